"""The short timing protocol's sequential rule: when may a feedback timing stop sampling?

Visible feedback only needs to know where a candidate stands against the expert baseline
(faster, slower, or as fast), not its speedup to 1%. So the candidate is sampled a few
times, and after every sample from the `min_samples`-th on ("a look") the interval of its
speedup is computed; sampling stops at the first look where the interval

- lies entirely above 1.0x ("faster") or entirely below it ("slower"): it decisively
  excludes 1.0x, or
- lies entirely inside the equivalence band [1/(1+e), 1+e] ("equivalent"): it decisively
  includes 1.0x, any difference being smaller than the margin e,

or when the cap of samples is reached (no decision: "undecided").

The interval of one case's speedup (baseline median / candidate median) is built on the log
scale: log(m_b / m_c) +- t * sqrt(se_b^2 + se_c^2), where se is the relative standard error
of a median estimated robustly from the IQR (sqrt(pi/2) * IQR / 1.349 / sqrt(n), the
normal-theory value, which one outlier does not inflate; never below `noise_floor`, since
a handful of identical samples says nothing about the clock's jitter) and t the Student-t
quantile with the candidate's n - 1 degrees of freedom (the baseline has many samples; the
candidate's few dominate the uncertainty). Repeated looks at growing data would inflate the
error rate of a fixed-level interval, so each look uses the level 1 - alpha / L, L being the
most looks the cap allows (Bonferroni over looks): the chance that any look decides wrongly
stays at most alpha. Conservative, and simple enough to state in one line.

Pure: arrays in, numbers out (scipy.stats for the Student-t quantiles).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as st

FASTER, SLOWER, EQUIVALENT = "faster", "slower", "equivalent"
DECISIONS = (FASTER, SLOWER, EQUIVALENT)

_NORMAL_MEDIAN_SE = math.sqrt(math.pi / 2)  # SE of a normal sample's median per sigma / sqrt(n)
_IQR_PER_SIGMA = 1.349


@functools.lru_cache(maxsize=1024)
def _t_quantile(q: float, df: int) -> float:
    """Student-t quantile, memoised: the sequential rule asks for the same few at every look."""
    return float(st.t.ppf(q, df))


def median_log_se(samples: Sequence[float] | np.ndarray, noise_floor: float = 0.0) -> float:
    """Standard error of log(median) (the median's relative standard error), robust to outliers;
    infinite with fewer than two samples or a median that is not positive."""
    x = np.asarray(samples, dtype=float)
    if len(x) < 2:
        return math.inf
    med = float(np.median(x))
    if med <= 0 or not math.isfinite(med):
        return math.inf
    q1, q3 = np.percentile(x, [25, 75])  # scipy.stats.iqr gives the same, at a hundred times the cost per look
    sigma = float(q3 - q1) / _IQR_PER_SIGMA
    return max(_NORMAL_MEDIAN_SE * sigma / math.sqrt(len(x)) / med, noise_floor)


def median_interval(samples: Sequence[float] | np.ndarray, confidence: float = 0.95,
                    noise_floor: float = 0.0) -> tuple[float, float]:
    """Interval of the median, median * exp(-+ t * se) (se from `median_log_se`, t with n - 1
    degrees of freedom): what a cached baseline's drift re-check compares against."""
    x = np.asarray(samples, dtype=float)
    se = median_log_se(x, noise_floor)
    med = float(np.median(x)) if len(x) else math.nan
    if not math.isfinite(se):
        return (0.0, math.inf)
    t = _t_quantile(0.5 + confidence / 2, len(x) - 1)
    return (med * math.exp(-t * se), med * math.exp(t * se))


def intervals_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def look_confidence(alpha: float, min_samples: int, max_samples: int) -> float:
    """The level of each look's interval: 1 - alpha / (number of looks from min to max samples)."""
    looks = max_samples - min_samples + 1
    if looks < 1:
        raise ValueError("max_samples must be at least min_samples")
    return 1.0 - alpha / looks


def speedup_interval(baseline: Sequence[float] | np.ndarray, candidate: Sequence[float] | np.ndarray,
                     confidence: float, noise_floor: float = 0.0) -> tuple[float, float, float]:
    """(speedup, lo, hi) of median(baseline) / median(candidate) (module docstring)."""
    b, c = np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)
    if len(b) == 0 or len(c) == 0:
        raise ValueError("speedup_interval needs samples on both sides")
    mb, mc = float(np.median(b)), float(np.median(c))
    if mb <= 0 or mc <= 0:
        return (math.nan, 0.0, math.inf)
    se = math.hypot(median_log_se(b, noise_floor), median_log_se(c, noise_floor))
    point = math.log(mb / mc)
    if not math.isfinite(se):
        return (math.exp(point), 0.0, math.inf)
    t = _t_quantile(0.5 + confidence / 2, max(len(c) - 1, 1))
    return (math.exp(point), math.exp(point - t * se), math.exp(point + t * se))


def geomean_speedup_interval(cases: Sequence[tuple[Sequence[float], Sequence[float]]], confidence: float,
                             noise_floor: float = 0.0) -> tuple[float, float, float]:
    """(speedup, lo, hi) of the geometric mean over cases of median(baseline) / median(candidate),
    each case given as (baseline samples, candidate samples): the mean of the cases' log
    ratios +- t * sqrt(sum of their squared log standard errors) / n, every median's error at
    least `noise_floor` (as in `speedup_interval`), t with the fewest candidate samples - 1
    degrees of freedom.

    The short protocol reports this interval rather than a bootstrap of its few samples: with
    five near-identical samples a bootstrap of the median spans a fraction of a percent, far
    less than what differs between two runs, and methods choose between candidates by it."""
    if not cases:
        raise ValueError("geomean_speedup_interval needs at least one case")
    logs, variances, fewest = [], [], math.inf
    for baseline, candidate in cases:
        mb, mc = float(np.median(baseline)), float(np.median(candidate))
        if not (mb > 0 and mc > 0 and math.isfinite(mb) and math.isfinite(mc)):
            return (math.nan, 0.0, math.inf)
        se = math.hypot(median_log_se(baseline, noise_floor), median_log_se(candidate, noise_floor))
        logs.append(math.log(mb / mc))
        variances.append(se * se)
        fewest = min(fewest, len(candidate))
    centre = math.fsum(logs) / len(logs)
    se = math.sqrt(math.fsum(variances)) / len(logs)
    if not math.isfinite(se):
        return (math.exp(centre), 0.0, math.inf)
    t = _t_quantile(0.5 + confidence / 2, max(int(fewest) - 1, 1))
    return (math.exp(centre), math.exp(centre - t * se), math.exp(centre + t * se))


def decide(lo: float, hi: float, equivalence: float) -> str | None:
    """FASTER / SLOWER when [lo, hi] excludes 1.0, EQUIVALENT when it lies inside the band
    [1/(1+equivalence), 1+equivalence], None when it does neither (sample on)."""
    if lo > 1.0:
        return FASTER
    if hi < 1.0:
        return SLOWER
    if lo >= 1.0 / (1.0 + equivalence) and hi <= 1.0 + equivalence:
        return EQUIVALENT
    return None
