"""Running a method's own unit tests (Reflexion's internal tests) against a candidate.

Methods never run code: `ctx.run_tests(candidate, tests)` sends a job of kind
`"internal_tests"` to the judge worker (judge/worker.py), which has the candidate's own
contained process (judge/candidate/server.py) import it from its file as for any evaluation and call
`run_test_functions` there, where neither hidden cases nor references can be imported.
The tests see two globals: the entry point (by its name) and `DEVICE` ("cuda" on a GPU,
either vendor; "cpu" on the Triton interpreter). Every top-level `test_*` function is
called in definition order, each under its own time limit, with Python's and torch's random
generators seeded alike before each and `torch.empty*` poisoned (NaN, as in the oracle), so
memory the kernel never writes reads the same in every run; one failing or crashing test
never stops the others. These are the *method's* tests, run as written: no reference, none
of the task's cases.

Feedback text is a function of the candidate's behaviour (design invariant 8): a failed
assert names the tensors it compared, at how many elements two of them differ and the first
such element of each (never a leading run of the output, which quotes whatever memory the
kernel read out of bounds); a failing test runs four more times on the same inputs, and a failure
whose text differs between the runs is described, not quoted (judge/candidate/value_text.py).

The result crosses the process boundary as an `InternalTestReport`, whose JSON has the
shape of an evaluation (`verdict`, `timing`, plus `tests`), so the run store's evaluation
cache keeps it under its own case set (`internal:<hash of the tests>`) and a resumed run
replays it instead of running the tests again.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import re
import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from judge.candidate.reruns import RERUNS, disturb_memory
from judge.candidate.value_text import VARYING, describe_value
from judge.candidate.verdict import TestOutcome, Verdict, missing_entry_point

JOB_KIND = "internal_tests"  # judge/job.py INTERNAL_TESTS
DEFAULT_TEST_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class InternalTestReport:
    """`verdict.kind`: "correct" when the candidate imported and every test passed,
    "wrong_result" when a test failed, else why the candidate could not be tested
    (syntax/compile/runtime error at import, timeout, crash)."""

    verdict: Verdict
    tests: tuple[TestOutcome, ...] = ()
    phases: dict[str, float] | None = None  # seconds per phase (judge/phases.py)

    @property
    def passed(self) -> bool:
        return self.verdict.correct

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"verdict": self.verdict.to_json(), "timing": None,
                             "tests": [asdict(t) for t in self.tests]}
        if self.phases is not None:
            d["phases"] = dict(self.phases)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> InternalTestReport:
        return cls(Verdict.from_json(d["verdict"]), tuple(TestOutcome(**t) for t in d.get("tests", ())),
                   d.get("phases"))

    @classmethod
    def from_outcomes(cls, outcomes: tuple[TestOutcome, ...]) -> InternalTestReport:
        failed = [t for t in outcomes if not t.passed]
        if not failed:
            return cls(Verdict("correct", f"{len(outcomes)} test(s) passed", cases_run=len(outcomes)), outcomes)
        first = failed[0]
        return cls(Verdict("wrong_result", f"{len(failed)} of {len(outcomes)} test(s) failed; first: {first.message}",
                           failing_case=first.name, cases_run=len(outcomes)), outcomes)


def case_set_for(tests: str) -> str:
    """The evaluation-cache case set of one test source: identical tests share verdicts."""
    return "internal:" + hashlib.sha256(tests.encode()).hexdigest()[:16]


# ---------------------------------------------------------------- inside the worker


class TestTimeout(Exception):
    pass


def _time_limit(seconds: float | None) -> contextlib.AbstractContextManager[None]:
    """SIGALRM-based limit, only on the main thread (the worker's); the pool's job timeout
    stays the backstop for a test stuck where Python cannot interrupt it."""
    return alarm_after(seconds, lambda: TestTimeout(f"the test ran past its {seconds:.0f} s limit"))


@contextlib.contextmanager
def alarm_after(seconds: float | None, raised: Callable[[], BaseException]) -> Iterator[None]:
    """`raised()` raised in the main thread once `seconds` have passed (SIGALRM); nothing without
    seconds or off the main thread, where no timer signal can interrupt."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise raised()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_names(tests: str) -> list[str]:
    tree = ast.parse(tests)
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]


def _test_frame(exc: BaseException) -> Any:
    """The innermost frame of the test source in the traceback, or None."""
    tb, frame = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<internal_tests>":
            frame = tb
        tb = tb.tb_next
    return frame


