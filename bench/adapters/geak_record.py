"""A GEAK-eval file's task: its recorded calls turned into the task's cases, the reference that
answers them, new shapes and perf inputs probed on it.

Hidden cases are differential: the suite's test runs once per process (in the evaluation
worker, on the device the cases run on) with the entry point wrapped so its arguments are
recorded (geak_calls.py). The reference is the suite's own code on the same inputs. Cases come in four
kinds, each named so a failure says which:

- `visible-call<i>`, `hidden-call<i>-suite`: the suite's recorded calls, replayed;
- `hidden-call<i>-perm-s<k>`: the same shapes with each floating-point tensor's values
  permuted (seeded): new values, the suite's distribution;
- `hidden-shape<j>`: new shapes (see _shapes.py), each kept only where the reference runs;
  a slot no perturbation fills is skipped by the judge with the reason;
- `perf-<j>`: the suite's perf inputs (ROCm `test_performance` parameters, TritonBench
  `perf_G/golden_metrics/<op>_perf.py` inputs), else the largest new shapes, else the largest
  recorded call: the inputs speedups are measured on.

What the entry point writes into (output arguments, compared after the call) and which of
those the judge may poison is learnt by running the reference on the recorded calls.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.adapters import _outputs, _shapes
from bench.adapters._adapted import import_text, module_name
from bench.adapters._glue import complete, missing_imports
from bench.adapters.geak_calls import SuiteCalls
from bench.adapters.geak_parse import SuiteFile
from bench.faults import mentions_device_error, mentions_out_of_memory
from bench.sequences import same_kind
from bench.task import Case, CaseUnavailable, NothingToCompare, OutputArgs

CPU_SHAPE_ELEMENTS = 1 << 14
GPU_SHAPE_ELEMENTS = 1 << 26
SHAPE_SLOTS_GPU = 8
SHAPE_SLOTS_CPU = 4
PERF_SLOTS = 3
PERF_SPREAD = 16
SHAPE_ATTEMPTS = 6
PROBE_MEMORY_TRIES = 3
PROBE_MEMORY_WAIT_S = 2.0
"""A probe out of GPU memory is tried again, idle blocks handed back and 2 s, then 4 s, waited
first: the memory may be other workers' (12 judge workers and their probing children share one
GPU in a `bench check`), and a shape rejected for it would make a run's hidden cases depend on the
load. Three tries stay inside a probe's own limit (shape_probe.py `PROBE_LIMIT_S`)."""


class _ProbeOutOfMemory(Exception):
    """A probe of the suite's reference ran out of GPU memory (`GeakSuite._reference_runs`)."""


class ReferenceFault(RuntimeError):
    """The suite's reference ended the GPU context while the adapter probed it."""


def _to_device(value: Any, device: str) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device).clone()
    if isinstance(value, (list, tuple)):
        return same_kind(value, (_to_device(v, device) for v in value))
    return value


@dataclass(frozen=True)
class ShapeCall:
    values: tuple
    origin: int
    change: str


