"""Latency noise summaries: median, IQR and coefficient of variation of repeated timings.

Why: kernel timings are noisy (measured with triton.testing.do_bench medians on an H200: CV about
10% for a 4K-element add, 0.2% at 64M elements). The median and IQR are robust to outliers (preemption, clock changes)
and are what is reported; the CV flags measurements too noisy to rank kernels on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["LatencyStats", "latency_stats", "flagged_share"]


@dataclass(frozen=True)
class LatencyStats:
    """Summary of repeated latency samples of one kernel on one shape.

    ``median``; ``iqr = Q3 - Q1`` (numpy linear-interpolated quantiles);
    ``cv = std(ddof=1) / mean`` (NaN when n < 2); ``n`` samples;
    ``rel_iqr = iqr / median`` (a robust CV).
    """

    median: float
    iqr: float
    cv: float
    n: int
    rel_iqr: float = float("nan")


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
    return LatencyStats(median=med, iqr=iqr, cv=cv, n=int(x.size), rel_iqr=iqr / med)


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
