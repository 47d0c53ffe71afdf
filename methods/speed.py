"""Speed-based choices that timing noise cannot flip (design invariant 8).

A method that picks between correct candidates by speed (direct's visible-best, GEAK's
ancestor pool and answer) must not follow differences inside the measured noise: two runs
of the same seed would then pick differently. So a candidate is *decisively faster* than
another only when its whole speedup interval lies above the other's by more than
`TIE_MARGIN` (the interval the timing protocol measured, judge/timing.py); anything less is
a tie, and a tie goes to the earlier candidate.

Why a margin and not bare non-overlap: an interval covers the noise of the samples taken in
one process, not what differs between runs (the worker that timed it, its cached baseline,
the clock state). On a GPU, same-seed runs of the 7-task command with bare non-overlap picked
the same final submission in little more than half the units, direct's visible-best most often
differing (benchmarks/results/README.md, "Same-seed determinism"). The margin is the short protocol's own equivalence margin
(judge/policy.py `feedback_equivalence`, 5%): that protocol stops sampling once a speedup is
known to lie within it, so it never resolves a smaller difference, and a choice should not
pretend to. A candidate with no timing (the CPU interpreter times
nothing) has an unbounded interval: it ties with everything.

"Decisively faster" is not transitive, so orders and picks are built by selection, never by
a sort with that comparison: the best of a set is the earliest candidate no other candidate
is decisively faster than (one always exists: the one with the highest lower bound), the
worst is the latest candidate that is decisively faster than no other (the lowest upper
bound), and an order repeats the pick. Each is a function of the intervals and the order of
proposal alone.

Speed figures shown to a model are rounded to two significant digits (methods/rounding.py
`two_digits`): more digits quote noise, and a prompt that changes with noise changes the
model's reply.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from methods.base import Feedback

T = TypeVar("T")

TIE_MARGIN = 0.05
"""Relative speed difference below which two candidates tie, whatever their intervals."""


@dataclass(frozen=True)
class SpeedInterval:
    """A candidate's speedup over the expert kernel: [low, high]; unbounded when not timed."""

    low: float = -math.inf
    high: float = math.inf

    @classmethod
    def of(cls, feedback: Feedback) -> SpeedInterval:
        """The interval a feedback measured: its bootstrap interval, else its point estimate,
        else (not timed) unbounded."""
        if feedback.speedup_ci is not None:
            low, high = feedback.speedup_ci
            return cls(min(low, high), max(low, high))
        if feedback.speedup is not None:
            return cls(feedback.speedup, feedback.speedup)
        return cls()

    @property
    def timed(self) -> bool:
        return math.isfinite(self.low) or math.isfinite(self.high)

    def beats(self, other: SpeedInterval) -> bool:
        """Decisively faster: this interval lies wholly above the other's, by more than `TIE_MARGIN`."""
        return self.low > other.high * (1.0 + TIE_MARGIN)


def best(items: Sequence[T], speed: Callable[[T], SpeedInterval]) -> T:
    """The earliest item that no other item is decisively faster than."""
    if not items:
        raise ValueError("best of no items")
    speeds = [speed(i) for i in items]
    for i, s in enumerate(speeds):
        if not any(o.beats(s) for j, o in enumerate(speeds) if j != i):
            return items[i]
    raise AssertionError("unreachable: the item with the highest lower bound is never beaten")


def worst(items: Sequence[T], speed: Callable[[T], SpeedInterval]) -> T:
    """The latest item that is decisively faster than no other item."""
    if not items:
        raise ValueError("worst of no items")
    speeds = [speed(i) for i in items]
    for i in reversed(range(len(items))):
        if not any(speeds[i].beats(o) for j, o in enumerate(speeds) if j != i):
            return items[i]
    raise AssertionError("unreachable: the item with the lowest upper bound beats nobody")


def fastest_first(items: Sequence[T], speed: Callable[[T], SpeedInterval]) -> list[T]:
    """`items` ordered by repeated `best`: fastest first, ties in proposal order."""
    left = list(range(len(items)))
    order = []
    while left:
        pick = best(left, lambda i: speed(items[i]))
        order.append(items[pick])
        left.remove(pick)
    return order
