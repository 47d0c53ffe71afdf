"""Confidence intervals for suite-level means (bootstrap over tasks) and binomial proportions.

Why: following Miller (2024), "Adding Error Bars to Evals", the *task* is the unit of
resampling. A per-task score (pass@k estimate, 0/1 outcome, log speedup, ...) is computed
first, then the suite mean is bootstrapped over tasks, one level only. What this covers:
tasks resampled with replacement represent tasks drawn from a population, so the interval
targets the *population* mean of the per-task quantity (it is conservative for the mean of
the fixed tasks actually in the suite; ``scripts/coverage_sim.py`` measures both).

For small suites of binary outcomes, Wilson and Clopper-Pearson ("exact") intervals from
statsmodels are reported beside the bootstrap because the bootstrap undercovers there.

Everything is pure: arrays in, frozen dataclasses out; no project imports.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import stats as sps
from statsmodels.stats.proportion import proportion_confint

__all__ = [
    "Estimate",
    "ColumnIntervals",
    "mean_ci",
    "mean_ci_columns",
    "t_ci",
    "wilson_ci",
    "exact_ci",
    "binary_ci",
    "BOOTSTRAP_METHODS",
    "BAND_METHODS",
    "RATE_BAND",
    "band_columns",
    "mean_band",
]

#: Methods accepted by :func:`mean_ci` (names as scipy.stats.bootstrap spells them).
BOOTSTRAP_METHODS: tuple[str, ...] = ("BCa", "percentile", "basic")

#: Methods accepted by :func:`band_columns`: the scipy bootstrap ones, the Student-t interval over
#: tasks, the studentised bootstrap and the Wilson score interval at an effective number of tasks.
BAND_METHODS: tuple[str, ...] = ("t", "studentized", "wilson") + BOOTSTRAP_METHODS

#: The band of a mean of per-task rates in [0, 1] (pass@k, submitted/oracle pass, budget curves):
#: chosen by scripts/band_coverage_sim.py among BAND_METHODS (see its docstring and the README).
RATE_BAND: str = "wilson"

# Upper bound on the number of float64 elements scipy materialises per resampling batch
# (resampled data has shape (columns, batch, n_tasks)); keeps memory near 64 MB.
_MAX_BATCH_ELEMENTS: int = 8_000_000


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a two-sided interval.

    ``value`` is the point estimate, ``[lo, hi]`` the interval at level ``confidence``,
    ``method`` says how the interval was obtained (e.g. ``"bootstrap-BCa"``,
    ``"bootstrap-percentile (BCa failed)"``, ``"degenerate"``, ``"wilson"``, ``"exact"``),
    and ``n`` is the number of tasks (the resampling unit) behind it.
    """

    value: float
    lo: float
    hi: float
    method: str
    n: int
    confidence: float = 0.95

    @property
    def width(self) -> float:
        """hi - lo."""
        return self.hi - self.lo

    def contains(self, x: float) -> bool:
        """True when lo <= x <= hi."""
        return bool(self.lo <= x <= self.hi)


@dataclass(frozen=True, eq=False)
class ColumnIntervals:
    """Column-wise bootstrap intervals of means (one interval per column, same resamples).

    ``value[j] = mean(X[:, j])``; ``lo[j], hi[j]`` the interval; ``methods[j]`` the method
    label actually used for column j (see :class:`Estimate`); ``n`` the number of rows (tasks).
    """

    value: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    methods: tuple[str, ...]
    n: int
    confidence: float = 0.95

    def summary_method(self) -> str:
        """One string that lists how many columns used each method, e.g. 'BCa x98; degenerate x3'."""
        labels, counts = np.unique(np.asarray(self.methods, dtype=object).astype(str), return_counts=True)
        return "; ".join(f"{lab} x{cnt}" for lab, cnt in zip(labels, counts, strict=True))


def _check_confidence(confidence: float) -> float:
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return c


def _normalise_method(method: str) -> str:
    for m in BOOTSTRAP_METHODS:
        if method.lower() == m.lower():
            return m
    raise ValueError(f"method must be one of {BOOTSTRAP_METHODS}, got {method!r}")


def _as_float_matrix(scores: npt.ArrayLike, name: str = "scores") -> np.ndarray:
    x = np.asarray(scores, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ValueError(f"{name} must be 1-D (tasks) or 2-D (tasks x columns), got shape {x.shape}")
    if x.shape[0] == 0:
        raise ValueError(f"{name} is empty: no tasks to estimate from")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} contains NaN or inf; drop or score those tasks explicitly first")
    return x


def _mean_stat(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis)


