"""The judge worker's cases: their inputs and the reference's answers on them, drawn once and
kept on the device (`_InputCache`), and the copies a call is given. Runs in the judge process.

Every call gets the case's pristine inputs, copied by the runner into tensors of its own; output
arguments whose initial contents the reference ignores are poisoned first (`poisoned_outputs`).
The expected outputs (judge/reference_habits.py `expected_and_unwritten`) are cached beside the
inputs, per attempt (judge/oracle.py `FIRST`, `REFILL`).

For a suite's Triton reference, which runs in this process and may write past its own tensors,
everything kept here lies in storage with zeroed slack before and after it: the answers are
allocated that way (`expected_and_unwritten`), the inputs are kept as padded copies
(`cached_inputs`), so such a write lands in slack, never in a kept value.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable
from typing import Any

import torch

from bench.slack import padded_copy
from bench.task import Case, CaseUnavailable, OutputArgs, Task
from judge.candidate.allocations import poison_tensor
from judge.candidate.bit_equality import flat_tensors
from judge.reference_habits import expected_and_unwritten


def storage_bytes(value: Any) -> int:
    """Device bytes `value`'s tensors keep alive: each distinct storage's whole size, not the
    elements' (`tensor_bytes`). Why: a strided case's input is a view of a buffer two or three
    times its elements (bench/task.py `strided_view`), so bounds kept in elements let the input
    cache and a hold's plan hold up to three times their bytes on such cases. Part of why, on an
    H100 (2026-12-06, scripts/judge_memory_probe.py --history), embedding's hidden job peaked at
    17 GiB allocated under a 4 GiB cache and a 1 GiB plan; not all of it (benchmarks/results/
    README.md, session 30). Storages without an address (the meta device) count each time."""
    sizes: dict[Any, int] = {}
    for i, t in enumerate(flat_tensors(value)):
        storage = t.untyped_storage()
        where = (str(t.device), storage.data_ptr()) if storage.data_ptr() else i
        sizes[where] = storage.nbytes()
    return sum(sizes.values())


class _InputCache:
    """Pristine inputs and float64-reference outputs per (task, case, run), kept on the device.

    A persistent worker judges many candidates on the same cases; drawing their inputs and,
    above all, computing the float64 reference cost more than the candidate's own run on a
    GPU. Every candidate gets fresh clones, so none can see another's buffers. Safe across
    threads (a judge worker draws the run's inputs in the background, judge/worker.py
    `_prepare_rest`): a key being made by one thread is waited for by another, not made twice.

    Bounded by the bytes its tensors' storages hold (`storage_bytes`), evicting whole tasks,
    least recently used first. Why whole tasks: a worker judges one task's case set at a time,
    so a task partly kept is redrawn in part at every job anyway; and a task's own entries never
    evict each other, so a set larger than the bound keeps its first cases instead of pushing
    itself out case by case. Before, past the bound nothing more was kept, and in a full-suite
    run the first tasks judged held the cache for the run while every later task redrew its
    inputs and re-ran its float64 reference at every job."""

    def __init__(self, max_bytes: int = 0) -> None:
        self.max_bytes = max_bytes
        self.used = 0
        self.entries: dict[tuple[Any, ...], Any] = {}
        self.sizes: dict[tuple[Any, ...], int] = {}
        self.task_bytes: dict[Any, int] = {}  # by task, least recently used first
        self._lock = threading.Lock()
        self._making: dict[tuple[Any, ...], threading.Event] = {}

    @property
    def full(self) -> bool:
        """Whether a further entry would likely not be kept without evicting (95% of the bound used)."""
        return self.used >= 0.95 * self.max_bytes

    def get(self, key: tuple[Any, ...], make: Callable[[], Any], evict: bool = True) -> Any:
        """The value of `key`, made by `make` when not kept. `evict=False` (inputs drawn ahead
        of their first job): kept only where that evicts nothing."""
        with self._lock:
            if key in self.entries:
                self._touch(key[0])
                return self.entries[key]
            making = self._making.get(key)
            if making is None:
                self._making[key] = threading.Event()
        if making is not None:  # another thread is making it: its value, or ours where it was not kept
            making.wait()
            with self._lock:
                if key in self.entries:
                    self._touch(key[0])
                    return self.entries[key]
            return make()
        try:
            value = make()
            with self._lock:
                self._keep(key, value, storage_bytes(value), evict)
            return value
        finally:
            with self._lock:
                self._making.pop(key).set()

    def peek(self, key: tuple[Any, ...]) -> Any:
        """The value of `key` where it is kept, else None; nothing is made."""
        with self._lock:
            return self.entries.get(key)

    def _touch(self, task: Any) -> None:
        if task in self.task_bytes:
            self.task_bytes[task] = self.task_bytes.pop(task)  # to the most recent end

    def _keep(self, key: tuple[Any, ...], value: Any, size: int, evict: bool) -> None:
        task = key[0]
        own = self.task_bytes.get(task, 0)
        if own + size > self.max_bytes or (not evict and self.used + size > self.max_bytes):
            return  # it would have to evict its own task's entries: kept are its first cases
        while self.used + size > self.max_bytes:
            oldest = next(t for t in self.task_bytes if t != task)
            self._drop(oldest)
        self.entries[key] = value
        self.sizes[key] = size
        self.used += size
        self.task_bytes[task] = own + size
        self._touch(task)

    def forget(self, task: Any) -> None:
        """Drop whatever is kept of `task` (`forget_task`)."""
        with self._lock:
            if task in self.task_bytes:
                self._drop(task)

    def _drop(self, task: Any) -> None:
        for key in [k for k in self.entries if k[0] == task]:
            del self.entries[key]
            self.used -= self.sizes.pop(key)
        del self.task_bytes[task]


_CACHE = _InputCache()


def set_input_cache_bytes(max_bytes: int) -> None:
    """Called by the worker; a one-off judge (the naive harness, tests) keeps no cache."""
    _CACHE.max_bytes = max_bytes


def forget_task(task_id: str) -> None:
    """Whatever the cache keeps of `task_id`, dropped (its blocks go back at the job's end): for
    a worker of a run that judges each task once (judge/worker.py `KEEP_TASK_INPUTS_ENV`)."""
    _CACHE.forget(task_id)


def input_cache_full() -> bool:
    """Whether drawing more inputs ahead would be wasted (`_InputCache.full`)."""
    return _CACHE.full


def skipped_here(task: Task, case: Case, interpreter: bool) -> bool:
    """A case whose dtype the interpreter cannot run for this task (`Task.interpreter_skips`)."""
    return interpreter and case.dtype in task.interpreter_skips


def prepare_inputs(task: Task, case: Case, device: str, interpreter: bool) -> int:
    """Both attempts' inputs of `case` drawn into the cache now, as `judge_cases` would draw
    them (a judge worker starting up: judge/worker.py), where that evicts no other task's; 1,
    or 0 for a case the interpreter skips or the task cannot build here."""
    if skipped_here(task, case, interpreter):
        return 0
    try:
        for refill in (False, True):
            cached_inputs(task, case, device, refill, evict=False)
    except CaseUnavailable:
        return 0
    return 1


def cached_inputs(task: Task, case: Case, device: str, refill: bool, evict: bool = True) -> tuple:
    """Pristine inputs (cached, never handed out: a runner copies them into its own tensors); for
    a task whose reference is Triton code, padded copies (the module's docstring says why)."""
    def make() -> tuple:
        c = case
        if refill:
            c = dataclasses.replace(case, name=case.name + "+refill", seed=case.seed + 7919)
        drawn = task.inputs(c, device)
        return tuple(padded_copy(a) for a in drawn) if task.triton_reference else drawn

    return _CACHE.get((task.id, case, device, refill), make, evict)


def drawn_inputs(task: Task, case: Case, device: str) -> tuple | None:
    """`cached_inputs` of the case's first attempt where they are already drawn, else None: a
    look that does no GPU work (judge/precompile.py's descriptions are made without a ticket)."""
    return _CACHE.peek((task.id, case, device, False))


def cached_expected(task: Task, case: Case, device: str, attempt: str, pristine: tuple) -> tuple[Any, Any]:
    """`expected_and_unwritten` of `case`'s `attempt` ("first", "after in-place refill", ...) on
    its `pristine` inputs, computed once per judge worker (`_CACHE`): for a suite's Triton
    reference that is three runs of it."""
    return _CACHE.get((task.id, case, device, attempt, "expected"),
                      functools.partial(expected_and_unwritten, task, pristine, case))


def poisoned_outputs(args: tuple, outputs: OutputArgs) -> tuple:
    """`args` with the output arguments whose initial contents the reference ignores replaced
    by poisoned copies (NaN, or an integer sentinel): a candidate that leaves part of such an
    output unwritten cannot pass on stale values. The cached pristine inputs stay untouched."""
    if not outputs.poisoned:
        return args
    return tuple(poison_tensor(a.clone()) if i in outputs.poisoned and isinstance(a, torch.Tensor) else a
                 for i, a in enumerate(args))
