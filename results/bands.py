"""The band of every rate over tasks (pass@k, submitted and oracle pass, budget curves) and its
measured coverage, said in words wherever the band is printed.

Why: issue 43 item 3. The band was chosen by simulation (scripts/band_coverage_sim.py, JSON in
benchmarks/results/2026-12-04-cpu-band-coverage-sim.json: 4,000 suites per cell, s.e. 0.0035)
among BCa, percentile, the t interval over tasks, the studentised bootstrap and the Wilson score
interval at an effective number of tasks (stats.RATE_BAND). The figures below are its coverage
range over the simulated model's own tasks and a Beta(0.8, 1.2) population, for pass@1 and
pass@5 over 10 samples and budget curves at 1 and 3 repeats. Where a suite is small enough that
the band covers less than its nominal 95%, :func:`coverage_words` says so.
"""

from __future__ import annotations

from stats import RATE_BAND

__all__ = ["BAND_LABELS", "MEASURED", "band_label", "coverage_words", "band_note"]

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
    """One sentence for a table's or figure's notes: the band, and its coverage at this size."""
    return f"{what}: {band_label()} over tasks; {coverage_words(n_tasks)}."
