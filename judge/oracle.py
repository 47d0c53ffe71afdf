"""The correctness oracle. Runs in the judge process; the candidate never runs here.

The candidate runs in a process of its own (judge/candidate/server.py) that gets inputs and hands
back plain output tensors; this module makes the inputs, computes the expected outputs,
compares and decides. Each defence answers a way public harnesses (KernelBench, TritonBench,
GEAK-eval) were fooled: the reference runs in float64; outputs the candidate allocates with
`torch.empty*` are poisoned with NaN (or a sentinel for integers) so stale memory never
passes; inputs are checked unmodified; the candidate runs again after the inputs are
rewritten *in place* (same data pointers, new values), which defeats caches keyed by
`data_ptr`; every output of a case set is compared only after every call has returned, so a
buffer reused across calls shows; outputs must be exact `torch.Tensor`s and must not share
memory with an input; NaN where the reference is finite never passes; a constant output
where the reference varies fails; a call that launched no Triton kernel is `no_kernel`, and
so is one whose output no kernel wrote (judge/candidate/launches.py); PyTorch arithmetic beyond the
allow-list is `torch_fallback`.

Adapted suites (issue 16) add, in the block at the end: output arguments (poisoned before the
call where the reference ignores their contents, exempt from the inputs-unchanged check,
compared through `Task.judged_output`), seeded entry points, cases that cannot be built here
(`CaseUnavailable`, skipped with their reason) and output a Triton reference never writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch

from bench.sequences import same_kind
from bench.slack import padded_copy
from bench.task import Case, CaseUnavailable, OutputArgs, Task
from judge.candidate.allocations import (  # noqa: F401 - re-exported: the judge's callers name them here
    MARK_FLOAT,
    allocations,
    install_poisoned_allocations,
    poison_tensor,
    poisoned_allocations,
)
from judge.candidate.bit_equality import same_bits, tensor_bytes, unchanged
from judge.candidate.kernel_trace import TraceFindings, judged_findings
from judge.candidate.launches import (
    ALLOWED_OPS,
    PARTLY_STORED,
    UNRECORDED,
    UNRECORDED_WHY,
    add_inputs,
    alias_text,
)
from judge.candidate.loading import (  # noqa: F401 - re-exported: the judge's callers name them here
    CandidateLoadError,
    classify_exception,
    format_exception,
    is_device_error,
    load_module,
    mentions_device_error,
    prepare_process,
)
from judge.candidate.reruns import at_attempt
from judge.candidate.value_text import describe_value
from judge.candidate.verdict import Verdict, capped_traceback
from judge.candidate.wire import Opaque

T = TypeVar("T")

# ---------------------------------------------------------------- comparison


def _tensors(args: tuple) -> list[torch.Tensor]:
    return [a for a in args if isinstance(a, torch.Tensor)]


def _clone_args(args: tuple) -> tuple:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def _to_float64(args: tuple) -> tuple:
    def precise(a: Any) -> Any:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            return a.to(torch.float64)
        if isinstance(a, torch.Tensor) and a.is_complex():
            return a.to(torch.complex128)
        return a

    return tuple(precise(a) for a in args)


def expected_output(task: Task, args: tuple, case: Case | None = None, slack: str = "") -> Any:
    """Reference in float64, cast back to the dtype the reference gives on native inputs (a
    suite's Triton reference: its native run alone).
    `slack` (a suite's Triton reference), "zero" or "nan": every copy it gets is followed in
    memory by slack (bench/slack.py `padded_copy`), so what it reads past an input's end is
    known, and what it writes there lands in the slack."""
    written = task.output_args(case).written if case is not None else ()

    def copies(values: tuple) -> tuple:
        copied = values if not slack else tuple(padded_copy(a, nan_slack=slack == "nan") for a in values)
        # Inside the judge's recording of the reference (`expected_and_unwritten`), these copies
        # are the call's inputs: a launch that receives one has not thereby written it.
        add_inputs(tuple(a for i, a in enumerate(copied) if i not in written))
        return copied

    native = call_seeded(task, case, task.reference, copies(_clone_args(args)))
    if task.triton_reference:
        # A suite's Triton kernel is the specification in the dtypes it is given: widened inputs
        # change what it computes, or cannot compile. Guessing which float64 inputs the judge
        # widened cast back the ones a suite's test passes as float64 itself (FlagGems' uniform_,
        # softmax and masked_select: every such reference "returned" float32 on an H200).
        return native
    precise = call_seeded(task, case, task.reference, copies(_to_float64(_clone_args(args))))
    return _cast_like(precise, native)


def _cast_like(precise: Any, native: Any) -> Any:
    if isinstance(native, torch.Tensor):
        return precise.to(native.dtype)
    if isinstance(native, (tuple, list)):
        return same_kind(native, (_cast_like(p, n) for p, n in zip(precise, native, strict=True)))
    return precise


class Mismatch(Exception):
    def __init__(self, message: str, max_abs: float | None = None, max_rel: float | None = None):
        super().__init__(message)
        self.max_abs = max_abs
        self.max_rel = max_rel


def compare(out: Any, expected: Any, task: Task, path: str = "output") -> tuple[float, float]:
    """Raise `Mismatch` unless `out` matches `expected`; return (max abs err, max rel err)."""
    if isinstance(expected, (tuple, list)):
        if not isinstance(out, (tuple, list)) or len(out) != len(expected):
            raise Mismatch(f"{path}: expected a sequence of {len(expected)} tensors, got {type(out).__name__}")
        worst = (0.0, 0.0)
        for i, (o, e) in enumerate(zip(out, expected, strict=True)):
            a, r = compare(o, e, task, f"{path}[{i}]")
            worst = (max(worst[0], a), max(worst[1], r))
        return worst
    if not isinstance(out, torch.Tensor):
        raise Mismatch(f"{path}: expected a tensor, got {type(out).__name__}")
    if tuple(out.shape) != tuple(expected.shape):
        raise Mismatch(f"{path}: shape {tuple(out.shape)} != expected {tuple(expected.shape)}")
    if out.dtype != expected.dtype:
        raise Mismatch(f"{path}: dtype {out.dtype} != expected {expected.dtype}")
    if out.device.type != expected.device.type:
        raise Mismatch(f"{path}: on {out.device}, expected {expected.device}")
    if out.numel() == 0:
        return 0.0, 0.0
    if expected.is_complex():
        # Judged per component: a cast to float64 would silently drop the imaginary part.
        out, expected = torch.view_as_real(out.detach()), torch.view_as_real(expected.detach())
    tol = task.tolerance(str(expected.dtype).removeprefix("torch."))
    o = out.detach().to(torch.float64)
    e = expected.detach().to(torch.float64)
    e_finite = torch.isfinite(e)
    o_finite = torch.isfinite(o)
    bad_nonfinite = e_finite & ~o_finite
    same_special = (~e_finite) & ((o == e) | (torch.isnan(o) & torch.isnan(e)))
    diff = torch.where(e_finite, (o - e).abs(), 0.0)
    rel = torch.where(e_finite, diff / e.abs().clamp_min(1e-12), 0.0)
    bad = e_finite & (diff > tol.atol + tol.rtol * e.abs())
    flags = torch.stack((bad_nonfinite.any(), ((~e_finite) & ~same_special).any(), bad.any(), e_finite.any(),
                         o_finite.any())).to(torch.float64)
    values = torch.stack((diff.max(), rel.max(), _masked(e, e_finite, True), _masked(e, e_finite, False),
                          _masked(o, o_finite, True), _masked(o, o_finite, False),
                          torch.where(e_finite, e.abs(), 0.0).max()))
    (nonfinite_missing, special_missing, any_bad, e_any_finite, o_any_finite, max_abs, max_rel, e_max, e_min,
     o_max, o_min, e_scale) = torch.cat((flags, values)).tolist()  # one device-to-host sync, two casts, not twelve
    s = _Summary(nonfinite_missing, special_missing, max_abs, max_rel, any_bad, e_any_finite, e_max, e_min,
                 o_any_finite, o_max, o_min, e_scale)
    if s.nonfinite_missing:
        raise Mismatch(f"{path}: {int(bad_nonfinite.sum())} NaN/Inf values where the reference is finite",
                       float("inf"), float("inf"))
    if s.special_missing:
        raise Mismatch(f"{path}: non-finite reference values not reproduced")
    max_abs, max_rel = s.max_abs, s.max_rel
    if s.any_bad:
        idx = int(bad.flatten().nonzero()[0])
        raise Mismatch(  # garbage is described against the answer's magnitude
            f"{path}: {int(bad.sum())}/{bad.numel()} elements outside atol={tol.atol} rtol={tol.rtol}; "
            f"first at flat index {idx}: got {describe_value(float(o.flatten()[idx]), s.e_scale)}, "
            f"expected {float(e.flatten()[idx]):.6g}",
            max_abs, max_rel,
        )
    if o.numel() > 1:
        e_span = s.e_max - s.e_min if s.e_any_finite else 0.0
        o_span = s.o_max - s.o_min if s.o_any_finite else 0.0
        if o_span == 0.0 and e_span > tol.atol:
            constant = describe_value(float(o.flatten()[0]), s.e_scale)
            raise Mismatch(f"{path}: output is constant ({constant}) where the reference varies",
                           max_abs, max_rel)
    return max_abs, max_rel


@dataclass(frozen=True)
class _Summary:
    """What `compare` reads of one output, fetched from the device in one copy: each `.any()`,
    `.max()` or boolean-mask index read on its own waits for the GPU, and a hidden case set
    compares hundreds of outputs (measured, about ten such waits per compare added up to a sixth of
    a warm evaluation)."""

    nonfinite_missing: float
    special_missing: float
    max_abs: float
    max_rel: float
    any_bad: float
    e_any_finite: float
    e_max: float
    e_min: float
    o_any_finite: float
    o_max: float
    o_min: float
    e_scale: float  # the largest finite |expected| (0 when none is finite)


def _masked(t: torch.Tensor, mask: torch.Tensor, largest: bool) -> torch.Tensor:
    """The largest (or smallest) of `t`'s elements where `mask` holds, without indexing by the
    mask (which waits for the device); -inf (+inf) when none does, which the caller never reads."""
    masked = torch.where(mask, t, float("-inf") if largest else float("inf"))
    return masked.max() if largest else masked.min()


class _InputCache:
    """Pristine inputs and float64-reference outputs per (task, case, run), kept on the device.

    A persistent worker judges many candidates on the same cases; drawing their inputs and,
    above all, computing the float64 reference cost more than the candidate's own run on a
    GPU. Every candidate gets fresh clones, so none can see another's buffers. Safe across
    threads (a judge worker draws the run's inputs in the background, judge/worker.py
    `_prepare_rest`): a key being made by one thread is waited for by another, not made twice.

    Bounded by bytes, evicting whole tasks, least recently used first. Why whole tasks: a
    worker judges one task's case set at a time, so a task partly kept is redrawn in part at
    every job anyway; and a task's own entries never evict each other, so a set larger than
    the bound keeps its first cases instead of pushing itself out case by case. Before, past
    the bound nothing more was kept, and in a full-suite run the first tasks judged held the
    cache for the run while every later task redrew its inputs and re-ran its float64
    reference at every job."""

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
                self._keep(key, value, tensor_bytes(value), evict)
            return value
        finally:
            with self._lock:
                self._making.pop(key).set()

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

    def _drop(self, task: Any) -> None:
        for key in [k for k in self.entries if k[0] == task]:
            del self.entries[key]
            self.used -= self.sizes.pop(key)
        del self.task_bytes[task]


_CACHE = _InputCache()


def set_input_cache_bytes(max_bytes: int) -> None:
    """Called by the worker; a one-off judge (the naive harness, tests) keeps no cache."""
    _CACHE.max_bytes = max_bytes


def input_cache_full() -> bool:
    """Whether drawing more inputs ahead would be wasted (`_InputCache.full`)."""
    return _CACHE.full


def _skipped_here(task: Task, case: Case, interpreter: bool) -> bool:
    """A case whose dtype the interpreter cannot run for this task (`Task.interpreter_skips`)."""
    return interpreter and case.dtype in task.interpreter_skips


def prepare_inputs(task: Task, case: Case, device: str, interpreter: bool) -> int:
    """Both attempts' inputs of `case` drawn into the cache now, as `judge_cases` would draw
    them (a judge worker starting up: judge/worker.py), where that evicts no other task's; 1,
    or 0 for a case the interpreter skips or the task cannot build here."""
    if _skipped_here(task, case, interpreter):
        return 0
    try:
        for refill in (False, True):
            cached_inputs(task, case, device, refill, evict=False)
    except CaseUnavailable:
        return 0
    return 1


def cached_inputs(task: Task, case: Case, device: str, refill: bool, evict: bool = True) -> tuple:
    """Pristine inputs (cached, never handed out: a runner copies them into its own tensors)."""
    def make() -> tuple:
        c = case
        if refill:
            c = dataclasses.replace(case, name=case.name + "+refill", seed=case.seed + 7919)
        return task.inputs(c, device)

    return _CACHE.get((task.id, case, device, refill), make, evict)


# ---------------------------------------------------------------- running the candidate


@dataclass
class CallReport:
    """What one call of the entry point gave back (judge/candidate/server.py `run_call`)."""

    ok: bool
    kind: str = ""
    message: str = ""
    traceback: str = ""  # the candidate's own frames when it raised (judge/candidate/tracebacks.py)
    launched: int = 0
    fallback: dict[str, int] = field(default_factory=dict)
    unwritten: list[str] = field(default_factory=list)
    aliased: list[str] = field(default_factory=list)
    modified: list[int] = field(default_factory=list)  # inputs the call changed (numbered among tensors)
    inputs_after: tuple = ()  # the arguments after the call: output arguments as written, the rest as given
    output: Any = None  # as it was when the call returned
    trace: TraceFindings | None = None  # on a GPU, what the device's trace showed (judge/candidate/kernel_trace.py)

    @classmethod
    def from_reply(cls, reply: dict[str, Any], inputs_after: tuple = (), output: Any = None) -> CallReport:
        def strings(v: Any) -> list[str]:
            return [str(x)[:300] for x in v] if isinstance(v, list) else []

        raw = reply.get("fallback")
        fallback: dict[Any, Any] = raw if isinstance(raw, dict) else {}
        return cls(ok=reply.get("ok") is True, kind=str(reply.get("kind", "runtime_error")),
                   message=str(reply.get("message", ""))[:4000],
                   traceback=capped_traceback(reply.get("traceback")), launched=int(reply.get("launched") or 0),
                   fallback={str(k)[:80]: int(v) for k, v in fallback.items() if isinstance(v, int)},
                   unwritten=strings(reply.get("unwritten")), aliased=strings(reply.get("aliased")),
                   modified=_ints(reply.get("modified")), inputs_after=inputs_after, output=output,
                   trace=TraceFindings.from_wire(reply["trace"]) if reply.get("trace") is not None else None)


def _ints(v: Any) -> list[int]:
    return [int(x) for x in v if isinstance(x, int) and not isinstance(x, bool)][:64] if isinstance(v, list) else []


class Runner(Protocol):
    """Runs the candidate's entry point: in its own process (judge/remote.py `RemoteRunner`) or
    in this one (`LocalRunner`, the naive harness and unit tests). Calls are submitted and their
    reports taken in the same order; a runner may run a call while the one before it is judged."""

    def submit(self, slot: int, args: tuple, refill: bool, seed: int | None = None,
               written: tuple[int, ...] = ()) -> None:
        """One call on `args` (copied into the runner's own tensors, or with `refill` copied into
        the tensors of the slot's previous call); `seed`: torch's generators seeded right before
        it (Task.seeded_rng); `written`: output arguments (an output may alias them)."""
        ...

    def result(self) -> CallReport:
        """The report of the oldest call submitted and not yet taken."""
        ...

    def discard(self) -> None:
        """Calls submitted and no longer wanted (a verdict came first): dropped once done."""
        ...

    def collect(self) -> tuple[int, list[int]]:
        """(calls held since the last reset, indices of those whose output is no longer what
        the call returned: a buffer reused by a later call), forgetting them."""
        ...

    def reset(self) -> None:
        """Forget held outputs and inputs: a new case set begins."""
        ...


class LocalRunner:
    """The candidate in this very process: for the naive benchmark harness and unit tests only."""

    def __init__(self, entry: Callable[..., Any], device: str, interpreter: bool, allowed_ops: tuple[str, ...] = (),
                 source_path: Path | None = None, guard: bool = True):
        """`source_path`: the candidate's file, whose frames a failure's traceback shows. `guard`:
        writes past a CPU allocation are judged (the task's `judges_overruns`)."""
        from judge.candidate import launches

        launches.set_allowed_ops(allowed_ops)
        self.entry, self.device, self.interpreter = entry, device, interpreter
        self.source_path = source_path
        self.guard = guard
        self.inputs: dict[int, tuple] = {}
        from judge.candidate.server import HeldOutputs

        self.held = HeldOutputs()
        self.reports: list[CallReport] = []  # of calls run and not yet taken (`result`)

    def submit(self, slot: int, args: tuple, refill: bool, seed: int | None = None,
               written: tuple[int, ...] = ()) -> None:
        """Run now: in this process nothing can run beside the judge."""
        self.reports.append(self.call(slot, args, refill, seed, written))

    def result(self) -> CallReport:
        return self.reports.pop(0)

    def discard(self) -> None:
        self.reports.clear()

    def call(self, slot: int, args: tuple, refill: bool, seed: int | None = None,
             written: tuple[int, ...] = ()) -> CallReport:
        """The same steps as the candidate process's `call` (judge/candidate/server.py), so both
        judge alike."""
        from judge.candidate.server import changed_inputs, copy_output, input_copies, run_call
        from judge.candidate.server import refill as refill_in_place

        if refill and slot in self.inputs:
            self.inputs[slot] = refill_in_place(self.inputs[slot], args)
        else:
            self.inputs[slot] = tuple(padded_copy(a) for a in args)  # as a candidate process receives them
        mine = self.inputs[slot]
        before = input_copies(mine, written)
        reply, out = run_call(self.entry, mine, self.device, self.interpreter, seed=seed, written=written,
                              source_path=self.source_path, guard=self.guard)
        if not reply["ok"]:
            return CallReport.from_reply(reply)
        reply["modified"] = changed_inputs(before, mine)
        self.held.add(out, mine, written)
        return CallReport.from_reply(reply, _after_call(args, mine, written), copy_output(out))

    def collect(self) -> tuple[int, list[int]]:
        return self.held.take()

    def reset(self) -> None:
        self.held.clear()
        self.inputs = {}


def _after_call(given: tuple, after: tuple | list, written: tuple[int, ...]) -> tuple:
    """The arguments as a call left them: output arguments from `after` (copied), the rest as
    `given` (an input the call changed fails on the runner's `modified` report instead)."""
    def left(i: int, g: Any) -> Any:
        if i not in written:
            return g
        return after[i].clone() if isinstance(after[i], torch.Tensor) else after[i]

    return tuple(left(i, g) for i, g in enumerate(given))


def _check_output(out: Any, path: str = "output") -> str:
    """Plain tensors only: a subclass could answer the comparison itself."""
    if isinstance(out, Opaque) and out.subclass:
        return f"{path} is a tensor subclass ({out.type_name}); return a plain torch.Tensor"
    if isinstance(out, torch.Tensor) and type(out) is not torch.Tensor:
        return f"{path} is a tensor subclass ({type(out).__name__}); return a plain torch.Tensor"
    if isinstance(out, (tuple, list)):
        for i, o in enumerate(out):
            problem = _check_output(o, f"{path}[{i}]")
            if problem:
                return problem
    return ""


@dataclass
class _Ran:
    """A call judged: what the end-of-set check names when its output changed later, and its
    largest errors. Not its output: a hidden case set's outputs, all kept until the set's end,
    held gigabytes per judge worker on an H200 (embedding's 82 cases)."""

    slot: int
    case: Case
    attempt: str
    index: int
    max_abs: float = 0.0
    max_rel: float = 0.0


FIRST = "first"
REFILL = "after in-place refill"
REPEAT = "repeat on the first inputs"


CASES_PER_HOLD = 8
"""Cases judged under one hold of `judge_cases`'s `hold` (the judge worker's ticket at the GPU's
gate): a timer waiting there waits for at most these, and the call in flight is judged before
the hold is let go."""


@dataclass
class _Sent:
    """A call submitted to the runner and not yet judged."""

    slot: int
    case: Case
    attempt: str
    outputs: OutputArgs
    answer: tuple[Any, Any]  # the expected output and what the reference leaves unwritten (`cached_expected`)
    last: bool  # the case's last attempt: once it passes, the case is done


class _Judging:
    """One case set's judging in `judge_cases`: the call in flight, and what has passed.

    The next call is submitted as soon as the last one's report is read, and the last one is
    judged while the runner runs the next: a candidate process computes while the judge
    compares (measured: the judge's side of a call, nearly as long as the candidate's, was paid
    on top of it). A report that already says the call failed (it raised,
    crashed) sends nothing more."""

    def __init__(self, task: Task, runner: Runner, device: str, races: bool = False) -> None:
        """`races`: every case gets a REPEAT attempt, judged against its first output, which is
        kept until then (and only then: no other output outlives its judging)."""
        self.task, self.runner, self.device, self.races = task, runner, device, races
        self.in_flight: _Sent | None = None
        self.ran: list[_Ran] = []
        self.firsts: dict[int, Any] = {}  # a case's first output as judged, until its REPEAT
        self.done: set[int] = set()  # cases every attempt of which passed
        self.worst_abs = self.worst_rel = 0.0

    def send(self, call: _Sent, args: tuple, seed: int | None) -> Verdict | None:
        """Submit `call` on `args` once the call in flight has reported, and judge that one
        meanwhile: the verdict it earns, else None."""
        previous, report = self._take()
        if previous is not None and not report.ok:
            return self._failed(previous, report)
        self.runner.submit(call.slot, args, refill=call.attempt != FIRST, seed=seed, written=call.outputs.written)
        self.in_flight = call
        return self._judge(previous, report) if previous is not None else None

    def flush(self) -> Verdict | None:
        """The call in flight, judged."""
        previous, report = self._take()
        if previous is None:
            return None
        return self._failed(previous, report) if not report.ok else self._judge(previous, report)

    def decided(self, verdict: Verdict) -> Verdict:
        """`verdict` decides the set: a call sent after the one it judged is dropped once the
        runner has done it, so the candidate is idle for what comes next (judge/candidate/reruns.py's
        re-runs of the failing case, in the same process)."""
        if self.in_flight is not None:
            self.in_flight = None
            self.runner.discard()
        return verdict

    def _take(self) -> tuple[_Sent | None, CallReport]:
        call, self.in_flight = self.in_flight, None
        return (call, self.runner.result()) if call is not None else (None, CallReport(ok=False))

    def _failed(self, c: _Sent, report: CallReport) -> Verdict:
        return Verdict(report.kind, report.message, c.case.name, cases_run=len(self.done),
                       kernel_launched=report.launched > 0, traceback=report.traceback)

    def _judge(self, c: _Sent, report: CallReport) -> Verdict | None:
        """A passing call's report judged: the verdict when it fails, else None."""
        r = _Ran(c.slot, c.case, c.attempt, len(self.ran))
        self.ran.append(r)
        with judge_side(self.runner):
            verdict, judged = _judge_call(self.task, r, report, c.outputs, self.device, len(self.done), c.answer)
        del report  # the output goes with it, whatever follows
        first = self.firsts.pop(c.slot, None) if c.attempt == REPEAT else None
        if verdict is None and c.attempt == REPEAT and _race(first, judged, self.task, self.device):
            verdict = Verdict("wrong_result", "two runs on the same inputs gave different results (a race?)",
                              c.case.name, cases_run=len(self.done), kernel_launched=True)
        if verdict is not None:
            return verdict
        if c.attempt == FIRST and self.races:
            self.firsts[c.slot] = judged
        self.worst_abs, self.worst_rel = max(self.worst_abs, r.max_abs), max(self.worst_rel, r.max_rel)
        if c.last:
            self.done.add(c.slot)
        return None


def judge_side(runner: Runner) -> AbstractContextManager[Any]:
    """Around the judge's own work in `judge_cases` (inputs, the reference, comparisons): a
    runner over a candidate process with a time limit stops its clock there
    (judge/remote.py); a runner without one (`LocalRunner`) has nothing to stop."""
    stop = getattr(runner, "judge_side", None)
    return stop() if callable(stop) else contextlib.nullcontext()


def judge_cases(task: Task, runner: Runner, cases: tuple[Case, ...], device: str, interpreter: bool,
                repeat_for_races: bool = False,
                hold: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext) -> Verdict:
    """Run the candidate on every case and judge each call in order; the first failure decides
    the verdict.

    Per case the candidate runs twice: on fresh inputs, then after the inputs are rewritten in
    place (same memory, new values): a result cached by data pointer is stale on the second
    run. The runner keeps every output it returned; once every call has returned, it says
    which are no longer what they were when their calls returned, so an output buffer reused
    by a later call shows (`Runner.collect`). `repeat_for_races` (a final submission on a GPU): a third
    call on the first inputs must agree with the first call (where the task's reference is
    deterministic), else a race. A case the task cannot build here (`CaseUnavailable`) is
    skipped with its reason.

    A call is sent as soon as the one before it has reported, and that one is judged while the
    candidate runs the next (`_Judging`); which calls are sent before a failure is judged
    depends only on the case set, never on timing, so the candidate's history (what
    judge/candidate/reruns.py's re-runs inherit) is the same from run to run. The candidate's clock stops
    for the judge's own work as before (judge/remote.py `judge_side`), also while the next call
    runs meanwhile: at most the job's limit once more in all, as before. `hold()`: entered
    around each run of `CASES_PER_HOLD` cases (their inputs, calls and comparisons) and around
    the end-of-set check: the judge worker's GPU ticket (judge/gate.py), so a timer waiting at
    the gate waits for those cases,
    not the whole set.
    """
    runner.reset()
    races = repeat_for_races and task.deterministic
    judging = _Judging(task, runner, device, races)
    skipped = 0
    reasons: list[str] = []
    numbered = list(enumerate(cases))
    for first in range(0, len(numbered), CASES_PER_HOLD):
        with hold():
            for slot, c in numbered[first:first + CASES_PER_HOLD]:
                if _skipped_here(task, c, interpreter):
                    skipped += 1
                    reason = f"{c.dtype}: {task.interpreter_skips[c.dtype]}"
                    if reason not in reasons:
                        reasons.append(reason)
                    continue
                attempts = [FIRST, REFILL, REPEAT] if races else [FIRST, REFILL]
                try:
                    # The expected outputs first: a case the reference gives no answer on is
                    # skipped before the candidate runs it (`expected_and_unwritten`).
                    with judge_side(runner):
                        outputs = task.output_args(c)
                        # One copy per set of inputs, poisoned where the reference ignores the
                        # contents: what the reference is run on (on copies of its own) and what
                        # the runner copies.
                        given = {a: poisoned_outputs(cached_inputs(task, c, device, refill=a == REFILL), outputs)
                                 for a in (FIRST, REFILL)}
                        answers = {a: cached_expected(task, c, device, a, args) for a, args in given.items()}
                except CaseUnavailable as exc:
                    skipped += 1
                    reasons.append(str(exc))
                    continue
                except Exception:
                    # The judge's own side failed on this case: the call in flight is judged
                    # first, as it would have been one call at a time.
                    verdict = judging.flush()
                    if verdict is not None:
                        return judging.decided(verdict)
                    raise
                given[REPEAT], answers[REPEAT] = given[FIRST], answers[FIRST]  # the first inputs again
                seed = c.seed if task.seeded_rng else None
                for k, attempt in enumerate(attempts):
                    call = _Sent(slot, c, attempt, outputs, answers[attempt], last=k == len(attempts) - 1)
                    verdict = judging.send(call, given[attempt], seed)
                    if verdict is not None:
                        return judging.decided(verdict)
            verdict = judging.flush()
            if verdict is not None:
                return judging.decided(verdict)
    ran, done = judging.ran, judging.done
    if ran:
        with hold():
            calls, changed = runner.collect()
        if calls != len(ran) or any(not 0 <= i < len(ran) for i in changed):
            return Verdict("runtime_error", f"the candidate process held {calls} outputs for {len(ran)} calls")
        if changed:
            r = ran[min(changed)]
            return Verdict("wrong_result", f"the output of this case changed after later calls ({r.attempt} run): "
                           "a buffer reused across calls", r.case.name, cases_run=len(done), kernel_launched=True)
    if not done:
        # Never a pass by default: a candidate nobody could judge here has not shown it is right.
        why = "; ".join(reasons) if reasons else "the case set is empty"
        return Verdict("runtime_error", f"no case could be judged here: {why}", cases_run=0, cases_skipped=skipped,
                       skip_reasons=tuple(reasons))
    return Verdict("correct", "", None, judging.worst_abs, judging.worst_rel, cases_run=len(done),
                   cases_skipped=skipped, skip_reasons=tuple(reasons), kernel_launched=True)


def _judge_call(task: Task, r: _Ran, report: CallReport, outputs: OutputArgs, device: str, cases_run: int,
                answer: tuple[Any, Any]) -> tuple[Verdict | None, Any]:
    """The verdict `report` (of the call `r`) earns, or None when it passes (its largest errors
    kept on `r`), with the output as judged (`Task.judged_output`: the return value, plus
    written output arguments for tasks that have them); `answer`: the expected output and the
    masks of what the reference leaves unwritten (`cached_expected`)."""
    c, attempt = r.case, r.attempt
    launched = report.launched > 0

    def fail(kind: str, message: str, a: float | None = None, rel: float | None = None) -> tuple[Verdict, Any]:
        """The verdict of this call's failure, naming its attempt (judge/candidate/reruns.py
        compares re-runs by it)."""
        return Verdict(kind, at_attempt(message, attempt), c.name, a, rel, cases_run=cases_run,
                       kernel_launched=launched), None

    if report.modified:
        return fail("wrong_result", f"input {report.modified[0]} was modified in place")
    problem = _check_output(report.output)
    if problem:
        return fail("wrong_result", problem)
    aliased = [a for a in report.aliased if a not in allowed_aliases(outputs)]
    if aliased and not task.in_place:
        return fail("wrong_result", f"{aliased[0]}; the task asks for a new tensor")
    out = task.judged_output(_to_device(report.output, device), _to_device(report.inputs_after, device), c)
    expected, never_written = answer
    try:
        a_err, r_err = compare(accept_unwritten(out, expected, never_written), expected, task)
    except Mismatch as m:
        return fail("wrong_result", str(m), m.max_abs, m.max_rel)
    if not launched and not reference_launches_nothing(task, c):
        return fail("no_kernel", "the entry point returned without launching a Triton kernel", a_err, r_err)
    fallback = {name: n for name, n in report.fallback.items() if name not in reference_ops(task)}
    if fallback:
        ops = ", ".join(f"{name}" + (f" x{n}" if n > 1 else "") for name, n in sorted(fallback.items()))
        why = f" ({UNRECORDED_WHY})" if UNRECORDED in fallback else ""
        return fail("torch_fallback", f"the entry point computed with PyTorch outside Triton kernels: {ops}{why}",
                    a_err, r_err)
    if report.trace is not None:
        allowed = ALLOWED_OPS | set(task.allowed_torch_ops) | reference_ops(task)
        traced_why = judged_findings(report.trace, frozenset(allowed))
        if traced_why:
            return fail("torch_fallback", traced_why, a_err, r_err)
    unwritten = [] if reference_finishes_in_torch(task) else report.unwritten
    # An output where the task's reference returns its input (layer_norm_fwd's residual when
    # there is none) is that input, not a kernel's product, when the candidate's is too.
    passed_through = {path for path, index in outputs.aliases if alias_text(path, index) in report.aliased}
    unwritten = [u for u in unwritten if u.split(" ", 1)[0] not in passed_through]
    if never_written is not None:
        # The reference itself leaves part of its output unwritten: a kernel may too.
        unwritten = [u for u in unwritten if not u.endswith(PARTLY_STORED)]
    if unwritten:
        return fail("no_kernel", f"{', '.join(unwritten)}: not the work of a launched Triton kernel "
                    "(a kernel ran, but the returned tensor was computed elsewhere)", a_err, r_err)
    r.max_abs, r.max_rel = a_err, r_err
    return None, accept_unwritten(out, expected, never_written)


def cached_expected(task: Task, case: Case, device: str, attempt: str, pristine: tuple) -> tuple[Any, Any]:
    """`expected_and_unwritten` of `case`'s `attempt` ("first", "after in-place refill", ...) on
    its `pristine` inputs, computed once per judge worker (`_CACHE`): for a suite's Triton
    reference that is three runs of it."""
    return _CACHE.get((task.id, case, device, attempt, "expected"),
                      functools.partial(expected_and_unwritten, task, pristine, case))


def _race(first: Any, again: Any, task: Task, device: str) -> bool:
    """Two runs on the same inputs that differ beyond the task's tolerance (bit-level noise from
    atomics reordering a float sum is not a race; a missing barrier or an unmasked read is)."""
    if same_bits(first, again):
        return False
    try:
        compare(_to_device(again, device), _to_device(first, device), task)
    except Mismatch:
        return True
    return False


def _to_device(out: Any, device: str) -> Any:
    if isinstance(out, torch.Tensor):
        return out.to(device) if out.device.type != torch.device(device).type else out
    if isinstance(out, (tuple, list)):
        return same_kind(out, (_to_device(o, device) for o in out))
    return out


# ---------------------------------------------------------------- output arguments, seeded entry points, skipped cases
# What adapted suites need of the judge (issue 16), kept in one place: an entry point that
# writes its result into arguments (`Task.output_args`: poisoned before the call when the
# reference ignores their contents, exempt from the inputs-unchanged check and from the
# aliasing check, compared through `Task.judged_output`), one that draws random numbers
# (`Task.seeded_rng`: candidate and reference get the case's seed right before every call, the
# candidate in its own process), and a case that cannot be built here (`CaseUnavailable`:
# skipped with its reason). Kernels given a `triton.reinterpret` view of a tensor count as
# receiving the tensor (judge/candidate/launches.py).


def call_seeded(task: Task, case: Case | None, fn: Callable[..., Any], args: tuple) -> Any:
    if task.seeded_rng and case is not None:
        torch.manual_seed(case.seed)
    return fn(*args)


def poisoned_outputs(args: tuple, outputs: OutputArgs) -> tuple:
    """`args` with the output arguments whose initial contents the reference ignores replaced
    by poisoned copies (NaN, or an integer sentinel): a candidate that leaves part of such an
    output unwritten cannot pass on stale values. The cached pristine inputs stay untouched."""
    if not outputs.poisoned:
        return args
    return tuple(poison_tensor(a.clone()) if i in outputs.poisoned and isinstance(a, torch.Tensor) else a
                 for i, a in enumerate(args))


def allowed_aliases(outputs: OutputArgs) -> set[str]:
    """The aliasing reports a candidate may earn: outputs where the task's own reference returns
    (a view of) an input (`OutputArgs.aliases`, learnt from the reference)."""
    return {alias_text(path, index) for path, index in outputs.aliases}


def modified_inputs(before: tuple | list, after: tuple | list, outputs: OutputArgs) -> list[int]:
    """Positions (among the tensor arguments, as the message numbers them) of inputs the call
    changed, output arguments excepted."""
    changed = []
    k = 0
    for i, (b, a) in enumerate(zip(before, after, strict=True)):
        if not isinstance(b, torch.Tensor):
            continue
        if i not in outputs.written and not (isinstance(a, torch.Tensor) and unchanged(b, a)):
            changed.append(k)
        k += 1
    return changed


# ---------------------------------------------------------------- output a reference never writes
# Some suite references leave part of their output unwritten (an attention kernel that stores
# 96 of 128 head columns into `torch.empty_like(q)`): what is there is whatever the allocator
# returned, zeros in a fresh process, so the suite's own check passes by luck. Those elements
# are nobody's answer: the reference runs once with its allocations poisoned and once with a
# finite marker, elements that differ are unwritten, and a candidate is not judged on them
# (for tasks whose reference is Triton code; a PyTorch reference writes everything). The same
# run, recorded as a candidate's call is (judge/candidate/launches.py), tells which PyTorch operations
# the suite's own wrapper runs around its kernels (a candidate may run them too: they are the
# suite's interface) and whether it finishes its output in PyTorch (then the check that a
# kernel wrote the output is not applied to that task).


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
    from judge.candidate import launches

    prepare_process()  # the judge runs the suite's Triton reference: record it as a candidate is recorded
    with allocations("poison"):
        poisoned = expected_output(task, args, case, slack="zero")
    with allocations("marker"), launches.recording(args) as rec:
        marked = expected_output(task, args, case, slack="zero")
    habits = _HABITS.setdefault(task.id, _ReferenceHabits())
    habits.ops |= set(rec.fallback)
    habits.finishes_in_torch |= bool(launches.unwritten_outputs(marked, rec, interpreter=False))
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


def accept_unwritten(out: Any, expected: Any, unwritten: Any) -> Any:
    """`out` with the elements the reference never writes replaced by the expected ones, so the
    comparison ignores them."""
    if unwritten is None:
        return out
    if isinstance(unwritten, torch.Tensor):
        if isinstance(out, torch.Tensor) and out.shape == unwritten.shape and out.dtype == expected.dtype \
                and out.device == expected.device and not out.is_complex():
            return torch.where(unwritten, expected, out)
        return out
    if isinstance(out, (tuple, list)) and isinstance(expected, (tuple, list)) and len(out) == len(unwritten):
        return same_kind(out, (accept_unwritten(o, e, m) for o, e, m in zip(out, expected, unwritten, strict=True)))
    return out
