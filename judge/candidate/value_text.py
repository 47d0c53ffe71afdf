"""How feedback text quotes the values a candidate produced: deterministically.

A kernel that writes too few elements, or reads past its inputs, leaves in its output
whatever the memory held: 1.849e+20 in one run, 6.56e+09 in the next. Quoted digit for digit,
that garbage makes the feedback (and every prompt built from it) differ between two runs of
the same candidate, so the method's next step and the run cannot be reproduced (design
invariant 8). Two ways, both here as text:

- a quoted value (the oracle's and the internal tests' first failing element; allocations
  are poisoned there, so unwritten memory reads NaN) that is far beyond the answer's
  magnitude (`scale`) or in the denormal range, where random bit patterns land, is called
  garbage instead of being quoted (`describe_value`);
- a failure (the oracle's wrong result, a method's failing test) is judged again on the same
  inputs with memory disturbed (judge/candidate/reruns.py); when its text differs between the runs, the
  values are not a function of the inputs and the text says so (`VARYING`) instead of
  quoting them.

Neither is certain (garbage can repeat itself); only replaying a recorded run (`compare
--replay`) reproduces every feedback exactly. No torch here.
"""

from __future__ import annotations

import math

GARBAGE_RATIO = 1e4  # a value this many times beyond the answer's magnitude was never computed from it
TINY = 1e-30  # nonzero magnitudes below this (denormal floats) are random bit patterns, not results
GARBAGE = "garbage"


def is_garbage(value: float, scale: float) -> bool:
    """Not finite, or out of all proportion to `scale` (the largest magnitude of the correct
    answer), or a nonzero value in the denormal range."""
    if not math.isfinite(value):
        return True
    magnitude = abs(value)
    return magnitude > GARBAGE_RATIO * max(abs(scale), 1.0) or 0.0 < magnitude < TINY


def describe_value(value: float, scale: float, digits: int = 6) -> str:
    """`value` to `digits` significant digits, or, for garbage, a description of it that does
    not depend on the bits that happened to be in memory."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if is_garbage(value, scale):
        return f"{GARBAGE} (|value| {'far above' if abs(value) > 1 else 'far below'} the expected magnitude)"
    return f"{value:.{digits}g}"


VARYING = ("the values vary between runs on the same inputs: the kernel reads memory it never wrote, or out "
           "of bounds (check the grid, the masks and the offsets)")
