"""How a measured figure is written into a prompt: two significant digits.

A latency or speedup quoted to four decimals quotes the timing noise, and a prompt that
changes with noise changes the model's reply (design invariant 8); two significant digits
keep what a model can use (0.012 ms, 1.3x) and little of the noise.
"""

from __future__ import annotations

import math


def two_digits(value: float) -> str:
    """`value` rounded to two significant digits, without an exponent in the usual range
    (0.012, 1.3, 130; 1.2e+06 beyond a million)."""
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    return f"{float(f'{value:.2g}'):g}"
