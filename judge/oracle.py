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

Adapted suites (issue 16) add output arguments (poisoned before the call where the reference
ignores their contents, judge/case_inputs.py; exempt from the inputs-unchanged check, compared
through `Task.judged_output`: the block at the end), seeded entry points (judge/comparison.py
`call_seeded`), cases that cannot be built here (`CaseUnavailable`, skipped with their reason)
and output a Triton reference never writes (judge/reference_habits.py).

This module is the judging pipeline: the runners (a candidate process, or this process), the
case set's calls sent and judged in order, the verdict. What it judges with lives beside it:
judge/comparison.py (the expected output, the comparison), judge/case_inputs.py (inputs and
expected outputs, cached per judge worker), judge/reference_habits.py (what a suite's reference
leaves unwritten, the operations its wrapper runs).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch

from bench.task import Case, CaseUnavailable, OutputArgs, Task
from judge.candidate.bit_equality import same_bits, unchanged
from judge.candidate.call_record import PARTLY_STORED, alias_text
from judge.candidate.kernel_trace import judged_findings
from judge.candidate.known_memory import UNRECORDED, UNRECORDED_WHY
from judge.candidate.launches import ALLOWED_OPS
from judge.candidate.reruns import at_attempt
from judge.candidate.structure import Opaque
from judge.candidate.verdict import Verdict
from judge.candidate.wire import INLINE_LIMIT
from judge.case_inputs import cached_expected, cached_inputs, poisoned_outputs, skipped_here, storage_bytes
from judge.comparison import Mismatch, accept_unwritten, compare, to_device
from judge.reference_habits import reference_finishes_in_torch, reference_launches_nothing, reference_ops
from judge.runner import Call, CallReport, Runner


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
gate): a timer waiting there waits for at most these, and every call of them is judged before
the hold is let go."""

HOLD_PLAN_BYTES = 1 << 30
"""The most bytes of inputs and expected outputs (the storages they keep: judge/case_inputs.py
`storage_bytes`) a hold plans before its calls are run and judged (`judge_cases`): cases past it
are drawn once those are done. Why: a hold planned its eight cases at once, and on a GPU's large
cases (the hidden set includes the perf cases) that kept 9-15 GiB live in the judge beside its
input cache (an H100, 2026-12-05, scripts/judge_memory_probe.py --history: swiglu, gather,
embedding, transpose); four workers at such peaks left candidates out of memory. Which calls go
ahead of a failure still depends on the case set alone."""
BATCH_INPUT_BYTES = 64 << 20
"""The most input bytes one request of calls carries (`batches`): a hold's calls on large cases
go in several requests, so neither side holds a whole hold's inputs at once."""
BATCH_ENV = "KMC_CALL_BATCH"
"""0: one call per request, as before calls were batched (for comparison, benchmarks/gpu_verify.sh)."""


@dataclass
class _Planned:
    """A call of a case set, planned with its inputs and expected answer."""

    slot: int
    case: Case
    attempt: str
    outputs: OutputArgs
    answer: tuple[Any, Any]  # the expected output and what the reference leaves unwritten (`cached_expected`)
    last: bool  # the case's last attempt: once it passes, the case is done
    call: Call

    def input_bytes(self) -> int:
        return sum(a.untyped_storage().nbytes() for a in self.call.args if isinstance(a, torch.Tensor))

    def reply_bytes(self) -> int:
        """About what its reply carries: an output the size of the expected one, and the output
        arguments it wrote."""
        expected = self.answer[0]
        tensors = [*(expected if isinstance(expected, (tuple, list)) else (expected,)),
                   *(self.call.args[i] for i in self.call.written if i < len(self.call.args))]
        return sum(t.untyped_storage().nbytes() for t in tensors if isinstance(t, torch.Tensor))


def batches(planned: list[_Planned], inline_limit: int, input_limit: int = BATCH_INPUT_BYTES,
            first_case_alone: bool = False) -> list[list[_Planned]]:
    """`planned` cut into requests, in order: a call joins the request before it while that
    request's inputs stay within `input_limit` and the call before it answers with at most
    `inline_limit` bytes (judge/candidate/wire.py `INLINE_LIMIT`: every reply but a request's
    last goes inline). `first_case_alone`: the first case's calls make a request of their own
    (a case set's start: a candidate wrong on its first case, the commonest failure, runs no
    other case's calls before its verdict). Depends only on the case set, never on timing, so
    which calls run before a failure is judged is the same from run to run. `BATCH_ENV`=0: one
    call each."""
    one_each = os.environ.get(BATCH_ENV, "1") == "0"
    out: list[list[_Planned]] = []
    size = 0
    for p in planned:
        n = p.input_bytes()
        alone = first_case_alone and len(out) == 1 and p.slot != out[0][0].slot
        if out and not one_each and not alone and size + n <= input_limit \
                and out[-1][-1].reply_bytes() <= inline_limit:
            out[-1].append(p)
            size += n
        else:
            out.append([p])
            size = n
    return out


