"""The candidate process: imports one candidate, runs its entry point on the inputs the judge
sends, and hands back plain output tensors with what it saw while the entry point ran.

It holds no reference, expected output, tolerance, verdict logic, expert baseline or secret,
and the task registry is not importable from it (judge/template.py removes the project from
the import path before forking it). Every call's output goes back at once and is also kept; at
the end of the case set the judge asks which of them changed since their calls returned, so a
buffer the candidate reused across calls shows. Whether a call changed its inputs is found here
too, against copies taken before the call: only output arguments travel back. (Both are
self-reported checks of honest mistakes, like the launch records: docs/ARCHITECTURE.md.)
One process serves one candidate: forked fresh from the template, contained
(judge/containment.py), ended after the job, so nothing it does reaches the next candidate.

Messages (judge/candidate/wire.py frames): `load`, `compile` and `compile_tests`
(judge/candidate/precompile.py),
`call`, `collect`, `reset`, `disturb` (a failing case judged again, judge/candidate/reruns.py),
`tests`, `time` (GPU timing rounds, judge/timing.py) and `exit`. Output arguments (the wrapper writing into tensors the
caller provides, `written` in a call) come poisoned among the inputs where the reference
ignores their contents, and are the only arguments that go back after the call.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bench.sequences import same_kind
from bench.slack import raw_bytes
from judge.candidate import call_record, launches, structure, wire
from judge.candidate.allocations import overruns, poisoned_allocations
from judge.candidate.bit_equality import (
    BitCopy,
    Digest,
    bit_copy,
    bits_digest,
    still_same,
    tensor_bytes,
    unchanged,
)
from judge.candidate.kernel_trace import CallTracer
from judge.candidate.kernel_trace import enabled as kernel_trace_enabled
from judge.candidate.loading import (
    CandidateLoadError,
    classify_exception,
    format_exception,
    load_module,
    use_triton_cache,
)
from judge.candidate.tracebacks import candidate_traceback


class CandidateServer:
    def __init__(self, sock: socket.socket, device: str, interpreter: bool, plan: Any) -> None:
        """`plan`: its containment (judge/containment.py `Plan`), set by the template when it
        forked this process; nothing the judge or anyone else sends changes it."""
        self.link = wire.Link(sock, pin=device != "cpu")
        self.device = device
        self.interpreter = interpreter
        self.plan = plan
        self.contained = ""
        self.entry: Any = None
        self.module: Any = None  # the candidate's module: where the judge's objects find their classes
        self.entry_name = ""
        self.guard = True  # writes past a CPU allocation judged (the task's `judges_overruns`)
        self.inputs: dict[int, tuple] = {}
        self.held = HeldOutputs()
        self.kept: list[Any] = []  # spacers of judge/candidate/reruns.py, alive for the process's life
        self.timers: dict[int, Any] = {}  # per perf case being timed (judge/timing_job.py prepares several)
        self.test_session: Any = None  # a method's tests, defined once (`_op_tests`)
        self.tracer: CallTracer | None = None  # on a GPU: the device's trace of each judged call
        self.path: Path | None = None  # the candidate's file, whose frames its tracebacks show
        self.spent: dict[str, float] = {}  # seconds per step of this process's work, sent with `collect`
        self.call_steps: dict[str, list[float]] = {}  # each call's seconds per `call:` step (`steady_and_slow`)
        self.profiler = _profiler()
        self.context = device != "cpu"  # on a GPU, whether this process made its device context (`start`)

    def _spend(self, step: str, since: float) -> float:
        """Seconds per step, told to the judge for scripts/judge_profile.py only: the judge
        never decides anything on what a candidate process says about itself."""
        now = time.perf_counter()
        self.spent[step] = self.spent.get(step, 0.0) + now - since
        if step.startswith("call:"):
            self.call_steps.setdefault(step, []).append(now - since)
        return now

    def start(self) -> bool:
        """Before the first request. On a GPU the context is made now, while the judge is still
        busy with the previous candidate, but only once the judge says go
        (judge/remote.py `CandidateProcess.start_device`): it holds the GPU's gate for judging
        meanwhile, so a context being made never overlaps a timing on that GPU."""
        if self.device != "cpu":
            go, _ = self.link.recv()
            if go.get("context") is False:  # a compile-ahead process (judge/compile_ahead.py): no context, no GPU work
                self.context, self.link.pin = False, False
                self.link.send({"ready": True, "pid": os.getpid(), "trace_problem": ""})
                return True
            try:
                torch.cuda.init()
                torch.empty(1, device=self.device)
                if kernel_trace_enabled():
                    self.tracer = CallTracer()
                    self.tracer.prepare()  # CUPTI warmed before any candidate code runs
            except Exception as exc:  # noqa: BLE001 - said to the judge, which stops with this line
                where = f" inside its sandbox ({self.plan.sandbox[:80]})" if getattr(self.plan, "sandbox", "") else ""
                self.link.send({"ready": False, "error": f"the GPU could not be used{where}: {format_exception(exc)}"})
                return False
        self.link.send({"ready": True, "pid": os.getpid(), "trace_problem": self.tracer.problem if self.tracer else ""})
        return True

    def serve(self) -> None:
        while True:
            try:
                header, tensors = self.link.recv(self.device, slack=True)
            except EOFError:
                return
            started = time.perf_counter()
            op = header.get("op")
            self.spent["copy_in"] = self.link.copy_in_seconds
            if op == "exit":
                return
            handler = getattr(self, f"_op_{op}", None)
            if handler is None:
                self.link.send({"ok": False, "kind": "runtime_error", "message": f"unknown op {op!r}"})
                continue
            try:
                if self.profiler is not None:
                    self.profiler.enable()
                try:
                    reply, out = handler(header, tensors)
                finally:
                    if self.profiler is not None:
                        self.profiler.disable()
                if op == "collect" or (op == "tests" and self.profiler is not None):
                    spent = {**self.spent, **steady_and_slow(self.call_steps)}
                    reply = {**reply, "spent": {k: round(v, 4) for k, v in spent.items()},
                             **({"profile": _top_lines(self.profiler)} if self.profiler is not None else {})}
            except Exception as exc:  # noqa: BLE001 - answered, not died of
                # A reply that cannot be built (an output this process cannot encode, memory for
                # the reply refused, a timing step the candidate's code breaks) is the
                # candidate's runtime error, with its message: a silent exit would say nothing.
                reply, out = {"ok": False, "kind": "runtime_error",
                              "message": f"the candidate process could not answer: {format_exception(exc)}"}, []
            try:
                handled = self._spend(f"{op}:handle", started)
                self.link.send({**reply, "seq": header.get("seq")}, out)
                self._spend(f"{op}:send", handled)
            except Exception as exc:  # noqa: BLE001 - the reply itself could not be sent: say why, in a small one
                self.link.send({"ok": False, "kind": "runtime_error", "seq": header.get("seq"),
                                      "message": f"the candidate process could not send its reply: "
                                                 f"{format_exception(exc)}"})

    def _op_load(self, header: dict[str, Any], _: list[torch.Tensor]) -> tuple[dict[str, Any], list]:
        from judge import containment

        plan = self.plan
        if plan.writable:
            use_triton_cache(plan.writable[0])  # this source's own cache (judge/source_caches.py)
        self.contained = containment.apply(plan)
        self.entry_name = str(header["entry_point"])
        self.guard = header.get("judges_overruns", True) is not False
        launches.set_allowed_ops(tuple(header.get("allowed_ops", ())))
        path = self.path = Path(plan.folder) / "candidate.py"
        path.write_text(str(header["source"]))
        try:
            module = load_module(path, f"kmc_candidate_{os.getpid()}")
        except CandidateLoadError as exc:
            return {"ok": False, "kind": exc.kind, "message": str(exc), "traceback": exc.traceback,
                    "contained": self.contained}, []
        self.module = module
        self.entry = getattr(module, self.entry_name, None)
        if not callable(self.entry):
            from judge.candidate.verdict import missing_entry_point

            missing = missing_entry_point(self.entry_name, module)
            return {"ok": False, "kind": missing.kind, "message": missing.message, "contained": self.contained}, []
        return {"ok": True, "contained": self.contained}, []

    def _op_calls(self, header: dict[str, Any], tensors: list[torch.Tensor]) -> tuple[dict[str, Any], list]:
        """A batch of calls (judge/remote.py `RemoteRunner`): every call's inputs came in this one
        message and are copied out of the judge's arena before any candidate code runs. Each
        call's reply but the last goes inline (`wire.Link.send`), out of this process's reach,
        before the next call runs; the batch stops at a failed call, and at an output too large
        to send inline, which goes through the arena as the request's last reply (the judge
        sends the calls not run again). Each reply carries its call's index in the batch."""
        started = time.perf_counter()
        calls = header["calls"]
        values = structure.decode_values(header["args"], tensors, structure.Rebuilder(self.module))
        if not isinstance(calls, list) or not isinstance(values, list) or len(values) != len(calls) or not calls:
            raise wire.WireError("a batch whose calls and arguments do not match")
        del tensors
        self._spend("call:decode", started)
        for index, (call, fresh) in enumerate(zip(calls, values, strict=True)):
            reply, out = self._call(call, fresh)
            reply["index"] = index
            if index == len(calls) - 1 or not reply["ok"] or sum(raw_bytes(t).numel() for t in out) > wire.INLINE_LIMIT:
                return {**reply, "more": False}, out
            started = time.perf_counter()
            self.link.send({**reply, "seq": header.get("seq"), "more": True}, out, inline=True)
            self._spend("call:send", started)
        raise AssertionError("unreachable: the last call returns")

    def _call(self, call: dict[str, Any], fresh: Any) -> tuple[dict[str, Any], list]:
        """One call of a batch: its inputs (copied into the slot's tensors of its last call
        with `refill`), run and recorded, and its output and output arguments encoded."""
        slot = int(call["slot"])
        started = time.perf_counter()
        if call.get("refill") and slot in self.inputs:
            args = refill(self.inputs[slot], fresh)
        else:
            args = tuple(fresh)
        self.inputs[slot] = args
        seed = call.get("seed")
        written = tuple(int(i) for i in call.get("written") or ())
        before = input_copies(args, written)
        started = self._spend("call:refill", started)
        report, out = run_call(self.entry, args, self.device, self.interpreter,
                               seed=int(seed) if seed is not None else None, written=written, source_path=self.path,
                               guard=self.guard, tracer=self.tracer)
        started = self._spend("call:run_and_record", started)
        if not report["ok"]:
            return report, []
        report["modified"] = changed_inputs(before, args)
        self.held.add(out, args, written)
        spec, tensors = structure.encode_values([out, [args[i] for i in written]], objects=False)
        self._spend("call:checks", started)
        return {**report, "values": spec}, tensors

    def _op_compile(self, header: dict[str, Any], _: list[torch.Tensor]) -> tuple[dict[str, Any], list]:
        """The compile pass (judge/candidate/precompile.py): the cases' kernels compiled on host
        placeholders before the judge takes a GPU ticket; nothing recorded, nothing judged."""
        from judge.candidate import precompile

        cases = header.get("cases")
        return self._compile_pass(lambda: precompile.compile_cases(self.entry, cases, self.module, load=self.context)
                                  if isinstance(cases, list) else precompile.PassReport(stopped="no cases"))

    def _op_compile_tests(self, header: dict[str, Any], _: list[torch.Tensor]) -> tuple[dict[str, Any], list]:
        """The compile pass for a method's own tests (`precompile.compile_for_tests`)."""
        from judge.candidate import precompile

        tests = str(header["tests"])
        return self._compile_pass(lambda: precompile.compile_for_tests(self.entry, self.entry_name, tests))

    def _compile_pass(self, run: Any) -> tuple[dict[str, Any], list]:
        """`run()`'s pass where the pass is on, then the candidate imported afresh."""
        from judge.candidate import precompile

        if not precompile.enabled(self.interpreter):
            return precompile.reply(precompile.PassReport(stopped="off")), []
        report = run()
        problem = self._import_again(report)
        return precompile.reply(report, problem), []

    def _import_again(self, report: Any) -> str:
        """The candidate imported afresh after a compile pass, under the same name: whatever the
        pass left in its module (a buffer cached on the host placeholders' device, a counter of
        calls) is gone, so the judged calls meet the module as a pass-free process would. Its
        kernels are not compiled again: the pass left them in this process's Triton cache on
        disk, and those it compiled are handed to the new module's kernels
        (`precompile.carry_compiled_kernels`). Where the second import fails, the first module
        stays, and the reply says why."""
        from judge.candidate.precompile import carry_compiled_kernels

        assert self.path is not None and self.module is not None
        try:
            module = load_module(self.path, self.module.__name__)
        except CandidateLoadError as exc:
            return f"{exc.kind}: {str(exc)[:200]}"
        entry = getattr(module, self.entry_name, None)
        if not callable(entry):
            return "the second import has no entry point"
        report.carried = carry_compiled_kernels(self.module, module)
        self.module, self.entry = module, entry
        return ""

    def _op_reset(self, header: dict[str, Any], _: list[torch.Tensor]) -> tuple[dict[str, Any], list]:
        """A new case set begins (a failing case judged again on its own): nothing held over."""
        self.held.clear()
        self.inputs = {}
        return {"ok": True}, []

    def _op_disturb(self, header: dict[str, Any], _: list[torch.Tensor]) -> tuple[dict[str, Any], list]:
        """Memory disturbed before a re-run (judge/candidate/reruns.py), here where the kernel reads it."""
        from judge.candidate.reruns import disturb_memory

        disturb_memory(int(header.get("rerun") or 0), self.device, self.kept)
        return {"ok": True}, []

    def _op_collect(self, header: dict[str, Any], _: list[torch.Tensor]) -> tuple[dict[str, Any], list]:
        from judge.candidate.launchers import noted

        calls, changed = self.held.take()
        return {"ok": True, "calls": calls, "changed": changed, "launchers": noted()}, []

    def _op_tests(self, header: dict[str, Any], _: list[torch.Tensor]) -> tuple[dict[str, Any], list]:
        """A method's tests (judge/candidate/internal_tests.py): those named in `only`, else all,
        in a session defined once per test source, so a test run alone by name sees the same
        namespace as a run of them all."""
        from dataclasses import asdict

        from judge.candidate.internal_tests import TestSession

        tests = str(header["tests"])
        with launches.registering():  # a buffer the tests' calls make and a later call reuses is known memory
            if self.test_session is None or self.test_session.tests != tests:
                self.test_session = TestSession(self.entry, self.entry_name, tests, self.device,
                                                float(header.get("per_test_timeout") or 0) or None)
            only = header.get("only")
            names = [str(n) for n in only] if isinstance(only, list) else self.test_session.names
            outcomes = self.test_session.run(names)
        return {"ok": True, "tests": [asdict(t) for t in outcomes]}, []

    def _op_time(self, header: dict[str, Any], tensors: list[torch.Tensor]) -> tuple[dict[str, Any], list]:
        from judge.candidate.sampling import CandidateTimer

        number = int(header.get("timer") or 0)
        if header.get("step") == "close":
            self.timers.pop(number, None)
            return {"ok": True}, []
        if header.get("step") == "start" or number not in self.timers:
            args = tuple(structure.decode_values(header["args"], tensors, structure.Rebuilder(self.module)))
            self.timers[number] = CandidateTimer(self.entry, args, header.get("refresh"))
        reply, out = self.timers[number].step(header)
        return {"ok": True, **reply}, out


