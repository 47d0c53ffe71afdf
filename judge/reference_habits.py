"""Output a suite's reference never writes, and what else the judge learns from running it as a
candidate is run. Runs in the judge process (judge/case_inputs.py caches what it computes;
judge/oracle.py reads the habits when it decides).

Some suite references leave part of their output unwritten (an attention kernel that stores
96 of 128 head columns into `torch.empty_like(q)`): what is there is whatever the allocator
returned, zeros in a fresh process, so the suite's own check passes by luck. Those elements
are nobody's answer: the reference runs once with its allocations poisoned and once with a
finite marker, elements that differ are unwritten, and a candidate is not judged on them
(for tasks whose reference is Triton code; a PyTorch reference writes everything). The same
run, recorded as a candidate's call is (judge/candidate/launches.py), tells which PyTorch operations
the suite's own wrapper runs around its kernels (a candidate may run them too: they are the
suite's interface) and whether it finishes its output in PyTorch (then the check that a
kernel wrote the output is not applied to that task).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from bench.task import Case, CaseUnavailable, Task
from judge.candidate.allocations import MARK_FLOAT, allocations
from judge.candidate.loading import prepare_process
from judge.comparison import expected_output


@dataclass
class _ReferenceHabits:
    ops: set[str] = field(default_factory=set)
    finishes_in_torch: bool = False
    kernel_free_cases: set[str] = field(default_factory=set)  # cases the reference answers without a launch


_HABITS: dict[str, _ReferenceHabits] = {}


def expected_and_unwritten(task: Task, args: tuple, case: Case | None = None) -> tuple[Any, Any]:
    """The expected output, and a matching structure of masks of the elements the reference
    leaves unwritten (None where nothing is)."""
    if not task.triton_reference:
        return expected_output(task, args, case), None
    from judge.candidate import call_record, launches

    prepare_process()  # the judge runs the suite's Triton reference: record it as a candidate is recorded
    # Every run's allocations padded (judge/candidate/allocations.py `_padded`): what a reference
    # writes past its own tensors must not reach the judge's, the answers it keeps among them.
    with allocations("poison", padded=True):
        poisoned = expected_output(task, args, case, slack="zero")
    with allocations("marker", padded=True), launches.recording(args) as rec:
        marked = expected_output(task, args, case, slack="zero")
    habits = _HABITS.setdefault(task.id, _ReferenceHabits())
    habits.ops |= set(rec.fallback)
    habits.finishes_in_torch |= bool(call_record.unwritten_outputs(marked, rec, interpreter=False))
    if rec.launches == 0 and case is not None:
        habits.kernel_free_cases.add(case.name)
    unwritten = _unwritten_masks(poisoned, marked)
    try:
        # Elements computed from memory the reference allocated and never wrote differ between
        # the poisoned and the marked run, whatever the allocator hands out; elements computed
        # from memory past its inputs, or from state it keeps, differ in the disturbed run.
        derived = _unsteady_masks(marked, poisoned, task, exempt=unwritten)
        unsteady = _unsteady_masks(marked, _disturbed_reference(task, args, case), task, exempt=unwritten)
    except _NoAnswer:
        raise CaseUnavailable(f"{case.name if case is not None else 'this case'}: {NO_ANSWER}") from None
    return marked, _either(_either(unwritten, derived), unsteady)


NO_ANSWER = ("the suite's reference answers differently on the same inputs (it reads memory past its "
             "inputs or that it never wrote, or keeps state between calls): no answer to judge against")


class _NoAnswer(Exception):
    """Two runs of the reference on the same values disagree on more than half of an output."""


def _disturbed_reference(task: Task, args: tuple, case: Case | None) -> Any:
    """The reference once more with NaN instead of zeros past each floating-point input's end,
    after memory was filled with NaN and freed (judge/candidate/reruns.py): a suite reference that reads
    past its inputs (an unmasked load, a block past a sequence's end) or reads memory it never
    wrote answers differently here."""
    from judge.candidate.reruns import disturb_memory

    device = next((a.device.type for a in args if isinstance(a, torch.Tensor)), "cpu")
    kept: list[Any] = []
    disturb_memory(1, device, kept)
    with allocations("plain", padded=True):  # padded only: what memory held stays there
        return expected_output(task, args, case, slack="nan")


def _unsteady_masks(a: Any, b: Any, task: Task, exempt: Any = None) -> Any:
    """Elements where two runs of the reference on the same values disagree beyond the task's
    tolerance (None where none do): nobody's answer, so no candidate is judged on them. Only
    where they are at most half of an output: a reference that disagrees with itself on more
    (one that keeps state between calls, or a one-element result computed from memory past its
    input, as TritonBench-revised layer_norm_welfold's on a 1x1 input) gives no answer on this
    case at all, and `_NoAnswer` is raised: the case is skipped with that reason (`judge_cases`),
    as a case the reference cannot run is, and a task with no case left is judged on none,
    which is never a pass. Before, such a case failed every candidate, the reference included.
    `exempt` (a mask structure as `_unwritten_masks` gives): elements not counted towards that
    half, those the reference leaves unwritten outright, which are excluded whatever their share."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype:
        if a.is_complex():
            a, b = torch.view_as_real(a), torch.view_as_real(b)  # as `_unwritten_masks` views them
        if a.is_floating_point():
            tol = task.tolerance(str(a.dtype).removeprefix("torch."))
            differ = ~torch.isclose(a.double(), b.double(), rtol=tol.rtol, atol=tol.atol, equal_nan=True)
        else:
            differ = a != b
        counted = differ & ~exempt if isinstance(exempt, torch.Tensor) and exempt.shape == differ.shape else differ
        if int(counted.sum()) > differ.numel() // 2:
            raise _NoAnswer
        return differ if bool(differ.any()) else None
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b):
        exempts = exempt if isinstance(exempt, (tuple, list)) and len(exempt) == len(a) else [None] * len(a)
        masks = [_unsteady_masks(x, y, task, e) for x, y, e in zip(a, b, exempts, strict=True)]
        return masks if any(m is not None for m in masks) else None
    return None


def _either(a: Any, b: Any) -> Any:
    """Two mask structures (as `_unwritten_masks` gives) merged: an element either marks is marked."""
    if a is None or b is None:
        return b if a is None else a
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape:
        return a | b
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b):
        return [_either(x, y) for x, y in zip(a, b, strict=True)]
    return a


