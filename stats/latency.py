"""Latency noise summaries: median (with a bootstrap interval), IQR, MAD and coefficient of
variation of repeated timings.

Why: kernel timings are noisy, a small kernel's far more than a large one's (measured with
triton.testing.do_bench: benchmarks/results/README.md, "Timing"). The median, IQR/median and MAD/median are robust
to outliers (preemption, a clock change) and are what is reported; the CV is not (one outlier in
100 samples can make it several hundred percent), so it is shown only beside them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

__all__ = ["LatencyStats", "latency_stats", "median_ci", "flagged_share"]


@dataclass(frozen=True)
class LatencyStats:
    """Summary of repeated latency samples of one kernel on one shape.

    ``median``; ``iqr = Q3 - Q1`` (numpy linear-interpolated quantiles);
    ``cv = std(ddof=1) / mean`` (NaN when n < 2); ``n`` samples;
    ``rel_iqr = iqr / median`` and ``rel_mad = mad / median`` (robust CVs), with
    ``mad = median(|x - median(x)|)`` (unscaled).
    """

    median: float
    iqr: float
    cv: float
    n: int
    rel_iqr: float = float("nan")
    mad: float = float("nan")
    rel_mad: float = float("nan")


def latency_stats(samples: npt.ArrayLike) -> LatencyStats:
    """Median, IQR and CV of latency samples (any time unit, all must be finite and > 0).

    Computed: ``median = np.median(x)``; ``iqr = np.percentile(x, 75) - np.percentile(x, 25)``;
    ``cv = np.std(x, ddof=1) / np.mean(x)`` (NaN for a single sample: no spread estimate);
    ``rel_iqr = iqr / median``. Empty, non-finite or non-positive samples raise ValueError.
    """
    x = np.asarray(samples, dtype=float).ravel()
    if x.size == 0:
        raise ValueError("no latency samples")
    if np.any(~np.isfinite(x)) or np.any(x <= 0):
        raise ValueError("latency samples must be positive and finite")
    med = float(np.median(x))
    q1, q3 = np.percentile(x, [25.0, 75.0])
    iqr = float(q3 - q1)
    cv = float(np.std(x, ddof=1) / np.mean(x)) if x.size >= 2 else float("nan")
    mad = float(np.median(np.abs(x - med)))
    return LatencyStats(median=med, iqr=iqr, cv=cv, n=int(x.size), rel_iqr=iqr / med, mad=mad, rel_mad=mad / med)


def median_ci(samples: npt.ArrayLike, confidence: float = 0.95, n_resamples: int = 2000,
              seed: int | np.random.Generator | None = 0) -> tuple[float, float, float]:
    """(median, lo, hi): percentile bootstrap interval of the median of latency samples.

    Why: a median without an interval hides how well the samples pin it down. Computed with
    ``scipy.stats.bootstrap((x,), np.median, method="percentile")`` (the percentile interval:
    BCa's jackknife is unstable for the median of samples with ties). Fewer than 2 samples, or
    all equal, gives a zero-width interval.
    """
    x = np.asarray(samples, dtype=float).ravel()
    if x.size == 0 or np.any(~np.isfinite(x)):
        raise ValueError("latency samples must be finite and non-empty")
    med = float(np.median(x))
    if x.size < 2 or np.ptp(x) == 0:
        return med, med, med
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    res = sps.bootstrap((x,), np.median, n_resamples=int(n_resamples), confidence_level=confidence,
                        method="percentile", vectorized=True, rng=rng)
    return med, float(res.confidence_interval.low), float(res.confidence_interval.high)


def flagged_share(flags: npt.ArrayLike) -> float:
    """Share of measurements flagged (e.g. as too noisy): ``mean(flags)``; NaN when empty.

    Why: reported beside speedups so readers know how many timings were unreliable.
    """
    f = np.asarray(flags)
    if f.dtype != bool:
        if not np.all(np.isin(f, (0, 1))):
            raise ValueError("flags must be boolean (or 0/1)")
        f = f.astype(bool)
    if f.size == 0:
        return float("nan")
    return float(f.mean())