def refill(old: tuple, fresh: Any) -> tuple:
    """New values in the same memory (a result cached by data pointer is now stale); scalar
    arguments (eps, alpha) take their new values too."""
    args = []
    for o, n in zip(old, fresh, strict=True):
        if isinstance(o, torch.Tensor) and isinstance(n, torch.Tensor):
            o.copy_(n)
            args.append(o)
        else:
            args.append(n)
    return tuple(args)


SLOW_CALL = 3.0
"""A call whose step took this many times the step's median is counted apart (`steady_and_slow`)."""


def steady_and_slow(call_steps: dict[str, list[float]]) -> dict[str, float]:
    """Per `call:` step, its seconds split in two: `STEP:steady` (the median call's, times the
    calls) and `STEP:slow` (summed over the calls that took over `SLOW_CALL` times the median:
    on a GPU, mostly a kernel variant's first launch in this fresh process, which loads it from
    the Triton cache). scripts/judge_profile.py --spans showed softmax's expert loading dozens of
    variants over a hidden set, a third of its calls' run time."""
    import statistics

    out = {}
    for step, seconds in call_steps.items():
        median = statistics.median(seconds)
        out[f"{step}:steady"] = median * len(seconds)
        out[f"{step}:slow"] = sum(s for s in seconds if s > SLOW_CALL * median)
    return out