class _Judging:
    """One case set's judging in `judge_cases`: what has passed, and the calls' reports read
    and judged in order.

    A request's calls run in the runner while the judge judges the ones already answered, and
    the next request is sent as soon as the last reply of the one before it is read, before
    that call is judged: a candidate process computes while the judge compares (measured: the
    judge's side of a call, nearly as long as the candidate's, was paid on top of it). A
    report that already says the call failed (it raised, crashed) decides, and nothing more is
    sent."""

    def __init__(self, task: Task, runner: Runner, device: str, races: bool = False) -> None:
        """`races`: every case gets a REPEAT attempt, judged against its first output, which is
        kept until then (and only then: no other output outlives its judging)."""
        self.task, self.runner, self.device, self.races = task, runner, device, races
        self.open = False  # calls submitted whose reports are not all taken
        self.ran: list[_Ran] = []
        self.firsts: dict[int, Any] = {}  # a case's first output as judged, until its REPEAT
        self.done: set[int] = set()  # cases every attempt of which passed
        self.worst_abs = self.worst_rel = 0.0

    def run(self, planned: list[_Planned]) -> Verdict | None:
        """Every planned call run and judged in order: the verdict of the first that fails, else None."""
        requests = batches(planned, INLINE_LIMIT, first_case_alone=not self.ran)
        for r, request in enumerate(requests):
            if r == 0:
                self.runner.submit([p.call for p in request])
                self.open = True
            for k, p in enumerate(request):
                report = self.runner.result()
                if not report.ok:
                    self.open = False  # the runner ran nothing after it
                    return self._failed(p, report)
                if k == len(request) - 1:
                    self.open = r + 1 < len(requests)
                    if self.open:  # the next request runs while this call is judged
                        self.runner.submit([q.call for q in requests[r + 1]])
                verdict = self._judge(p, report)
                if verdict is not None:
                    return self.decided(verdict)
        return None

    def decided(self, verdict: Verdict) -> Verdict:
        """`verdict` decides the set: calls sent after the one it judged are dropped once the
        runner has done them, so the candidate is idle for what comes next (judge/candidate/reruns.py's
        re-runs of the failing case, in the same process)."""
        if self.open:
            self.open = False
            self.runner.discard()
        return verdict

    def _failed(self, c: _Planned, report: CallReport) -> Verdict:
        return Verdict(report.kind, report.message, c.case.name, cases_run=len(self.done),
                       kernel_launched=report.launched > 0, traceback=report.traceback)

    def _judge(self, c: _Planned, report: CallReport) -> Verdict | None:
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

    A hold's calls go to the runner in as few requests as `batches` allows, and each is judged
    while the runner runs the ones after it (`_Judging`); which calls are sent before a failure
    is judged depends only on the case set, never on timing, so the candidate's history (what
    judge/candidate/reruns.py's re-runs inherit) is the same from run to run. The candidate's
    clock stops for the judge's own work as before (judge/remote.py `judge_side`), also while
    later calls run meanwhile: at most the job's limit once more in all, as before. `hold()`:
    entered around each run of `CASES_PER_HOLD` cases (their inputs, calls and comparisons) and
    around the end-of-set check: the judge worker's GPU ticket (judge/gate.py), so a timer
    waiting at the gate waits for those cases, not the whole set.
    """
    runner.reset()
    races = repeat_for_races and task.deterministic
    judging = _Judging(task, runner, device, races)
    skipped = 0
    reasons: list[str] = []
    numbered = list(enumerate(cases))
    for first in range(0, len(numbered), CASES_PER_HOLD):
        with hold():
            planned: list[_Planned] = []
            planned_bytes = 0
            for slot, c in numbered[first:first + CASES_PER_HOLD]:
                if skipped_here(task, c, interpreter):
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
                    # The judge's own side failed on this case: the calls planned before it are
                    # run and judged first, as they would have been one call at a time.
                    verdict = judging.run(planned)
                    if verdict is not None:
                        return verdict
                    raise
                given[REPEAT], answers[REPEAT] = given[FIRST], answers[FIRST]  # the first inputs again
                seed = c.seed if task.seeded_rng else None
                planned += [_Planned(slot, c, attempt, outputs, answers[attempt], k == len(attempts) - 1,
                                     Call(slot, given[attempt], attempt != FIRST, seed, outputs.written))
                            for k, attempt in enumerate(attempts)]
                planned_bytes += storage_bytes((given[FIRST], given[REFILL], answers[FIRST], answers[REFILL]))
                if planned_bytes >= HOLD_PLAN_BYTES:  # large cases: judged before more are drawn
                    verdict = judging.run(planned)
                    if verdict is not None:
                        return verdict
                    planned, planned_bytes = [], 0
            verdict = judging.run(planned)
            if verdict is not None:
                return verdict
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
    out = task.judged_output(to_device(report.output, device), to_device(report.inputs_after, device), c)
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


def _race(first: Any, again: Any, task: Task, device: str) -> bool:
    """Two runs on the same inputs that differ beyond the task's tolerance (bit-level noise from
    atomics reordering a float sum is not a race; a missing barrier or an unmasked read is)."""
    if same_bits(first, again):
        return False
    try:
        compare(to_device(again, device), to_device(first, device), task)
    except Mismatch:
        return True
    return False


# ---------------------------------------------------------------- output arguments
# What adapted suites need of the judge (issue 16): an entry point that writes its result into
# arguments (`Task.output_args`: poisoned before the call when the reference ignores their
# contents, judge/case_inputs.py `poisoned_outputs`; exempt from the inputs-unchanged check and
# from the aliasing check, compared through `Task.judged_output`), one that draws random numbers
# (`Task.seeded_rng`: candidate and reference get the case's seed right before every call, the
# candidate in its own process: judge/comparison.py `call_seeded`), and a case that cannot be
# built here (`CaseUnavailable`: skipped with its reason). Kernels given a `triton.reinterpret`
# view of a tensor count as receiving the tensor (judge/candidate/launches.py).


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