class GeakSuite:
    """One adapted file: imports the reference and records the suite's calls lazily, once per
    process, and serves the task's callables (inputs, reference, output arguments)."""

    def __init__(self, sf: SuiteFile, interpreter: bool, perf_script: Path | None = None):
        from bench.adapters._adapted import for_interpreter, guard_versioned_imports

        self.sf = sf
        self.interpreter = interpreter
        self.perf_script = perf_script
        def fix(text: str) -> str:
            return guard_versioned_imports(for_interpreter(text) if interpreter else text)

        self.code, self.test, self.appended = fix(sf.code), fix(sf.test), fix(sf.appended)
        self.test_imports = missing_imports(self.code, self.test)
        self._reference: Any = None
        self._outputs: OutputArgs | None = None
        self._child: tuple[dict[str, bool], Callable[[str, str], None]] | None = None  # in a probing child
        self._decided: dict[str, bool] | None = None  # the probing children's decisions, once made
        self._deciding: _Deciding | None = None  # the children at work, started ahead (`start_ahead`)
        self._perf_ahead: tuple[list[tuple] | Exception, Any] | None = None  # (`_record_perf_inputs_ahead`)
        self.probe_notes: list[str] = []  # shapes whose probe ended the probing process
        self._learn_failures: list[str] = []  # what the reference raised on recorded calls while its outputs were learnt
        self._shape_calls: list[ShapeCall] | None = None
        self._perf_calls: list[tuple] | None = None
        self.recorded = SuiteCalls(sf, self.code, self.test, interpreter, perf_script)  # the suite's calls

    # ------------------------------------------------------------ the reference

    @property
    def baseline(self) -> str:
        code = self.code + ("\n\n# the suite's own call of the code (from its test section)\n" + self.appended
                            if self.appended else "")
        return complete(code, self.sf.entry, "", self.test_imports)

    def reference_fn(self) -> Callable[..., Any]:
        if self._reference is None:
            module = import_text(self.baseline, module_name("ref", str(self.sf.path), self.baseline))
            self._reference = getattr(module, self.sf.entry)
        return self._reference

    def run_device(self) -> str:
        """Where the reference runs when the adapter probes it (its outputs, new shapes, perf
        inputs): recorded calls are kept on the CPU, and a compiled kernel cannot take CPU
        tensors, so on a GPU every probe would fail and teach nothing."""
        return "cpu" if self.interpreter else "cuda"

    def _run(self, values: tuple, seed: int = 0) -> Any:
        """The reference on `values` (mutated in place, as the suite's code does), seeded."""
        import torch

        torch.manual_seed(seed)
        return self.reference_fn()(*values)

    # ------------------------------------------------------------ the suite's calls (geak_calls.py)

    def calls(self) -> list[tuple]:
        return self.recorded.calls()

    @property
    def failure(self) -> str:
        """The first failure the suite's own test met while its calls were recorded."""
        return self.recorded.failure

    def perf_script_calls(self, max_elements: int) -> list[tuple]:
        """The calls this file's TritonBench perf script makes (SuiteCalls.perf_script_calls)."""
        return self.recorded.perf_script_calls(max_elements)

    # ------------------------------------------------------------ what the judge needs

    def output_spec(self) -> OutputArgs:
        if self._outputs is None:
            device = self.run_device()
            self._outputs = _outputs.learn_output_args(self._run, [_to_device(c, device) for c in self.calls()],
                                                       self._learn_failures)
            _release_probe_memory()
        return self._outputs

    def output_args(self, case: Case) -> OutputArgs:
        return self.output_spec()

    def judged(self, returned: Any, args: tuple) -> tuple:
        return _outputs.judged_form(returned, args, self.output_spec().written)

    def shape_calls(self) -> list[ShapeCall]:
        """New shapes the reference runs on, in a fixed order: round-robin over the recorded
        calls with distinct shapes, large perturbations first."""
        if self._shape_calls is None:
            self._shape_calls = self._find_shapes()
            _release_probe_memory()
        return self._shape_calls

    def _find_shapes(self) -> list[ShapeCall]:
        if self.sf.entry_kind == "launch":
            return []  # the grid is the test's own, fixed: a launch is replayed at the shapes it was written for
        calls = self.calls()
        limit = SHAPE_SLOTS_CPU if self.interpreter else SHAPE_SLOTS_GPU
        cap = CPU_SHAPE_ELEMENTS if self.interpreter else GPU_SHAPE_ELEMENTS
        distinct: list[int] = []
        seen_sig: set[str] = set()
        for i, c in enumerate(calls):
            sig = _shapes.describe_shapes(c)
            if sig not in seen_sig:
                seen_sig.add(sig)
                distinct.append(i)
        queues = [[(i, p) for p in _shapes.candidates(calls[i], cap)] for i in distinct]
        runs_on = self._prober()
        found: list[ShapeCall] = []
        tried: dict[int, int] = {}
        for i, p in (item for group in itertools.zip_longest(*queues) for item in group if item is not None):
            if len(found) >= limit:
                break
            if tried.get(i, 0) >= SHAPE_ATTEMPTS * 2:
                continue
            new = _shapes.perturb(calls[i], p, seed=1000 + len(found))
            sig = _shapes.describe_shapes(new)
            if sig in seen_sig:
                continue
            tried[i] = tried.get(i, 0) + 1
            # The decision's key names the perturbation too: two perturbations can give the same
            # tensor shapes with different integer arguments (sizes that follow the tensors, or
            # not), and only one may run (decay_cumsum: a block size grown to a non-power of 2).
            if not runs_on(new, f"{sig} (call {i}: {p.describe()})"):
                continue
            seen_sig.add(sig)
            found.append(ShapeCall(new, i, p.describe()))
        return found

    def _prober(self) -> Callable[[tuple, str], bool]:
        """Whether the reference runs on a perturbed call (values, a key naming it): probed here
        on the interpreter; on a GPU decided in child processes first (shape_probe.py says why),
        so this process only looks the answers up; in such a child, looked up where decided and
        probed (each probe announced, then its outcome) where not."""
        from bench.adapters import shape_probe

        if self._child is not None:
            decided, report = self._child

            def probe_announced(values: tuple, sig: str) -> bool:
                if sig in decided:
                    return decided[sig]
                report(shape_probe.TRY, sig)
                ok = self._reference_runs(values)
                report(shape_probe.RUNS if ok else shape_probe.REJECTED, sig)
                return ok

            return probe_announced
        if not shape_probe.in_child(self.interpreter):
            return lambda values, sig: self._reference_runs(values)
        if self._decided is None:  # one round of children decides the new shapes and the perf inputs
            self._start_deciding()
            if shape_probe.works_ahead():
                self._record_perf_inputs_ahead()  # while the children probe, not after
            assert self._deciding is not None
            try:
                self._decided, self.probe_notes = self._deciding.result()
            finally:
                self._deciding = None  # a failure is not kept: the next job that needs them tries again
        decided = self._decided
        return lambda values, sig: decided.get(sig, False)

    # ------------------------------------------------------------ the worker's side of probing, ahead

    def start_ahead(self, cases: tuple[Case, ...]) -> None:
        """A job is about to judge `cases`: where they need the probing children's decisions (a
        new shape or a perf case) and the children run elsewhere (on a GPU), start them now, so
        they probe while this worker loads the candidate and records the suite's calls. On an
        H100 (2026-12-06) a worker spent 4.3 s recording the suite and 5.3 s making perf inputs
        around a 21-s wait for its child. Never raises: the decisions are the same either way."""
        from bench.adapters import shape_probe

        if (self._child is not None or self._decided is not None or not shape_probe.in_child(self.interpreter)
                or not shape_probe.works_ahead()):
            return
        if any("shape" in c.dims or "perf" in c.dims for c in cases):
            self._start_deciding()

    def _start_deciding(self) -> None:
        from bench.adapters import shape_probe

        if self._deciding is None:
            key = "\n".join((str(self.sf.path), self.sf.kind, self.code, self.test, str(GPU_SHAPE_ELEMENTS)))
            state = self.probe_state()
            self._deciding = _Deciding(lambda: shape_probe.decide_in_children(state, key))

    def _record_perf_inputs_ahead(self) -> None:
        """The suite's perf inputs recorded now, for `perf_calls` to take later, with torch's
        generators left as they were (`perf_calls` puts them where recording there would have
        left them): a job needing the children's decisions needs the perf inputs too (hidden and
        timed jobs run the perf cases on a GPU). A failure is kept for `perf_calls` to raise.
        One suite per process holds such inputs unused (`_AheadHeld`): a job that stops before its
        perf cases (a candidate wrong at a new shape) leaves them, and a worker of a long run
        judges many suites, each holding up to gigabytes."""
        if self._perf_ahead is not None or self._perf_calls is not None:
            return
        _AheadHeld.take(self)
        before = _generator_states()
        try:
            outcome: list[tuple] | Exception = self.recorded.suite_perf_inputs()
        except Exception as exc:  # noqa: BLE001 - raised where perf_calls asks for them, as before
            outcome = exc
        self._perf_ahead = (outcome, _generator_states())
        _restore_generators(before)
        _release_probe_memory()

    def _drop_perf_ahead(self) -> None:
        """Another suite records ahead now: these are recorded again where needed, as before."""
        self._perf_ahead = None

    def _suite_perf_inputs(self) -> list[tuple]:
        ahead, self._perf_ahead = self._perf_ahead, None
        _AheadHeld.release(self)
        if ahead is None:
            return self.recorded.suite_perf_inputs()
        outcome, after = ahead
        _restore_generators(after)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def probe_state(self) -> tuple:
        """What a probing child needs to be this suite (`from_probe_state`)."""
        return self.sf, self.interpreter, self.perf_script

    @classmethod
    def from_probe_state(cls, state: tuple) -> GeakSuite:
        sf, interpreter, perf_script = state
        if interpreter:
            from bench.adapters._adapted import interpreter_autotune_first_config

            interpreter_autotune_first_config()
        return cls(sf, interpreter, perf_script)

    def probe_here(self, decided: dict[str, bool], report: Callable[[str, str], None]) -> None:
        """In a probing child: the new-shape search and the choice of perf inputs, `decided`
        taken as given, each other probe reported before and after (`shape_probe._child_main`)."""
        self._child = (decided, report)
        self.shape_calls()
        self.perf_calls()

    def _reference_runs(self, values: tuple) -> bool:
        """The suite's reference runs on `values` and gives the same answer twice, the second
        time on copies made after memory was filled with other values: a shape where the
        reference reads memory it does not own (an argument not grown with the others) has no
        answer to judge a candidate against. Out of GPU memory, the probe is tried again
        (`PROBE_MEMORY_TRIES`) before the shape counts as rejected."""
        for attempt in range(PROBE_MEMORY_TRIES):
            try:
                return self._runs_the_same(values)
            except _ProbeOutOfMemory:
                _release_probe_memory()
                if attempt + 1 < PROBE_MEMORY_TRIES:
                    time.sleep(PROBE_MEMORY_WAIT_S * (attempt + 1))
        return False

    def _runs_the_same(self, values: tuple) -> bool:
        device = self.run_device()
        try:
            args = _outputs.clone_call(_to_device(values, device))
            out = self._run(args)
            if out is None and not self.output_spec().written:
                return False
            first = _outputs.clone_call(self.judged(out, args))
            with _outputs.disturbed_memory(device):
                again_args = _outputs.clone_call(_to_device(values, device))
            again = self._run(again_args)
        except Exception as exc:  # noqa: BLE001 - the suite's reference rejects this shape: not a case
            if mentions_device_error(f"{type(exc).__name__}: {exc}"):
                # Not a rejection: this process's GPU context is gone, and every later step
                # would fail with an error that no longer says where it came from.
                raise ReferenceFault(f"the suite's reference faulted on the GPU while the adapter probed it on "
                                     f"{_shapes.describe_shapes(values)}: {type(exc).__name__}: "
                                     f"{str(exc).splitlines()[0][:300]}") from exc
            if mentions_out_of_memory(f"{type(exc).__name__}: {exc}"):
                raise _ProbeOutOfMemory() from exc
            return False
        return _outputs.same(first, self.judged(again, again_args))

    def perf_calls(self) -> list[tuple]:
        """The calls speedups are measured on: the suite's perf inputs where it ships them and
        the reference runs on them, else the largest of the new shapes and recorded calls (those
        within a factor PERF_SPREAD of the largest, so a five-element call never dilutes them)."""
        if self._perf_calls is None:
            calls = self.calls()
            largest_first = sorted(self._suite_perf_inputs(), key=_shapes.elements, reverse=True)
            runs_on = self._prober()
            suite = [c for k, c in enumerate(largest_first)
                     if runs_on(c, f"perf input {k}: {_shapes.describe_shapes(c)}")][:PERF_SLOTS]
            pool = sorted([s.values for s in self.shape_calls()] + list(calls), key=_shapes.elements, reverse=True)
            largest = _shapes.elements(pool[0])
            self._perf_calls = suite or [c for c in pool if _shapes.elements(c) * PERF_SPREAD >= largest][:PERF_SLOTS]
            _release_probe_memory()
        return self._perf_calls

    def make_inputs(self, c: Case, device: str) -> tuple:
        dims = c.dims
        if "shape" in dims:
            shapes = self.shape_calls()
            if dims["shape"] >= len(shapes):
                raise CaseUnavailable(f"{c.name}: no new shape for this slot (the reference runs on "
                                      f"{len(shapes)} of the perturbations tried)")
            base = shapes[dims["shape"]].values
        elif "perf" in dims:
            perf = self.perf_calls()
            base = perf[dims["perf"] % len(perf)]
        else:
            calls = self.calls()
            base = calls[dims["call"] % len(calls)]
        return tuple(_permuted(_to_device(v, device), c.seed, pos) for pos, v in enumerate(base))

    def reference(self, *args: Any) -> tuple:
        """The suite's entry point on `args`, in the judged form (return value, then written
        arguments). Called on the dtypes the case has: the judge makes no widened float64 run
        of a suite's Triton reference (judge/comparison.py `expected_output`)."""
        returned = self.reference_fn()(*args)
        result = self.judged(returned, args)
        if not result:
            calls = len(self.calls())
            why = (f" (learning its outputs, it raised on {len(self._learn_failures)} of the {calls} recorded calls: "
                   f"{self._learn_failures[0]})" if self._learn_failures else "")
            raise NothingToCompare(f"{self.sf.target} returned nothing and wrote no argument: there is nothing to "
                               f"compare{why}")
        return result


