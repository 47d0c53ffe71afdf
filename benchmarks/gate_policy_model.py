#!/usr/bin/env python
"""A model of the GPU gate under the 7-task command's job mix: which gate order and which hold
lengths waste the least worker time at the gate. A model, not a measurement of the toolkit.

Worker threads take jobs from one queue and *sleep* through each job's steps, holding the real
gate (judge/gate.py `FairGate`, a folder in a temporary directory) the way judge/worker.py does:
no ticket while compiling, a shared ticket per hold of judging, and for a timed job a shared
ticket around each perf case's inputs, warm-up and re-check with an exclusive one around its
samples only; each job's next candidate process makes its context under a shared ticket on a
thread of its own (judge/spares.py). The job mix and step lengths default to the per-kind means
of the 7-task command on an H100 (benchmarks/results/2026-12-05-h100-session24-speed.json, call
2): 41 hidden jobs, 15 hidden timed, 53 own-test, 50 visible timed. What the record does not
give is guessed and said so below (how a phase splits into holds).

It prints, per setting, the wall time and the share of worker time spent waiting at the gate, so
the gate's orders (`fifo`, `timers-first`) and shorter holds can be compared before a GPU is
lent; a GPU's own figure (benchmarks/bench_compare_gpu.py) is what counts.

Usage: python benchmarks/gate_policy_model.py [--workers 4] [--scale 0.2] [--repeats 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import queue
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from judge.gate import FairGate  # noqa: E402


@dataclass(frozen=True)
class Kind:
    """One kind of job: how many, its compile seconds (no ticket), its judging seconds split
    into `holds` shared holds, and its timed perf cases (0: untimed)."""

    name: str
    jobs: int
    compile_s: float
    judging_s: float
    holds: int
    perf_cases: int = 0


# Per-kind means of session 24's H100 call 2 (compile, correctness); how a correctness phase
# splits into holds is a guess: a hidden set of ~100 cases at 8 cases a hold, a method's 5 tests.
MIX = (
    Kind("hidden", 41, 1.15, 1.36, 13),
    Kind("hidden timed", 15, 1.0, 1.9, 15, perf_cases=2),
    Kind("internal", 53, 0.39, 2.08, 5),
    Kind("visible timed", 50, 0.2, 0.3, 1, perf_cases=2),
)
ALONE_S = 0.08  # a perf case's samples alone (0.15-0.17 s a timed job, ~2 perf cases)
SHARED_TIMING_S = 0.05  # each of a perf case's shared holds: inputs, warm-up, re-check (a guess)
CONTEXT_S = 0.6  # a spare's context under a shared ticket (spare:context)


@dataclass
class Outcome:
    setting: str
    wall_s: float
    worker_s: float
    gate_wait_s: float

    @property
    def gate_share(self) -> float:
        return self.gate_wait_s / self.worker_s if self.worker_s else 0.0


@dataclass(frozen=True)
class Setting:
    """`hold_factor`: holds that many times shorter (more of them); `contexts`: a spare's context
    under a `shared` ticket, a `background` one (judge/gate.py) or `none`; `alone_per_job`: a
    timed job's perf cases prepared under shared tickets, then sampled under one exclusive ticket."""

    name: str
    timers_first: bool = False
    hold_factor: float = 1.0
    contexts: str = "shared"
    alone_per_job: bool = False


SETTINGS = (
    Setting("fifo (the default)"),
    Setting("timers-first", timers_first=True),
    Setting("fifo, holds half as long", hold_factor=2.0),
    Setting("fifo, holds twice as long", hold_factor=0.5),
    Setting("fifo, one exclusive ticket per timed job", alone_per_job=True),
    Setting("fifo, contexts without a ticket", contexts="none"),
    Setting("fifo, contexts under background tickets", contexts="background"),
    Setting("timers-first, contexts without a ticket", timers_first=True, contexts="none"),
    Setting("fifo, background contexts, one exclusive per job", contexts="background", alone_per_job=True),
)


def run(workers: int, scale: float, setting: Setting, seed: int) -> tuple[float, float, float]:
    """One run of the mix: (wall, worker seconds busy, worker seconds waiting at the gate)."""
    rng = random.Random(seed)
    jobs: list[Kind] = [k for k in MIX for _ in range(k.jobs)]
    rng.shuffle(jobs)
    todo: queue.Queue[Kind] = queue.Queue()
    for job in jobs:
        todo.put(job)
    folder = Path(tempfile.mkdtemp(prefix="gate-model-"))
    waited = [0.0] * workers
    busy = [0.0] * workers

    def nap(seconds: float) -> None:
        time.sleep(max(0.0, seconds * scale * rng.uniform(0.5, 1.5)))

    def worker(i: int) -> None:
        gate = FairGate(folder, timers_first=setting.timers_first)

        def held(exclusive: bool, seconds: float) -> None:
            with gate.enter(exclusive) as ticket:
                waited[i] += ticket.wait_s
                nap(seconds)

        def spare() -> None:  # the next job's process makes its context meanwhile
            if setting.contexts == "none":
                nap(CONTEXT_S)
            else:
                with gate.enter(False, background=setting.contexts == "background"):
                    nap(CONTEXT_S)

        while True:
            try:
                job = todo.get_nowait()
            except queue.Empty:
                return
            started = time.perf_counter()
            context = threading.Thread(target=spare)
            context.start()
            nap(job.compile_s)
            holds = max(1, round(job.holds / setting.hold_factor))
            for _ in range(holds):
                held(False, job.judging_s / holds)
            if setting.alone_per_job and job.perf_cases:
                for _ in range(2 * job.perf_cases):  # inputs and warm-up of every case
                    held(False, SHARED_TIMING_S)
                held(True, ALONE_S * job.perf_cases)
                for _ in range(job.perf_cases):  # the re-checks
                    held(False, SHARED_TIMING_S)
            else:
                for _ in range(job.perf_cases):
                    held(False, SHARED_TIMING_S)
                    held(False, SHARED_TIMING_S)
                    held(True, ALONE_S)
                    held(False, SHARED_TIMING_S)
            context.join()
            busy[i] += time.perf_counter() - started

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return (time.perf_counter() - t0) / scale, sum(busy) / scale, sum(waited) / scale


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--scale", type=float, default=0.2, help="model seconds per real second (sleeps shrink by it)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", dest="json_out", type=Path, default=None)
    args = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    print(f"A MODEL of the gate (sleeping threads, the real FairGate), {args.workers} workers, the 7-task mix; "
          "wall and worker seconds in model seconds", flush=True)
    for setting in SETTINGS:
        outcomes = [Outcome(setting.name, *run(args.workers, args.scale, setting, seed))
                    for seed in range(args.repeats)]
        row = {"setting": setting.name, "wall_s": round(statistics.mean(o.wall_s for o in outcomes), 1),
               "gate_share": round(statistics.mean(o.gate_share for o in outcomes), 3),
               "runs": [asdict(o) for o in outcomes]}
        rows.append(row)
        print(f"{setting.name:<62} wall {row['wall_s']:7.1f} s   gate share {row['gate_share']:.1%}", flush=True)
    if args.json_out:
        args.json_out.write_text(json.dumps({"model": True, "workers": args.workers, "scale": args.scale,
                                             "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
