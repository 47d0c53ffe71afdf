#!/usr/bin/env python
"""Throughput of model calls through the real client path, serial vs 32-way concurrent.

Why: iterative methods spend most of their wall time waiting on the model, so a run is only
as fast as the number of calls it keeps in flight. With serve-sim adding 1 s of latency to
every call (so the model's own compute is negligible), the full path -- Ledger account ->
OpenAI SDK client (semaphore, retries) -> HTTP on loopback -> serve-sim -> run store -- is
timed once with one caller and once with 32 callers, each on its own ledger account as the
scheduler's units are. Goal: the concurrent throughput is at least 25x the serial one.

Usage: ``python benchmarks/bench_modelio_concurrency.py [--latency 1.0] [--concurrency 32]
[--serial-calls 6] [--calls-per-caller 3]``. Exit status 1 when the goal is missed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.registry import get_task  # noqa: E402
from methods.templates import answer_request, render, system_prompt, task_block  # noqa: E402
from modelio.ledger import BudgetExhausted, Ledger  # noqa: E402
from modelio.openai_client import OpenAIClient  # noqa: E402
from modelio.server import ServerOptions, SimServer  # noqa: E402
from modelio.types import Message  # noqa: E402
from record.store import Store  # noqa: E402

GOAL = 25.0


def prompt() -> tuple[Message, ...]:
    task = get_task("vector_add").view()
    return (Message("system", system_prompt("nvidia", True)),
            Message("user", render("direct_generate", task=task_block(task, True), oneshot="", answer=answer_request("fenced"))))


def drain(ledger: Ledger, name: str, messages: tuple[Message, ...]) -> int:
    account = ledger.account("bench", name, 0)
    n = 0
    while True:
        try:
            account.complete(messages, temperature=1.0, role="generator")
        except BudgetExhausted:
            return n
        n += 1


def timed(server: SimServer, store_dir: Path, callers: int, calls_each: int, concurrency: int) -> tuple[int, float]:
    client = OpenAIClient(server.url, "sim", timeout_s=30.0, max_retries=3, max_concurrency=concurrency)
    ledger = Ledger(client, Store(store_dir / f"store-{callers}.sqlite"), budget=calls_each)
    messages = prompt()
    done = [0] * callers
    threads = [threading.Thread(target=lambda i=i: done.__setitem__(i, drain(ledger, f"u{i}", messages)))
               for i in range(callers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    client.close()
    assert ledger.totals().calls == sum(done) == callers * calls_each
    return sum(done), elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--serial-calls", type=int, default=6)
    ap.add_argument("--calls-per-caller", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, SimServer(options=ServerOptions(latency_s=args.latency)) as server:
        n_serial, t_serial = timed(server, Path(tmp), 1, args.serial_calls, args.concurrency)
        n_conc, t_conc = timed(server, Path(tmp), args.concurrency, args.calls_per_caller, args.concurrency)
        peak = server.counters().max_in_flight
    serial = n_serial / t_serial
    concurrent = n_conc / t_conc
    ratio = concurrent / serial
    print(f"latency per call: {args.latency:.2f} s (serve-sim on loopback, real OpenAI SDK client, ledger, run store)")
    print(f"serial:     {n_serial:4d} calls in {t_serial:6.2f} s = {serial:6.2f} calls/s")
    print(f"concurrent: {n_conc:4d} calls in {t_conc:6.2f} s = {concurrent:6.2f} calls/s "
          f"({args.concurrency} callers, max_concurrency {args.concurrency}, peak in flight {peak})")
    print(f"speedup: {ratio:.1f}x (goal >= {GOAL:.0f}x) -> {'PASS' if ratio >= GOAL else 'FAIL'}")
    return 0 if ratio >= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
