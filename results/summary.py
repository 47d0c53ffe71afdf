"""summary.json and the end-of-run table, computed from the run folder alone.

Because it reads only the run folder (config.json and the store, through results.readers, the
same frames the report reads), the summary of a resumed run is computed exactly as that
of an uninterrupted one, and it holds no wall-clock fields, so the two compare equal.
Stable fields (scripts rely on them): simulated, budget, budget_unit, and per method
calls_used, tokens_used (per task, summed over repeats), submitted_pass, oracle_pass,
submitted_pass_ci, speedup_geomean.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from results.labels import SIMULATED_BANNER
from results.readers import RunData, load_run
from stats import geomean, mean_ci


def _ci(scores: np.ndarray, seed: int) -> tuple[list[float], str]:
    est = mean_ci(scores, confidence=0.95, n_resamples=10_000, method="BCa", seed=seed)
    return [float(est.lo), float(est.hi)], est.method


def build_summary(run_dir: Path) -> dict[str, Any]:
    """summary.json's content for a run folder, from the frames the report reads (results.readers)."""
    return summarize(load_run(run_dir))


def summarize(data: RunData) -> dict[str, Any]:
    info = data.first
    df = data.units
    unit = info.budget_unit
    summary: dict[str, Any] = {
        "simulated": info.simulated,
        "model": info.model,
        "budget": info.budget,
        "budget_unit": "calls" if unit == "calls" else "tokens",
        "tokens_counted": None if unit == "calls" else ("output" if unit == "output_tokens" else "total"),
        "repeats": info.repeats,
        "seed": info.seed,
        "methods": {},
    }
    for method in info.methods:
        rows = df[df["method"] == method]
        if not len(rows):
            summary["methods"][method] = {"calls_used": {}, "tokens_used": {}, "submitted_pass": None,
                                          "oracle_pass": None, "submitted_pass_ci": None, "speedup_geomean": None}
            continue
        per_task = rows.groupby("task").agg(
            submitted=("submitted_pass", "mean"), oracle=("oracle_pass", "mean"), calls=("calls_used", "sum"),
            tokens=("tokens_used", "sum"), evals=("feedback_evals", "sum"))
        sub_ci, ci_method = _ci(per_task["submitted"].to_numpy(float), info.seed)
        ora_ci, _ = _ci(per_task["oracle"].to_numpy(float), info.seed)
        speedups = rows["speedup"].dropna().to_numpy(float)
        vis = rows[rows["submitted_visible_pass"] == True]  # noqa: E712 - pandas elementwise comparison
        summary["methods"][method] = {
            "calls_used": {t: int(v) for t, v in per_task["calls"].items()},
            "tokens_used": {t: int(v) for t, v in per_task["tokens"].items()},
            "gpu_evals": {t: int(v) for t, v in per_task["evals"].items()},
            "submitted_pass": float(per_task["submitted"].mean()),
            "oracle_pass": float(per_task["oracle"].mean()),
            "submitted_pass_ci": sub_ci,
            "oracle_pass_ci": ora_ci,
            "ci_method": f"bootstrap over {len(per_task)} tasks ({ci_method})",
            "speedup_geomean": float(geomean(speedups)) if len(speedups) else None,
            "speedup_correct_only": True,
            "visible_false_positive_rate": float((~vis["submitted_pass"].astype(bool)).mean()) if len(vis) else None,
        }
    return summary


def format_table(summary: dict[str, Any], interpreter: bool) -> str:
    lines = []
    if summary["simulated"]:
        lines.append(SIMULATED_BANNER)
    unit = summary["budget_unit"]
    lines.append(f"budget {summary['budget']} {unit} per (method, task, repeat); repeats {summary['repeats']}")
    header = f"{'method':<12} {'submitted':>9} {'95% CI':>15} {'oracle':>7} {'calls':>7} {'tokens':>9} {'GPU evals':>9} {'speedup':>10}"
    lines.append(header)
    lines.append("-" * len(header))
    for name, m in summary["methods"].items():
        if m["submitted_pass"] is None:
            lines.append(f"{name:<12} (no finished units)")
            continue
        ci = m["submitted_pass_ci"]
        calls = sum(m["calls_used"].values())
        tokens = sum(m["tokens_used"].values())
        evals = sum(m.get("gpu_evals", {}).values())
        sp = m["speedup_geomean"]
        speed = "n/a on CPU" if interpreter else ("n/a" if sp is None or math.isnan(sp) else f"{sp:.2f}x")
        lines.append(f"{name:<12} {m['submitted_pass']:>9.3f} {f'[{ci[0]:.2f}, {ci[1]:.2f}]':>15} "
                     f"{m['oracle_pass']:>7.3f} {calls:>7d} {tokens:>9d} {evals:>9d} {speed:>10}")
    lines.append("submitted: the method's own pick passes the hidden tests; oracle: any candidate it generated does. "
                 "speedup: geometric mean over correct submissions vs the expert Triton baseline.")
    return "\n".join(lines)
