"""Labels and wording every output shares: the simulated-model banner (design invariant 7)
and how an interval is written, so a degenerate one is said plainly everywhere."""

from __future__ import annotations

import math

SIMULATED_BANNER = ("SIMULATED MODEL: these results come from the built-in simulated model, "
                    "not from a real LLM; they exercise the toolkit, they say nothing about any model.")


def interval_text(value: float | None, lo: float | None, hi: float | None, n_tasks: int, digits: int = 2,
                  suffix: str = "", rate: bool = False) -> str:
    """"0.62 [0.41, 0.80]"; a zero-width interval is not an interval and is said so
    ("1.00 (all 4 tasks pass; no interval)"); "n/a" when there is no value."""
    if value is None or not math.isfinite(value):
        return "n/a"
    v = f"{value:.{digits}f}{suffix}"
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{v} (no interval)"
    if lo != hi:
        return f"{v} [{lo:.{digits}f}, {hi:.{digits}f}]"
    tasks = f"{n_tasks} task" + ("s" if n_tasks != 1 else "")
    if n_tasks <= 1:
        why = f"{tasks}"
    elif rate and value == 1:
        why = f"all {tasks} pass"
    elif rate and value == 0:
        why = f"none of {tasks} passes"
    else:
        why = f"the same on all {tasks}"
    return f"{v} ({why}; no interval)"
