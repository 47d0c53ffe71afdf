"""Paired comparisons of every pair of methods, and one plain-language verdict for each.

Why: "is the agent better than sampling at the same cost, by how much, with what
uncertainty?" is answered pair by pair on the same tasks (pairing removes shared task
difficulty), with the task as the unit (design invariant 11): repeats are nested in tasks,
never counted as independent, so adding copies of a run changes nothing.

Which test answers which question:

* submitted pass at the full budget: the estimate is the mean over tasks of per-task
  differences d_i (each method's per-task score is the mean over its repeats), in points.
  The verdict is the paired t-test on the d_i; the Student-t interval on the d_i printed
  beside it agrees with it by construction (the interval excludes 0 exactly when p < 0.05
  before adjustment). The coverage simulation (scripts/coverage_sim.py) found the t interval
  holds at 30 tasks where percentile/BCa bootstrap intervals of paired differences
  under-cover; the paired BCa bootstrap is shown beside it. For small suites the sign-flip
  permutation test on the same d_i (exact up to 16 tasks) is shown beside the t-test.
  Exact McNemar over (task, repeat) pairs treats repeats as independent, so it is only a
  description (discordant pairs), with its p-value shown only when every task has one repeat;
* speedup, on the tasks where both methods' final submissions are correct and timed
  (unflagged): per-task mean log speedup, differences, the same paired t-test and t interval
  (reported as ratios), the BCa bootstrap and Wilcoxon signed-rank (zero_method="wilcox")
  beside them;
* "no detectable difference" always comes with the minimum detectable difference (power
  0.8, alpha 0.05, the same paired t-test, stats/power.py) from the observed spread of the
  d_i (from the assumed variance model when every d_i is equal).

All verdict p-values of a report form one family, adjusted with Holm's method (named explicitly).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np
import pandas as pd

from results.labels import range_text
from results.readers import RunData
from stats import (
    ALPHA,
    TARGET_POWER,
    Estimate,
    PairedTest,
    PassVarianceModel,
    adjust_pvalues,
    mcnemar_exact,
    minimum_detectable_difference,
    paired_diff_ci,
    paired_t_test,
    sign_flip_test,
    t_ci,
    wilcoxon_log_ratio,
)

ADJUST = "holm"
ZERO_METHOD = "wilcox"
MIN_SPEEDUP_TASKS = 2  # fewer tasks where both are correct: no interval, no test (not in the Holm family)
SIGN_FLIP_BELOW = 50  # tasks: below this the sign-flip permutation test is shown beside the t-test
SIGN_FLIP_RESAMPLES = 2 ** 16  # sign patterns: exact (every pattern) up to 16 tasks
DISPLAY = {"direct": "direct prompting", "reflexion": "Reflexion", "geak": "GEAK"}


def display(method: str) -> str:
    return DISPLAY.get(method, method)


@dataclass(frozen=True)
class MinimumDetectable:
    """The smallest true difference the comparison's test detects with power 0.8 at alpha 0.05.

    value: on the comparison's scale (a fraction for pass; a ratio >= 1 for speedup); NaN
    when not estimable. source: "observed spread of per-task differences" or the assumed
    variance model's description."""

    value: float
    source: str


@dataclass(frozen=True)
class Comparison:
    """One paired comparison of method a against method b (positive = a better/faster).

    metric: "submitted pass" (difference in points) or "speedup" (ratio a/b).
    value: mean per-task difference (pass, as a fraction) or geometric mean ratio (speedup).
    t_interval / boot_interval: on the same scale as value. test: the verdict's test (paired
    t on per-task differences). p_adjusted: after the report-wide adjustment.
    beside: tests shown next to it, outside the adjusted family (sign-flip permutation for
    small suites; McNemar over (task, repeat) pairs for pass, descriptive; Wilcoxon for speedup).
    one_repeat: every task has one unit per method (McNemar's p-value is then meaningful).
    mde: the minimum detectable difference of the verdict's test.
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
    beside: tuple[PairedTest, ...] = ()
    one_repeat: bool = True
    mde: MinimumDetectable = MinimumDetectable(float("nan"), "")
    p_adjusted: float = float("nan")
    adjust_method: str = ADJUST
    note: str = ""

    @property
    def significant(self) -> bool:
        return bool(self.p_adjusted < ALPHA)

    def beside_test(self, prefix: str) -> PairedTest | None:
        return next((t for t in self.beside if t.method.startswith(prefix)), None)


def _per_task(units: pd.DataFrame, method: str, col: str) -> pd.Series:
    return units[units["method"] == method].groupby("task")[col].mean()


def log_speedup_per_task(units: pd.DataFrame, method: str) -> pd.Series:
    """Per task: mean log speedup over the method's correct repeats with an unflagged timing."""
    rows = units[(units["method"] == method) & units["submitted_pass"] & units["speedup"].notna()
                 & ~units["speedup_flagged"]]
    return np.log(rows["speedup"]).groupby(rows["task"]).mean()


