"""What adapted tasks share: the task record, importing suite code from text, and the
transforms that let a suite written for `device='cuda'` run through the CPU interpreter.

Suite code is imported from files written to a private temporary folder (Triton's `@jit`
reads its source from a file), once per process.
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import re
import shutil
import sys
import tempfile
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.modules import import_file
from bench.task import FLOAT_DTYPES, GEAK_EVAL_PROFILE, Case, Task, Tolerance

ADAPTED_TOLERANCES = {
    # The reference of an adapted task is the suite's own code at the inputs' precision (a Triton
    # kernel does not run in float64), so fp32 is compared at 1e-3, GEAK-eval's own tolerance.
    "float32": Tolerance(atol=1e-3, rtol=1e-3),
    "float16": Tolerance(atol=1e-2, rtol=1e-2),
    "bfloat16": Tolerance(atol=2e-2, rtol=2e-2),
    "float64": Tolerance(atol=1e-8, rtol=1e-8),
    "int8": Tolerance(atol=0, rtol=0),
    "int32": Tolerance(atol=0, rtol=0),
    "int64": Tolerance(atol=0, rtol=0),
    "bool": Tolerance(atol=0, rtol=0),
}


GEAK_EVAL_TOLERANCE = Tolerance(atol=1e-2, rtol=1e-1)
"""What GEAK-eval's run.py passes its checker (`evaluator(..., atol=1e-2, rtol=1e-1)`)."""


@dataclass(frozen=True)
class AdaptedTask(Task):
    """A task read from an external suite. The baseline is text (derived from the suite's
    file), not a file under bench/kernels; `triton_baseline` is False where the suite has no
    Triton reference (KernelBench: the baseline is eager PyTorch, used for speedups only)."""

    origin: str = ""
    mode: str = ""
    test_mode: str = ""
    baseline_text: str = ""
    triton_baseline: bool = True
    appended: str = ""
    """The suite's own call of the code (a launcher from its test section, glue): appended to a
    candidate that does not define the entry point."""
    test_imports: str = ""
    """Imports the suite's test section makes and its code does not (bench/adapters/_glue.py
    `missing_imports`): appended to every candidate lacking them."""
    output_form: Callable[[Any, tuple], Any] | None = None
    entry_kind: str = "function"
    suite_cases: tuple[Case, ...] = ()
    """The suite's own calls, replayed as the suite makes them: what its own checker judges."""
    ahead: Callable[[tuple[Case, ...]], None] | None = None
    """What `start_ahead` starts (geak_record.py `GeakSuite.start_ahead`)."""

    @property
    def baseline_path(self) -> Path:
        return Path(self.origin)

    def baseline_source(self) -> str:
        return self.baseline_text

    def judged_output(self, returned: Any, args: tuple, case: Case) -> Any:
        return returned if self.output_form is None else self.output_form(returned, args)

    def start_ahead(self, cases: tuple[Case, ...]) -> None:
        if self.ahead is not None:
            self.ahead(cases)

    def profile(self, name: str) -> Task | None:
        """`geak-eval`: the suite's own calls only (no permutations, no new shapes), compared at
        GEAK-eval's tolerance (atol 1e-2, rtol 1e-1 for every floating-point dtype, exact
        otherwise), with the rest of the oracle unchanged (poisoned outputs, unchanged inputs, a
        kernel must run). Its verdict gives GEAK-eval's call accuracy (the code imports and its
        entry point runs) and execution accuracy beside the strict hidden verdict."""
        if name != GEAK_EVAL_PROFILE or not self.suite_cases:
            return None
        tolerances = {d: GEAK_EVAL_TOLERANCE if d in FLOAT_DTYPES else Tolerance(0, 0) for d in self.tolerances}
        return dataclasses.replace(self, id=f"{self.id}@{name}", visible=self.suite_cases, hidden_gpu=(),
                                   hidden_cpu=(), suites=(), tolerances=tolerances, suite_cases=(),
                                   judges_overruns=False)

    def contract(self) -> str:
        """A suite with its own Triton reference states its contract through its own calls (their
        layouts, output arguments its wrappers write in place): nothing is added to it."""
        return "" if self.triton_reference else super().contract()

    def complete_source(self, source: str) -> str:
        from bench.adapters._glue import complete

        return complete(source, self.entry_point, self.appended, self.test_imports)


