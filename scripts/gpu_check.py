"""Judge and time every built-in baseline (and one tuning mutation each) on this machine's GPU.

Prints, per task: hidden verdict, judge time, timing method, samples, baseline-vs-itself
speedup (should be ~1.00: a self-check of the timing protocol), a re-tuned kernel's speedup
with its CI, and the clock flags. Usage: python scripts/gpu_check.py [--workers N] [--tasks a,b]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.registry import all_tasks, get_task  # noqa: E402
from judge.device import default_device, detect_target  # noqa: E402
from runners.pool import LocalPool  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--tasks", default=None)
    args = ap.parse_args()
    target = detect_target(force_cpu=default_device() == "cpu")
    print(f"target: {target}")
    tasks = [get_task(t) for t in args.tasks.split(",")] if args.tasks else all_tasks()
    with LocalPool(target, workers=args.workers) as pool:
        pool.warm_up()

        def one(task):  # noqa: ANN001, ANN202
            t0 = time.perf_counter()
            base = pool.evaluate(task.id, task.baseline_source(), "hidden", timing=True)
            t1 = time.perf_counter()
            tuning = next((m for m in task.mutations if not m.breaks), None)
            tuned = None
            if tuning is not None:
                tuned = pool.evaluate(task.id, task.baseline_source().replace(tuning.find, tuning.replace, 1),
                                      "perf" if False else "hidden", timing=True)
            return task, base, t1 - t0, tuning, tuned

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=pool.size) as ex:
            results = list(ex.map(one, tasks))
        wall = time.perf_counter() - started
        for task, base, secs, tuning, tuned in results:
            v, t = base.verdict, base.timing
            line = f"{task.id:<14} {v.kind:<13} cases {v.cases_run:>3} skip {v.cases_skipped} judge+time {secs:6.1f}s"
            if t:
                n = [len(c.candidate_ms) for c in t.cases]
                cv = [statistics.pstdev(c.candidate_ms) / statistics.median(c.candidate_ms) for c in t.cases]
                line += (f" | self-speedup {t.speedup_vs_baseline:.3f} CI [{t.speedup_ci[0]:.3f},{t.speedup_ci[1]:.3f}]"
                         f" vs eager {t.speedup_vs_eager:.2f}x ms {t.candidate_ms:.4f} samples {n}"
                         f" method {[c.method for c in t.cases]} cv {[round(x, 3) for x in cv]} flags {list(t.flag_reasons)}")
            print(line)
            if v.kind != "correct":
                print("   ", v.one_line()[:400])
            if tuned is not None and tuned.timing:
                tt = tuned.timing
                print(f"   tuned ({tuning.replace.strip()[:40]}): {tuned.verdict.kind} speedup {tt.speedup_vs_baseline:.3f} "
                      f"CI [{tt.speedup_ci[0]:.3f},{tt.speedup_ci[1]:.3f}]")
            elif tuned is not None:
                print(f"   tuned: {tuned.verdict.one_line()[:200]}")
        print(f"wall {wall:.1f}s with {pool.size} workers; pool stats {pool.stats}")
        print(f"clocks at end: {base.timing.clocks_after if base.timing else None}")


if __name__ == "__main__":
    main()
