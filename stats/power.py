"""Power and minimum detectable difference of a paired comparison over tasks.

Why: "no detectable difference" is only informative beside the smallest difference the run
could have detected. The verdict between two methods is a paired t-test on per-task
differences d_i (each the difference of the two methods' mean pass over a task's repeats),
so its power follows from the number of tasks n and the spread sd of the d_i:

    power(delta) = P(|T| > t_{1-alpha/2, n-1}),  T ~ noncentral t(n - 1, delta / (sd / sqrt(n)))

(statsmodels' ``TTestPower``, which is this formula), and the minimum detectable difference
(MDE) is the delta at which the power reaches its target.

The spread of d_i comes from a variance model of pass/fail outcomes (``PassVarianceModel``):
with baseline pass rate P and R repeats per task,

    sd^2 = 2 P (1 - P) (between_share + within_share / R)

``between_share``: variance of the TRUE per-task differences between the two methods, as a
share of 2 P(1-P) (tasks on which one method is better and others on which the other is:
more repeats do not remove it); ``within_share``: a unit's variance around its task's own
success probability, as a share of P(1-P) (repeat-to-repeat luck: repeats average it out).
With an intraclass correlation ICC (the between-task share of a unit's variance) and a
correlation r between the two methods' per-task success probabilities,
between_share = ICC (1 - r) and within_share = 1 - ICC. The default, ICC 0.5 and r 0.8,
gives an MDE of about 29 points at 30 tasks and 1 repeat, 19 points at 3 repeats.
A pilot run replaces the assumption by estimates (results/planning.py).

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from statsmodels.stats.power import TTestPower

__all__ = ["PassVarianceModel", "DEFAULT_ICC", "DEFAULT_METHOD_CORRELATION", "paired_power",
           "minimum_detectable_difference", "ALPHA", "TARGET_POWER"]

ALPHA = 0.05
TARGET_POWER = 0.8
DEFAULT_ICC = 0.5
DEFAULT_METHOD_CORRELATION = 0.8


@dataclass(frozen=True)
class PassVarianceModel:
    """The variance of a per-task difference in pass rate (see the module docstring)."""

    between_share: float
    within_share: float
    source: str = "assumed"

    def __post_init__(self) -> None:
        if not (self.between_share >= 0 and self.within_share >= 0) or self.between_share + self.within_share <= 0:
            raise ValueError("variance shares must be >= 0 and not both zero")

    @classmethod
    def from_icc(cls, icc: float = DEFAULT_ICC, method_correlation: float = DEFAULT_METHOD_CORRELATION,
                 source: str = "") -> PassVarianceModel:
        """between_share = icc (1 - r), within_share = 1 - icc."""
        if not 0 <= icc <= 1 or not -1 <= method_correlation <= 1:
            raise ValueError("icc must be in [0, 1] and the method correlation in [-1, 1]")
        return cls(icc * (1 - method_correlation), 1 - icc,
                   source or f"assumed: ICC {icc:g}, correlation of the methods' per-task success {method_correlation:g}")

    def difference_sd(self, baseline: float, repeats: int) -> float:
        """sd of one task's difference in mean pass over `repeats` repeats at pass rate `baseline`."""
        if not 0 < baseline < 1:
            raise ValueError(f"baseline pass rate must be strictly between 0 and 1, got {baseline!r}")
        if repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {repeats!r}")
        return math.sqrt(2 * baseline * (1 - baseline) * (self.between_share + self.within_share / repeats))


def _check(sd: float, n_tasks: int, alpha: float) -> None:
    if not (math.isfinite(sd) and sd > 0):
        raise ValueError(f"sd must be positive and finite, got {sd!r}")
    if n_tasks < 2:
        raise ValueError(f"a paired t-test needs at least 2 tasks, got {n_tasks!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")


def paired_power(delta: float, sd: float, n_tasks: int, alpha: float = ALPHA) -> float:
    """Power of the two-sided paired t-test at true mean difference `delta` (any scale, same as sd)."""
    _check(sd, n_tasks, alpha)
    if delta == 0:
        return float(alpha)
    power = TTestPower().power(effect_size=abs(delta) / sd, nobs=n_tasks, alpha=alpha, alternative="two-sided")
    return float(np.asarray(power).ravel()[0])


def minimum_detectable_difference(sd: float, n_tasks: int, alpha: float = ALPHA, power: float = TARGET_POWER) -> float:
    """Smallest |mean difference| the two-sided paired t-test detects with probability `power`."""
    _check(sd, n_tasks, alpha)
    if not alpha < power < 1:
        raise ValueError(f"power must be in (alpha, 1), got {power!r}")
    effect = TTestPower().solve_power(effect_size=None, nobs=n_tasks, alpha=alpha, power=power,
                                      alternative="two-sided")
    return float(np.asarray(effect).ravel()[0]) * sd