def _values(frame: Any, line: str) -> str:
    """What the failing line compared (Reflexion shows the output next to the failed assert):
    the tensors it names with their shapes and, for two of one shape, at how many elements
    they differ and the first such element of each. Only that one element is quoted, and
    through judge/candidate/value_text.py: a leading run of an output quotes whatever memory the
    kernel left unwritten or read out of bounds."""
    try:
        import torch
    except ImportError:  # pragma: no cover - the worker always has torch
        return ""
    names = dict.fromkeys(re.findall(r"\b[A-Za-z_]\w*\b", line))
    tensors = [(n, frame.f_locals[n]) for n in names if isinstance(frame.f_locals.get(n), torch.Tensor)][:3]
    if len(tensors) == 2 and tensors[0][1].shape == tensors[1][1].shape and tensors[0][1].is_floating_point():
        (na, a), (nb, b) = tensors
        a64, b64 = a.detach().double().cpu().flatten(), b.detach().double().cpu().flatten()
        differ = ~torch.isclose(a64, b64, equal_nan=True)
        text = f"{na} and {nb} (shape {tuple(a.shape)}) differ at {int(differ.sum())} of {differ.numel()} elements"
        if bool(differ.any()):
            i = int(differ.nonzero()[0])
            finite = [float(t[torch.isfinite(t)].abs().max()) for t in (a64, b64) if bool(torch.isfinite(t).any())]
            scale = min(finite) if finite else 1.0
            index = _unravel(i, tuple(a.shape))
            text += (f"; first at index {index}: {na} = {describe_value(float(a64[i]), scale, 4)}, "
                     f"{nb} = {describe_value(float(b64[i]), scale, 4)}")
        return text
    return "; ".join(f"{n} shape {tuple(t.shape)}" for n, t in tensors)


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The index of element `flat` of a contiguous tensor of `shape`. Not `torch.unravel_index`:
    its first call imports sympy (through torch.fx's symbolic shapes), 0.4 s in a fresh
    candidate process on the CPU host, paid by every own-test job whose test failed."""
    index = []
    for size in reversed(shape):
        flat, k = divmod(flat, size)
        index.append(k)
    return tuple(reversed(index))


def _failure_message(exc: BaseException, tests: str) -> str:
    """For a failed assert, the assert line itself and what it compared; else the error."""
    lines = tests.splitlines()
    tb = _test_frame(exc)
    lineno = tb.tb_lineno if tb is not None else 0
    where = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
    if isinstance(exc, AssertionError):
        detail = f" ({exc})" if str(exc) else ""
        values = _values(tb.tb_frame, where) if tb is not None and where else ""
        text = f"AssertionError: {where}{detail}" if where else f"AssertionError{detail}"
        return f"{text} # {values}" if values else text
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()[-600:]
    return f"{text} (at: {where})" if where else text


def _seeded_call(fn: Callable[[], Any], per_test_timeout: float | None) -> None:
    """One run of a test function, every random generator seeded alike, so a re-run sees the
    inputs the first run saw (a test that draws inputs without a seed included), with
    `torch.empty*` poisoned as in the oracle, so memory the kernel never writes reads NaN."""
    import random

    import torch

    from judge.candidate.allocations import poisoned_allocations

    random.seed(0)
    torch.manual_seed(0)
    with _time_limit(per_test_timeout), poisoned_allocations():
        fn()


def _reproducible_failure(exc: BaseException, fn: Callable[[], Any], per_test_timeout: float | None,
                          tests: str, device: str) -> str:
    """The failure text, made a function of the candidate's behaviour (design invariant 8): the
    test runs RERUNS more times on the same inputs (the earlier runs' tensors kept alive and
    memory disturbed: judge/candidate/reruns.py), so memory read out of bounds or never written
    differs; when the text differs between runs, it quotes garbage, and the assert line with
    the note judge/candidate/value_text.py VARYING replaces it."""
    first = _failure_message(exc, tests)
    if isinstance(exc, TestTimeout):
        return first  # another 30 s would tell nothing new
    kept: list[Any] = [exc]  # holds the first run's frames, and so its tensors, alive through the re-runs
    texts = [first]
    for rerun in range(RERUNS):
        disturb_memory(rerun, device, kept)
        try:
            _seeded_call(fn, per_test_timeout)
        except (Exception, SystemExit) as again:  # noqa: BLE001 - a re-run's failure is compared, not raised
            kept.append(again)
            texts.append(_failure_message(again, tests))
        else:
            texts.append("")
    del kept
    if all(t == first for t in texts):
        return first
    tb = _test_frame(exc)
    lines = tests.splitlines()
    where = lines[tb.tb_lineno - 1].strip() if tb is not None and 0 < tb.tb_lineno <= len(lines) else ""
    head = f"AssertionError: {where}" if isinstance(exc, AssertionError) and where else (
        f"{type(exc).__name__}" + (f" (at: {where})" if where else ""))
    passed = " (it passed on a re-run)" if "" in texts else ""
    return f"{head} # {VARYING}{passed}"


def with_slack(entry: Callable[..., Any]) -> Callable[..., Any]:
    """`entry` handed, in place of each tensor argument a test passes it, a copy followed by
    NaN slack (bench/slack.py `padded_copy`, zeros before it, and after an integer tensor),
    as the oracle's cases reach a candidate's process; what it writes into such a copy is
    copied back, so a test that passes an output tensor still sees it filled.

    A method's own tests make their tensors in the candidate's process, where memory past a
    tensor's end is whatever the heap holds: a kernel reading there (flip's source index run
    past the row) quoted other values from one process to the next, and a method's prompt
    changed with them (the exact-replay test failed on a loaded machine). Past the end of
    these copies it reads NaN everywhere. A tensor that needs a gradient is passed as it is."""
    import torch

    from bench.slack import padded_copy

    def padded(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and not value.requires_grad:
            return padded_copy(value, nan_slack=True)
        return value

    @functools.wraps(entry)
    def call(*args: Any, **kwargs: Any) -> Any:
        given = [*args, *kwargs.values()]
        sent_args = [padded(a) for a in args]
        sent_kwargs = {k: padded(v) for k, v in kwargs.items()}
        try:
            return entry(*sent_args, **sent_kwargs)
        finally:
            with torch.no_grad():
                for original, sent in zip(given, [*sent_args, *sent_kwargs.values()], strict=True):
                    if sent is not original and not torch.equal(sent, original):
                        original.copy_(sent)

    return call


class TestSession:
    """A method's tests defined once, in a fresh namespace holding the entry point and DEVICE,
    then run by name (`run`), a request at a time: the judge holds its GPU ticket around each
    test function rather than around them all (judge/worker.py), so a timer waiting at the
    gate waits for one test. A test source that does not parse fails as one test ("tests"); one
    that does not even define its functions (an import of a missing module) fails every test
    with that error."""

    def __init__(self, entry: Callable[..., Any], entry_name: str, tests: str, device: str,
                 per_test_timeout: float | None = DEFAULT_TEST_TIMEOUT_S) -> None:
        self.tests, self.device, self.per_test_timeout = tests, device, per_test_timeout
        self.broken: dict[str, str] = {}  # a test's name -> why every run of it fails at once
        try:
            self.names = test_names(tests)
        except SyntaxError as exc:
            self.names = ["tests"]
            self.broken = {"tests": f"the tests do not parse: {exc}"}
            return
        wrapped = with_slack(entry)
        self.namespace: dict[str, Any] = {"__name__": "kmc_internal_tests", entry_name: wrapped, "DEVICE": device}
        try:
            exec(compile(tests, "<internal_tests>", "exec"), self.namespace)  # noqa: S102 - the candidate process's job
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a broken test file fails its tests, not the worker
            message = f"the tests could not be defined: {_failure_message(exc, tests)}"
            self.names = self.names or ["tests"]
            self.broken = dict.fromkeys(self.names, message)
            return
        self.namespace[entry_name] = wrapped  # a test file that rebinds the entry point still tests the candidate

    def run(self, names: list[str] | tuple[str, ...]) -> tuple[TestOutcome, ...]:
        """The named tests (in the order given), each seeded alike before it runs."""
        outcomes = []
        for name in names:
            if name in self.broken or name not in self.names:
                outcomes.append(TestOutcome(name, False, self.broken.get(name, "no such test function")))
                continue
            fn = self.namespace.get(name)
            if not callable(fn):
                outcomes.append(TestOutcome(name, False, "not a function after the test source ran"))
                continue
            try:
                _seeded_call(fn, self.per_test_timeout)
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - every failure of a test is that test's outcome
                outcomes.append(TestOutcome(name, False, _reproducible_failure(exc, fn, self.per_test_timeout,
                                                                               self.tests, self.device)))
            else:
                outcomes.append(TestOutcome(name, True))
        return tuple(outcomes)


def run_test_functions(entry: Callable[..., Any], entry_name: str, tests: str, device: str,
                       per_test_timeout: float | None = DEFAULT_TEST_TIMEOUT_S) -> tuple[TestOutcome, ...]:
    """Every test function of `tests`, in definition order (`TestSession`)."""
    session = TestSession(entry, entry_name, tests, device, per_test_timeout)
    return session.run(session.names)


def judge_internal_tests(module: Any, entry_name: str, tests: str, device: str,
                         per_test_timeout: float | None = DEFAULT_TEST_TIMEOUT_S) -> InternalTestReport:
    """The worker's half of a job: `module` is the imported candidate."""
    entry = getattr(module, entry_name, None)
    if not callable(entry):
        return InternalTestReport(missing_entry_point(entry_name, module))
    if not tests.strip():
        return InternalTestReport(Verdict("correct", "no tests to run; the candidate imported"))
    return InternalTestReport.from_outcomes(run_test_functions(entry, entry_name, tests, device, per_test_timeout))