# ---------------------------------------------------------------- importing suite code

_WORKDIR: list[Path] = []


def workdir() -> Path:
    if not _WORKDIR:
        path = Path(tempfile.mkdtemp(prefix="kmc-adapted-"))
        atexit.register(shutil.rmtree, path, True)
        _WORKDIR.append(path)
    return _WORKDIR[0]


def module_name(*parts: str) -> str:
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    return f"kmc_adapted_{digest}"


def import_text(text: str, name: str) -> types.ModuleType:
    """Import `text` as module `name` from a file of its own."""
    install_suite_stubs()
    path = workdir() / f"{name}.py"
    path.write_text(text)
    return import_file(path, name)


def run_in_namespace(text: str, name: str, namespace: dict[str, Any],
                     passes: tuple[type[BaseException], ...] = ()) -> list[str]:
    """Run `text` (written to its own file, so `@triton.jit` can read its source) inside an
    existing module's namespace: a suite's test section against its code section.

    Statement by statement: a statement that fails (an import of something this Triton no
    longer has, the suite's own test failing) is noted and the next one still runs, so the
    launcher and test functions defined after it exist. Exceptions of the `passes` types
    propagate (the recorder's stop signal); KeyboardInterrupt and SystemExit always do.
    Returns the failures, one line each."""
    import ast

    install_suite_stubs()
    path = workdir() / f"{name}.py"
    path.write_text(text)
    failures: list[str] = []
    for node in ast.parse(text).body:
        code = compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec")
        try:
            exec(code, namespace)  # noqa: S102 - suite code the user pointed us to
        except BaseException as exc:  # noqa: BLE001 - pytest.skip and friends are BaseExceptions
            if isinstance(exc, (KeyboardInterrupt, SystemExit, *passes)):
                raise
            failures.append(f"{type(exc).__name__}: {exc}")
    return failures


_VERSIONED_IMPORT = re.compile(r"^(from\s+triton\.(?!language\b)[\w.]+\s+import\s+.+|import\s+triton\.(?!language\b)[\w.]+.*)$")


def guard_versioned_imports(text: str) -> str:
    """Top-level imports of Triton internals that move between versions (`triton.backends.
    compiler.AttrsDescriptor`, `triton.tools.experimental_descriptor`, ...) wrapped so that a
    Triton without them still imports the rest of the file; code that uses such a name then
    fails where it uses it, with a NameError that says which."""
    out = []
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\n")
        if _VERSIONED_IMPORT.match(stripped) and not stripped.rstrip().endswith(("(", "\\")):
            out.append(f"try:\n    {stripped.strip()}\nexcept ImportError:  # not in this Triton version\n    pass\n")
        else:
            out.append(line)
    return "".join(out)


# ---------------------------------------------------------------- stubs and transforms

_STUB_ROOTS = ("geak_eval", "tb_eval")


