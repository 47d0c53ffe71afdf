"""Variance components of repeated outcomes nested in tasks, and the fixed-suite interval.

Why: a suite mean has two sources of uncertainty. Between tasks: another draw of tasks
"like these" would have other difficulties (what the task bootstrap covers: the population
estimand). Within tasks: the same tasks run again would give other outcomes (the only
uncertainty about THIS suite: the fixed-suite estimand). Their sizes say whether to buy
tasks or repeats: the variance of the suite mean is between/T + within/(T R), so repeats
shrink only the second term.

Computed with the one-way random-effects ANOVA (method of moments, unbalanced), for k
tasks with n_i outcomes each (N = sum n_i), task means m_i and grand mean m:

    MSB = sum n_i (m_i - m)^2 / (k - 1);    MSW = sum_i sum_j (y_ij - m_i)^2 / (N - k)
    n0 = (N - sum n_i^2 / N) / (k - 1)
    within = MSW;   between = max(0, (MSB - MSW) / n0);   ICC = between / (between + within)

Pure: arrays in, numbers out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from .intervals import Estimate

__all__ = ["VarianceComponents", "variance_components", "fixed_suite_ci"]


@dataclass(frozen=True)
class VarianceComponents:
    """between: variance of true task means; within: variance of one outcome around its task's
    mean; icc = between / (between + within) (NaN when both are 0); n_tasks; mean_repeats."""

    between: float
    within: float
    icc: float
    n_tasks: int
    mean_repeats: float
    df_within: int

    def mean_variance(self, n_tasks: int, repeats: float) -> float:
        """Variance of a suite mean over `n_tasks` tasks with `repeats` each: between/T + within/(T R)."""
        return self.between / n_tasks + self.within / (n_tasks * repeats)

    def within_share_of_mean_variance(self, repeats: float | None = None) -> float:
        """Share of the suite mean's variance due to within-task noise (the part repeats remove)."""
        r = self.mean_repeats if repeats is None else repeats
        total = self.between + self.within / r
        return float("nan") if total == 0 else (self.within / r) / total


def _groups(values_by_task: Sequence[npt.ArrayLike]) -> list[np.ndarray]:
    groups = [np.asarray(v, dtype=float).ravel() for v in values_by_task]
    if len(groups) < 2:
        raise ValueError("need at least 2 tasks")
    if any(g.size == 0 for g in groups):
        raise ValueError("every task needs at least one outcome")
    if any(not np.all(np.isfinite(g)) for g in groups):
        raise ValueError("outcomes contain NaN or inf")
    if sum(g.size for g in groups) <= len(groups):
        raise ValueError("need repeats: at least one task with 2 or more outcomes")
    return groups


def variance_components(values_by_task: Sequence[npt.ArrayLike]) -> VarianceComponents:
    """Between- and within-task variance components (module docstring) of outcomes grouped by task."""
    groups = _groups(values_by_task)
    k = len(groups)
    n = np.array([g.size for g in groups], dtype=float)
    big_n = float(n.sum())
    means = np.array([g.mean() for g in groups])
    grand = float(np.sum(n * means) / big_n)
    msb = float(np.sum(n * (means - grand) ** 2) / (k - 1))
    df_w = int(big_n - k)
    msw = float(sum(np.sum((g - g.mean()) ** 2) for g in groups) / df_w)
    n0 = (big_n - float(np.sum(n ** 2)) / big_n) / (k - 1)
    between = max(0.0, (msb - msw) / n0)
    total = between + msw
    icc = between / total if total > 0 else float("nan")
    return VarianceComponents(between, msw, icc, k, big_n / k, df_w)


def fixed_suite_ci(values_by_task: Sequence[npt.ArrayLike], confidence: float = 0.95) -> Estimate:
    """Interval for the mean over THESE tasks of their true means (within-task sampling only).

    Computed: value = mean_i m_i; Var = within * sum_i (1 / n_i) / k^2 with the pooled
    within-task variance (MSW, N - k degrees of freedom); interval value +- t * sqrt(Var).
    Every outcome equal to its task's mean (no within-task spread) gives a zero-width
    interval labelled "degenerate (no within-task spread: ...)" (the tasks may still differ).
    It ignores task sampling, so it is narrower than the
    task bootstrap: it answers "how sure are we about this suite", not "about tasks like these".
    """
    groups = _groups(values_by_task)
    comps = variance_components(groups)
    k = len(groups)
    value = float(np.mean([g.mean() for g in groups]))
    se = float(np.sqrt(comps.within * sum(1.0 / g.size for g in groups)) / k)
    if se == 0:
        return Estimate(value, value, value, "degenerate (no within-task spread: every task's repeats agree)", k,
                        confidence)
    half = float(sps.t.ppf(0.5 + confidence / 2, comps.df_within)) * se
    return Estimate(value, value - half, value + half, "fixed-suite t (pooled within-task variance)", k, confidence)
