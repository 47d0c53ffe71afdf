#!/usr/bin/env python
"""The two lanes on a GPU: does judging beside a timer move its medians, and how fast is the main job?

Issue 15 item 1 (runners/pool.py, judge/gate.py). Two measurements, one command:

1. **Timing alone vs beside judging.** One pool of `--judging` + 1 workers on the GPU. A fixed
   kernel (the expert kernel of `--task`, softmax by default) gets the full timing protocol
   (`evaluate(..., "hidden", timing=True)`) `--repeats` times with the GPU otherwise idle, then
   `--repeats` times while `--judging` threads keep the other workers judging other tasks'
   expert kernels on their hidden cases (correctness only: the GPU-heavy part of judging).
   For each perf case it prints and records the candidate's median per repeat, the median of
   those medians with a bootstrap 95% interval (scipy.stats.bootstrap over repeats), both
   sides' intervals and whether they overlap, the loaded/alone ratio, how many judging jobs
   ran meanwhile and the seconds the timer waited at the gate. The fair gate should make the
   loaded median indistinguishable from the alone one (intervals overlap, ratio within noise).
   With `--ungated-contexts`, the same once more with candidate processes making their GPU
   contexts without a ticket at the gate (judge/spares.py `CONTEXT_GATE_ENV`): the timer's
   own spare then makes its context while the timer measures, and so do the judging
   workers' spares. Whether that moves the medians decides whether contexts may leave the gate.
2. **The 7-task command** (`compare --budget 20 --tasks vector_add,softmax,layer_norm,rms_norm,
   matmul,cumsum,flip`) with the default worker count: wall time, the executor's layout and why
   (config.json's `executor`), phase seconds per method (gate and retry included) and CPU/GPU
   use, through benchmarks/bench_compare_gpu.py's `measure` (`--skip-seven` leaves it out).

Usage (on the GPU machine, from the repository root; about 4-6 minutes on one H200):
    python benchmarks/bench_lanes_gpu.py --json benchmarks/results/<date>-h200-lanes.json
CPU smoke (interpreter: nothing is timed there, so part 1 is skipped; toy-size part 2):
    python benchmarks/bench_lanes_gpu.py --device cpu --seven-tasks vector_add --budget 2 --json out.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_compare_gpu import SEVEN_TASKS, measure, print_measured, write_record  # noqa: E402

from judge.device import Target  # noqa: E402
from judge.spares import CONTEXT_GATE_ENV  # noqa: E402
from record.run_folder import RunFolder  # noqa: E402
from runners.config import CompareConfig  # noqa: E402

LOAD_TASKS = ("matmul", "layer_norm", "rms_norm", "cumsum", "softmax", "vector_add")


def median_interval(values: list[float], seed: int = 0) -> tuple[float, float, float]:
    """Median of `values` with a bootstrap 95% interval (percentile; degenerate for one value)."""
    import numpy as np
    from scipy import stats

    mid = float(statistics.median(values))
    if len(values) < 2 or len(set(values)) < 2:
        return mid, mid, mid
    res = stats.bootstrap((np.asarray(values),), np.median, n_resamples=2000, method="percentile",
                          random_state=np.random.default_rng(seed))
    return mid, float(res.confidence_interval.low), float(res.confidence_interval.high)


def timed_medians(pool: Any, task_id: str, source: str) -> tuple[dict[str, float], dict[str, float]]:
    """One full timing of `source`: the candidate's median per perf case, and the job's phases."""
    evaluation = pool.evaluate(task_id, source, "hidden", timing=True)
    if evaluation.timing is None:
        raise SystemExit(f"{task_id}'s expert kernel was not timed: {evaluation.verdict.kind} "
                         f"{evaluation.verdict.message[:300]}")
    return {c.case: c.median("candidate") for c in evaluation.timing.cases}, dict(evaluation.phases or {})


def timing_beside_judging(target: Target, task_id: str, judging: int, repeats: int) -> dict[str, Any]:
    from bench.registry import get_task
    from runners.pool import LocalPool

    source = get_task(task_id).baseline_source()
    with LocalPool(target, workers=judging + 1) as pool:
        pool.warm_up()
        timed_medians(pool, task_id, source)  # compile, warm caches: not counted
        alone = [timed_medians(pool, task_id, source) for _ in range(repeats)]
        stop, done, errors = threading.Event(), [0], []
        load_sources = [(t, get_task(t).baseline_source()) for t in LOAD_TASKS]

        def judge(k: int) -> None:
            i = k
            while not stop.is_set():
                t, src = load_sources[i % len(load_sources)]
                kind = pool.evaluate(t, src, "hidden").verdict.kind
                if kind != "correct":
                    errors.append(f"{t}: {kind}")
                done[0] += 1
                i += 1

        threads = [threading.Thread(target=judge, args=(k,), daemon=True) for k in range(judging)]
        for t in threads:
            t.start()
        time.sleep(2.0)  # the judging lane is busy before the timer asks
        loaded = [timed_medians(pool, task_id, source) for _ in range(repeats)]
        stop.set()
        for t in threads:
            t.join(timeout=300)
        layout = pool.layout()
        oom_retries = pool.stats.oom_retries
    cases = {}
    for case in alone[0][0]:
        a = [m[case] for m, _ in alone]
        b = [m[case] for m, _ in loaded]
        a_mid, a_lo, a_hi = median_interval(a)
        b_mid, b_lo, b_hi = median_interval(b)
        cases[case] = {"alone_ms": a, "loaded_ms": b, "alone_median_ms": a_mid, "alone_ci": [a_lo, a_hi],
                       "loaded_median_ms": b_mid, "loaded_ci": [b_lo, b_hi], "ratio": b_mid / a_mid,
                       "intervals_overlap": a_lo <= b_hi and b_lo <= a_hi}
    return {"task": task_id, "judging_workers": judging, "repeats": repeats, "cases": cases,
            "judging_jobs_during_loaded_timing": done[0], "judging_errors": errors[:20],
            "timer_gate_wait_s_loaded": [p.get("gate", 0.0) for _, p in loaded],
            "timer_gate_wait_s_alone": [p.get("gate", 0.0) for _, p in alone], "oom_retries": oom_retries,
            "pool_layout": layout}


def print_lanes(r: dict[str, Any]) -> None:
    print(f"timing {r['task']}'s expert kernel alone vs beside {r['judging_workers']} judging workers "
          f"({r['repeats']} full timings each; {r['judging_jobs_during_loaded_timing']} judging jobs ran meanwhile)")
    for case, c in r["cases"].items():
        print(f"  {case}: alone {c['alone_median_ms'] * 1e3:.2f} us [{c['alone_ci'][0] * 1e3:.2f}, "
              f"{c['alone_ci'][1] * 1e3:.2f}], beside judging {c['loaded_median_ms'] * 1e3:.2f} us "
              f"[{c['loaded_ci'][0] * 1e3:.2f}, {c['loaded_ci'][1] * 1e3:.2f}]; ratio {c['ratio']:.3f}; "
              f"intervals {'overlap' if c['intervals_overlap'] else 'DO NOT overlap'}")
    waits = r["timer_gate_wait_s_loaded"]
    print(f"  the timer waited at the gate {statistics.fmean(waits):.2f} s on average beside judging "
          f"(max {max(waits):.2f} s); judging errors: {len(r['judging_errors'])}; OOM retries: {r['oom_retries']}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="softmax", help="the kernel timed (its expert) [softmax]")
    p.add_argument("--judging", type=int, default=8, help="judging workers busy beside the timer [8]")
    p.add_argument("--repeats", type=int, default=5, help="full timings alone and beside judging [5]")
    p.add_argument("--seven-tasks", default=SEVEN_TASKS)
    p.add_argument("--budget", type=int, default=20, help="budget of the 7-task command [20]")
    p.add_argument("--skip-seven", action="store_true", help="leave the 7-task command out")
    p.add_argument("--ungated-contexts", action="store_true",
                   help="part 1 once more with candidate processes making their GPU contexts without a ticket "
                        "(KMC_GATE_CONTEXTS=0, judge/spares.py): does that move the timer's medians?")
    p.add_argument("--device", choices=["auto", "cpu"], default="auto")
    p.add_argument("--sample-s", type=float, default=0.5)
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = p.parse_args(argv)
    if args.judging < 1 or args.repeats < 2:
        print("error: --judging must be at least 1 and --repeats at least 2", file=sys.stderr)
        return 2
    from judge.device import detect_target, environment_info

    target = detect_target(force_cpu=args.device == "cpu")
    lanes = ungated = None
    if target.interpreter:
        print("timing alone vs beside judging: skipped (the CPU interpreter times nothing)")
    else:
        lanes = timing_beside_judging(target, args.task, args.judging, args.repeats)
        print_lanes(lanes)
        if args.ungated_contexts:
            os.environ[CONTEXT_GATE_ENV] = "0"  # the workers' environment keeps KMC_* variables
            try:
                ungated = timing_beside_judging(target, args.task, args.judging, args.repeats)
            finally:
                os.environ.pop(CONTEXT_GATE_ENV, None)
            print("the same, with candidate processes making their GPU contexts without a ticket:")
            print_lanes(ungated)
    seven = None
    if not args.skip_seven:
        config = CompareConfig(budget=args.budget, tasks=args.seven_tasks.split(","), seed=0, device=args.device,
                               task_sources=[], method_modules=[])
        seven = measure("seven-task run, default workers", config, Path(tempfile.mkdtemp(prefix="kmc-lanes-")),
                        args.sample_s)
        print_measured(seven)
        executor = RunFolder(seven.run_dir).read_executor() or {}
        print(f"  executor: {executor.get('workers')} judging worker(s), {executor.get('timing_lanes')} timing "
              f"lane(s): {executor.get('why')}")
    record = {"benchmark": "bench_lanes_gpu", "timing_beside_judging": lanes,
              "timing_beside_judging_ungated_contexts": ungated,
              "seven_task_run": asdict(seven) if seven else None,
              "seven_task_executor": RunFolder(seven.run_dir).read_executor() if seven else None,
              "environment": environment_info(target)}
    write_record(record, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
