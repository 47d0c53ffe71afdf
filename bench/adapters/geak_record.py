"""Recording a GEAK-eval file's calls and turning them into the task's cases.

Hidden cases are differential: the suite's test runs once per process (in the evaluation
worker, on the device the cases run on) with the entry point wrapped so its arguments are
recorded. The reference is the suite's own code on the same inputs. Cases come in four
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

import inspect
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.adapters import _outputs, _shapes
from bench.adapters._adapted import PerformanceMetricsStub, import_text, module_name, run_in_namespace
from bench.adapters._glue import complete, missing_imports
from bench.adapters.geak_parse import MAX_CALLS, SuiteFile
from bench.faults import mentions_device_error
from bench.sequences import same_kind
from bench.task import Case, CaseUnavailable, NothingToCompare, OutputArgs

CPU_MAX_ELEMENTS = 1 << 18
CPU_SHAPE_ELEMENTS = 1 << 14
GPU_SHAPE_ELEMENTS = 1 << 26
GPU_PERF_ELEMENTS = 1 << 27
SHAPE_SLOTS_GPU = 8
SHAPE_SLOTS_CPU = 4
PERF_SLOTS = 3
PERF_SPREAD = 16
SHAPE_ATTEMPTS = 6


class ReferenceFault(RuntimeError):
    """The suite's reference ended the GPU context while the adapter probed it."""


class _Captured(Exception):
    """Raised by the recorder to stop a pytest-style test once its inputs are captured."""


class _Request:
    """Stands in for pytest's `request` fixture (tests read request.node.name)."""

    def __init__(self, name: str):
        self.node = type("Node", (), {"name": name, "nodeid": name})()


def _param_sets(fn: Callable[..., Any]) -> list[dict[str, Any]]:
    sets: list[dict[str, Any]] = [{}]
    for mark in reversed(getattr(fn, "pytestmark", [])):
        if getattr(mark, "name", "") != "parametrize" or len(mark.args) < 2:
            continue
        names = mark.args[0] if not isinstance(mark.args[0], str) else [n.strip() for n in mark.args[0].split(",")]
        combos = []
        for value in mark.args[1]:
            if hasattr(value, "values") and hasattr(value, "marks"):  # pytest.param(...)
                values = tuple(value.values)
            else:
                values = tuple(value) if len(names) > 1 else (value,)
            if len(values) == len(names):
                combos.append(dict(zip(names, values, strict=True)))
        sets = [{**a, **b} for a, b in itertools.product(sets, combos)]
    return sets


def _to_cpu(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").clone()
    if isinstance(value, (list, tuple)):
        return same_kind(value, (_to_cpu(v) for v in value))
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    return value


def _to_device(value: Any, device: str) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device).clone()
    if isinstance(value, (list, tuple)):
        return same_kind(value, (_to_device(v, device) for v in value))
    return value


def _python_function(kernel: Any) -> Any:
    """The Python function under a JITFunction / Autotuner / Heuristics chain."""
    fn = kernel
    for _ in range(8):
        inner = getattr(fn, "fn", None)
        if inner is None or inner is fn:
            break
        fn = inner
    return fn


class _ApplyRecorder:
    """Stands in for an autograd Function class whose `.apply` the test calls directly."""

    def __init__(self, cls: Any, record: Callable[[tuple, dict], None]):
        self._cls = cls
        self._record = record

    def apply(self, *args: Any, **kwargs: Any) -> Any:
        self._record(args, kwargs)
        return self._cls.apply(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cls, name)


def _frozen_grid(grid: Any, kernel: Any, sig: inspect.Signature, bound: dict[str, Any], kwargs: dict) -> Any:
    """A grid the test wrote as a function of the launch's meta-parameters (`lambda meta:
    (cdiv(n, meta['BLOCK_SIZE']),)`), evaluated now on the launch's own arguments. The replayed
    launch's values cross to the candidate's process as data (judge/candidate/wire.py), where a function
    cannot go; for a kernel that is not autotuned the meta-parameters are exactly the launch's
    arguments, so the tuple is the grid Triton would have computed. An autotuned kernel's grid
    is evaluated under each of its configurations: when all give the same tuple (a grid the test
    computes from its own block sizes) that tuple is the grid; when they differ it depends on the
    configuration the autotuner picks and stays a function (such a launch cannot be replayed in a
    candidate's process)."""
    if not callable(grid):
        return grid
    meta = {name: p.default for name, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}
    meta.update(bound)
    meta.update(kwargs)
    configs = getattr(kernel, "configs", None)
    metas = [meta] if configs is None else [{**meta, **_config_meta(c)} for c in configs]
    frozen: set[tuple[int, ...]] = set()
    for one in metas:
        try:
            value = grid(one)
        except Exception:  # noqa: BLE001 - a grid needing what the launch does not say stays a function
            return grid
        if not isinstance(value, (tuple, list)):
            return grid
        frozen.add(tuple(int(g) for g in value))
    return frozen.pop() if len(frozen) == 1 else grid


