"""`serve-sim`: the simulated model as an OpenAI-compatible endpoint."""

from __future__ import annotations

import sys
from typing import Any

import click

from commands.common import BadInput, say, split_list


@click.command("serve-sim")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port; 0 picks a free one.")
@click.option("--latency", type=float, default=0.0, show_default=True, help="Seconds added to every chat request.")
@click.option("--fail-rate", type=float, default=0.0, show_default=True,
              help="Probability that a chat request gets a fault (429, 500 or a dropped connection).")
@click.option("--faults", default="429,500,drop", show_default=True,
              help="Fault kinds to draw from: 429, 500, drop, timeout.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the fault generator.")
@click.option("--reject-json-mode", is_flag=True, help="Answer HTTP 400 to every request asking for JSON mode.")
@click.option("--reject-every", type=int, default=0, show_default=True, metavar="N",
              help="Answer HTTP 400 (context length exceeded) to every N-th chat request; 0: never.")
@click.option("--reject-max-tokens", is_flag=True,
              help="Answer HTTP 400 to a reply cap sent as max_tokens (wanting max_completion_tokens, as OpenAI's "
                   "reasoning models do).")
def serve_sim(host: str, port: int, latency: float, fail_rate: float, faults: str, seed: int,
              reject_json_mode: bool = False, reject_every: int = 0, reject_max_tokens: bool = False) -> None:
    """Serve the simulated model as an OpenAI-compatible endpoint (/v1/chat/completions, /v1/models)."""
    from modelio.server import ServerOptions, serve

    def ready(server: Any) -> None:
        say(f"serving the SIMULATED model at {server.url} (latency {latency} s, fail rate {fail_rate}); "
             f"use: compare --base-url {server.url} --model sim")
        click.echo(server.url)  # the one stdout line, for scripts that start it with --port 0
        sys.stdout.flush()

    try:
        options = ServerOptions(latency_s=latency, fail_rate=fail_rate, fault_kinds=tuple(split_list(faults) or ()),
                                seed=seed, reject_json_mode=reject_json_mode, reject_every=reject_every,
                                reject_max_tokens=reject_max_tokens)
        serve(host, port, options, on_ready=ready)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    except KeyboardInterrupt:
        say("serve-sim stopped")
