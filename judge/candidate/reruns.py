"""Feedback that does not depend on what happened to be in memory (design invariant 8).

A kernel that reads out of bounds, or leaves part of its output unwritten where nothing was
poisoned, gets values that depend on the heap: its failure text (the value it got, how many
elements are off, even NaN or not) differs from one process to the next, and so does every
prompt built from it. A failure is therefore judged again `RERUNS` times on the same inputs,
with memory disturbed between runs (`disturb_memory`: NaN-filled spacers kept alive shift
where the next run's tensors land, freed NaN-filled scratch leaves NaN where untouched memory
would read zero). When the text differs between the runs it was quoting garbage, and a
description replaces it (judge/candidate/value_text.py VARYING); otherwise it is a function of the
candidate and kept. Used for the oracle's wrong results (`steady_verdict`, re-judging only
the failing case) and for a method's own tests (judge/candidate/internal_tests.py).

Only a re-run that fails at the same call counts: the same case and the same attempt (the
oracle calls each case first on fresh inputs, then after an in-place refill, and names the
attempt in every failure, `at_attempt`). A re-run in the same process also inherits the
candidate's own history: a candidate that memoises results by input address serves, on a
GPU whose caching allocator hands back the same addresses, a remembered result at the
re-run's first call (no launch: `no_kernel` at the first attempt) where the first judgement
failed at the refill. A re-run that passes, or fails at another attempt, says the candidate
depends on its history, not that its text quoted garbage, and the first text stays, as long
as all such re-runs give one and the same outcome (a memo serves the same thing every time;
garbage that passes one re-run and fails another does not); a
failure that names no attempt (a crash, a raised exception, a race) is compared as before.
The price: a kernel whose garbage turns benign in all four re-runs, or fails only at another
attempt with the same text in each, keeps its first text (garbage values themselves are still described, not
quoted, by judge/candidate/value_text.py).

No detection by re-running is certain (the heap may hold the same garbage every time).
Measured on the CPU interpreter with a flip kernel reading out of bounds, each in fresh
worker processes with different histories: with two re-runs and spacers only, 4 distinct
texts of its 5 failing tests in 6 processes; with four re-runs and the scratch, 1 (6
processes), and the oracle's visible verdict 1 distinct text in 5 processes (3 before).
With the same-call rule, a flip kernel reading four tensors past the end: the VARYING note in
all 5 fresh processes on the visible and the hidden set, as with the rule before it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from judge.candidate.value_text import VARYING
from judge.candidate.verdict import Verdict

RERUNS = 4
_ATTEMPT = re.compile(r"\(([^()]+) run\)")


def at_attempt(message: str, attempt: str) -> str:
    """`message` naming the attempt (the oracle's call of a case: "first", "after in-place
    refill", ...) it failed at, as `attempt_of` reads it back."""
    return f"{message} ({attempt} run)"


def attempt_of(message: str) -> str | None:
    """The attempt a failure's message names (`at_attempt`; the last one named), or None."""
    named = _ATTEMPT.findall(message)
    return named[-1] if named else None


def _fails_at_the_same_call(first: Verdict, again: Verdict) -> bool:
    """Whether the re-run `again` failed where `first` did: the same case, and the same
    attempt unless one of them names none."""
    if again.correct or again.failing_case != first.failing_case:
        return False
    attempts = attempt_of(first.message), attempt_of(again.message)
    return None in attempts or attempts[0] == attempts[1]


def disturb_memory(rerun: int, device: str, kept: list[Any]) -> None:
    """Before re-run `rerun`: NaN-filled spacers appended to `kept` (the caller holds them
    through the re-run) and NaN-filled scratch allocated and freed."""
    import torch

    kept.extend(torch.full((n * (rerun + 1),), float("nan"), device=device) for n in (1, 3, 17, 64, 255, 1024))
    scratch = [torch.full((n * (rerun + 1),), float("nan"), device=device) for n in (1024, 4096, 16384)]
    del scratch


def steady_verdict(first: Verdict, rejudge: Callable[[str], Verdict | None], device: str,
                   disturb: Callable[[int], Any] | None = None) -> Verdict:
    """`first` unless it is a wrong result and judging its failing case again (`rejudge(case
    name)`, None when that case cannot be judged alone) RERUNS times fails at the same call
    (case and attempt) with another text at least once: then `first` with its message replaced
    by a description; the verdict stays wrong (a kernel wrong only sometimes is wrong). Re-runs
    that pass or fail at another attempt leave `first` as it is when they all agree with each
    other (one other outcome: the candidate's history, the module's docstring says why), and
    get the description when they do not. `disturb(rerun)` disturbs the memory of the process the candidate runs in
    (judge/candidate/server.py's `disturb` op); by default, this process's."""
    if first.kind != "wrong_result" or first.failing_case is None:
        return first
    kept: list[Any] = []
    elsewhere: set[tuple[Any, ...]] = set()  # the distinct outcomes of re-runs that did not fail at that call
    varying = dataclasses.replace(first, message=f"output: {VARYING}", max_abs_err=None, max_rel_err=None)
    for rerun in range(RERUNS):
        if disturb is None:
            disturb_memory(rerun, device, kept)
        else:
            disturb(rerun)
        again = rejudge(first.failing_case)
        if again is None:
            return first
        if _fails_at_the_same_call(first, again):
            if (again.kind, again.message) != (first.kind, first.message):
                return varying
        else:
            elsewhere.add((again.kind, again.failing_case, again.message))
    # A candidate's own history gives one other outcome every time (a memo served again); re-runs
    # that disagree among themselves, passing once and failing once, are reading garbage.
    return first if len(elsewhere) <= 1 else varying