def reference_ops(task: Task) -> set[str]:
    """PyTorch operations the task's own Triton reference runs outside its kernels (empty for
    a PyTorch reference, whose arithmetic is no candidate's licence)."""
    habits = _HABITS.get(task.id)
    return habits.ops if habits else set()


def reference_launches_nothing(task: Task, case: Case) -> bool:
    """Whether the task's own Triton reference answers `case` without launching a kernel (a
    suite wrapper's early return: TritonBench-revised multinomial_sampling returns zeros for a
    single token). A candidate doing the same there is not `no_kernel`; everywhere else it is."""
    habits = _HABITS.get(task.id)
    return bool(habits and case.name in habits.kernel_free_cases)


def reference_finishes_in_torch(task: Task) -> bool:
    """Whether the task's own Triton reference returns a tensor no kernel wrote (a suite wrapper
    that finishes its result in PyTorch, e.g. a sum over per-block partials)."""
    habits = _HABITS.get(task.id)
    return bool(habits and habits.finishes_in_torch)


def _unwritten_masks(a: Any, b: Any) -> Any:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape:
        if a.is_complex():
            a, b = torch.view_as_real(a), torch.view_as_real(b)
        differ = ~((a == b) | (torch.isnan(a) & torch.isnan(b))) if a.is_floating_point() else a != b
        if a.is_floating_point() and b.dtype == a.dtype:
            differ = differ & (b == torch.tensor(MARK_FLOAT, dtype=b.dtype, device=b.device))
        return differ if bool(differ.any()) else None
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b):
        masks = [_unwritten_masks(x, y) for x, y in zip(a, b, strict=True)]
        return masks if any(m is not None for m in masks) else None
    return None