PROFILE_ENV = "KMC_PROFILE_CANDIDATE"
"""Set (to anything) in a judge worker's environment by scripts/judge_profile.py: its candidate
processes run their requests under cProfile and send the top lines with `collect`."""


def _profiler(env: str = PROFILE_ENV) -> Any:
    """A cProfile profiler when `env` is set (judge/template.py uses it for its warm-up), else None."""
    if not os.environ.get(env):
        return None
    import cProfile

    return cProfile.Profile()


def _top_lines(profiler: Any, top: int = 30) -> str:
    import io
    import pstats

    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)  # which of Triton's steps (compile, launcher build) the time is under
    return text.getvalue()[-40000:]


def input_copies(args: tuple, written: tuple[int, ...]) -> tuple:
    """Copies of the tensor arguments a call must leave alone (output arguments excepted), taken
    right before it, on the device: what `changed_inputs` compares them with afterwards."""
    return tuple(a.clone() if isinstance(a, torch.Tensor) and i not in written else None
                 for i, a in enumerate(args))


def changed_inputs(before: tuple, args: tuple) -> list[int]:
    """Positions, counted among the tensor arguments (as the judge numbers them), of inputs the
    call changed."""
    tensors = [(b, a) for b, a in zip(before, args, strict=True) if isinstance(a, torch.Tensor)]
    return [k for k, (b, a) in enumerate(tensors) if b is not None and not unchanged(b, a)]


