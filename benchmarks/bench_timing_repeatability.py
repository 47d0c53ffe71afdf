#!/usr/bin/env python
"""Repeatability of the timing protocol: one fixed candidate/baseline pair per size, timed in
several separate runs, each in a fresh process (a fresh worker: new CUDA context, new
Triton cache state, new allocator).

Pairs (candidate = the task's expert kernel with one tuning Mutation applied, baseline = the
expert kernel), each at a size whose kernel takes over 50 us on an H200 and one under 10 us:

  vector_add  BLOCK_SIZE 1024 -> 256     n = 32M float32      and n = 64K float32
  softmax     num_warps -> 8             8192 x 8192 float32  and 256 x 1024 float32

Per (pair, size) it prints the speedup of every run, the median kernel time, and the spread
(max - min) / median of the speedups, against the issue's goals: within 1% for kernels
over 50 us, within 3% under 10 us. Needs a GPU; on a CPU-only machine it says so and exits 2.

Usage: python benchmarks/bench_timing_repeatability.py [--runs 5] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PAIRS: dict[str, dict[str, Any]] = {
    "vector_add": {"find": "BLOCK_SIZE = 1024", "replace": "BLOCK_SIZE = 256",
                   "sizes": {"large": {"n": 1 << 25}, "small": {"n": 1 << 16}}, "dtype": "float32"},
    "softmax": {"find": "num_warps = 4 if BLOCK_SIZE <= 2048 else 8", "replace": "num_warps = 8",
                "sizes": {"large": {"rows": 8192, "cols": 8192}, "small": {"rows": 256, "cols": 1024}},
                "dtype": "float32"},
}
GOALS = {"large": (0.05, 0.01), "small": (0.010, 0.03)}  # (kernel-time bound in ms, allowed spread)


def child() -> None:
    """One run: time every pair at every size with the toolkit's protocol; print one JSON line."""
    import tempfile

    from bench.registry import get_task
    from bench.task import case
    from judge.candidate.loading import load_module, prepare_process
    from judge.device import detect_target, physical_device
    from judge.timing import TimingPolicy
    from judge.timing_job import time_candidate

    target = detect_target()
    prepare_process()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        for tid, spec in PAIRS.items():
            task = get_task(tid)
            base_src = task.baseline_source()
            if spec["find"] not in base_src:
                raise SystemExit(f"{tid}: the tuning edit no longer applies to the baseline")
            paths = {"baseline": Path(d) / f"{tid}_base.py", "candidate": Path(d) / f"{tid}_cand.py"}
            paths["baseline"].write_text(base_src)
            paths["candidate"].write_text(base_src.replace(spec["find"], spec["replace"], 1))
            fns = {k: getattr(load_module(p, f"rep_{tid}_{k}"), task.entry_point) for k, p in paths.items()}
            cases = tuple(case(f"{label}", spec["dtype"], 0, **dims) for label, dims in spec["sizes"].items())
            timing = time_candidate(task, fns["candidate"], fns["baseline"], cases, target.vendor, physical_device(),
                                    TimingPolicy(time_eager=False))
            for ct in timing.cases:
                out[f"{tid}/{ct.case}"] = {
                    "speedup": statistics.median(ct.baseline_ms) / statistics.median(ct.candidate_ms),
                    "candidate_ms": statistics.median(ct.candidate_ms),
                    "baseline_ms": statistics.median(ct.baseline_ms),
                    "samples": len(ct.candidate_ms), "method": ct.method,
                    "launches_per_sample": ct.launches_per_sample,
                }
            out[f"{tid}/flags"] = list(timing.flag_reasons)
    print("RESULT " + json.dumps(out), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", dest="json_out", type=Path, default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child()
        return 0
    from judge.device import detect_target

    target = detect_target()
    if target.interpreter:
        print("bench_timing_repeatability needs a GPU (none found; the CPU interpreter has no meaningful "
              "timings); nothing measured", file=sys.stderr)
        return 2
    if args.runs < 2:
        print("error: --runs must be at least 2", file=sys.stderr)
        return 2
    print(f"target: {target.vendor} {target.device_name}; {args.runs} runs, each in a fresh process", flush=True)
    runs: list[dict[str, Any]] = []
    for i in range(args.runs):
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child"], capture_output=True,
                              text=True, timeout=900, cwd=str(ROOT))
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if proc.returncode != 0 or line is None:
            print(f"run {i + 1} failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}", file=sys.stderr)
            return 1
        runs.append(json.loads(line[len("RESULT "):]))
        print(f"run {i + 1}/{args.runs} done", flush=True)
    summary: dict[str, Any] = {}
    ok = True
    print(f"{'pair/size':<22}{'kernel ms':>11}{'spread':>9}{'goal':>7}  speedups per run")
    for key in [k for k in runs[0] if not k.endswith("/flags")]:
        speedups = [r[key]["speedup"] for r in runs]
        med = statistics.median(speedups)
        spread = (max(speedups) - min(speedups)) / med
        kernel_ms = statistics.median(r[key]["candidate_ms"] for r in runs)
        size = key.split("/")[1]
        bound, goal = GOALS[size]
        in_class = kernel_ms > bound if size == "large" else kernel_ms < bound
        met = spread <= goal
        ok = ok and met
        note = "" if in_class else f" (kernel {'not over' if size == 'large' else 'not under'} {bound * 1e3:.0f} us)"
        print(f"{key:<22}{kernel_ms:>11.4f}{spread:>8.2%}{goal:>7.0%}  "
              + " ".join(f"{s:.4f}" for s in speedups) + ("" if met else "  <- over goal") + note)
        summary[key] = {"speedups": speedups, "spread": spread, "goal": goal, "met": met, "kernel_ms": kernel_ms,
                        "method": runs[0][key]["method"], "samples": [r[key]["samples"] for r in runs]}
    flags = {k: [r[k] for r in runs] for k in runs[0] if k.endswith("/flags")}
    print(f"clock flags per run: {flags}")
    if args.json_out:
        args.json_out.write_text(json.dumps({"target": target.to_json(), "cases": summary, "flags": flags}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
