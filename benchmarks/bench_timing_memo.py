#!/usr/bin/env python
"""What a memo keyed on the inputs' contents gains in timing, with and without refreshed inputs.

The timing protocol calls a function again and again on one set of inputs. A candidate that
remembers its output by a checksum of the inputs' contents (tests/hostile/memo_by_content_hash.py)
is correct on every check, and on a compute-bound task its remembered calls cost a checksum and
a copy. judge/candidate/sampling.py `InputRefresher` gives each sample input values no earlier call saw.
This script times a candidate file against the task's expert on each perf case, in this
process (the judge's own timing code, judge/timing_job.py `time_candidate` with a plain callable), once with the
inputs refreshed (the default) and once without, and prints each case's medians, the launch
method and the speedup. A memo shows as a speedup that collapses once the inputs are refreshed.

Usage (on the GPU machine, from the repository root; under a minute on one H200):
    python benchmarks/bench_timing_memo.py [--task matmul] [--candidate tests/hostile/memo_by_content_hash.py]
Exit status 2 without a GPU (the CPU interpreter times nothing).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def measure(task_id: str, candidate: Path, policy_json: dict[str, Any]) -> dict[str, Any]:
    import tempfile

    from bench.registry import get_task
    from judge.candidate.loading import load_module, prepare_process
    from judge.device import detect_target, physical_device
    from judge.policy import TimingPolicy
    from judge.timing_job import time_candidate

    target = detect_target()
    task = get_task(task_id)
    prepare_process()
    policy = TimingPolicy.from_json(policy_json)
    rows: dict[str, Any] = {"task": task_id, "candidate": str(candidate), "device": target.device_name}
    with tempfile.TemporaryDirectory() as d:
        expert_path = Path(d) / f"{task_id}_expert.py"
        expert_path.write_text(task.baseline_source())
        expert = getattr(load_module(expert_path, f"memo_expert_{task_id}"), task.entry_point)
        for refresh in (True, False):
            # A fresh module each time: its memo starts empty.
            cand = getattr(load_module(candidate, f"memo_cand_{task_id}_{refresh}"), task.entry_point)
            timing = time_candidate(task, cand, expert, task.perf, target.vendor, physical_device(),
                                    replace(policy, refresh_inputs=refresh, time_eager=False))
            label = "refreshed" if refresh else "not_refreshed"
            rows[label] = {
                "speedup": timing.speedup_vs_baseline,
                "cases": {ct.case: {"candidate_ms": statistics.median(ct.candidate_ms),
                                    "baseline_ms": statistics.median(ct.baseline_ms),
                                    "samples": len(ct.candidate_ms), "method": ct.method,
                                    "launches_per_sample": ct.launches_per_sample} for ct in timing.cases},
                "flags": list(timing.flag_reasons),
            }
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="matmul")
    ap.add_argument("--candidate", type=Path, default=ROOT / "tests" / "hostile" / "memo_by_content_hash.py")
    ap.add_argument("--max-samples", type=int, default=100)
    ap.add_argument("--json", dest="json_out", type=Path, default=None)
    args = ap.parse_args(argv)
    from judge.device import detect_target

    if detect_target().interpreter:
        print("bench_timing_memo needs a GPU (none found; the CPU interpreter has no meaningful timings); "
              "nothing measured", file=sys.stderr)
        return 2
    rows = measure(args.task, args.candidate.resolve(), {"min_samples": 20, "max_samples": args.max_samples})
    for label in ("refreshed", "not_refreshed"):
        r = rows[label]
        print(f"{label}: speedup {r['speedup']:.3f}x against the expert" + (f"; flags {r['flags']}" if r["flags"] else ""))
        for name, c in r["cases"].items():
            print(f"  {name}: candidate {c['candidate_ms'] * 1e3:.1f} us, expert {c['baseline_ms'] * 1e3:.1f} us, "
                  f"{c['samples']} samples, {c['method']} x{c['launches_per_sample']}")
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=2) + "\n")
        print(f"written: {args.json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