COPY_BUDGET_BYTES = 256 << 20
"""Bytes of a case set's outputs `HeldOutputs` keeps as exact copies; past them, fingerprints."""


@dataclass
class HeldCall:
    """What the candidate process keeps of one call for the end-of-set check: the output (a
    buffer the candidate reuses in a later call changes under it) and its bits as the call
    returned them: a copy while the set's copies fit `COPY_BUDGET_BYTES`, else a fingerprint
    (judge/candidate/bit_equality.py: copies of every output once filled an H200's memory; fingerprints of
    every output were a third of the process's work per call)."""

    output: Any
    as_returned: Digest | BitCopy

    @classmethod
    def of(cls, out: Any, args: tuple, written: tuple[int, ...], copy: bool = False) -> HeldCall:
        return cls(held_output(out, args, written), bit_copy(out) if copy else bits_digest(out))


class HeldOutputs:
    """A case set's calls as `HeldCall`s, until the judge asks which outputs changed."""

    def __init__(self, copy_budget: int = COPY_BUDGET_BYTES) -> None:
        self.copy_budget = copy_budget
        self.calls: list[HeldCall] = []
        self.copied = 0

    def add(self, out: Any, args: tuple, written: tuple[int, ...]) -> None:
        size = tensor_bytes(out)
        copy = self.copied + size <= self.copy_budget
        self.copied += size if copy else 0
        self.calls.append(HeldCall.of(out, args, written, copy=copy))

    def take(self) -> tuple[int, list[int]]:
        """(calls held, indices of those whose output changed since); nothing is held after."""
        calls = self.calls
        self.clear()
        return len(calls), changed_calls(calls)

    def clear(self) -> None:
        self.calls, self.copied = [], 0


