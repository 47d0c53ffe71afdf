"""What adapted tasks share: the task record, importing suite code from text, and the
transforms that let a suite written for `device='cuda'` run through the CPU interpreter.

Suite code is imported from files written to a private temporary folder (Triton's `@jit`
reads its source from a file), once per process.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import re
import shutil
import sys
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.modules import import_file
from bench.task import Task, Tolerance

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

    @property
    def baseline_path(self) -> Path:
        return Path(self.origin)

    def baseline_source(self) -> str:
        return self.baseline_text


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


def run_in_namespace(text: str, name: str, namespace: dict[str, Any]) -> None:
    """Run `text` (written to its own file, so `@triton.jit` can read its source) inside an
    existing module's namespace: a suite's test section against its code section."""
    install_suite_stubs()
    path = workdir() / f"{name}.py"
    path.write_text(text)
    exec(compile(text, str(path), "exec"), namespace)  # noqa: S102 - suite code the user pointed us to


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


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
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
    through the Triton interpreter on CPU tensors. Only device literals are rewritten, plus
    `with torch.cuda.device(t.device):`, which TritonBench wrappers (the FlagGems-derived
    ones) put around their launches and which refuses a CPU device: on one device it only
    selects that device, so a null context keeps the meaning."""
    text = _CUDA_LITERAL.sub("'cpu'", text)
    text = re.sub(r"\.cuda\(\)", ".cpu()", text)
    text = re.sub(r"\btorch\.cuda\.device\(", "__import__('contextlib').nullcontext(", text)
    return re.sub(r"torch\.cuda\.synchronize\(\)", "None", text)


def function_signature(fn: Any) -> str:
    """`def name(args) -> ret` from an ast.FunctionDef."""
    import ast

    sig = f"def {fn.name}({ast.unparse(fn.args)})"
    if fn.returns is not None:
        sig += f" -> {ast.unparse(fn.returns)}"
    return sig