class _AheadHeld:
    """The one suite in this process holding perf inputs recorded ahead and not yet taken."""

    suite: GeakSuite | None = None

    @classmethod
    def take(cls, suite: GeakSuite) -> None:
        if cls.suite is not None and cls.suite is not suite:
            cls.suite._drop_perf_ahead()
        cls.suite = suite

    @classmethod
    def release(cls, suite: GeakSuite) -> None:
        if cls.suite is suite:
            cls.suite = None


class _Deciding:
    """The probing children's decisions made on a thread of their own (it only starts processes
    and reads their reports), taken with `result`, which raises what deciding raised."""

    def __init__(self, decide: Callable[[], tuple[dict[str, bool], list[str]]]):
        self._outcome: tuple[dict[str, bool], list[str]] | BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(decide,), name="shape-probe", daemon=True)
        self._thread.start()

    def _run(self, decide: Callable[[], tuple[dict[str, bool], list[str]]]) -> None:
        try:
            self._outcome = decide()
        except BaseException as exc:  # noqa: BLE001 - handed to the thread that asks for the result
            self._outcome = exc

    def result(self) -> tuple[dict[str, bool], list[str]]:
        self._thread.join()
        outcome = self._outcome
        if isinstance(outcome, BaseException):
            raise outcome
        assert outcome is not None
        return outcome


