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

With ONE repeat per task the per-task difference is ternary (-1, 0, +1) and its spread grows
under the alternative, so the normal formula above is optimistic (29 points at 30 tasks where
the test's power is 0.69-0.78). ``ternary_power`` computes the power exactly instead, over
every multinomial count of (+1, -1, 0) tasks, for the alternative built from the variance
model's joint outcome table at the baseline: A's failures turn into successes and B's
successes into failures at rate delta / (2 P(1 - P)) of their mass, each independently of the
other method's outcome (so A's pass rate is P + delta / 2 and B's P - delta / 2).

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from statsmodels.stats.power import TTestPower

__all__ = ["PassVarianceModel", "DEFAULT_ICC", "DEFAULT_METHOD_CORRELATION", "paired_power",
           "minimum_detectable_difference", "ALPHA", "TARGET_POWER", "one_repeat_cells", "ternary_power",
           "ternary_mde"]

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


def one_repeat_cells(model: PassVarianceModel, baseline: float, delta: float = 0.0) -> tuple[float, float]:
    """(P(d = +1), P(d = -1)) of one task's difference with one repeat (module docstring).

    Null table at baseline P: discordant cells q = P(1-P)(between_share + within_share) each
    (so Var(d) = 2q, the model's one-repeat variance), p11 = P - q, p00 = 1 - P - q. Then A's
    failures (p01, p00) succeed with probability f = delta / (2 P) ... of its failures'
    mass, f = (delta / 2) / (1 - P), and B's successes (p11, p01) fail with probability
    g = (delta / 2) / P, each independently of the other method."""
    if not 0 < baseline < 1:
        raise ValueError(f"baseline pass rate must be strictly between 0 and 1, got {baseline!r}")
    q = baseline * (1 - baseline) * (model.between_share + model.within_share)
    p11, p10, p01, p00 = baseline - q, q, q, 1 - baseline - q
    if p11 < 0 or p00 < 0:
        raise ValueError("the variance model gives more discordance than this baseline allows")
    f = (delta / 2) / (1 - baseline)
    g = (delta / 2) / baseline
    if not 0 <= f <= 1 or not 0 <= g <= 1:
        raise ValueError(f"a difference of {delta:g} does not fit around a baseline of {baseline:g}")
    p11, p10, p01, p00 = p11 + f * p01, p10 + f * p00, (1 - f) * p01, (1 - f) * p00  # A gains
    p11, p10, p01, p00 = (1 - g) * p11, p10 + g * p11, (1 - g) * p01, p00 + g * p01  # B loses
    return float(p10), float(p01)


def ternary_power(p_plus: float, p_minus: float, n_tasks: int, alpha: float = ALPHA) -> float:
    """Exact power of the report's two-sided paired t-test over n tasks whose differences are
    +1, -1 or 0 with probabilities p_plus, p_minus and the rest.

    Computed: the sum, over every count (k+, k-, k0) of the multinomial, of its probability
    where the test rejects: |t| > t_{1-alpha/2, n-1} with t = mean / (sd / sqrt(n)); with zero
    spread (every difference +1, or every one -1) the report's test falls back to the exact
    sign-flip p = 2 / 2^n, so it rejects when that is below alpha; all zero never rejects."""
    from scipy import stats as sps

    if n_tasks < 2:
        raise ValueError(f"a paired t-test needs at least 2 tasks, got {n_tasks!r}")
    if not (0 <= p_plus and 0 <= p_minus and p_plus + p_minus <= 1 + 1e-12):
        raise ValueError("p_plus and p_minus must be probabilities summing to at most 1")
    n = int(n_tasks)
    crit = float(sps.t.ppf(1 - alpha / 2, n - 1))
    kp, km = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    ok = kp + km <= n
    kp, km = kp[ok], km[ok]
    k0 = n - kp - km
    p0 = max(0.0, 1.0 - p_plus - p_minus)
    prob = sps.multinomial.pmf(np.stack([kp, km, k0], axis=1), n, [p_plus, p_minus, p0])
    mean = (kp - km) / n
    ss = (kp + km) - n * mean ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / np.sqrt(ss / (n - 1) / n)
    reject = np.where(ss > 1e-12, np.abs(t) > crit, (kp + km > 0) & (2.0 * 0.5 ** n < alpha))
    return float(np.sum(prob[reject]))


def ternary_mde(model: PassVarianceModel, baseline: float, n_tasks: int, alpha: float = ALPHA,
                power: float = TARGET_POWER) -> float:
    """The smallest difference delta (A's pass rate minus B's) at which ``ternary_power`` of
    the one-repeat alternative (``one_repeat_cells``) reaches `power`; NaN when no difference
    that fits around the baseline reaches it. Bisection to 1e-5."""
    limit = 2 * min(baseline, 1 - baseline)

    def pw(delta: float) -> float:
        return ternary_power(*one_repeat_cells(model, baseline, delta), n_tasks, alpha)

    if pw(limit) < power:
        return float("nan")
    lo, hi = 0.0, limit
    while hi - lo > 1e-5:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if pw(mid) < power else (lo, mid)
    return float(hi)
