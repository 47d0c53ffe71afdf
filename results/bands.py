"""The band of every rate over tasks (pass@k, submitted and oracle pass, budget curves) and its
measured coverage, said in words wherever the band is printed.

Why: issue 43 item 3. The band was chosen by simulation (scripts/band_coverage_sim.py, JSON in
benchmarks/results/2026-12-04-cpu-band-coverage-sim.json: 4,000 suites per cell, s.e. 0.0035)
among BCa, percentile, the t interval over tasks, the studentised bootstrap and the Wilson score
interval at an effective number of tasks (stats.RATE_BAND). The figures below are its coverage
range over the simulated model's own tasks and a Beta(0.8, 1.2) population, for pass@1 and
pass@5 over 10 samples and budget curves at 1 and 3 repeats. Where a suite is small enough that
the band covers less than its nominal 95%, :func:`coverage_words` says so.

Below the small-suite minimum (design invariant 12; issue 43 item 1) no per-method figure is an
interval: over fewer than INTERVAL_MIN_TASKS tasks, the fewest on which an exact test at the
report's alpha could reject at all (stats.min_tasks_to_reject, with its margin), pass rates,
pass@k, curve bands and speedup summaries keep their point value, lose their interval (NaN ends,
null in summary.json, no band in figures) and name the count of tasks they rest on
(:func:`point_only`, :func:`curve_points_only`); :func:`too_few_words` says why, wherever one
would have been printed.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from results.labels import TOO_FEW
from stats import ALPHA, RATE_BAND, SMALL_SUITE_MARGIN, CurveBand, Estimate, PassAtKCurve, min_tasks_to_reject

__all__ = ["BAND_LABELS", "MEASURED", "band_label", "coverage_words", "band_note", "INTERVAL_MIN_TASKS", "TOO_FEW",
           "has_interval", "count_words", "point_only", "curve_points_only", "too_few_words"]

BAND_LABELS = {"wilson": "Wilson score interval at an effective number of tasks", "t": "Student-t interval",
               "studentized": "studentised bootstrap", "BCa": "BCa bootstrap", "percentile": "percentile bootstrap",
               "basic": "basic bootstrap"}

#: Measured coverage of the 95% Wilson band at 3, 10 and 30 tasks: (lowest, highest, where the lowest was).
MEASURED: dict[int, tuple[float, float, str]] = {
    3: (0.900, 1.000, "pass@5 over 10 samples"),
    10: (0.875, 0.987, "pass@5 over 10 samples"),
    30: (0.930, 0.971, "pass@5 over 10 samples"),
}

#: Below this many tasks the band covers less than 95% in at least one measured setting
#: by more than the Monte-Carlo noise (the 30-task cell is within 2 points of nominal).
FULL_COVERAGE_TASKS = 30

#: Per-method figures get an interval only over at least this many tasks (design invariant 12): the
#: fewest on which an exact (sign-flip) test at the report's alpha could reject at all, with the
#: small-suite margin. Unlike a verdict's minimum (results.verdicts.small_suite_minimum) it does not
#: grow with the report's family of verdicts: a per-method interval is not adjusted with them.
INTERVAL_MIN_TASKS = min_tasks_to_reject(ALPHA)

_C = TypeVar("_C", CurveBand, PassAtKCurve)


def band_label() -> str:
    """"Wilson score interval at an effective number of tasks (95%)" (stats.RATE_BAND, in words)."""
    return f"{BAND_LABELS[RATE_BAND]} (95%)"


def coverage_words(n_tasks: int) -> str:
    """What the band's measured coverage is at this suite size, in words ("" where nothing to say).

    At 30 tasks or more: the measured range (0.93-0.97). Below 30 tasks: that it covers less than
    95%, with the figure measured at the nearest smaller measured size (10 or 3 tasks).
    """
    lo30, hi30, _ = MEASURED[30]
    if n_tasks >= FULL_COVERAGE_TASKS:
        return (f"measured coverage at {FULL_COVERAGE_TASKS} tasks {lo30:.2f}-{hi30:.2f} "
                f"(scripts/band_coverage_sim.py)")
    size = 10 if n_tasks >= 10 else 3
    lo, hi, where = MEASURED[size]
    return (f"with {n_tasks} tasks this band covers less than 95%: as low as {lo:.3f} for {where} at {size} tasks "
            f"(range {lo:.2f}-{hi:.2f} in scripts/band_coverage_sim.py); read it as rough")


def band_note(n_tasks: int, what: str = "Bands") -> str:
    """One sentence for a table's or figure's notes: the band, and its coverage at this size; below
    INTERVAL_MIN_TASKS tasks, that there is none, and why."""
    if not has_interval(n_tasks):
        return f"{what}: none with {n_tasks} task{'s' if n_tasks != 1 else ''}; {too_few_words()}."
    return f"{what}: {band_label()} over tasks; {coverage_words(n_tasks)}."


def has_interval(n_tasks: int) -> bool:
    """Whether a per-method figure over `n_tasks` tasks gets an interval (design invariant 12)."""
    return n_tasks >= INTERVAL_MIN_TASKS


def too_few_words() -> str:
    """Why a figure over fewer than INTERVAL_MIN_TASKS tasks has no interval, as one clause."""
    lo, hi, _ = MEASURED[3]
    return (f"no interval is given over fewer than {INTERVAL_MIN_TASKS} tasks (design invariant 12: the fewest on "
            f"which an exact test at alpha {ALPHA:g} could reject at all, with a margin of {SMALL_SUITE_MARGIN:g}), "
            "since over so few tasks an interval's coverage is not known (scripts/band_coverage_sim.py measured the "
            f"rate band at 3 tasks covering {lo:.2f}-{hi:.2f}, only on the task populations it simulates; no "
            "speedup interval's coverage was measured there)")


def count_words(scores: npt.ArrayLike | None, n_tasks: int) -> str:
    """The tasks a point value rests on: "2/3 tasks" when every per-task score is 0 or 1 (the
    tasks that pass out of all), else "3 tasks"."""
    s = np.asarray([] if scores is None else scores, dtype=float).ravel()
    if s.size == n_tasks and s.size and bool(np.all((s == 0) | (s == 1))):
        return f"{int(s.sum())}/{n_tasks} tasks"
    return f"{n_tasks} task" + ("s" if n_tasks != 1 else "")


def point_only(e: Estimate, scores: npt.ArrayLike | None = None) -> Estimate:
    """`e` as it is over INTERVAL_MIN_TASKS tasks or more (e.n); below, its point value with no
    interval (NaN ends) and the count of tasks (`scores`: its per-task values, see count_words) in
    its method: "too few tasks for an interval (2/3 tasks)". An estimate without a value stays."""
    if has_interval(e.n) or not math.isfinite(e.value):
        return e
    nan = float("nan")
    return replace(e, lo=nan, hi=nan, method=f"{TOO_FEW} ({count_words(scores, e.n)})")


def curve_points_only(c: _C) -> _C:
    """A budget curve or pass@k curve as it is over INTERVAL_MIN_TASKS tasks or more; below, its
    means with no band (NaN ends) and TOO_FEW as its method."""
    if has_interval(c.n_tasks):
        return c
    return replace(c, lo=np.full(np.shape(c.mean), np.nan), hi=np.full(np.shape(c.mean), np.nan), method=TOO_FEW)