def _config_meta(config: Any) -> dict[str, Any]:
    """The meta-parameters a `triton.Config` adds to a launch (its block sizes and launch options)."""
    every = getattr(config, "all_kwargs", None)
    return dict(every()) if callable(every) else dict(getattr(config, "kwargs", {}) or {})


class _LaunchRecorder:
    """Stands in for a kernel the test launches itself: `kernel[grid](...)` is recorded, then
    launched for real (a TritonBench test goes on using its result)."""

    def __init__(self, kernel: Any, record: Callable[[Any, tuple, dict], None]):
        self._kernel = kernel
        self._record = record

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        def launch(*args: Any, **kwargs: Any) -> Any:
            self._record(grid, args, kwargs)
            return self._kernel[grid](*args, **kwargs)

        return launch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kernel, name)


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
        self._calls: list[tuple] | None = None
        self._recording: tuple[dict[str, Any], dict[str, Any]] | None = None
        self._outputs: OutputArgs | None = None
        self._child: tuple[dict[str, bool], Callable[[str, str], None]] | None = None  # in a probing child
        self._decided: dict[str, bool] | None = None  # the probing children's decisions, once made
        self.probe_notes: list[str] = []  # shapes whose probe ended the probing process
        self._learn_failures: list[str] = []  # what the reference raised on recorded calls while its outputs were learnt
        self._shape_calls: list[ShapeCall] | None = None
        self._perf_calls: list[tuple] | None = None
        self.failure = ""

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

    # ------------------------------------------------------------ recording

    def calls(self) -> list[tuple]:
        if self._calls is None:
            self._calls = self._record()
        return self._calls

    def _flatten(self, original: Any) -> Callable[[tuple, dict], tuple | None]:
        """How a call's (args, kwargs) become the positional values the judge passes."""
        sf = self.sf
        if sf.entry_kind in ("apply", "class_apply"):
            return lambda args, kwargs: (*args, *kwargs.values())
        sig = inspect.signature(inspect.unwrap(original))
        packed = not sf.order and any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values())

        def bind(args: tuple, kwargs: dict) -> tuple | None:
            if packed:  # a decorator that hides the signature: the values as passed
                return (*args, *kwargs.values())
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError:
                return None
            bound.apply_defaults()
            if not sf.order:
                return tuple(bound.arguments.values())
            return tuple(bound.arguments[name] for name in sf.order)

        return bind

    def _launch_values(self, kernel: Any, grid: Any, args: tuple, kwargs: dict) -> tuple | None:
        shape = self.sf.launch
        assert shape is not None
        sig = inspect.signature(_python_function(kernel))
        params = {k: v for k, v in kwargs.items() if k in sig.parameters}
        try:
            bound = sig.bind_partial(*args, **params)
        except TypeError:
            return None
        values = []
        for name in shape.positional + shape.keywords:
            if name in bound.arguments:
                values.append(bound.arguments[name])
            elif sig.parameters[name].default is not inspect.Parameter.empty:
                values.append(sig.parameters[name].default)
            else:
                return None
        if shape.options:
            values.append({k: v for k, v in kwargs.items() if k not in sig.parameters})
        values.append(_frozen_grid(grid, kernel, sig, bound.arguments, kwargs))
        return tuple(values)

    def _install(self, ns: dict[str, Any], originals: dict[str, Any], sink: list[tuple], stop: bool) -> None:
        """Replace the entry's target in `ns` with a recorder appending to `sink` (raising
        `_Captured` after each call when `stop`, which ends a pytest-style test early)."""
        sf = self.sf
        original = originals.setdefault(sf.target, ns[sf.target])

        def keep(values: tuple | None) -> None:
            if values is not None and len(sink) < MAX_CALLS:
                sink.append(tuple(_to_cpu(v) for v in values))
                if stop:
                    raise _Captured()

        if sf.entry_kind == "launch":
            ns[sf.target] = _LaunchRecorder(original, lambda grid, a, k: keep(self._launch_values(original, grid, a, k)))
            return
        if sf.entry_kind == "class_apply":
            ns[sf.target] = _ApplyRecorder(original, lambda a, k: keep((*a, *k.values())))
            return
        flatten = self._flatten(original)

        def recorder(*args: Any, **kwargs: Any) -> Any:
            keep(flatten(args, kwargs))
            return original(*args, **kwargs)

        ns[sf.target] = recorder

    def _run_pytest_functions(self, ns: dict[str, Any], names: tuple[str, ...], sink: list[tuple],
                              limit: int, spread: bool = False) -> str:
        """Call pytest-style test functions, parameter set by parameter set, until `limit` calls
        are recorded (with `spread`, parameter sets evenly spaced over the whole list: a
        performance test sweeps sizes upward). Returns the first failure met (the suite's own
        test may fail)."""
        failure = ""
        for name in names:
            fn = ns.get(name)
            if not callable(fn):
                continue
            params = inspect.signature(fn).parameters
            # ROCm tests take `request` and often `device='cuda'`: a parameter with a default is
            # not a fixture we must provide.
            required = {n for n, p in params.items()
                        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
            sets = _param_sets(fn)
            if spread and len(sets) > limit:
                sets = [sets[i] for i in sorted({round(k * (len(sets) - 1) / (limit - 1)) for k in range(limit)})]
            for kwargs in sets:
                if len(sink) >= limit:
                    return failure
                if "request" in params:
                    kwargs = {**kwargs, "request": _Request(name)}
                if required - set(kwargs):
                    break  # a fixture we cannot provide
                try:
                    fn(**kwargs)
                except _Captured:
                    pass
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as exc:  # noqa: BLE001 - pytest.skip/fail raise BaseExceptions; inputs are what we need
                    failure = failure or f"{type(exc).__name__}: {exc}"
        return failure

    def _record(self) -> list[tuple]:
        import torch

        sf = self.sf
        module = import_text(self.code, module_name("rec", str(sf.path), self.code))
        ns = module.__dict__
        originals: dict[str, Any] = {}
        recorded: list[tuple] = []
        # A TritonBench test runs at import and goes on using each result: let it. A pytest-style
        # test (ROCm) is called per parameter set and stopped once its call is recorded.
        stop_each = sf.entry_in_test or sf.kind == "rocm"
        defined_by_test = sf.entry_in_test or sf.from_perf_only
        torch.manual_seed(0)
        failure = ""
        if not defined_by_test:
            self._install(ns, originals, recorded, stop_each)
        try:
            failures = run_in_namespace(self.test, module_name("test", str(sf.path), self.test), ns, (_Captured,))
            failure = failures[0] if failures else ""
        except _Captured:
            pass
        if defined_by_test:
            self._install(ns, originals, recorded, True)
        if not recorded:
            names = sf.perf_callers if sf.from_perf_only else sf.test_callers
            failure = self._run_pytest_functions(ns, names, recorded, MAX_CALLS) or failure
        self._recording = (ns, originals)
        self.failure = failure
        if not recorded:
            raise RuntimeError(f"the suite's test recorded no call of {sf.target}" + (f" ({failure})" if failure else ""))
        replayable = [c for c in recorded if not any(_holds_raw_address(v) for v in c)]
        if not replayable:
            raise RuntimeError(f"every call the suite's test makes of {sf.target} passes an object holding a raw "
                               "device address (not a tensor), which no copy or other process can replay")
        recorded = replayable
        if self.interpreter:
            small = [c for c in recorded if _shapes.elements(c) <= CPU_MAX_ELEMENTS]
            recorded = small or [min(recorded, key=_shapes.elements)]
        return recorded

    def _suite_perf_inputs(self) -> list[tuple]:
        """The calls the suite's performance test (ROCm) or perf script (TritonBench) makes, read
        only when timing needs them (never on the interpreter): they are large."""
        sf = self.sf
        self.calls()
        if self.interpreter or sf.from_perf_only or self._recording is None:
            return []
        ns, originals = self._recording
        perf: list[tuple] = []
        if sf.perf_callers:
            self._install(ns, originals, perf, True)
            self._run_pytest_functions(ns, sf.perf_callers, perf, MAX_CALLS, spread=True)
        elif self.perf_script is not None:
            self._install(ns, originals, perf, True)
            perf = self._record_perf_script(ns, perf, GPU_PERF_ELEMENTS)
        return [c for c in perf if _shapes.elements(c) <= GPU_PERF_ELEMENTS]

    def perf_script_calls(self, max_elements: int) -> list[tuple]:
        """The calls this file's TritonBench perf script makes, read on their own (on a GPU
        `calls()` reads them with the rest; the interpreter never times, so it skips them)."""
        module = import_text(self.code, module_name("perfrec", str(self.sf.path), self.code))
        sink: list[tuple] = []
        self._install(module.__dict__, {}, sink, True)
        return self._record_perf_script(module.__dict__, sink, max_elements)

    def _record_perf_script(self, ns: dict[str, Any], sink: list[tuple], max_elements: int) -> list[tuple]:
        """TritonBench's perf script for this file: its `get_input_tensors()` inputs, up to
        three spread over the sizes it sweeps (the largest that fits first), each passed through
        its own `call_op` once with the entry recorded."""
        from bench.adapters._adapted import for_interpreter

        if self.perf_script is None:
            return []
        text = self.perf_script.read_text(errors="replace")
        if self.interpreter:
            text = for_interpreter(text)
        lines = []
        names: list[str] = []
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith("from TritonBench_v1.") and " import " in stripped:
                names += [n.strip() for n in stripped.split(" import ", 1)[1].split(",")]
                line = line[: len(line) - len(line.lstrip())] + "pass"
            elif stripped.startswith("from performance_utils import") or stripped.startswith("sys.path.append"):
                line = line[: len(line) - len(line.lstrip())] + "pass"
            lines.append(line)
        script_ns: dict[str, Any] = {"__name__": "kmc_perf_script", "Performance_Metrics": PerformanceMetricsStub,
                                     "do_bench_config": lambda *a, **k: None}
        for n in names:
            if n in ns:
                script_ns[n] = ns[n]
        try:
            run_in_namespace("\n".join(lines), module_name("perf", str(self.perf_script), text), script_ns, (_Captured,))
            metrics = script_ns["performance_metrics"]()
            metrics.get_input_tensors()
            inputs = list(metrics.input_tensors)
        except Exception:  # noqa: BLE001 - no perf inputs: speedups fall back to the largest hidden shapes
            return []
        sized = sorted(((i, _perf_elements(x)) for i, x in enumerate(inputs)), key=lambda p: p[1])
        fitting = [i for i, n in sized if n <= max_elements]
        picks = sorted({fitting[int(len(fitting) * f)] for f in (0.99, 0.66, 0.33)} if fitting else set(), reverse=True)
        for i in picks:
            try:
                metrics.call_op(metrics.to_cuda(inputs[i]))
            except _Captured:
                pass
            except Exception:  # noqa: BLE001 - an input the op refuses is not a perf input
                continue
        return sink

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
            key = "\n".join((str(self.sf.path), self.sf.kind, self.code, self.test, str(GPU_SHAPE_ELEMENTS)))
            self._decided, self.probe_notes = shape_probe.decide_in_children(self.probe_state(), key)
        decided = self._decided
        return lambda values, sig: decided.get(sig, False)

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
        answer to judge a candidate against."""
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
        of a suite's Triton reference (judge/oracle.py `expected_output`)."""
        returned = self.reference_fn()(*args)
        result = self.judged(returned, args)
        if not result:
            calls = len(self.calls())
            why = (f" (learning its outputs, it raised on {len(self._learn_failures)} of the {calls} recorded calls: "
                   f"{self._learn_failures[0]})" if self._learn_failures else "")
            raise NothingToCompare(f"{self.sf.target} returned nothing and wrote no argument: there is nothing to "
                               f"compare{why}")
        return result


def _holds_raw_address(value: Any, depth: int = 0) -> bool:
    """A tensor-like object that is not a tensor but hands Triton a `data_ptr()` of its own
    (FlagGems' StridedBuffer: a base tensor plus an address computed from it). The address is
    this process's, of the test's own tensor: a copy of the call, or the same call replayed in
    a candidate's process, would still point there (on an H200 the candidate's launch was
    refused: "cannot be accessed from Triton"). Such calls are not replayed."""
    import torch

    if isinstance(value, torch.Tensor) or depth > 4:
        return False
    if isinstance(value, (list, tuple)):
        return any(_holds_raw_address(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return any(_holds_raw_address(v, depth + 1) for v in value.values())
    return callable(getattr(type(value), "data_ptr", None))


def _release_probe_memory() -> None:
    """Hand the GPU memory the probes reserved back to the driver. Probes run the reference on
    shapes up to 2**26 elements; PyTorch's caching allocator would keep that peak reserved in
    this process for good, and several judging processes sharing one GPU then run each other
    out of memory (seen on an H200 with 16 processes: 140 GB reserved, most jobs failing)."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _perf_elements(x: Any) -> int:
    import torch

    if isinstance(x, torch.Tensor):
        return x.numel()
    if isinstance(x, (list, tuple)):
        return sum(_perf_elements(v) for v in x)
    if isinstance(x, dict):
        return sum(_perf_elements(v) for v in x.values())
    return 0


SHUFFLE_LIMIT = 1 << 20
"""Above this many elements a permuted case reorders values with a seeded affine map instead of
a full shuffle: `torch.randperm` runs on the CPU (the same order on every device), and for the
50M-element caches of TritonBench's copy kernels it took about 9 s per tensor on an H200 host,
so a 17-case hidden set outlived the 150 s limit in preparing inputs alone."""


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