def _mde_pass(d: np.ndarray, repeats: float) -> MinimumDetectable:
    if d.size < 2:
        return MinimumDetectable(float("nan"), "one task: no test")
    sd = float(np.std(d, ddof=1))
    if sd > 0:
        return MinimumDetectable(minimum_detectable_difference(sd, d.size), "observed spread of per-task differences")
    model = PassVarianceModel.from_icc()
    sd = model.difference_sd(0.5, max(1, round(repeats)))
    return MinimumDetectable(minimum_detectable_difference(sd, d.size),
                             f"every per-task difference is equal, so {model.source}, pass rate 0.5")


def _pass_comparison(data: RunData, a: str, b: str, n_resamples: int, seed: int) -> Comparison | None:
    u = data.units
    sa, sb = _per_task(u, a, "submitted_pass"), _per_task(u, b, "submitted_pass")
    tasks = sorted(set(sa.index) & set(sb.index))
    if not tasks:
        return None
    x, y = sa.loc[tasks].to_numpy(float), sb.loc[tasks].to_numpy(float)
    d = x - y
    test = paired_t_test(d, SIGN_FLIP_RESAMPLES, seed)
    boot = paired_diff_ci(x, y, n_resamples=n_resamples, method="BCa", seed=seed)
    beside: list[PairedTest] = []
    if len(tasks) < SIGN_FLIP_BELOW:
        beside.append(sign_flip_test(d, SIGN_FLIP_RESAMPLES, seed))
    ua, ub = u[u["method"] == a], u[u["method"] == b]
    pairs = ua[["task", "repeat", "submitted_pass"]].merge(ub[["task", "repeat", "submitted_pass"]],
                                                           on=["task", "repeat"], suffixes=("_a", "_b"))
    beside.append(mcnemar_exact(pairs["submitted_pass_a"].to_numpy(bool), pairs["submitted_pass_b"].to_numpy(bool)))
    sizes = pd.concat([ua.groupby("task").size(), ub.groupby("task").size()])
    repeats = float(pd.concat([ua, ub]).groupby(["method", "task"]).size().mean())
    return Comparison(a, b, "submitted pass", data.budget, data.budget_unit, len(tasks), float(np.mean(d)),
                      _clip(t_ci(d)), boot, test, tuple(beside), bool((sizes == 1).all()), _mde_pass(d, repeats),
                      note=test.note)


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
    la, lb = log_speedup_per_task(data.units, a), log_speedup_per_task(data.units, b)
    tasks = sorted(set(la.index) & set(lb.index))
    if len(tasks) < MIN_SPEEDUP_TASKS:
        return None
    x, y = la.loc[tasks].to_numpy(float), lb.loc[tasks].to_numpy(float)
    d = x - y
    test = paired_t_test(d, SIGN_FLIP_RESAMPLES, seed)
    boot = paired_diff_ci(x, y, n_resamples=n_resamples, method="BCa", seed=seed)
    beside = [wilcoxon_log_ratio(np.exp(x), np.exp(y), zero_method=ZERO_METHOD)]
    if len(tasks) < SIGN_FLIP_BELOW:
        beside.insert(0, sign_flip_test(d, SIGN_FLIP_RESAMPLES, seed))
    sd = float(np.std(d, ddof=1))
    mde = (MinimumDetectable(math.exp(minimum_detectable_difference(sd, len(tasks))),
                             "observed spread of per-task log ratios") if sd > 0
           else MinimumDetectable(float("nan"), "every per-task log ratio is equal"))
    return Comparison(a, b, "speedup", data.budget, data.budget_unit, len(tasks), math.exp(float(np.mean(d))),
                      _exp(t_ci(d)), _exp(boot), test, tuple(beside), mde=mde, note=test.note)


def uncompared_speedups(data: RunData) -> list[str]:
    """Method pairs whose speedups are not compared: fewer than MIN_SPEEDUP_TASKS tasks where both are correct."""
    if not data.has_timings:
        return []
    present = [m for m in data.methods if (data.units["method"] == m).any()]
    out = []
    for b, a in combinations(present, 2):
        n = len(set(log_speedup_per_task(data.units, a).index) & set(log_speedup_per_task(data.units, b).index))
        if n < MIN_SPEEDUP_TASKS:
            out.append(f"Speedups of {display(a)} and {display(b)} are not compared: {n} task(s) where both "
                       f"submissions are correct and timed without a flag (at least {MIN_SPEEDUP_TASKS} needed).")
    return out


