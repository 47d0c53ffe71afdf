"""Paired comparisons of every pair of methods, and one plain-language verdict for each.

Why: "is the agent better than sampling at the same cost, by how much, with what
uncertainty?" is answered pair by pair on the same tasks (pairing removes shared task
difficulty). For submitted pass at the full budget:

* the difference is the mean over tasks of per-task differences (each method's per-task
  score is the mean over its repeats), in percentage points;
* its interval is the Student-t interval on the per-task differences (stats.t_ci), with
  the paired BCa bootstrap beside it. The t interval leads because the project's coverage
  simulation (scripts/coverage_sim.py) found percentile/BCa bootstrap intervals for paired
  differences under-cover at 30 tasks (0.87-0.90) while the t interval holds (0.93-0.95);
* the test is exact McNemar on units paired by (task, repeat); under "no difference"
  both methods have the same success probability on a task, so a discordant pair is a fair
  coin whichever repeats are paired.

Where both methods' final submissions were timed, speedups are compared on log ratios
(per-task geometric mean over correct repeats, tasks where both are correct): t interval
and bootstrap on the mean log ratio, reported as a ratio, and the Wilcoxon signed-rank test
(zero_method="wilcox": tasks with equal speedups carry no sign and are dropped).

All p-values of a report form one family, adjusted with Holm's method (named explicitly).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np
import pandas as pd

from results.readers import RunData
from stats import (
    Estimate,
    PairedTest,
    adjust_pvalues,
    mcnemar_exact,
    paired_diff_ci,
    t_ci,
    wilcoxon_log_ratio,
)

ALPHA = 0.05
ADJUST = "holm"
ZERO_METHOD = "wilcox"
MIN_SPEEDUP_TASKS = 2  # fewer tasks where both are correct: no interval, no test (not in the Holm family)
DISPLAY = {"direct": "direct prompting", "reflexion": "Reflexion", "geak": "GEAK"}


def display(method: str) -> str:
    return DISPLAY.get(method, method)


@dataclass(frozen=True)
class Comparison:
    """One paired comparison of method a against method b (positive = a better/faster).

    metric: "submitted pass" (difference in points) or "speedup" (ratio a/b).
    value: mean per-task difference (pass, as a fraction) or geometric mean ratio (speedup).
    t_interval / boot_interval: on the same scale as value. test: the paired test.
    p_adjusted: after the report-wide adjustment (`adjust_method`).
    """

    a: str
    b: str
    metric: str
    budget: int
    budget_unit: str
    n_tasks: int
    value: float
    t_interval: Estimate
    boot_interval: Estimate
    test: PairedTest
    p_adjusted: float = float("nan")
    adjust_method: str = ADJUST
    note: str = ""

    @property
    def significant(self) -> bool:
        return bool(self.p_adjusted < ALPHA)


def _per_task(units: pd.DataFrame, method: str, col: str) -> pd.Series:
    return units[units["method"] == method].groupby("task")[col].mean()


def _log_speedup_per_task(units: pd.DataFrame, method: str) -> pd.Series:
    rows = units[(units["method"] == method) & units["submitted_pass"] & units["speedup"].notna()]
    return np.log(rows["speedup"]).groupby(rows["task"]).mean()


def _pass_comparison(data: RunData, a: str, b: str, n_resamples: int, seed: int) -> Comparison | None:
    u = data.units
    sa, sb = _per_task(u, a, "submitted_pass"), _per_task(u, b, "submitted_pass")
    tasks = sorted(set(sa.index) & set(sb.index))
    if not tasks:
        return None
    x, y = sa.loc[tasks].to_numpy(float), sb.loc[tasks].to_numpy(float)
    t_est = _clip(t_ci(x - y))
    boot = paired_diff_ci(x, y, n_resamples=n_resamples, method="BCa", seed=seed)
    pairs = u[u["method"] == a][["task", "repeat", "submitted_pass"]].merge(
        u[u["method"] == b][["task", "repeat", "submitted_pass"]], on=["task", "repeat"], suffixes=("_a", "_b"))
    test = mcnemar_exact(pairs["submitted_pass_a"].to_numpy(bool), pairs["submitted_pass_b"].to_numpy(bool))
    return Comparison(a, b, "submitted pass", data.budget, data.budget_unit, len(tasks), float(np.mean(x - y)),
                      t_est, boot, test, note=test.note)


def _clip(est: Estimate) -> Estimate:
    """A difference of two success rates lies in [-1, 1]; the t interval is not range-respecting
    (with few tasks it can reach past it), so it is intersected with that range (coverage is kept)."""
    lo, hi = max(est.lo, -1.0), min(est.hi, 1.0)
    if (lo, hi) == (est.lo, est.hi):
        return est
    return replace(est, lo=lo, hi=hi, method=f"{est.method} (clipped to [-1, 1])")


def _exp(est: Estimate) -> Estimate:
    return replace(est, value=math.exp(est.value), lo=math.exp(est.lo), hi=math.exp(est.hi),
                   method=f"exp({est.method})")


def _speedup_comparison(data: RunData, a: str, b: str, n_resamples: int, seed: int) -> Comparison | None:
    la, lb = _log_speedup_per_task(data.units, a), _log_speedup_per_task(data.units, b)
    tasks = sorted(set(la.index) & set(lb.index))
    if len(tasks) < MIN_SPEEDUP_TASKS:
        return None
    x, y = la.loc[tasks].to_numpy(float), lb.loc[tasks].to_numpy(float)
    d = x - y
    test = wilcoxon_log_ratio(np.exp(x), np.exp(y), zero_method=ZERO_METHOD)
    boot = paired_diff_ci(x, y, n_resamples=n_resamples, method="BCa", seed=seed)
    return Comparison(a, b, "speedup", data.budget, data.budget_unit, len(tasks), math.exp(float(np.mean(d))),
                      _exp(t_ci(d)), _exp(boot), test, note=test.note)


def uncompared_speedups(data: RunData) -> list[str]:
    """Method pairs whose speedups are not compared: fewer than MIN_SPEEDUP_TASKS tasks where both are correct."""
    if not data.has_timings:
        return []
    present = [m for m in data.methods if (data.units["method"] == m).any()]
    out = []
    for b, a in combinations(present, 2):
        n = len(set(_log_speedup_per_task(data.units, a).index) & set(_log_speedup_per_task(data.units, b).index))
        if n < MIN_SPEEDUP_TASKS:
            out.append(f"Speedups of {display(a)} and {display(b)} are not compared: {n} task(s) where both "
                       f"submissions are correct and timed (at least {MIN_SPEEDUP_TASKS} needed).")
    return out


def paired_comparisons(data: RunData, n_resamples: int = 10_000, seed: int = 0,
                       adjust: str = ADJUST) -> list[Comparison]:
    """Every pair (later method in the run's order vs earlier), pass and (when timed) speedup,
    with p-values adjusted together by `adjust` ("holm" by default)."""
    present = [m for m in data.methods if (data.units["method"] == m).any()]
    out: list[Comparison] = []
    for b, a in combinations(present, 2):
        for build in (_pass_comparison, _speedup_comparison):
            c = build(data, a, b, n_resamples, seed)
            if c is not None:
                out.append(c)
    if out:
        adjusted = adjust_pvalues(np.array([c.test.pvalue for c in out]), method=adjust)
        out = [replace(c, p_adjusted=float(p), adjust_method=adjust) for c, p in zip(out, adjusted, strict=True)]
    return out


def _p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def _adj_name(method: str) -> str:
    return {"holm": "Holm", "fdr_bh": "BH", "bonferroni": "Bonferroni"}.get(method, method)


def verdict_sentence(c: Comparison) -> str:
    """The comparison in one plain sentence, with its interval and adjusted p-value."""
    A, B = display(c.a), display(c.b)
    unit = "calls" if c.budget_unit == "calls" else "tokens"
    adj = f"{_adj_name(c.adjust_method)}-adjusted p = {_p(c.p_adjusted)}"
    t, bt = c.t_interval, c.boot_interval
    if c.metric == "submitted pass":
        pts = 100 * c.value
        ci = f"95% CI [{100 * t.lo:+.1f}, {100 * t.hi:+.1f}] (t on per-task differences; paired bootstrap [{100 * bt.lo:+.1f}, {100 * bt.hi:+.1f}])"
        test = f"exact McNemar {adj}; discordant (task, repeat) pairs {c.test.n10} for {A}, {c.test.n01} for {B}"
        if c.significant:
            verb = "exceeds" if pts > 0 else "falls short of"
            s = (f"At {c.budget} {unit}, {A}'s submitted pass {verb} {B}'s by {abs(pts):.1f} points over "
                 f"{c.n_tasks} tasks, {ci}; {test}.")
        else:
            s = (f"At {c.budget} {unit}, no detectable difference in submitted pass between {A} and {B} over "
                 f"{c.n_tasks} tasks: {A} minus {B} = {pts:+.1f} points, {ci}; {test}.")
        excludes_zero = t.lo > 0 or t.hi < 0
    else:
        ci = (f"95% CI [{t.lo:.2f}, {t.hi:.2f}] (t on per-task log ratios; paired bootstrap "
              f"[{bt.lo:.2f}, {bt.hi:.2f}])")
        test = f"Wilcoxon signed-rank ({ZERO_METHOD}) {adj}"
        if c.significant:
            verb = "faster" if c.value > 1 else "slower"
            s = (f"At {c.budget} {unit}, on the {c.n_tasks} tasks where both submissions are correct, {A}'s kernels "
                 f"are {verb} than {B}'s: speedup ratio {c.value:.2f}x, {ci}; {test}.")
        else:
            s = (f"At {c.budget} {unit}, on the {c.n_tasks} tasks where both submissions are correct, no detectable "
                 f"difference in speedup between {A} and {B}: ratio {c.value:.2f}x, {ci}; {test}.")
        excludes_zero = t.lo > 1 or t.hi < 1
    degenerate = t.lo == t.hi
    if c.significant and not excludes_zero:
        s += " The t interval still includes no difference: treat this as borderline."
    elif not c.significant and excludes_zero and not degenerate:
        s += " The t interval excludes no difference but the adjusted test does not: treat this as borderline."
    if c.note:
        s += f" ({c.note}.)"
    return s
