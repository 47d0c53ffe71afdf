#!/usr/bin/env python
"""Where a judged candidate's seconds go on this machine: one worker, the expert of a few
tasks judged several times (the first pays the compile, the rest hit the per-source cache),
each evaluation's wall time and recorded phases printed, plus the cost of a bare CUDA
context and of a fresh candidate process. A diagnostic for the evaluator's throughput.

Usage: python scripts/judge_profile.py [--tasks vector_add,softmax] [--repeats 3] [--case-set hidden]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.registry import get_task  # noqa: E402
from judge.device import detect_target  # noqa: E402
from runners.pool import LocalPool  # noqa: E402


def bare_context_seconds() -> float | None:
    code = ("import time, torch; t = time.perf_counter(); torch.empty(1, device='cuda'); "
            "torch.cuda.synchronize(); print(time.perf_counter() - t)")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        return float(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError):
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="vector_add,softmax,layer_norm")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--case-set", default="hidden")
    ap.add_argument("--timing", action="store_true", help="also run the timing protocol (final submissions)")
    ap.add_argument("--json", dest="json_out", type=Path, default=None)
    args = ap.parse_args(argv)
    target = detect_target()
    rows = []
    if not target.interpreter:
        print(f"bare CUDA context in a fresh python: {bare_context_seconds()} s", flush=True)
    t0 = time.perf_counter()
    with LocalPool(target, workers=1) as pool:
        print(f"pool start: {time.perf_counter() - t0:.2f} s ({target.device_name}); containment: {pool.contained}",
              flush=True)
        for task_id in args.tasks.split(","):
            source = get_task(task_id).baseline_source()
            n_cases = len(get_task(task_id).cases(args.case_set, target.interpreter))
            for i in range(args.repeats):
                t = time.perf_counter()
                ev = pool.evaluate(task_id, source, args.case_set, timing=args.timing)
                wall = time.perf_counter() - t
                phases = {k: round(v, 3) for k, v in (ev.phases or {}).items()}
                phases["outside_phases"] = round(wall - sum(phases.values()), 3)
                rows.append({"task": task_id, "repeat": i, "cases": n_cases, "wall_s": round(wall, 3),
                             "verdict": ev.verdict.kind, "phases": phases})
                print(f"{task_id:<12} #{i} {n_cases:>3} cases  {wall:6.2f} s  {ev.verdict.kind:<14} {phases}", flush=True)
                if not ev.verdict.correct:
                    print(f"    {ev.verdict.one_line()[:1500]}", flush=True)
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