def _generator_states() -> tuple[Any, Any]:
    """torch's CPU generator's state, and the current GPU's where this process made a context."""
    import torch

    cuda = torch.cuda.get_rng_state() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    return torch.get_rng_state(), cuda


def _restore_generators(states: tuple[Any, Any]) -> None:
    import torch

    cpu, cuda = states
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state(cuda)


def _release_probe_memory() -> None:
    """Hand the GPU memory the probes reserved back to the driver. Probes run the reference on
    shapes up to 2**26 elements; PyTorch's caching allocator would keep that peak reserved in
    this process for good, and several judging processes sharing one GPU then run each other
    out of memory (seen on an H200 with 16 processes: 140 GB reserved, most jobs failing)."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


SHUFFLE_LIMIT = 1 << 20
"""Above this many elements a permuted case reorders values with a seeded affine map instead of
a full shuffle: `torch.randperm` runs on the CPU (the same order on every device), and for the
50M-element caches of TritonBench's copy kernels it took seconds per tensor, so a hidden set
outlived the job's time limit in preparing inputs alone."""


def _permuted(t: Any, seed: int, pos: int) -> Any:
    """A floating-point tensor's values in a seeded new order (seed 0: unchanged)."""
    import torch

    if seed <= 0 or not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() <= 1:
        return t
    g = torch.Generator().manual_seed(seed * 7919 + pos)
    n = t.numel()
    perm = torch.randperm(n, generator=g).to(t.device) if n <= SHUFFLE_LIMIT else _affine_order(n, g, t.device)
    return t.contiguous().reshape(-1)[perm].reshape(t.shape)


def _affine_order(n: int, g: Any, device: Any) -> Any:
    """`i -> (a*i + b) mod n` with `a` coprime to `n` (a permutation), `a` and `b` drawn from
    `g`: computed where the tensor lives, in integers, so every device gets the same order."""
    import math

    import torch

    a = int(torch.randint(n // 3, n, (1,), generator=g))
    while math.gcd(a, n) != 1:
        a += 1
    b = int(torch.randint(0, n, (1,), generator=g))
    return (torch.arange(n, dtype=torch.int64, device=device) * a + b) % n
