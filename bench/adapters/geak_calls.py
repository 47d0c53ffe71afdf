"""Recording a GEAK-eval file's calls of its entry point: the suite's test runs with the entry
wrapped (a function, an autograd Function's `apply`, or a kernel the test launches itself), so
each call's arguments are kept, on the CPU, as the positional values the judge passes. A
TritonBench test runs at import; a pytest-style (ROCm) test is called per parameter set and
stopped once its call is recorded. The suite's performance inputs (a ROCm performance test,
a TritonBench perf script) are recorded the same way, only when timing needs them.

geak_record.py builds the task's cases from these calls.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.adapters import _shapes
from bench.adapters._adapted import PerformanceMetricsStub, import_text, module_name, run_in_namespace
from bench.adapters._oversize import holds_meta, skipping_oversize, tensors_in
from bench.adapters.geak_parse import MAX_CALLS, SuiteFile
from bench.sequences import same_kind

CPU_MAX_ELEMENTS = 1 << 18
GPU_PERF_ELEMENTS = 1 << 27


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


def to_cpu(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").clone()
    if isinstance(value, (list, tuple)):
        return same_kind(value, (to_cpu(v) for v in value))
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
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


class SuiteCalls:
    """The calls one adapted file's test makes of its entry point, recorded lazily, once per
    process (`calls()`), and the suite's performance inputs, recorded on demand."""

    def __init__(self, sf: SuiteFile, code: str, test: str, interpreter: bool, perf_script: Path | None = None):
        self.sf = sf
        self.code, self.test = code, test
        self.interpreter = interpreter
        self.perf_script = perf_script
        self._calls: list[tuple] | None = None
        self._recording: tuple[dict[str, Any], dict[str, Any]] | None = None
        self.failure = ""  # the first failure the suite's own test met while its calls were recorded

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
                sink.append(tuple(to_cpu(v) for v in values))
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

    def suite_perf_inputs(self) -> list[tuple]:
        """The calls the suite's performance test (ROCm) or perf script (TritonBench) makes, read
        only when timing needs them (never on the interpreter): they are large."""
        sf = self.sf
        self.calls()
        if self.interpreter or sf.from_perf_only or self._recording is None:
            return []
        ns, originals = self._recording
        perf: list[tuple] = []
        _seed_inputs()
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
        _seed_inputs()
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
            inputs = _made_inputs(metrics, max_elements)
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


def _seed_inputs() -> None:
    """The generators seeded before a suite's perf inputs are made, as before its test is run
    (`_record`): the values were whatever the process had drawn before, so the probing child and
    each worker of a run made different perf cases of one task, and a run's perf-case verdicts
    hung on which tasks a worker had judged first."""
    import torch

    torch.manual_seed(0)


def _made_inputs(metrics: Any, max_elements: int) -> list[Any]:
    """The script's inputs, those over `max_elements` left unmade where it can be (_oversize.py);
    made the plain way where a kept input would hold an unmade tensor, or the script could not
    run so."""
    try:
        with skipping_oversize(max_elements):
            metrics.get_input_tensors()
        inputs = list(metrics.input_tensors)
        if not any(holds_meta(x) for x in inputs if _perf_elements(x) <= max_elements):
            return inputs
    except Exception:  # noqa: BLE001 - the script mixes an unmade tensor with real ones: made as written below
        pass
    metrics.get_input_tensors()
    return list(metrics.input_tensors)


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


def _perf_elements(x: Any) -> int:
    return sum(t.numel() for t in tensors_in(x))
