"""Labels and wording every output shares: the simulated-model banner (design invariant 7)
and how an interval is written, so a degenerate one is said plainly everywhere."""

from __future__ import annotations

import math

SIMULATED_BANNER = ("SIMULATED MODEL: these results come from the built-in simulated model, "
                    "not from a real LLM; they exercise the toolkit, they say nothing about any model.")


#: Extra digits an interval may take so that its two ends print apart (a band of width 2e-4 around
#: 0.9999 would otherwise print "1.00 [1.00, 1.00]", which reads as a zero-width interval).
EXTRA_DIGITS = 3


def display_digits(lo: float, hi: float, digits: int, signed: bool = False) -> int | None:
    """The fewest digits, from `digits` up to `digits + EXTRA_DIGITS`, at which the two ends of a
    non-degenerate interval print apart; None when even that many cannot tell them apart."""
    sign = "+" if signed else ""
    for d in range(digits, digits + EXTRA_DIGITS + 1):
        if f"{lo:{sign}.{d}f}" != f"{hi:{sign}.{d}f}":
            return d
    return None


def range_text(lo: float, hi: float, digits: int = 2, scale: float = 1.0, signed: bool = False,
               what: str = "") -> str:
    """An interval's two ends, "[0.41, 0.80]" (times `scale`), with the digits that tell them
    apart; a zero-width one is not an interval and is said so ("no interval: every per-task
    difference is +50.0", with `what` = "every per-task difference is ") rather than printed as
    "[50.0, 50.0]"."""
    sign = "+" if signed else ""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "no interval"
    if lo == hi:
        return f"no interval: {what}{scale * lo:{sign}.{digits}f}" if what else "no interval (zero width)"
    d = display_digits(scale * lo, scale * hi, digits, signed)
    if d is None:
        return f"no interval wider than {10.0 ** -(digits + EXTRA_DIGITS):g} around {scale * lo:{sign}.{digits}f}"
    return f"[{scale * lo:{sign}.{d}f}, {scale * hi:{sign}.{d}f}]"


#: How an Estimate's method names a zero-width interval whose reason is not "every task the same"
#: (stats.fixed_suite_ci: "degenerate (no within-task spread: ...)"): the text in parentheses is the reason.
DEGENERATE_PREFIX = "degenerate ("

#: The method of an Estimate whose interval was withheld below the small-suite minimum (design
#: invariant 12; results/bands.py point_only), the count of tasks following in parentheses: "too few
#: tasks for an interval (2/3 tasks)". interval_text prints the value with that count: "0.67 (2/3 tasks)".
TOO_FEW = "too few tasks for an interval"


def interval_text(value: float | None, lo: float | None, hi: float | None, n_tasks: int, digits: int = 2,
                  suffix: str = "", rate: bool = False, reason: str = "") -> str:
    """"0.62 [0.41, 0.80]"; a zero-width interval is not an interval and is said so
    ("1.00 (all 4 tasks pass; no interval)"); a narrow one is printed with the digits that tell
    its ends apart ("0.9998 [0.9995, 1.0000]"); "n/a" when there is no value. `reason`: the
    Estimate's method; when it names why the interval has zero width ("degenerate (...)"), that
    reason is said instead of guessing from the value (a fixed-suite interval is zero-width when
    every task's repeats agree, though the tasks differ). When `reason` says the interval was
    withheld (TOO_FEW, below the small-suite minimum), the value with the count it names: "0.67 (2/3 tasks)"."""
    if value is None or not math.isfinite(value):
        return "n/a"
    v = f"{value:.{digits}f}{suffix}"
    if reason.startswith(f"{TOO_FEW} (") and reason.endswith(")"):
        return f"{v} ({reason[len(TOO_FEW) + 2:-1]})"
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{v} (no interval)"
    if lo != hi:
        d = display_digits(lo, hi, digits)
        if d is not None:
            return f"{value:.{d}f}{suffix} [{lo:.{d}f}, {hi:.{d}f}]"
        return f"{v} (interval narrower than {10.0 ** -(digits + EXTRA_DIGITS):g})"
    tasks = f"{n_tasks} task" + ("s" if n_tasks != 1 else "")
    if reason.startswith(DEGENERATE_PREFIX) and reason.endswith(")"):
        return f"{v} ({reason[len(DEGENERATE_PREFIX):-1]}; no interval)"
    if n_tasks <= 1:
        why = f"{tasks}"
    elif rate and value == 1:
        why = f"all {tasks} pass"
    elif rate and value == 0:
        why = f"none of {tasks} passes"
    else:
        why = f"the same on all {tasks}"
    return f"{v} ({why}; no interval)"