def changed_calls(held: list[HeldCall]) -> list[int]:
    """Indices of the calls whose output is no longer what the call returned."""
    return [i for i, h in enumerate(held) if not still_same(h.as_returned, h.output)]


def copy_output(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, (tuple, list)):
        return same_kind(out, (copy_output(o) for o in out))
    return out


def held_output(out: Any, args: tuple, written: tuple[int, ...]) -> Any:
    """What is kept of a call's output for the end-of-set check: the output itself (a buffer
    the candidate reuses in a later call then shows), except where it is memory the judge owns
    and refills for the next call (an output argument, or an input the task's reference also
    returns a view of): that part is kept as a copy. An output aliasing an input where the task
    does not allow it fails the aliasing check before this copy matters."""
    keys = _storages(args, tuple(range(len(args))))
    if not keys:
        return out
    if isinstance(out, torch.Tensor):
        return out.detach().clone() if call_record.storage_key(out) in keys else out
    if isinstance(out, (tuple, list)):
        return same_kind(out, (held_output(o, args, written) for o in out))
    return out


def run_call(entry: Any, args: tuple, device: str, interpreter: bool, seed: int | None = None,
             written: tuple[int, ...] = (), source_path: Path | None = None,
             guard: bool = True, tracer: CallTracer | None = None) -> tuple[dict[str, Any], Any]:
    """One call of the entry point, recorded: (report, output). Shared with the in-process
    runner (judge/oracle.py LocalRunner), so both judge a candidate the same way. `seed`:
    torch's generators seeded first (an entry point that draws random numbers, seeded as the
    reference is); `written`: the output arguments it writes into (judge/oracle.py);
    `source_path`: the candidate's file, whose frames a failure's traceback shows
    (judge/candidate/tracebacks.py; None: no traceback); `tracer`: on a GPU, the device's trace
    of the call, checked against the launch record (judge/candidate/kernel_trace.py)."""
    launched = 0
    try:
        if seed is not None:
            torch.manual_seed(seed)
        with launches.recording(args) as rec:
            traced = tracer is not None and tracer.start()
            try:
                with poisoned_allocations(guard):
                    out = entry(*args)
                if device != "cpu":
                    torch.cuda.synchronize()
            finally:
                # stopped also when the call raised (the next call starts a trace of its own)
                found = tracer.stop(dict(rec.kernels), dict(rec.kernels_sure)) if traced and tracer is not None else None
            launched = rec.launches
        overrun = overruns()
        if overrun:
            return {"ok": False, "kind": "wrong_result", "launched": launched,
                    "message": f"the entry point wrote out of bounds: {overrun}", "traceback": ""}, None
    except BaseException as exc:  # noqa: BLE001 - any candidate failure, even sys.exit, is a verdict
        shown = candidate_traceback(exc, source_path) if source_path is not None else ""
        return {"ok": False, "kind": classify_exception(exc), "message": format_exception(exc, path=source_path),
                "traceback": shown, "launched": launched}, None
    return {"ok": True, "launched": rec.launches, "fallback": dict(rec.fallback),
            "unwritten": call_record.unwritten_outputs(out, rec, interpreter, exempt=_storages(args, written))
            + call_record.unreceived_outputs(args, written, rec),
            "aliased": call_record.aliased_inputs(out, args, written),
            "trace": found.to_wire() if found is not None else None}, out


def _storages(args: tuple, indices: tuple[int, ...]) -> set[tuple[str, int]]:
    return {call_record.storage_key(args[i]) for i in indices if i < len(args) and isinstance(args[i], torch.Tensor)}


def serve_candidate(sock: socket.socket, device: str, interpreter: bool, plan: Any) -> None:
    """The child's whole life: answer the judge until it says exit."""
    try:
        server = CandidateServer(sock, device, interpreter, plan)
        if server.start():
            server.serve()
    except (wire.WireError, BrokenPipeError, ConnectionResetError) as exc:
        os.write(2, f"candidate process: {format_exception(exc)}\n".encode())