def mean_ci_columns(
    scores: npt.ArrayLike,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    method: str = "BCa",
    seed: int | np.random.Generator | None = 0,
) -> ColumnIntervals:
    """Bootstrap intervals for the mean of every column of a (tasks x columns) array.

    Why: budget curves and pass@k tables need one interval per column, and resampling the
    *same* task indices for every column (one vectorised scipy call) is both faster and
    gives bands that are coherent across columns (pointwise, not simultaneous, intervals).

    Computed: ``value[j] = mean_i X[i, j]``; rows (tasks) are resampled with replacement
    ``n_resamples`` times via ``scipy.stats.bootstrap(vectorized=True, axis=0)`` and the
    interval is the requested ``method`` ("BCa", "percentile" or "basic") at ``confidence``.

    Degenerate columns (one task, or every value equal) get the zero-width interval
    ``[v, v]`` labelled ``"degenerate"`` (the bootstrap distribution is a point mass).
    When BCa cannot be computed for a column (scipy returns NaN, e.g. when every bootstrap
    mean lies on one side of the estimate), that column falls back to the percentile
    interval of the same bootstrap distribution, labelled ``"bootstrap-percentile (BCa failed)"``.
    """
    conf = _check_confidence(confidence)
    meth = _normalise_method(method)
    if int(n_resamples) < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples!r}")
    x = _as_float_matrix(scores)
    n, m = x.shape
    value = x.mean(axis=0)
    lo = value.copy()
    hi = value.copy()
    labels = np.array(["degenerate"] * m, dtype=object)

    varying = np.ptp(x, axis=0) > 0 if n > 1 else np.zeros(m, dtype=bool)
    # all-equal columns: report the common value exactly (no summation rounding)
    value[~varying] = x[0, ~varying]
    lo[~varying] = hi[~varying] = x[0, ~varying]
    if np.any(varying):
        sub = x[:, varying]
        batch = max(1, min(int(n_resamples), _MAX_BATCH_ELEMENTS // max(1, n * sub.shape[1])))
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        with warnings.catch_warnings():
            # Handled below: BCa NaNs fall back to percentile; other numeric warnings are
            # artefacts of near-degenerate jackknife values.
            warnings.simplefilter("ignore", category=RuntimeWarning)
            warnings.simplefilter("ignore", category=sps.DegenerateDataWarning)
            res = sps.bootstrap(
                (sub,),
                _mean_stat,
                n_resamples=int(n_resamples),
                batch=batch,
                vectorized=True,
                axis=0,
                confidence_level=conf,
                method=meth,
                rng=rng,
            )
        s_lo = np.atleast_1d(np.asarray(res.confidence_interval.low, dtype=float))
        s_hi = np.atleast_1d(np.asarray(res.confidence_interval.high, dtype=float))
        s_lab = np.array([f"bootstrap-{meth}"] * sub.shape[1], dtype=object)
        bad = ~(np.isfinite(s_lo) & np.isfinite(s_hi))
        if np.any(bad):
            alpha = (1.0 - conf) / 2.0
            dist = np.asarray(res.bootstrap_distribution, dtype=float).reshape(sub.shape[1], -1)[bad]
            q = np.percentile(dist, [100.0 * alpha, 100.0 * (1.0 - alpha)], axis=-1)
            s_lo[bad], s_hi[bad] = q[0], q[1]
            s_lab[bad] = f"bootstrap-percentile ({meth} failed)"
        lo[varying], hi[varying], labels[varying] = s_lo, s_hi, s_lab
    return ColumnIntervals(
        value=value, lo=lo, hi=hi, methods=tuple(str(s) for s in labels), n=n, confidence=conf
    )


def mean_ci(
    scores: npt.ArrayLike,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    method: str = "BCa",
    seed: int | np.random.Generator | None = 0,
) -> Estimate:
    """Bootstrap interval for the mean of per-task scores (one-level bootstrap over tasks).

    Why: per-task scores are the unit (Miller 2024); resampling tasks captures the
    task-sampling variance that dominates small benchmark suites.

    Computed: ``value = mean_i scores[i]``; the interval is ``scipy.stats.bootstrap`` with
    ``method`` in {"BCa", "percentile", "basic"}, ``n_resamples`` resamples and level
    ``confidence``. Degenerate input (n == 1 or all values equal) returns ``[v, v]`` with
    method ``"degenerate"``; a failed BCa falls back to percentile and says so in ``method``.
    NaN/inf scores are refused (ValueError): decide how failed tasks score before calling.
    """
    x = np.asarray(scores, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"scores must be 1-D (one value per task), got shape {x.shape}")
    cols = mean_ci_columns(x, confidence=confidence, n_resamples=n_resamples, method=method, seed=seed)
    return Estimate(
        value=float(cols.value[0]),
        lo=float(cols.lo[0]),
        hi=float(cols.hi[0]),
        method=cols.methods[0],
        n=cols.n,
        confidence=cols.confidence,
    )


def t_ci(scores: npt.ArrayLike, confidence: float = 0.95) -> Estimate:
    """CLT interval with Student-t critical value: ``mean +- t_{n-1} * s / sqrt(n)``.

    Why: Miller (2024) recommends the CLT standard error over tasks; with the t quantile
    and ``s`` using ddof=1 it is slightly wider than the percentile bootstrap (which has
    no small-sample correction) and in ``scripts/coverage_sim.py`` it covers better for
    30-task suites. Computed with ``scipy.stats.t.interval(confidence, n-1, loc=mean,
    scale=scipy.stats.sem(scores))``. Degenerate input (n == 1 or all equal) gives
    ``[v, v]`` labelled "degenerate"; NaN/inf refused.
    """
    conf = _check_confidence(confidence)
    x = _as_float_matrix(scores)
    if x.shape[1] != 1:
        raise ValueError("scores must be 1-D (one value per task)")
    v = x[:, 0]
    n = v.size
    if n == 1 or np.ptp(v) == 0:
        return Estimate(float(v[0]), float(v[0]), float(v[0]), "degenerate", n, conf)
    mean = float(v.mean())
    lo, hi = sps.t.interval(conf, n - 1, loc=mean, scale=sps.sem(v))
    return Estimate(mean, float(lo), float(hi), "t", n, conf)


def _check_counts(successes: Any, n: Any) -> tuple[int, int]:
    s_f, n_f = float(successes), float(n)
    if s_f != int(s_f) or n_f != int(n_f):
        raise ValueError(f"successes and n must be integers, got {successes!r}, {n!r}")
    s_i, n_i = int(s_f), int(n_f)
    if n_i < 1:
        raise ValueError(f"n must be >= 1, got {n_i}")
    if not 0 <= s_i <= n_i:
        raise ValueError(f"need 0 <= successes <= n, got successes={s_i}, n={n_i}")
    return s_i, n_i


def _proportion(successes: int, n: int, confidence: float, sm_method: str, label: str) -> Estimate:
    conf = _check_confidence(confidence)
    s, m = _check_counts(successes, n)
    lo, hi = proportion_confint(s, m, alpha=1.0 - conf, method=sm_method)
    return Estimate(value=s / m, lo=float(lo), hi=float(hi), method=label, n=m, confidence=conf)


def wilson_ci(successes: int, n: int, confidence: float = 0.95) -> Estimate:
    """Wilson score interval for a binomial proportion (statsmodels ``method="wilson"``).

    Why: for small suites of one binary outcome per task it keeps near-nominal coverage
    where the bootstrap undercovers and never leaves [0, 1].

    Computed: with ``p = s/n`` and ``z = Phi^-1(1 - (1-confidence)/2)``,
    ``(p + z^2/(2n) +- z*sqrt(p(1-p)/n + z^2/(4n^2))) / (1 + z^2/n)``; ``value = s/n``.
    """
    return _proportion(successes, n, confidence, "wilson", "wilson")


def exact_ci(successes: int, n: int, confidence: float = 0.95) -> Estimate:
    """Clopper-Pearson ("exact") interval (statsmodels ``method="beta"``).

    Why: guaranteed coverage >= nominal for every true p (conservative); a safe companion
    to Wilson for very small suites.

    Computed: ``lo = Beta^-1(alpha/2; s, n-s+1)`` (0 when s = 0),
    ``hi = Beta^-1(1-alpha/2; s+1, n-s)`` (1 when s = n), ``alpha = 1 - confidence``.
    """
    return _proportion(successes, n, confidence, "beta", "exact")


def binary_ci(
    outcomes: npt.ArrayLike,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    method: str = "BCa",
    seed: int | np.random.Generator | None = 0,
    small_suite: int = 50,
) -> dict[str, Estimate]:
    """Intervals for the success rate of one binary outcome per task.

    Why: the bootstrap is the uniform method across metrics, but with fewer than
    ``small_suite`` tasks it undercovers, so Wilson and exact intervals are added.

    Returns ``{"bootstrap": ...}`` always, plus ``{"wilson": ..., "exact": ...}`` when
    ``len(outcomes) < small_suite``. All share ``value = mean(outcomes)``.
    """
    o = np.asarray(outcomes)
    if o.ndim != 1:
        raise ValueError(f"outcomes must be 1-D, got shape {o.shape}")
    if o.dtype != bool:
        if not np.all(np.isin(o, (0, 1))):
            raise ValueError("outcomes must be boolean (or 0/1)")
        o = o.astype(bool)
    out: dict[str, Estimate] = {
        "bootstrap": mean_ci(o.astype(float), confidence, n_resamples, method, seed)
    }
    if o.size < small_suite:
        s = int(o.sum())
        out["wilson"] = wilson_ci(s, o.size, confidence)
        out["exact"] = exact_ci(s, o.size, confidence)
    return out


def _t_columns(x: np.ndarray, varying: np.ndarray, conf: float) -> tuple[np.ndarray, np.ndarray]:
    n = x.shape[0]
    sub = x[:, varying]
    m = sub.mean(axis=0)
    se = sub.std(axis=0, ddof=1) / np.sqrt(n)
    q = float(sps.t.ppf(0.5 + conf / 2.0, n - 1))
    return m - q * se, m + q * se


def _studentized_columns(x: np.ndarray, varying: np.ndarray, conf: float, n_resamples: int,
                         seed: int | np.random.Generator | None) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap-t: quantiles of ``(m* - m) / se*`` over task resamples, ``se = s / sqrt(n)``.

    A resample whose tasks are all equal has ``se* = 0``: its t* is 0 when ``m* = m``, else
    +-inf by the sign of ``m* - m`` (the limit), so it widens the interval rather than vanish.
    """
    n = x.shape[0]
    sub = x[:, varying]
    m = sub.mean(axis=0)
    se = sub.std(axis=0, ddof=1) / np.sqrt(n)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    batch = max(1, _MAX_BATCH_ELEMENTS // max(1, n * sub.shape[1]))
    ts = []
    for start in range(0, int(n_resamples), batch):
        idx = rng.integers(0, n, size=(min(batch, int(n_resamples) - start), n))
        res = sub[idx]  # (batch, n, columns)
        diff = res.mean(axis=1) - m
        se_b = res.std(axis=1, ddof=1) / np.sqrt(n)
        with np.errstate(divide="ignore", invalid="ignore"):
            limit = np.where(diff > 0, np.inf, np.where(diff < 0, -np.inf, 0.0))
            t_b = np.where(se_b > 0, diff / np.where(se_b > 0, se_b, 1.0), limit)
        ts.append(t_b)
    t_all = np.concatenate(ts, axis=0)
    alpha = (1.0 - conf) / 2.0
    q_lo, q_hi = np.quantile(t_all, [alpha, 1.0 - alpha], axis=0, method="lower")
    with np.errstate(invalid="ignore"):
        return m - q_hi * se, m - q_lo * se


def _wilson_columns(x: np.ndarray, conf: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Wilson score interval of a mean of per-task rates at an effective number of tasks.

    Per-task rates in [0, 1] have variance at most ``mu (1 - mu)`` (a rate squared is at most
    the rate), with equality for one 0/1 outcome per task. The design effect
    ``deff = s^2 / (m (1 - m))`` (``s`` over tasks, ddof 1) measures how far below that bound
    the observed spread is, and ``n_eff = n / deff``. The interval is Wilson's with ``n_eff``
    trials and the Student-t quantile on ``n - 1`` degrees of freedom in place of z (Korn and
    Graubard 1998's adjustment for an estimated design effect):
    ``(m + c^2 / (2 n_eff) +- c sqrt(m (1 - m) / n_eff + c^2 / (4 n_eff^2))) / (1 + c^2 / n_eff)``.
    When every task is 0 or every task is 1, ``m (1 - m) = 0`` says nothing of the spread and the
    bound is used (``n_eff = n``): "all 10 tasks pass" is a Wilson interval [0.72, 1], not a
    point. Columns whose tasks are all equal strictly inside (0, 1) have no spread to bound the
    mean's error with: they are returned as not computable (the caller's degenerate case).
    Returns ``lo``, ``hi`` and a mask of the columns computed.
    """
    n = x.shape[0]
    m = x.mean(axis=0)
    s2 = x.var(axis=0, ddof=1)
    pq = m * (1.0 - m)
    ends = np.ptp(x, axis=0) == 0
    ends &= (x[0] == 0.0) | (x[0] == 1.0)
    ok = (s2 > 0) | ends
    # A mean that rounds to 0 or 1 while its tasks still differ by rounding (pass@k at large k:
    # 0.9999999999999998 beside 1.0) has no m (1 - m) to scale the spread by: the bound, as at the ends.
    bounded = ends | (pq <= 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        n_eff = np.where(bounded, float(n), n * pq / np.where(s2 > 0, s2, 1.0))
    n_eff = np.where(ok, n_eff, float(n))
    c = float(sps.t.ppf(0.5 + conf / 2.0, n - 1))
    c2 = c * c
    mm = np.where(ends, x[0], m)
    centre = (mm + c2 / (2 * n_eff)) / (1 + c2 / n_eff)
    half = c / (1 + c2 / n_eff) * np.sqrt(mm * (1 - mm) / n_eff + c2 / (4 * n_eff ** 2))
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0), ok


def band_columns(
    scores: npt.ArrayLike,
    confidence: float = 0.95,
    method: str = RATE_BAND,
    n_resamples: int = 10_000,
    seed: int | np.random.Generator | None = 0,
    bounds: tuple[float, float] | None = (0.0, 1.0),
) -> ColumnIntervals:
    """Interval for the mean of every column of a (tasks x columns) array of per-task scores.

    Why: pass@k tables, budget curves and per-method pass rates are means over tasks of per-task
    rates; which interval covers at 10 and 30 tasks was measured (scripts/band_coverage_sim.py),
    and this function offers every candidate so the choice is one name (``RATE_BAND``).

    Computed, per column: ``value = mean``; ``method`` is one of ``BAND_METHODS``:

    * ``"t"``: ``mean +- t_{n-1} s / sqrt(n)``;
    * ``"studentized"``: the bootstrap-t over ``n_resamples`` task resamples (one shared set
      of resamples for all columns);
    * ``"wilson"``: the Wilson score interval at an effective number of tasks (``_wilson_columns``;
      scores must lie in [0, 1]);
    * ``"BCa"``, ``"percentile"``, ``"basic"``: :func:`mean_ci_columns`.

    Ends are clipped to ``bounds`` (a rate's [0, 1] by default; None keeps them). Columns with
    one task, or all tasks equal, are zero-width ``"degenerate"`` except under ``"wilson"`` when
    every task is 0 or every task is 1 (see ``_wilson_columns``).
    """
    conf = _check_confidence(confidence)
    if method not in BAND_METHODS:
        raise ValueError(f"method must be one of {BAND_METHODS}, got {method!r}")
    x = _as_float_matrix(scores)
    if method in BOOTSTRAP_METHODS:
        cols = mean_ci_columns(x, conf, n_resamples, method, seed)
        lo, hi, value, labels = cols.lo.copy(), cols.hi.copy(), cols.value, np.array(cols.methods, dtype=object)
    else:
        if int(n_resamples) < 1:
            raise ValueError(f"n_resamples must be >= 1, got {n_resamples!r}")
        n, m = x.shape
        value = x.mean(axis=0)
        varying = np.ptp(x, axis=0) > 0 if n > 1 else np.zeros(m, dtype=bool)
        value[~varying] = x[0, ~varying]
        lo, hi = value.copy(), value.copy()
        labels = np.array(["degenerate"] * m, dtype=object)
        if method == "wilson":
            if np.any(x < 0) or np.any(x > 1):
                raise ValueError("the wilson band needs per-task scores in [0, 1]")
            if n > 1:
                w_lo, w_hi, ok = _wilson_columns(x, conf)
                lo[ok], hi[ok], labels[ok] = w_lo[ok], w_hi[ok], "wilson-effective-n"
        elif np.any(varying):
            if method == "t":
                v_lo, v_hi = _t_columns(x, varying, conf)
            else:
                v_lo, v_hi = _studentized_columns(x, varying, conf, n_resamples, seed)
            lo[varying], hi[varying] = v_lo, v_hi
            labels[varying] = "t" if method == "t" else "bootstrap-studentized"
    if bounds is not None:
        lo = np.clip(lo, bounds[0], bounds[1])
        hi = np.clip(hi, bounds[0], bounds[1])
    return ColumnIntervals(value=value, lo=lo, hi=hi, methods=tuple(str(s) for s in labels), n=x.shape[0],
                           confidence=conf)


def mean_band(
    scores: npt.ArrayLike,
    confidence: float = 0.95,
    method: str = RATE_BAND,
    n_resamples: int = 10_000,
    seed: int | np.random.Generator | None = 0,
    bounds: tuple[float, float] | None = (0.0, 1.0),
) -> Estimate:
    """:func:`band_columns` for one 1-D array of per-task scores, as an :class:`Estimate`."""
    x = np.asarray(scores, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"scores must be 1-D (one value per task), got shape {x.shape}")
    cols = band_columns(x, confidence, method, n_resamples, seed, bounds)
    return Estimate(float(cols.value[0]), float(cols.lo[0]), float(cols.hi[0]), cols.methods[0], cols.n,
                    cols.confidence)
