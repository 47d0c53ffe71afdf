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
    min_tasks_to_reject,
    minimum_detectable_difference,
    paired_diff_ci,
    paired_t_test,
    sign_flip_min_p,
    sign_flip_test,
    t_ci,
    wilcoxon_log_ratio,
)

ADJUST = "holm"
ZERO_METHOD = "wilcox"
SIGN_FLIP_BELOW = 50  # tasks: below this the sign-flip permutation test is shown beside the t-test
SIGN_FLIP_RESAMPLES = 2 ** 16  # sign patterns: exact (every pattern) up to 16 tasks
DISPLAY = {"direct": "direct prompting", "reflexion": "Reflexion", "geak": "GEAK"}
#: What decides a tested verdict (named in every sentence, table row and summary.json entry).
DECIDED_BY = "paired t-test on per-task differences"
UNTESTED = "too few tasks to test"


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
class WithoutErrors:
    """The comparison recomputed with every errored unit left out (design invariant 10): on the
    tasks where both methods keep at least one unit; outside the adjusted family. tested: there
    are enough such tasks for a test (the report's small-suite rule); else value only."""

    n_tasks: int
    value: float
    t_interval: Estimate | None
    p: float
    tested: bool


@dataclass(frozen=True)
class Comparison:
    """One paired comparison of method a against method b (positive = a better/faster).

    metric: "submitted pass" (difference in points) or "speedup" (ratio a/b).
    value: mean per-task difference (pass, as a fraction) or geometric mean ratio (speedup).
    t_interval / boot_interval: on the same scale as value; the t interval is the one printed
    beside the verdict (it agrees with the test), the bootstrap is descriptive (table files only).
    test: the verdict's test (paired t on per-task differences). p_adjusted: after the
    report-wide adjustment.
    beside: tests shown next to it, outside the adjusted family (sign-flip permutation for
    small suites; McNemar over (task, repeat) pairs for pass, descriptive; Wilcoxon for speedup).
    one_repeat: every task has one unit per method (McNemar's p-value is then meaningful).
    mde: the minimum detectable difference of the verdict's test.
    tested: False below the small-suite minimum (`min_tasks`): then there is no verdict, no
    p-value and no interval, only the counts (test.n10 / n01 / n) and the reason.
    decided_by: the test that decided the verdict ("" when untested).
    errored: units of each method that ended on an error, on the compared tasks;
    without_errors: the comparison with them left out (None when none errored).
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
    tested: bool = True
    min_tasks: int = 0
    decided_by: str = DECIDED_BY
    errored: tuple[int, int] = (0, 0)
    without_errors: WithoutErrors | None = None

    @property
    def significant(self) -> bool:
        return bool(self.tested and self.p_adjusted < ALPHA)

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


def _pair_values(units: pd.DataFrame, a: str, b: str, metric: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Tasks both methods have values on, and each method's per-task value (mean pass over
    repeats, or mean log speedup over correct, timed, unflagged repeats)."""
    if metric == "submitted pass":
        sa, sb = _per_task(units, a, "submitted_pass"), _per_task(units, b, "submitted_pass")
    else:
        sa, sb = log_speedup_per_task(units, a), log_speedup_per_task(units, b)
    tasks = sorted(set(sa.index) & set(sb.index))
    return tasks, sa.loc[tasks].to_numpy(float), sb.loc[tasks].to_numpy(float)


def _without_errors(data: RunData, a: str, b: str, metric: str, min_tasks: int) -> tuple[tuple[int, int],
                                                                                          WithoutErrors | None]:
    u = data.units
    tasks, _, _ = _pair_values(u, a, b, metric if metric == "submitted pass" else "submitted pass")
    on = u[u["task"].isin(tasks)]
    bad = on["error"].notna()
    errored = (int((bad & (on["method"] == a)).sum()), int((bad & (on["method"] == b)).sum()))
    if not any(errored):
        return errored, None
    clean = u[u["error"].isna()]
    t2, x, y = _pair_values(clean, a, b, metric)
    if not t2:
        return errored, WithoutErrors(0, float("nan"), None, float("nan"), False)
    d = x - y
    value = float(np.mean(d))
    if len(t2) < min_tasks:
        return errored, WithoutErrors(len(t2), value if metric == "submitted pass" else math.exp(value), None,
                                      float("nan"), False)
    ci = t_ci(d)
    p = paired_t_test(d, SIGN_FLIP_RESAMPLES, 0).pvalue
    if metric == "submitted pass":
        return errored, WithoutErrors(len(t2), value, _clip(ci), p, True)
    return errored, WithoutErrors(len(t2), math.exp(value), _exp(ci), p, True)