class _Anything:
    """Stands in for the suites' benchmark helpers (PytestBenchmarker, do_bench_config, ...):
    callable, attribute-bearing, does nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> _Anything:
        return _Anything()

    def __getattr__(self, name: str) -> _Anything:
        return _Anything()


class OnceBenchmarker(_Anything):
    """Stands in for `PytestBenchmarker(op_callable=..., ...)`, the ROCm performance tests'
    timer: `run_benchmark` calls the operation once instead of timing it, so the performance
    test's inputs can be recorded (they are the suite's perf inputs)."""

    def __init__(self, *args: Any, op_callable: Any = None, **kwargs: Any) -> None:
        self.op = op_callable if op_callable is not None else (args[0] if args else None)

    def run_benchmark(self, *args: Any, **kwargs: Any) -> _Anything:
        if callable(self.op):
            self.op()
        return _Anything()


class PerformanceMetricsStub:
    """Stands in for TritonBench's `performance_utils.Performance_Metrics`, the base class of
    its perf scripts (`perf_G/golden_metrics/<op>_perf.py`): only what `get_input_tensors`,
    `to_cuda` and `call_op` rely on."""

    def __init__(self, op_name: str = "", dtype: Any = None, is_backward: bool = False, **kwargs: Any) -> None:
        self.op_name = op_name
        self.dtype = dtype
        self.is_backward = is_backward
        self.input_tensors: list[Any] = []
        self.kwargs = kwargs

    def __getattr__(self, name: str) -> _Anything:
        return _Anything()


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "PytestBenchmarker":
            return OnceBenchmarker
        if name == "Performance_Metrics":
            return PerformanceMetricsStub
        return _Anything


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import `geak_eval.*` / `tb_eval.*` (the suites' own perf helpers, which test sections
    import) as inert stubs: the helpers only time and save results, which we do ourselves."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] in _STUB_ROOTS:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


_FINDER = _StubFinder()


def install_suite_stubs() -> None:
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)


_CUDA_LITERAL = re.compile(r"""(['"])cuda(?::\d+)?\1""")


def for_interpreter(text: str) -> str:
    """Suites allocate on `device='cuda'`; on a machine without a GPU the same code runs
    through the Triton interpreter on CPU tensors. Rewritten: device literals, `.cuda()` and
    `.cuda(n)`, `.is_cuda` (asserted by many wrappers: on the interpreter a CPU tensor is
    where the kernel runs), `with torch.cuda.device(t.device):` (which TritonBench wrappers
    put around their launches and which refuses a CPU device: on one device it only selects
    that device, so a null context keeps the meaning), `torch.cuda.synchronize()`,
    `torch.cuda.current_device()`, `get_device_name()` (read at import by some wrappers),
    `get_device_capability()` (an sm_80 path is taken) and `"tl.constexpr"` annotations
    written as strings. Autotuning is handled by `interpreter_autotune_first_config`."""
    text = _CUDA_LITERAL.sub("'cpu'", text)
    text = re.sub(r"\.cuda\((?:\s*\d*\s*|\s*device\s*=\s*\d+\s*)\)", ".cpu()", text)
    text = re.sub(r"\.is_cuda\b(?!\s*\()", ".is_cpu", text)
    text = re.sub(r"\btorch\.cuda\.device\(", "__import__('contextlib').nullcontext(", text)
    text = re.sub(r"torch\.cuda\.current_device\(\)", "'cpu'", text)
    text = re.sub(r"torch\.cuda\.get_device_name\([^()]*\)", "'cpu'", text)
    text = re.sub(r"torch\.cuda\.get_device_capability\([^()]*\)", "(8, 0)", text)
    # The interpreter takes only `tl.constexpr` itself as a constexpr annotation, not the string.
    text = re.sub(r""":\s*(['"])tl\.constexpr\1""", ": tl.constexpr", text)
    return re.sub(r"torch\.cuda\.synchronize\(\)", "None", text)


def interpreter_autotune_first_config() -> None:
    """On the Triton interpreter `triton.autotune` cannot time its configs (there is no GPU
    benchmarker), so the suite's own autotuned kernels (its reference, the tests an adapter runs
    to record inputs) would fail there. Under TRITON_INTERPRET=1 only, the autotuner is told
    every config takes the same time without running them, so it keeps its first one:
    correctness is what the interpreter judges, and a config's result does not depend on which
    one the tuner picks. Installed once per process, when an adapter loads tasks for the
    interpreter. Still needed beside judge/candidate/interpreter_support.py (which bench may not import):
    that one is installed where candidate code runs, not where an adapter loads. Candidates get
    only that one (their template loads no adapter): each config run once, one failing a static
    assertion skipped, as a GPU's tuner does."""
    import os

    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    from triton.runtime.autotuner import Autotuner

    # judge/candidate/interpreter_support.py's tuner (each config run once) is the better one where this
    # process has it: it marks the class, and takes back the original this one saves.
    if getattr(Autotuner._bench, "_kmc_first_config", False) or getattr(Autotuner, "_kmc_interpreter_support", False):
        return

    def untimed(self: Any, *args: Any, config: Any = None, **kwargs: Any) -> list[float]:
        return [1.0, 1.0, 1.0]

    untimed._kmc_first_config = True  # type: ignore[attr-defined]
    untimed._kmc_original = Autotuner._bench  # type: ignore[attr-defined]
    Autotuner._bench = untimed


def function_signature(fn: Any) -> str:
    """`def name(args) -> ret` from an ast.FunctionDef."""
    import ast

    sig = f"def {fn.name}({ast.unparse(fn.args)})"
    if fn.returns is not None:
        sig += f" -> {ast.unparse(fn.returns)}"
    return sig