def paired_comparisons(data: RunData, n_resamples: int = 10_000, seed: int = 0,
                       adjust: str = ADJUST) -> list[Comparison]:
    """Every pair (later method in the run's order vs earlier), pass and (when timed) speedup,
    with the verdict p-values adjusted together by `adjust` ("holm" by default)."""
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


def p_text(p: float) -> str:
    return "n/a" if not math.isfinite(p) else (f"{p:.3f}" if p >= 0.001 else f"{p:.1e}")


def _adj_name(method: str) -> str:
    return {"holm": "Holm", "fdr_bh": "BH", "bonferroni": "Bonferroni"}.get(method, method)


def mde_text(c: Comparison) -> str:
    """The minimum detectable difference as a clause: what this comparison could have seen."""
    m = c.mde
    power = f"power {TARGET_POWER:g} at alpha {ALPHA:g} before adjustment"
    if not math.isfinite(m.value):
        return f"the smallest detectable difference is not estimable ({m.source})"
    if c.metric == "submitted pass":
        if m.value >= 1:
            return (f"with {c.n_tasks} tasks no difference of pass rates could be detected ({power}; the smallest "
                    f"detectable would be {100 * m.value:.0f} points, more than the 100 possible; {m.source})")
        return (f"the smallest difference this comparison could detect is about {100 * m.value:.0f} points "
                f"({power}; {m.source})")
    return (f"the smallest speedup ratio this comparison could detect is about {m.value:.2f}x either way "
            f"({power}; {m.source})")


def verdict_sentence(c: Comparison) -> str:
    """The comparison in one plain sentence, with its interval, adjusted p-value and, when no
    difference is detected, the minimum detectable difference."""
    A, B = display(c.a), display(c.b)
    unit = "calls" if c.budget_unit == "calls" else "tokens"
    adj = f"{_adj_name(c.adjust_method)}-adjusted p = {p_text(c.p_adjusted)}"
    t, bt = c.t_interval, c.boot_interval
    flip = c.beside_test("sign-flip")
    flip_text = f"; sign-flip permutation p = {p_text(flip.pvalue)}" if flip else ""
    if c.metric == "submitted pass":
        pts = 100 * c.value
        ci = (f"95% CI {range_text(t.lo, t.hi, 1, 100, True)} (t on per-task differences; paired bootstrap "
              f"{range_text(bt.lo, bt.hi, 1, 100, True)})" if t.lo != t.hi else
              f"no interval (every per-task difference is {pts:+.1f} points: zero spread)")
        test = f"paired t-test on {c.n_tasks} per-task differences, {adj}{flip_text}"
        mc = c.beside_test("mcnemar")
        if mc is not None:
            test += f"; discordant (task, repeat) pairs {mc.n10} for {A}, {mc.n01} for {B}"
        if c.significant:
            verb = "exceeds" if pts > 0 else "falls short of"
            s = (f"At {c.budget} {unit}, {A}'s submitted pass {verb} {B}'s by {abs(pts):.1f} points over "
                 f"{c.n_tasks} tasks, {ci}; {test}.")
        else:
            s = (f"At {c.budget} {unit}, no detectable difference in submitted pass between {A} and {B} over "
                 f"{c.n_tasks} tasks: {A} minus {B} = {pts:+.1f} points, {ci}; {test}; {mde_text(c)}.")
        excludes_zero = t.lo > 0 or t.hi < 0
    else:
        ci = (f"95% CI {range_text(t.lo, t.hi, 2)} (t on per-task log ratios; paired bootstrap "
              f"{range_text(bt.lo, bt.hi, 2)})" if t.lo != t.hi else
              f"no interval (every per-task ratio is {c.value:.2f}x: zero spread)")
        wil = c.beside_test("wilcoxon")
        test = f"paired t-test on log ratios, {adj}{flip_text}" + (
            f"; Wilcoxon signed-rank p = {p_text(wil.pvalue)}" if wil else "")
        if c.significant:
            verb = "faster" if c.value > 1 else "slower"
            s = (f"At {c.budget} {unit}, on the {c.n_tasks} tasks where both submissions are correct, {A}'s kernels "
                 f"are {verb} than {B}'s: speedup ratio {c.value:.2f}x, {ci}; {test}.")
        else:
            s = (f"At {c.budget} {unit}, on the {c.n_tasks} tasks where both submissions are correct, no detectable "
                 f"difference in speedup between {A} and {B}: ratio {c.value:.2f}x, {ci}; {test}; {mde_text(c)}.")
        excludes_zero = t.lo > 1 or t.hi < 1
    degenerate = t.lo == t.hi
    if c.significant and not excludes_zero:
        s += " The t interval still includes no difference: treat this as borderline."
    elif not c.significant and excludes_zero and not degenerate:
        s += " The t interval excludes no difference but the adjusted test does not: treat this as borderline."
    if c.note:
        s += f" ({c.note}.)"
    return s
