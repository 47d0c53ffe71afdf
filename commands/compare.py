"""`compare`: one comparison run (runners.compare.run_compare; estimate_compare for --dry-run),
its table, endpoint line and wall time, the resume line after Ctrl-C or errored units."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from commands.common import (
    EXIT_ERRORED_UNITS,
    EXIT_INTERRUPTED,
    UNSANDBOXED_HELP,
    WORKERS_HELP,
    BadInput,
    device_option,
    given_sources,
    name_list,
    say,
    source_option,
)


@click.command()
@click.option("--budget", type=int, default=None, help="LLM budget per (method, task, repeat) [default 100].")
@click.option("--budget-unit", type=click.Choice(["calls", "tokens", "output_tokens", "total_tokens"]), default=None,
              help="What the budget counts [default calls]; tokens = total_tokens.")
@click.option("--methods", default=None,
              help="Comma-separated methods [default direct,reflexion,geak]; empty is an error.")
@click.option("--tasks", default=None,
              help="Comma-separated task ids (overrides --suite) [default: the suite's tasks]; empty is an error.")
@click.option("--suite", default=None, help="Task suite [default: quick without a GPU, full with one].")
@source_option
@click.option("--repeats", type=int, default=None, help="Independent repeats per (method, task) [default 1].")
@click.option("--seed", type=int, default=None, help="Run seed [default 0].")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="YAML or JSON file of options; command-line flags override it [default: none].")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Folder for run folders [default runs/].")
@click.option("--resume", type=click.Path(path_type=Path), default=None,
              help="Finish an interrupted run folder with its recorded options (a finished one is reported "
                   "complete) [default: none: a new run].")
@click.option("--base-url", default=None,
              help="OpenAI-compatible endpoint [default: none: the built-in simulated model].")
@click.option("--model", default=None, help="Model name at the endpoint (required with --base-url) [default: none].")
@click.option("--api-key-env", default=None,
              help="Environment variable holding the API key [default OPENAI_API_KEY].")
@device_option
@click.option("--workers", type=int, default=None, help=WORKERS_HELP)
@click.option("--worker-user", default=None, metavar="USER",
              help="Run evaluation workers as this unprivileged user, e.g. nobody (needs root). Off by default.")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="Judge on Ray actors (extra `cluster`): `local` starts Ray here, `auto` joins a running cluster, "
                   "or a cluster's address. Judging actors plus one timing actor per GPU [default: none: the "
                   "local worker pool].")
@click.option("--quiet", is_flag=True,
              help="No progress (a live bar on a terminal, else one line per finished unit). Off by default.")
@click.option("--max-concurrency", type=int, default=None, help="Model requests in flight at once [default 8].")
@click.option("--dry-run", is_flag=True, help="Print the calls, tokens and estimated cost the run would spend; spend nothing.")
@click.option("--replay", type=click.Path(path_type=Path), default=None,
              help="Re-run a recorded run folder from its recorded model responses and evaluations: every decision "
                   "and summary.json reproduced exactly, with no network and no GPU [default: none].")
@click.option("--rejudge", is_flag=True,
              help="With --replay: judge every candidate anew on this machine instead of replaying the evaluations.")
@click.option("--lock-clocks", "lock_spec", default=None, metavar="auto|SM[,MEM]",
              help="Lock GPU clocks for the run (needs root; restored on exit and Ctrl-C). Off by default.")
@click.option("--eval-budget", type=int, default=None, metavar="N",
              help="GPU evaluations per unit (visible feedback and a method's own test runs), enforced like calls "
                   "[default: one per two calls of a calls budget, the same for every method; none for a token "
                   "budget].")
@click.option("--oneshot-corpus", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="One-shot example corpus (GEAK-v1 train_crawl.json layout) [default: the built-in expert kernels].")
@click.option("--retry-errors", is_flag=True,
              help="With --resume: run errored units again (their good calls replayed, their failed calls resent).")
@click.option("--unsandboxed", is_flag=True, help=UNSANDBOXED_HELP)
def compare(budget: int | None, budget_unit: str | None, methods: str | None, tasks: str | None, suite: str | None,
            sources: tuple[str, ...], repeats: int | None, seed: int | None, config_path: Path | None,
            out: Path | None, resume: Path | None, base_url: str | None, model: str | None, api_key_env: str | None,
            device: str | None, workers: int | None, worker_user: str | None, ray_address: str | None, quiet: bool,
            max_concurrency: int | None, dry_run: bool, replay: Path | None, lock_spec: str | None,
            eval_budget: int | None, oneshot_corpus: Path | None, retry_errors: bool, rejudge: bool,
            unsandboxed: bool) -> None:
    """Run every method on every task under one budget ledger, then judge on hidden tests.

    Exit status: 0 when every unit finished cleanly; 3 when the run finished but some units
    ended on a model call that failed for good (a warning line names them; finish them with
    --resume RUN_DIR --retry-errors); 2 for bad input; 130 when interrupted."""
    from runners.compare import (
        CompareInterrupted,
        CompareOptions,
        estimate_compare,
        recorded_options,
        resume_command,
        run_compare,
    )
    from runners.config import compose_config

    flags = {"budget": budget, "budget_unit": budget_unit, "methods": name_list(methods, "--methods"),
             "tasks": name_list(tasks, "--tasks"),
             "suite": suite, "repeats": repeats, "seed": seed, "device": device, "workers": workers,
             "worker_user": worker_user, "ray_address": ray_address, "task_sources": given_sources(sources),
             "eval_budget": eval_budget, "unsandboxed": True if unsandboxed else None,
             "oneshot_corpus": str(oneshot_corpus) if oneshot_corpus else None}
    endpoint = {"base_url": base_url, "model": model, "api_key_env": api_key_env, "max_concurrency": max_concurrency}
    config = compose_config({**flags, **endpoint}, config_path, recorded_options(replay) if replay else None)
    # Which options go together is settled by the library (runners/plan.py plan_run), once.
    options = CompareOptions(out=out, resume=resume, replay=replay, lock_clocks=_parse_lock_spec(lock_spec),
                             command_line=list(sys.argv), on_message=say, retry_errors=retry_errors,
                             resume_with={"workers": workers} if resume is not None and workers is not None else {},
                             rejudge=rejudge)
    if dry_run:
        click.echo(estimate_compare(config, options).format())
        return
    if resume is not None and (config_path or any(v is not None for k, v in flags.items() if k != "workers")):
        say("note: --resume uses the run's recorded config (it may change only --workers); other run options "
             "are ignored")
    from runners.progress_display import ProgressDisplay

    # A live bar on a terminal; with stderr redirected, one line per finished unit.
    display = ProgressDisplay(sys.stderr, live=False if quiet else None)
    if not quiet:
        options.on_start, options.on_progress = display.start, display.update
    try:
        result = run_compare(config, options)
    except CompareInterrupted as stop:
        display.close()
        say(f"\ninterrupted: {stop.units_done} of {stop.units_total} units finished and recorded; "
             f"finish with: {resume_command(stop.run_dir)}")
        raise SystemExit(EXIT_INTERRUPTED) from None
    finally:
        display.close()
    from results.summary import format_table

    click.echo(format_table(result.summary, result.target.interpreter))
    s = result.endpoint_stats
    if s is not None:
        cost = "unknown (no price for this model)" if s.cost_usd is None else f"${s.cost_usd:.4f}"
        click.echo(f"endpoint: {s.calls} calls, {s.failed_calls} failed, {s.retries} retries; "
                   f"{s.prompt_tokens} prompt + {s.completion_tokens} completion tokens; estimated cost {cost}")
    click.echo(f"wall time {result.wall_s:.1f} s; summary: {result.summary_path}")
    if result.errored_units:
        errored = result.errored_units
        names = ", ".join(f"{m}/{t}/{r}" for m, t, r in errored[:5]) + (" ..." if len(errored) > 5 else "")
        say(f"warning: {len(errored)} unit(s) ended on an error, a failed model call or the method raising "
             f"({names}); the report lists their "
             f"errors; retry them with: {resume_command(result.run_dir, '--retry-errors')}")
        raise SystemExit(EXIT_ERRORED_UNITS)


def _parse_lock_spec(spec: str | None) -> tuple[int | None, int | None] | None:
    if spec is None:
        return None
    from runners.clock_lock import parse_lock_spec

    try:
        return parse_lock_spec(spec)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
