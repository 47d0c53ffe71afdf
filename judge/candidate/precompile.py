"""The compile pass: every Triton specialization a case set needs, compiled before the judge
takes a GPU ticket (issue 42 item 1).

Why: Triton compiles a kernel the first time it is launched with a new specialization (0.1-0.5 s
each on an H200 host; softmax's hidden cases force 27). Compiled inside a judged call, that
happens while the judge holds a ticket at the GPU's gate, so a timer queued there waits for the
compile, and every judging job behind the timer waits too (40% of worker time at the gate).

How: the judge sends each case's arguments as descriptions only (dtype, size, strides, storage
offset and size: judge/candidate/wire.py `describe`), never their bytes, and this process runs the
entry point on host placeholders of the same layout (so every pointer has the alignment the real
call's will have, `placeholder`) with every Triton launch turned into Triton's compile-only
warm-up (`compile_only`): `JITFunction.run(..., warmup=True)` compiles, loads nothing, launches
nothing; an autotuner compiles each of its configurations instead of benchmarking them. No GPU
work is done (a tensor the code makes on a GPU by name is made on the host, work on one already
there is refused: judge/candidate/launches.py `_HostOnly`), so no ticket is needed; compiles of
one source run concurrently on a few threads (Triton's `AsyncCompileMode`, where the installed
Triton has it), and each compiled kernel's launcher is built here too.

Best effort and never judged: an entry point that refuses host tensors, raises, or takes too
long just leaves its kernels to be compiled at their first judged launch, as before; the pass
runs on the judge's time, and a process lost to it is replaced (judge/worker.py `_compile_pass`). What the
pass sees decides nothing, and the judge reads no more of its reply than counts for the record.
Afterwards the candidate is imported afresh (judge/candidate/server.py `_import_again`), so
nothing the pass did to its module reaches a judged call; the compiled kernels are found in
the process's Triton cache on disk. (The candidate's process may not fork, so the pass cannot
run in a throwaway child: judge/containment.py.)
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import torch

from judge.candidate import launches, structure, wire
from judge.candidate.internal_tests import alarm_after

PRECOMPILE_ENV = "KMC_PRECOMPILE"
"""0 turns the pass off (for measuring what it saves); `force` runs it under Triton's CPU
interpreter too, where nothing compiles (the tests' way to drive the pass end to end)."""
CASE_LIMIT_S = 5.0
"""A case's entry point on placeholders gets this long (a host fallback path can be slow)."""
PASS_LIMIT_S = 30.0
"""The whole pass stops starting cases after this long."""
PASS_WAIT_S = PASS_LIMIT_S + 2 * CASE_LIMIT_S + 30.0
"""How long the judge waits for the pass's reply (the last case's compiles and launchers
included) before it gives the process up and judges in a fresh one without the pass."""
COMPILE_THREADS = 4


@dataclass
class PassReport:
    """What the pass did, for the record and the tests: it decides nothing."""

    cases: int = 0  # cases whose entry point ran to its end on placeholders
    launches: int = 0  # launches turned into compile-only warm-ups
    kernels: int = 0  # compiled kernels the pass left loaded, launcher built
    failures: int = 0  # cases whose entry point raised on placeholders
    seconds: float = 0.0
    stopped: str = ""  # why the pass stopped before the last case, if it did
    carried: int = 0  # compiled kernels handed to the module imported afresh (`carry_compiled_kernels`)
    first_failure: str = ""  # what the first case that raised raised, cut short (for telling why a pass helped nothing)


def enabled(interpreter: bool) -> bool:
    """Whether the pass runs: on by default on a GPU, off under the interpreter (nothing to compile)."""
    setting = os.environ.get(PRECOMPILE_ENV, "1").strip().lower()
    if setting in ("0", "off", "no", "false"):
        return False
    return setting == "force" or not interpreter


def placeholder(description: dict[str, Any]) -> torch.Tensor:
    """A host tensor of the described dtype, size, strides and storage offset over a storage of
    the described size: its pointer's alignment is the one the real tensor has in this process
    (`wire` keeps storages at 256-byte boundaries). Large storages are mapped lazily, so
    memory is touched only where the entry point reads or writes it."""
    dtype, size, stride, offset, nbytes = wire.description_fields(description)
    raw = torch.empty(nbytes, dtype=torch.uint8)
    return torch.empty(0, dtype=dtype).set_(raw.untyped_storage(), offset, size, stride)


class _CaseOverran(Exception):
    """Raised in the entry point by `_limited` when a case outlasts `CASE_LIMIT_S`."""


def _limited(seconds: float) -> contextlib.AbstractContextManager[None]:
    """The main thread interrupted with `_CaseOverran` after `seconds`."""
    return alarm_after(seconds, _CaseOverran)


@contextlib.contextmanager
def _concurrent_compiles() -> Iterator[None]:
    """Triton's asynchronous compile mode over a few threads, where this Triton has it: the
    entry point goes on to its next launch while the last one compiles (the C++ passes and
    ptxas run outside the interpreter lock for much of their time). Waits for them at the end;
    a compile that failed is dropped from Triton's cache there (its judged launch compiles it
    again and reports the error as before), never raised here."""
    try:
        from concurrent.futures import ThreadPoolExecutor

        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:
        yield
        return
    with ThreadPoolExecutor(COMPILE_THREADS, thread_name_prefix="kmc-compile") as pool:
        try:
            mode = AsyncCompileMode(pool, ignore_errors=True)
        except TypeError:  # a Triton whose mode has no such option: its errors are suppressed below
            mode = AsyncCompileMode(pool)
        try:
            mode.__enter__()
        except RuntimeError:  # another mode already active (never in a candidate process)
            yield
            return
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                mode.__exit__(None, None, None)


def _loaded(kernels: list[Any]) -> int:
    """Each compiled kernel's module loaded and launcher built (`_init_handles`), as its first
    launch would do: a driver call and a C compile, no GPU work. Returns how many distinct
    kernels (a kernel several cases launch comes back from each launch)."""
    done = 0
    for k in {id(k): k for k in kernels}.values():
        with contextlib.suppress(Exception):
            result = getattr(k, "result", None)
            kernel = result(ignore_errors=True) if callable(result) and hasattr(k, "future") else k
            init = getattr(kernel, "_init_handles", None)
            if callable(init):
                init()
                done += 1
    return done


class _NothingToRun(Exception):
    """Raised by a pass's `runs` when there is nothing to run: why, and how many failures that counts."""

    def __init__(self, why: str, failures: int = 0) -> None:
        super().__init__(why)
        self.why, self.failures = why, failures


def _drive(runs: Callable[[], Iterable[Callable[[], object]]], unit: str, limit_s: float, pass_limit_s: float,
           stop_without_launch: bool, load: bool = True) -> PassReport:
    """One pass: `runs()` (called with launches compiled only, within `limit_s`) gives the calls
    to make, each made within `limit_s`, until the pass has run `pass_limit_s`. A call that
    raises is a failure; with `stop_without_launch`, one that raised before any launch stops the
    pass (the code does not reach a launch on host tensors). `load`: the compiled kernels loaded
    too (`_loaded`); not in a process without a GPU context (a compile-ahead process,
    judge/compile_ahead.py), where loading one would make a context: its product is the cache on
    disk, which the judged process's own pass then finds."""
    report = PassReport()
    started = time.perf_counter()
    compiled: list[Any] = []
    with _concurrent_compiles(), launches.compile_only(compiled) as counter:
        try:
            with _limited(limit_s):
                calls = runs()
        except _NothingToRun as nothing:
            return PassReport(failures=nothing.failures, stopped=nothing.why)
        for call in calls:
            if time.perf_counter() - started > pass_limit_s:
                report.stopped = f"over {pass_limit_s:.0f} s"
                break
            before = counter.launches
            try:
                with _limited(limit_s):
                    call()
                report.cases += 1
            except _CaseOverran:
                report.failures += 1
                report.stopped = f"a {unit} over {limit_s:.0f} s"
                break
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - a pass that helps nothing is fine; the judged run tells
                report.failures += 1
                report.first_failure = report.first_failure or f"{type(exc).__name__}: {exc}"[:300]
                if stop_without_launch and counter.launches == before:
                    report.stopped = f"the {unit} raised before any launch on host tensors"
                    break
        report.launches = counter.launches
    report.kernels = _loaded(compiled) if load else 0
    report.seconds = round(time.perf_counter() - started, 4)
    return report


def compile_cases(entry: Any, cases: list[dict[str, Any]], module: Any, case_limit_s: float = CASE_LIMIT_S,
                  pass_limit_s: float = PASS_LIMIT_S, load: bool = True) -> PassReport:
    """Run `entry` on each case's placeholders with launches compiled only. `cases`: per case
    {"args": structure.encode_values spec, "tensors": [description, ...]}; `load`: as `_drive`'s."""
    def on_placeholders(case: dict[str, Any]) -> Callable[[], object]:
        def call() -> object:
            tensors = [placeholder(d) for d in case["tensors"]]
            return entry(*structure.decode_values(case["args"], tensors, structure.Rebuilder(module)))

        return call

    return _drive(lambda: [on_placeholders(c) for c in cases], "case", case_limit_s, pass_limit_s,
                  stop_without_launch=True, load=load)


def compile_for_tests(entry: Any, entry_name: str, tests: str, test_limit_s: float = CASE_LIMIT_S,
                      pass_limit_s: float = PASS_LIMIT_S) -> PassReport:
    """The compile pass for a method's own tests (judge/candidate/internal_tests.py): each test
    function run once with `DEVICE` the host and launches compiled only, so the kernels its
    inputs need are built before the judge takes a ticket to run the tests. The tests make
    their own inputs, so there are no placeholders; a tensor a test makes on the GPU by name
    (`device="cuda"`) is made on the host (launches.py `_HostOnly`). Outcomes here decide
    nothing: every assert on a launch's output fails, since nothing ran."""
    from judge.candidate.internal_tests import TestSession

    def test_functions() -> list[Callable[[], object]]:
        session = TestSession(entry, entry_name, tests, "cpu", None)  # defined as the judged run will
        if session.broken:
            unparsed = next(iter(session.broken.values())).startswith("the tests do not parse")
            raise _NothingToRun("the tests do not parse" if unparsed else "the tests could not be defined",
                                failures=0 if unparsed else 1)
        return [fn for name in session.names if callable(fn := session.namespace.get(name))]

    return _drive(test_functions, "test", test_limit_s, pass_limit_s, stop_without_launch=False)


CARRY_ENV = "KMC_CARRY_KERNELS"
"""0: the module imported afresh after the pass gets none of the pass's compiled kernels
(`carry_compiled_kernels`) and loads each from the Triton cache on disk at its first judged launch."""


def _jit_function(value: Any, jit_type: type) -> Any:
    """The `JITFunction` under a module attribute (an autotuner or heuristics wraps one in
    `.fn`), or None."""
    for _ in range(4):
        if isinstance(value, jit_type):
            return value
        value = getattr(value, "fn", None)
        if value is None:
            return None
    return None


def carry_compiled_kernels(old: Any, new: Any) -> int:
    """The kernels the pass compiled and loaded in module `old` handed to the same kernels of
    module `new` (the candidate imported afresh after the pass): Triton's in-memory cache of a
    `JITFunction`, per device, keyed by specialization, moved where the new function's source
    hash (`cache_key`, its source, dependencies and constexpr globals) is the old one's. Why:
    otherwise every kernel is found again in the Triton cache on disk at its first judged launch
    (hashing, reading and loading the binary, building its launcher) while the judge holds a
    GPU ticket. Only compiled code moves, never module state; nothing moves where Triton's
    internals differ from what this expects. Returns how many kernels moved."""
    if os.environ.get(CARRY_ENV, "1").strip() == "0":
        return 0
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return 0
    moved = 0
    for name, before in list(vars(old).items()):
        with contextlib.suppress(Exception):  # Triton's internals are not an API (nor a module's `.fn`s): nothing moves then
            was, now = _jit_function(before, JITFunction), _jit_function(vars(new).get(name), JITFunction)
            if was is None or now is None or was is now or type(was) is not type(now):
                continue
            caches = was.device_caches
            if not caches or was.cache_key != now.cache_key:
                continue
            for device, entry in list(caches.items()):
                if device not in now.device_caches and isinstance(entry, tuple) and isinstance(entry[0], dict):
                    kernels = {key: k for key, k in entry[0].items() if not _failed(k)}
                    # Made by Triton itself (its `device_caches` is a defaultdict of `create_binder`,
                    # which also gives the function what it compiles with: `ASTSource`, `compile`),
                    # then given the kernels. Before, the old function's entry was copied in whole,
                    # so the new function had no `ASTSource`: any specialization the pass had not
                    # compiled raised AttributeError at its judged launch, and a correct kernel was
                    # judged a runtime error (on an H100, every expert whose hidden cases were not
                    # all drawn before its pass; and every warm-up's pass, judge/hidden_warmup.py).
                    fresh = now.device_caches[device]
                    if isinstance(fresh, tuple) and isinstance(fresh[0], dict) and not fresh[0]:
                        fresh[0].update(kernels)
                        moved += len(kernels)
    return moved


def _failed(kernel: Any) -> bool:
    """A compile of the pass that failed or never finished (an asynchronous compile's future
    left in Triton's cache): not carried, so its judged launch compiles it and reports as before."""
    future = getattr(kernel, "future", None)
    if future is None:
        return False
    return not future.done() or future.exception() is not None


def reply(report: PassReport, import_problem: str = "") -> dict[str, Any]:
    """`import_problem`: why the candidate could not be imported afresh after the pass (the
    server's `_import_again`), "" when it was."""
    return {"ok": True, "pass": {**asdict(report), "import_again": import_problem or "ok"}}
