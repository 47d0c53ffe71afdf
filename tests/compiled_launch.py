"""Run a candidate's `vector_add` with its `add_kernel` compiled, not interpreted, on a machine
with or without a GPU; print what the candidate's traceback shows (tests/test_tracebacks.py).

The launch (`add_kernel[grid](...)`) is stood in for by Triton's real front end: `triton.compile`
of an `ASTSource` for a CUDA target, whose code generator fails before any backend tool or
driver is needed, so the launch line raises the CompilationError a GPU raises. It runs in a
process of its own, without TRITON_INTERPRET: once Triton's interpreter has run a kernel in a
process, its patched language functions break the code generator there.

Usage: python tests/compiled_launch.py CANDIDATE.py [JIT_HELPER ...]
Prints JSON: {"error": the exception's class name, "traceback": candidate_traceback's text}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}


class CompilingLauncher:
    """`kernel[grid](...)` that compiles `kernel` for an H100-class CUDA target."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel

    def __getitem__(self, grid: Any) -> Any:
        def launch(*args: Any, **kwargs: Any) -> None:
            import triton
            from triton.backends.compiler import GPUTarget
            from triton.compiler import ASTSource

            source = ASTSource(self.kernel, SIGNATURE, {"BLOCK": kwargs.get("BLOCK", 128)})
            triton.compile(source, target=GPUTarget("cuda", 90, 32))

        return launch


def main(path: Path) -> dict[str, str]:
    import torch

    from judge.candidate.loading import load_module
    from judge.candidate.tracebacks import candidate_traceback

    module = load_module(path, "kmc_candidate_compiled_1")
    module.add_kernel = CompilingLauncher(module.add_kernel)
    try:
        module.vector_add(torch.ones(100), torch.ones(100))
    except Exception as exc:  # noqa: BLE001 - what the candidate raised is the answer
        return {"error": type(exc).__name__, "traceback": candidate_traceback(exc, path)}
    return {"error": "", "traceback": ""}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
