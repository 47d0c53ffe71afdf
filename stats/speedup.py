"""Speedup aggregation: geometric means and KernelBench-style fast_p.

Why: speedups are ratios (reference time / candidate time), so the arithmetic mean is
dominated by a few large ratios and is not symmetric in gains and losses; the geometric
mean is. Averaging over correct kernels only hides failures (a method that solves one
easy task with a 3x speedup looks great), so this module always reports, beside the
correct-only geomean, two *all-task* views:

* ``fast_p``: fraction of ALL tasks that are correct AND have speedup > p (KernelBench);
  failures count as "not fast" at every p.
* ``geomean_all``: geometric mean over all tasks where a failed task counts as speedup
  ``failure_speedup``. Default 1.0, i.e. "on failure the user keeps the reference
  implementation" (no gain, no loss). It must be > 0 (a geomean with a zero is zero).

Convention for inputs: ``correct`` is a bool per task, ``speedup`` a float per task that
is NaN where not correct (values at incorrect tasks are ignored whatever they are).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from .intervals import Estimate, mean_ci

__all__ = [
    "SpeedupSummary",
    "geomean",
    "geomean_ci",
    "fast_p",
    "fast_p_table",
    "speedup_summary",
    "DEFAULT_FAST_PS",
]

#: Thresholds of the default fast_p table.
DEFAULT_FAST_PS: tuple[float, ...] = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)


@dataclass(frozen=True)
class SpeedupSummary:
    """All-task and correct-only views of one method's speedups on a suite.

    ``correct_rate``: mean of ``correct`` with bootstrap CI over all tasks.
    ``geomean_correct_only``: geomean over correct tasks with a bootstrap CI over those
    tasks (NaN estimate with method "no correct tasks" when none is correct).
    ``geomean_all``: geomean over all tasks, failures counted as ``failure_speedup``.
    ``fast_p``: {p: fraction of all tasks correct with speedup > p}.
    """

    n_tasks: int
    n_correct: int
    correct_rate: Estimate
    geomean_correct_only: Estimate
    geomean_all: Estimate
    failure_speedup: float
    fast_p: dict[float, float] = field(default_factory=dict)


def geomean(x: npt.ArrayLike) -> float:
    """Geometric mean ``exp(mean(log x))`` of positive finite values.

    Why: the right average for ratios. Empty input returns NaN (nothing to average);
    non-positive, NaN or infinite values raise ValueError (drop them explicitly first).
    """
    a = np.asarray(x, dtype=float).ravel()
    if a.size == 0:
        return float("nan")
    if np.any(~np.isfinite(a)) or np.any(a <= 0):
        raise ValueError("geomean needs positive finite values")
    return float(np.exp(np.mean(np.log(a))))


def geomean_ci(
    x: npt.ArrayLike,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    method: str = "BCa",
    seed: int | np.random.Generator | None = 0,
) -> Estimate:
    """Geometric mean with a bootstrap interval over tasks.

    Computed: ``mean_ci(log x)`` mapped through ``exp`` (value, lo, hi). Percentile and
    BCa intervals are transformation-respecting, so this is the bootstrap interval of the
    geomean itself. Empty input gives a NaN estimate with method "no values".
    """
    a = np.asarray(x, dtype=float).ravel()
    if a.size == 0:
        nan = float("nan")
        return Estimate(nan, nan, nan, "no values", 0, confidence)
    if np.any(~np.isfinite(a)) or np.any(a <= 0):
        raise ValueError("geomean needs positive finite values")
    est = mean_ci(np.log(a), confidence, n_resamples, method, seed)
    return Estimate(
        float(np.exp(est.value)),
        float(np.exp(est.lo)),
        float(np.exp(est.hi)),
        f"log-{est.method}",
        est.n,
        est.confidence,
    )


def _check(correct: npt.ArrayLike, speedup: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(correct)
    if c.dtype != bool:
        if not np.all(np.isin(c, (0, 1))):
            raise ValueError("correct must be boolean (or 0/1)")
        c = c.astype(bool)
    s = np.asarray(speedup, dtype=float)
    if c.ndim != 1 or s.shape != c.shape:
        raise ValueError("correct and speedup must be 1-D arrays over the same tasks")
    sc = s[c]
    if np.any(~np.isfinite(sc)) or np.any(sc <= 0):
        raise ValueError("every correct task needs a positive finite speedup")
    return c, s


def fast_p(correct: npt.ArrayLike, speedup: npt.ArrayLike, p: float) -> float:
    """fast_p = (1/N) * #{tasks i : correct_i and speedup_i > p}, over ALL N tasks.

    Why: KernelBench's all-task metric; failures are never "fast", so a method cannot
    look good by solving few tasks. fast_0 equals the correct rate. NaN when N = 0.
    """
    c, s = _check(correct, speedup)
    if c.size == 0:
        return float("nan")
    fast = np.zeros(c.size, dtype=bool)
    fast[c] = s[c] > float(p)
    return float(fast.mean())


def fast_p_table(
    correct: npt.ArrayLike,
    speedup: npt.ArrayLike,
    ps: tuple[float, ...] | list[float] = DEFAULT_FAST_PS,
) -> dict[float, float]:
    """{p: fast_p(correct, speedup, p)} for each threshold in ``ps``."""
    return {float(p): fast_p(correct, speedup, p) for p in ps}


def speedup_summary(
    correct: npt.ArrayLike,
    speedup: npt.ArrayLike,
    failure_speedup: float = 1.0,
    ps: tuple[float, ...] | list[float] = DEFAULT_FAST_PS,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    method: str = "BCa",
    seed: int | np.random.Generator | None = 0,
) -> SpeedupSummary:
    """Correct rate, correct-only geomean, all-task geomean and fast_p table, with CIs.

    Computed:
      * ``correct_rate = mean(correct)``, bootstrap CI over all tasks;
      * ``geomean_correct_only = exp(mean_{i correct} log s_i)``, bootstrap CI over the
        correct tasks (conditional on which tasks were correct);
      * ``geomean_all = exp(mean_i log s'_i)`` with ``s'_i = s_i`` if correct else
        ``failure_speedup`` (default 1.0 = fall back to the reference), CI over all tasks;
      * ``fast_p`` for each p in ``ps``.
    """
    if not (np.isfinite(failure_speedup) and failure_speedup > 0):
        raise ValueError("failure_speedup must be positive and finite (geomean of 0 is 0)")
    c, s = _check(correct, speedup)
    if c.size == 0:
        raise ValueError("no tasks")
    rate = mean_ci(c.astype(float), confidence, n_resamples, method, seed)
    correct_only = geomean_ci(s[c], confidence, n_resamples, method, seed)
    if c.sum() == 0:
        correct_only = Estimate(float("nan"), float("nan"), float("nan"), "no correct tasks", 0, confidence)
    filled = np.where(c, s, float(failure_speedup))
    all_tasks = geomean_ci(filled, confidence, n_resamples, method, seed)
    return SpeedupSummary(
        n_tasks=int(c.size),
        n_correct=int(c.sum()),
        correct_rate=rate,
        geomean_correct_only=correct_only,
        geomean_all=all_tasks,
        failure_speedup=float(failure_speedup),
        fast_p=fast_p_table(c, s, ps),
    )
