"""summary.json and the end-of-run table, computed from the store alone.

Because it reads only the store, the summary of a resumed run is computed exactly as that
of an uninterrupted one, and it holds no wall-clock fields, so the two compare equal.
Stable fields (scripts rely on them): simulated, budget, budget_unit, and per method
calls_used, tokens_used (per task, summed over repeats), submitted_pass, oracle_pass,
submitted_pass_ci, speedup_geomean.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from results.store import Store
from stats import geomean, mean_ci

SIMULATED_BANNER = ("SIMULATED MODEL: these results come from the built-in simulated model, "
                    "not from a real LLM; they exercise the toolkit, they say nothing about any model.")


@dataclass(frozen=True)
class UnitOutcome:
    method: str
    task: str
    repeat: int
    calls_used: int
    tokens_used: int
    feedback_evals: int
    submitted_pass: bool
    oracle_pass: bool
    submitted_visible_pass: bool | None
    speedup: float | None


def _hidden_verdicts(store: Store) -> dict[str, str]:
    """source hash -> hidden verdict kind (untimed evaluation; the timed one agrees)."""
    out: dict[str, str] = {}
    for r in store.query("SELECT source_hash, verdict, device_key FROM evaluations WHERE case_set='hidden'"):
        if not r["device_key"].endswith("|timed") or r["source_hash"] not in out:
            out[r["source_hash"]] = r["verdict"]
    return out


def _speedups(store: Store) -> dict[str, float]:
    import json

    out = {}
    for r in store.query("SELECT source_hash, evaluation FROM evaluations WHERE case_set='hidden' "
                         "AND device_key LIKE '%|timed'"):
        timing = json.loads(r["evaluation"]).get("timing")
        if timing and timing.get("speedup_vs_baseline"):
            out[r["source_hash"]] = float(timing["speedup_vs_baseline"])
    return out


def unit_outcomes(store: Store) -> list[UnitOutcome]:
    hidden = _hidden_verdicts(store)
    speed = _speedups(store)
    visible = {r["source_hash"]: r["verdict"] for r in store.query("SELECT source_hash, verdict FROM feedback")}
    # One pass over each table, grouped by unit (not one query per unit).
    finals = {(r[0], r[1], r[2]): r[3] for r in store.query(
        "SELECT s.method, s.task, s.repeat, s.source_hash FROM submissions s JOIN "
        "(SELECT method, task, repeat, MAX(submission_index) AS last FROM submissions GROUP BY method, task, repeat) m "
        "ON s.method=m.method AND s.task=m.task AND s.repeat=m.repeat AND s.submission_index=m.last")}
    candidates: dict[tuple, list[str]] = {}
    for r in store.query("SELECT method, task, repeat, source_hash FROM candidates"):
        candidates.setdefault((r[0], r[1], r[2]), []).append(r[3])
    outcomes = []
    for u in store.query("SELECT * FROM units WHERE status='done' ORDER BY method, task, repeat"):
        key = (u["method"], u["task"], u["repeat"])
        cands = candidates.get(key, [])
        final = finals.get(key)
        submitted = final is not None and hidden.get(final) == "correct"
        outcomes.append(UnitOutcome(
            method=u["method"], task=u["task"], repeat=u["repeat"], calls_used=u["calls_used"],
            tokens_used=u["prompt_tokens"] + u["completion_tokens"], feedback_evals=u["feedback_evals"],
            submitted_pass=submitted, oracle_pass=any(hidden.get(h) == "correct" for h in cands),
            submitted_visible_pass=(visible[final] == "correct") if final in visible else None,
            speedup=speed.get(final) if submitted and final else None,
        ))
    return outcomes


def _ci(scores: np.ndarray, seed: int) -> tuple[list[float], str]:
    est = mean_ci(scores, confidence=0.95, n_resamples=10_000, method="BCa", seed=seed)
    return [float(est.lo), float(est.hi)], est.method


def build_summary(store: Store, config: dict[str, Any], simulated: bool, model: str) -> dict[str, Any]:
    outcomes = unit_outcomes(store)
    df = pd.DataFrame([o.__dict__ for o in outcomes])
    unit = config["budget_unit"]
    summary: dict[str, Any] = {
        "simulated": simulated,
        "model": model,
        "budget": config["budget"],
        "budget_unit": "calls" if unit == "calls" else "tokens",
        "tokens_counted": None if unit == "calls" else ("output" if unit == "output_tokens" else "total"),
        "repeats": config["repeats"],
        "seed": config["seed"],
        "methods": {},
    }
    for method in config["methods"]:
        rows = df[df["method"] == method] if len(df) else df
        if not len(rows):
            summary["methods"][method] = {"calls_used": {}, "tokens_used": {}, "submitted_pass": None,
                                          "oracle_pass": None, "submitted_pass_ci": None, "speedup_geomean": None}
            continue
        per_task = rows.groupby("task").agg(
            submitted=("submitted_pass", "mean"), oracle=("oracle_pass", "mean"), calls=("calls_used", "sum"),
            tokens=("tokens_used", "sum"), evals=("feedback_evals", "sum"))
        sub_ci, ci_method = _ci(per_task["submitted"].to_numpy(float), config["seed"])
        ora_ci, _ = _ci(per_task["oracle"].to_numpy(float), config["seed"])
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