def _build(data: RunData, a: str, b: str, metric: str, tasks: list[str], x: np.ndarray, y: np.ndarray,
           min_tasks: int, n_resamples: int, seed: int) -> Comparison:
    d = x - y
    n = len(tasks)
    errored, clean = _without_errors(data, a, b, metric, min_tasks)
    common = dict(errored=errored, without_errors=clean, min_tasks=min_tasks)
    n10, n01 = int(np.sum(d > 0)), int(np.sum(d < 0))
    u = data.units
    ua, ub = u[u["method"] == a], u[u["method"] == b]
    mc: tuple[PairedTest, ...] = ()
    if metric == "submitted pass":  # discordant (task, repeat) pairs: descriptive counts
        pairs = ua[["task", "repeat", "submitted_pass"]].merge(ub[["task", "repeat", "submitted_pass"]],
                                                               on=["task", "repeat"], suffixes=("_a", "_b"))
        mc = (mcnemar_exact(pairs["submitted_pass_a"].to_numpy(bool), pairs["submitted_pass_b"].to_numpy(bool)),)
    if n < min_tasks:  # design invariant 12: counts and the reason, no test and no interval
        counts = PairedTest(float("nan"), float("nan"), n01, n10, n, UNTESTED)
        none = Estimate(float("nan"), float("nan"), float("nan"), "none: too few tasks", n)
        value = float(np.mean(d)) if metric == "submitted pass" else math.exp(float(np.mean(d)))
        return Comparison(a, b, metric, data.budget, data.budget_unit, n, value, none, none, counts, mc,
                          tested=False, decided_by="", **common)  # type: ignore[arg-type]
    test = paired_t_test(d, SIGN_FLIP_RESAMPLES, seed)
    boot = paired_diff_ci(x, y, n_resamples=n_resamples, method="BCa", seed=seed)
    beside: list[PairedTest] = []
    if n < SIGN_FLIP_BELOW:
        beside.append(sign_flip_test(d, SIGN_FLIP_RESAMPLES, seed))
    if metric == "submitted pass":
        beside.extend(mc)
        sizes = pd.concat([ua.groupby("task").size(), ub.groupby("task").size()])
        repeats = float(pd.concat([ua, ub]).groupby(["method", "task"]).size().mean())
        return Comparison(a, b, metric, data.budget, data.budget_unit, n, float(np.mean(d)), _clip(t_ci(d)), boot,
                          test, tuple(beside), bool((sizes == 1).all()), _mde_pass(d, repeats), note=test.note,
                          **common)  # type: ignore[arg-type]
    beside.append(wilcoxon_log_ratio(np.exp(x), np.exp(y), zero_method=ZERO_METHOD))
    sd = float(np.std(d, ddof=1))
    mde = (MinimumDetectable(math.exp(minimum_detectable_difference(sd, n)),
                             "observed spread of per-task log ratios") if sd > 0
           else MinimumDetectable(float("nan"), "every per-task log ratio is equal"))
    return Comparison(a, b, metric, data.budget, data.budget_unit, n, math.exp(float(np.mean(d))), _exp(t_ci(d)),
                      _exp(boot), test, tuple(beside), mde=mde, note=test.note, **common)  # type: ignore[arg-type]


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


def _present(data: RunData) -> list[str]:
    return [m for m in data.methods if (data.units["method"] == m).any()]


def uncompared_speedups(data: RunData) -> list[str]:
    """Method pairs whose speedups are not compared at all: no task where both are correct and timed."""
    if not data.has_timings:
        return []
    out = []
    for b, a in combinations(_present(data), 2):
        if not _pair_values(data.units, a, b, "speedup")[0]:
            out.append(f"Speedups of {display(a)} and {display(b)} are not compared: no task where both "
                       "submissions are correct and timed without a flag.")
    return out


def small_suite_minimum(sizes: list[int], alpha: float = ALPHA) -> int:
    """The number of tasks a comparison of this report needs for a verdict (design invariant 12).

    The family is every comparison that could be tested at all (at least
    `min_tasks_to_reject(alpha)` tasks); the minimum is `min_tasks_to_reject(alpha, family)`:
    the smallest suite on which the exact sign-flip test could reach alpha / (2 x family), the
    floor Holm's adjustment of that family needs, with a margin of 2. Counting a comparison
    that then falls below the minimum in the family errs on the side of fewer verdicts."""
    family = sum(n >= min_tasks_to_reject(alpha) for n in sizes)
    return min_tasks_to_reject(alpha, max(1, family))


