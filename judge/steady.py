"""Feedback that does not depend on what happened to be in memory (design invariant 8).

A kernel that reads out of bounds, or leaves part of its output unwritten where nothing was
poisoned, gets values that depend on the heap: its failure text (the value it got, how many
elements are off, even NaN or not) differs from one process to the next, and so does every
prompt built from it. A failure is therefore judged again `RERUNS` times on the same inputs,
with memory disturbed between runs (`disturb_memory`: NaN-filled spacers kept alive shift
where the next run's tensors land, freed NaN-filled scratch leaves NaN where untouched memory
would read zero). When the text differs between the runs it was quoting garbage, and a
description replaces it (judge/value_text.py VARYING); otherwise it is a function of the
candidate and kept. Used for the oracle's wrong results (`steady_verdict`, re-judging only
the failing case) and for a method's own tests (judge/internal_tests.py).

No detection by re-running is certain (the heap may hold the same garbage every time).
Measured on the CPU interpreter with a flip kernel reading out of bounds, each in fresh
worker processes with different histories: with two re-runs and spacers only, 4 distinct
texts of its 5 failing tests in 6 processes; with four re-runs and the scratch, 1 (6
processes), and the oracle's visible verdict 1 distinct text in 5 processes (3 before).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from judge.value_text import VARYING
from judge.verdict import Verdict

RERUNS = 4


def disturb_memory(rerun: int, device: str, kept: list[Any]) -> None:
    """Before re-run `rerun`: NaN-filled spacers appended to `kept` (the caller holds them
    through the re-run) and NaN-filled scratch allocated and freed."""
    import torch

    kept.extend(torch.full((n * (rerun + 1),), float("nan"), device=device) for n in (1, 3, 17, 64, 255, 1024))
    scratch = [torch.full((n * (rerun + 1),), float("nan"), device=device) for n in (1024, 4096, 16384)]
    del scratch


def steady_verdict(first: Verdict, rejudge: Callable[[str], Verdict | None], device: str,
                   disturb: Callable[[int], Any] | None = None) -> Verdict:
    """`first` if it is not a wrong result, or if judging its failing case again (`rejudge(case
    name)`, None when that case cannot be judged alone) RERUNS times gives the same text; else
    `first` with its message replaced by a description: the verdict stays wrong (a kernel
    wrong only sometimes is wrong). `disturb(rerun)` disturbs the memory of the process the
    candidate runs in (judge/candidate.py's `disturb` op); by default, this process's."""
    if first.kind != "wrong_result" or first.failing_case is None:
        return first
    kept: list[Any] = []
    for rerun in range(RERUNS):
        if disturb is None:
            disturb_memory(rerun, device, kept)
        else:
            disturb(rerun)
        again = rejudge(first.failing_case)
        if again is None:
            return first
        if (again.kind, again.failing_case, again.message) != (first.kind, first.failing_case, first.message):
            return dataclasses.replace(first, message=f"output: {VARYING}", max_abs_err=None, max_rel_err=None)
    return first
