"""The judge's side of the compile pass (judge/candidate/precompile.py says why): each case's
arguments described, never sent, so the candidate process compiles its kernels before the
judge takes a ticket at the GPU's gate.

The descriptions are made from inputs already drawn (judge/case_inputs.py `drawn_inputs`: the
worker draws the run's hidden inputs ahead of its jobs), so making them does no GPU work either;
a case not yet drawn is left out and compiles at its first judged launch, as before. An output
argument the judge poisons travels as a fresh copy (`poisoned_outputs`), so it is described as
one: the same size and strides, at the start of a storage of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from bench.task import Case, Task
from judge.candidate import structure, wire
from judge.case_inputs import cached_inputs, drawn_inputs, skipped_here

MAX_CASE_BYTES = 4 << 30
"""A case whose storages add up to more is left out: its placeholders would be host memory."""


def _as_sent(args: tuple, poisoned: frozenset[int] | set[int] | tuple[int, ...]) -> tuple:
    """`args` as the candidate process receives them, in layout: poisoned outputs as copies."""
    return tuple(torch.empty_like(a, device="meta") if i in poisoned and isinstance(a, torch.Tensor) else a
                 for i, a in enumerate(args))


def case_descriptions(task: Task, cases: tuple[Case, ...], device: str, interpreter: bool) -> list[dict[str, Any]]:
    """The compile pass's cases: per case, its arguments' spec (structure.encode_values) and its
    tensors' descriptions; exact repeats of a layout are sent once. On the CPU (no gate to
    keep) cases not yet drawn are drawn; on a GPU they are left out."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for c in cases:
        if skipped_here(task, c, interpreter):
            continue
        args = cached_inputs(task, c, device, refill=False) if device == "cpu" else drawn_inputs(task, c, device)
        if args is None:
            continue
        try:
            spec, tensors = structure.encode_values(_as_sent(args, task.output_args(c).poisoned))
        except Exception:  # noqa: BLE001 - a case this cannot describe is left to its judged call
            continue
        described = [wire.describe(t) for t in tensors]
        if sum(int(d["nbytes"]) for d in described) > MAX_CASE_BYTES:
            continue
        key = repr((spec, [(d["dtype"], d["size"], d["stride"], d["offset"]) for d in described]))
        if key not in seen:
            seen.add(key)
            out.append({"args": spec, "tensors": described})
    return out


def cases_to_compile(task: Task, case_set: str, interpreter: bool, timed: bool, through: str = "") -> tuple[Case, ...]:
    """The cases a job's compile pass compiles for: its case set's, and the perf cases where it
    is timed. `through`: the case the source failed on in its visible run (`Job.compile_through`):
    the hidden set begins with the visible cases on the same draws, so its run is expected to
    stop there too; the pass then compiles up to that case and no perf case. Why: a source that
    failed its visible cases still gets hidden jobs (a method's submission, judged for the record),
    and its pass compiled every hidden specialization for a run that stops at the second case.
    A run that goes on past it anyway compiles the rest at their first launch, as with no pass:
    the hint never decides a verdict. An unknown case name leaves every case in."""
    cases = tuple(task.cases(case_set, interpreter))
    if through:
        for i, c in enumerate(cases):
            if through == c.name or through.startswith(c.name + "+"):
                return cases[:i + 1]
    return cases + (tuple(task.perf) if timed else ())


def precompile(proc: Any, task: Task, cases: tuple[Case, ...], device: str, interpreter: bool) -> dict[str, Any]:
    """Ask the candidate process `proc` (loaded) to compile for `cases`; its report (counts, for
    the record), or {} where there was nothing to ask. `written`, counted here rather than
    reported: the entries the pass added to the process's Triton cache (kernels compiled and
    launchers built, not found cached), which tells a pass that compiled from one that loaded."""
    described = case_descriptions(task, cases, device, interpreter)
    if not described:
        return {}
    before = cache_entries(getattr(proc, "cache", ""))
    reply, _ = proc.request({"op": "compile", "cases": described})
    report = reported_counts(reply.get("pass"))
    if before is not None:
        report["written"] = entries_added(proc.cache, before)
    return report


def reported_counts(found: Any) -> dict[str, Any]:
    """What a candidate process said its pass did, kept for the record only (step lines): its
    counts, and its few short texts cut to 300 characters. Whatever else its reply holds (it
    comes from the candidate's process, which may be hostile) is dropped."""
    if not isinstance(found, dict):
        return {}
    kept: dict[str, Any] = {}
    for key, value in list(found.items())[:32]:
        if not isinstance(key, str) or len(key) > 40 or isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            kept[key] = value
        elif isinstance(value, str):
            kept[key] = value[:300]
    return kept


def cache_entries(folder: str) -> set[str] | None:
    """The names in a candidate process's Triton cache folder, or None where it has none."""
    if not folder:
        return None
    try:
        return {entry.name for entry in Path(folder).iterdir() if not entry.name.startswith(".")}
    except OSError:
        return None


def entries_added(folder: str, before: set[str]) -> int:
    """How many entries `folder` has that it did not have `before` (`cache_entries`): what a
    process's pass compiled rather than found. 0 where the folder cannot be read."""
    after = cache_entries(folder)
    return len(after - before) if after is not None else 0