def paired_comparisons(data: RunData, n_resamples: int = 10_000, seed: int = 0,
                       adjust: str = ADJUST) -> list[Comparison]:
    """Every pair (later method in the run's order vs earlier), pass and (when timed) speedup,
    with the verdict p-values adjusted together by `adjust` ("holm" by default). Comparisons
    on fewer tasks than `small_suite_minimum` are kept untested (counts and the reason), outside
    the adjusted family."""
    metrics = ("submitted pass", "speedup") if data.has_timings else ("submitted pass",)
    found = []
    for b, a in combinations(_present(data), 2):
        for metric in metrics:
            tasks, x, y = _pair_values(data.units, a, b, metric)
            if tasks:
                found.append((a, b, metric, tasks, x, y))
    minimum = small_suite_minimum([len(f[3]) for f in found])
    out = [_build(data, a, b, metric, tasks, x, y, minimum, n_resamples, seed) for a, b, metric, tasks, x, y in found]
    tested = [i for i, c in enumerate(out) if c.tested]
    if tested:
        adjusted = adjust_pvalues(np.array([out[i].test.pvalue for i in tested]), method=adjust)
        for i, p in zip(tested, adjusted, strict=True):
            out[i] = replace(out[i], p_adjusted=float(p), adjust_method=adjust)
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


def _untested_sentence(c: Comparison, A: str, B: str, unit: str) -> str:
    tied = c.n_tasks - c.test.n10 - c.test.n01
    where = " where both submissions are correct" if c.metric == "speedup" else ""
    tasks = f"{c.n_tasks} task" + ("s" if c.n_tasks != 1 else "")
    return (f"At {c.budget} {unit}, {UNTESTED}: {c.metric} of {A} and {B} over {tasks}{where} ({A} ahead on "
            f"{c.test.n10}, {B} ahead on {c.test.n01}, tied on {tied}); no verdict and no interval, because no "
            f"exact test over {tasks} can give a p-value below {p_text(sign_flip_min_p(c.n_tasks))} and this "
            f"report's verdicts need at least {c.min_tasks} tasks each (the fewest on which the exact sign-flip "
            f"test could reach alpha {ALPHA:g} over the report's family of verdicts, with a margin of 2).")


def errored_text(c: Comparison) -> str:
    """Design invariant 10 in the verdict: errored units per method and, when any, the comparison
    with them left out."""
    A, B = display(c.a), display(c.b)
    s = f"Errored units on these tasks: {A} {c.errored[0]}, {B} {c.errored[1]}"
    w = c.without_errors
    if w is None:
        return s + "."
    pass_ = c.metric == "submitted pass"
    if w.n_tasks == 0:
        return s + "; with them left out no task has both methods' units."
    value = f"{100 * w.value:+.1f} points" if pass_ else f"{w.value:.2f}x"
    if not w.tested or w.t_interval is None:
        return s + (f"; with them left out: {value} over {w.n_tasks} tasks, too few to test "
                    f"(at least {c.min_tasks} needed).")
    t = w.t_interval
    ci = range_text(t.lo, t.hi, 1, 100, True) if pass_ else range_text(t.lo, t.hi, 2)
    return s + (f"; with them left out: {value} over {w.n_tasks} tasks, 95% CI {ci} (t), p = {p_text(w.p)} "
                "(paired t, before adjustment).")


def verdict_sentence(c: Comparison) -> str:
    """The comparison in one plain sentence: the test that decided it, its adjusted p-value and
    the t interval that agrees with it (or, below the small-suite minimum, the counts and why
    there is no verdict); the minimum detectable difference when nothing is detected; the
    errored units per method and the comparison without them."""
    A, B = display(c.a), display(c.b)
    unit = "calls" if c.budget_unit == "calls" else "tokens"
    if not c.tested:
        return _untested_sentence(c, A, B, unit) + " " + errored_text(c)
    adj = f"{_adj_name(c.adjust_method)}-adjusted p = {p_text(c.p_adjusted)}"
    t = c.t_interval
    flip = c.beside_test("sign-flip")
    flip_text = f"; beside it, the sign-flip permutation test p = {p_text(flip.pvalue)}" if flip else ""
    if c.metric == "submitted pass":
        pts = 100 * c.value
        ci = (f"95% CI {range_text(t.lo, t.hi, 1, 100, True)} (t on per-task differences, the decider's own interval)"
              if t.lo != t.hi else f"no interval (every per-task difference is {pts:+.1f} points: zero spread)")
        test = f"decided by the {DECIDED_BY} ({c.n_tasks} tasks), {adj}{flip_text}"
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
        ci = (f"95% CI {range_text(t.lo, t.hi, 2)} (t on per-task log ratios, the decider's own interval)"
              if t.lo != t.hi else f"no interval (every per-task ratio is {c.value:.2f}x: zero spread)")
        wil = c.beside_test("wilcoxon")
        test = f"decided by the {DECIDED_BY} (log ratios), {adj}{flip_text}" + (
            f"; Wilcoxon signed-rank p = {p_text(wil.pvalue)} over {wil.n} non-zero ratios" if wil else "")
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
        s += (f" The 95% t interval excludes no difference but the {_adj_name(c.adjust_method)}-adjusted test "
              "does not (the interval is not adjusted for the report's several verdicts): treat this as borderline.")
    if c.note:
        s += f" ({c.note}.)"
    return s + " " + errored_text(c)
