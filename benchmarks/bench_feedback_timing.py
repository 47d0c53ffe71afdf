#!/usr/bin/env python
"""Feedback-short against final-full timing on the same candidates, on a GPU (issue 15 item 2).

Candidates: per task, the expert kernel and its speed-only tuning changes (the simulated
model's non-breaking mutations: block sizes, warps, stages), all correct, of different
speeds. Each is timed twice by one judge worker on the task's perf cases:

1. the short protocol of visible feedback (`feedback-short`: few candidate samples against
   expert-baseline and eager timings the worker measured once and re-uses; the first
   candidate of a task pays for measuring them);
2. the full protocol of final submissions (`final-full`: candidate, baseline and eager
   interleaved until every median is precise), the reference standard.

It prints and records, per candidate and in all: the timing seconds of each (the worker's
`timing` phase: the perf-case check and the protocol), the samples taken, whether the
references were reused, and whether the short protocol's decision against 1.0x agrees with
the full protocol's speedup, per perf case (the short protocol decides per case):
"faster" agrees when the full ratio is above 1, "slower" when below, "equivalent" when
within the equivalence band; a contradiction is a decision the full protocol's own 95%
interval excludes. Undecided cases (the sample cap reached) are counted apart.

Usage (on the GPU machine, from the repository root; about 3 to 6 minutes on one H200):
    python benchmarks/bench_feedback_timing.py --json benchmarks/results/<date>-h200-feedback-timing.json
Exit status 2 without a GPU (the CPU interpreter times nothing).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SEVEN_TASKS = "vector_add,softmax,layer_norm,rms_norm,matmul,cumsum,flip"


def candidates(task: Any, per_task: int) -> list[tuple[str, str]]:
    """(label, source): the expert, then up to `per_task - 1` of its tuning changes."""
    expert = task.baseline_source()
    out = [("expert", expert)]
    for m in task.mutations:
        if len(out) >= per_task:
            break
        if not m.breaks and m.find in expert:
            out.append((f"tune:{m.note or m.replace[:30]}", expert.replace(m.find, m.replace, 1)))
    return out


def classify_full(ratio: float, lo: float, hi: float, equivalence: float) -> str:
    if lo > 1.0:
        return "faster"
    if hi < 1.0:
        return "slower"
    return "equivalent" if 1 / (1 + equivalence) <= ratio <= 1 + equivalence else "inside-noise"


def agreement(short_decision: str | None, full_ratio: float, full_lo: float, full_hi: float,
              equivalence: float) -> str:
    """agree / disagree / contradiction / undecided for one case (module docstring)."""
    if short_decision is None:
        return "undecided"
    agrees = {"faster": full_ratio > 1.0, "slower": full_ratio < 1.0,
              "equivalent": 1 / (1 + equivalence) <= full_ratio <= 1 + equivalence}[short_decision]
    if agrees:
        return "agree"
    excluded = {"faster": full_hi < 1.0, "slower": full_lo > 1.0,
                "equivalent": full_lo > 1 + equivalence or full_hi < 1 / (1 + equivalence)}[short_decision]
    return "contradiction" if excluded else "disagree"


def case_ratio(ct: Any, policy: Any) -> tuple[float, float, float]:
    """A full-protocol case's speedup and its 95% bootstrap interval (rounds paired)."""
    from judge.timing import speedup_with_ci

    s, (lo, hi) = speedup_with_ci([ct], policy)
    return s, lo, hi


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default=SEVEN_TASKS, help="comma-separated tasks [the issue's seven]")
    p.add_argument("--per-task", type=int, default=4, help="candidates per task: the expert and its tunings [4]")
    p.add_argument("--json", type=Path, default=None, help="write the figures here as JSON")
    args = p.parse_args(argv)
    if args.per_task < 1:
        print("--per-task must be at least 1", file=sys.stderr)
        return 2

    import torch

    from bench.registry import get_task
    from judge.device import detect_target
    from judge.policy import FEEDBACK_SHORT, FINAL_FULL, TimingPolicy
    from runners.pool import LocalPool

    target = detect_target()
    if target.interpreter or not torch.cuda.is_available():
        print("bench_feedback_timing.py needs a GPU: the CPU interpreter times nothing", file=sys.stderr)
        return 2
    policy = TimingPolicy()
    tasks = [get_task(t.strip()) for t in args.tasks.split(",") if t.strip()]
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    with LocalPool(target, workers=1, job_timeout=600) as pool:  # one worker: one reference cache, one device
        for task in tasks:
            for label, source in candidates(task, args.per_task):
                timed: dict[str, Any] = {}
                for protocol in (FEEDBACK_SHORT, FINAL_FULL):
                    ev = pool.evaluate(task.id, source, "visible", timing=True,
                                       timing_policy=policy.for_protocol(protocol))
                    timed[protocol] = ev
                short, full = timed[FEEDBACK_SHORT], timed[FINAL_FULL]
                row: dict[str, Any] = {"task": task.id, "candidate": label, "verdict": full.verdict.kind}
                if short.timing is None or full.timing is None:
                    row["note"] = f"not timed: {short.verdict.one_line()[:200]} / {full.verdict.one_line()[:200]}"
                    rows.append(row)
                    print(f"{task.id:12s} {label[:28]:28s} not timed: {row['note'][:120]}")
                    continue
                cases = []
                for s_ct, f_ct in zip(short.timing.cases, full.timing.cases, strict=True):
                    ratio, lo, hi = case_ratio(f_ct, policy)
                    s_ratio = statistics.median(s_ct.baseline_ms) / max(statistics.median(s_ct.candidate_ms), 1e-9)
                    cases.append({"case": s_ct.case, "short_decision": s_ct.decision, "short_ratio": s_ratio,
                                  "short_samples": len(s_ct.candidate_ms), "early_stopped": s_ct.early_stopped,
                                  "baseline_source": s_ct.baseline_source, "full_ratio": ratio, "full_lo": lo,
                                  "full_hi": hi, "full_samples": len(f_ct.candidate_ms),
                                  "full_class": classify_full(ratio, lo, hi, policy.feedback_equivalence),
                                  "agreement": agreement(s_ct.decision, ratio, lo, hi, policy.feedback_equivalence)})
                row.update({
                    "short_s": (short.phases or {}).get("timing"), "full_s": (full.phases or {}).get("timing"),
                    "short_speedup": short.timing.speedup_vs_baseline, "short_ci": short.timing.speedup_ci,
                    "full_speedup": full.timing.speedup_vs_baseline, "full_ci": full.timing.speedup_ci,
                    "short_samples": short.timing.samples_taken, "full_samples": full.timing.samples_taken,
                    "drift_events": list(short.timing.drift_events), "cases": cases,
                    "references_reused": all(c["baseline_source"] == "reused" for c in cases),
                })
                rows.append(row)
                print(f"{task.id:12s} {label[:28]:28s} short {row['short_s']:6.2f} s {row['short_samples']:4d} samples "
                      f"x{row['short_speedup']:.3f}  | full {row['full_s']:6.2f} s {row['full_samples']:4d} samples "
                      f"x{row['full_speedup']:.3f}  | refs {'reused' if row['references_reused'] else 'fresh'} | "
                      + " ".join(f"{c['short_decision'] or '?'}/{c['agreement']}" for c in cases), flush=True)
    timed_rows = [r for r in rows if "cases" in r]
    all_cases = [c for r in timed_rows for c in r["cases"]]
    counts = {k: sum(c["agreement"] == k for c in all_cases) for k in ("agree", "disagree", "contradiction",
                                                                        "undecided")}
    decided = counts["agree"] + counts["disagree"] + counts["contradiction"]
    reused = [r for r in timed_rows if r["references_reused"]]
    summary = {
        "device": torch.cuda.get_device_name(0), "tasks": [t.id for t in tasks], "candidates": len(rows),
        "timed": len(timed_rows), "cases": len(all_cases), "agreement_counts": counts,
        "agreement_share_of_decided": counts["agree"] / decided if decided else None,
        "undecided_share": counts["undecided"] / len(all_cases) if all_cases else None,
        "short_seconds_total": sum(r["short_s"] or 0.0 for r in timed_rows),
        "full_seconds_total": sum(r["full_s"] or 0.0 for r in timed_rows),
        "short_seconds_median": _median([r["short_s"] for r in timed_rows]),
        "short_seconds_median_reused": _median([r["short_s"] for r in reused]),
        "full_seconds_median": _median([r["full_s"] for r in timed_rows]),
        "short_samples_median": _median([r["short_samples"] for r in timed_rows]),
        "full_samples_median": _median([r["full_samples"] for r in timed_rows]),
        "early_stopped_share": (sum(c["early_stopped"] for c in all_cases) / len(all_cases)) if all_cases else None,
        "drift_events": sum(len(r["drift_events"]) for r in timed_rows),
        "wall_s": time.perf_counter() - started, "policy": policy.to_json(),
    }
    print()
    print(f"cases: {len(all_cases)} over {len(timed_rows)} timed candidates; decisions of the short protocol vs the "
          f"full one: {counts}")
    if decided:
        print(f"agreement among decided cases: {counts['agree']}/{decided} = {summary['agreement_share_of_decided']:.3f}")
    print(f"timing seconds per evaluation (median): short {_fmt(summary['short_seconds_median'])} "
          f"(with reused references {_fmt(summary['short_seconds_median_reused'])}), full "
          f"{_fmt(summary['full_seconds_median'])}; totals short {summary['short_seconds_total']:.1f} s, full "
          f"{summary['full_seconds_total']:.1f} s")
    print(f"candidate samples per evaluation (median): short {_fmt(summary['short_samples_median'])}, full "
          f"{_fmt(summary['full_samples_median'])}; early-stopped cases {_fmt(summary['early_stopped_share'])}; "
          f"drift events {summary['drift_events']}; wall {summary['wall_s']:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summary": summary, "rows": rows}, indent=2, default=str) + "\n")
        print(f"wrote {args.json}")
    return 0


def _median(xs: list[Any]) -> float | None:
    vals = [float(x) for x in xs if x is not None and math.isfinite(float(x))]
    return statistics.median(vals) if vals else None


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


if __name__ == "__main__":
    sys.exit(main())
