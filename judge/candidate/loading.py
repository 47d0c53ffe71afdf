"""Loading a candidate in the process that runs it, and nothing of the judge: the process made
ready before any candidate is imported, the candidate imported from its file, what it raised
classified and written down.

Shared by the candidate process (judge/candidate/server.py) and the in-process runner the naive
benchmark harness uses; it imports no task, reference or tolerance.
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import Any

from bench.faults import DEVICE_ERROR_MARKERS, mentions_device_error  # noqa: F401 - named here by the judge
from bench.modules import import_file
from judge.candidate import interpreter_support
from judge.candidate.allocations import install_poisoned_allocations
from judge.candidate.launches import install_launch_recorder, registering
from judge.candidate.tracebacks import candidate_traceback, scrub


def prepare_process() -> None:
    """Install the launch recorder and the poisoning allocators *before* any candidate is
    imported, so a candidate that binds `torch.empty_like` at import gets the poisoned one; under
    the interpreter also what it lacks that a correct kernel may use (judge/candidate/interpreter_support.py:
    autotune, libdevice, bfloat16 arithmetic), so the same kernel gets the same verdict here as on a GPU."""
    install_launch_recorder()
    install_poisoned_allocations()
    if os.environ.get("TRITON_INTERPRET") == "1":
        interpreter_support.install()


class CandidateLoadError(Exception):
    """A candidate that could not be imported: the verdict's kind, its message and the
    traceback of the candidate's own lines (judge/candidate/tracebacks.py; "" for a syntax error, whose
    message already names the line)."""

    def __init__(self, kind: str, message: str, traceback_text: str = ""):
        super().__init__(message)
        self.kind = kind
        self.traceback = traceback_text


def load_module(path: Path, module_name: str) -> Any:
    """Import a candidate from its own file (Triton's `@jit` refuses source from `exec`). The
    tensors its import makes count as known memory for the launches of its calls
    (judge/candidate/launches.py `registering`)."""
    source = path.read_text()
    try:
        compile(source, str(path), "exec")
    except (SyntaxError, ValueError) as exc:
        raise CandidateLoadError("syntax_error", scrub(f"{type(exc).__name__}: {exc}", path)) from None
    try:
        with registering():
            return import_file(path, module_name)
    except BaseException as exc:  # noqa: BLE001 - SystemExit from candidate code is a verdict too
        raise CandidateLoadError(classify_exception(exc), f"import failed: {format_exception(exc, path=path)}",
                                 candidate_traceback(exc, path)) from None


def format_exception(exc: BaseException, limit: int = 2000, path: Path | str | None = None) -> str:
    """The exception's last line(s), at most `limit` characters, without what differs between
    processes (judge/candidate/tracebacks.py `scrub`; `path`: the candidate's file, shown as candidate.py).
    A longer text keeps its head (the exception's type and first words, which decide how it
    is handled: `runners/pool.py` retries a job that ran out of GPU memory) and its tail.
    Before, only the tail was kept, and PyTorch's out-of-memory message, which lists every
    process on the GPU, lost "out of memory": a job that a busy GPU starved was not retried."""
    text = scrub("".join(traceback.format_exception_only(type(exc), exc)).strip(), path)
    if len(text) <= limit or limit < 4 * len(ELIDED):
        return text[-limit:]
    head = max(0, limit // 2 - len(ELIDED))
    return text[:head] + ELIDED + text[-(limit - head - len(ELIDED)):]


ELIDED = " [...] "


def is_device_error(exc: BaseException) -> bool:
    return mentions_device_error(f"{type(exc).__name__}: {exc}")


# Errors the interpreter raises while tracing a kernel body that the GPU compiler would
# reject before launch (unknown `tl` names, type and shape checks): the same candidate must
# get the same verdict on the CPU interpreter and on a GPU.
_INTERPRETER_COMPILE_CAUSES = (AttributeError, NameError, TypeError, ValueError)


def classify_exception(exc: BaseException) -> str:
    """The verdict kind of what a candidate raised. A feature the interpreter lacks
    (judge/candidate/interpreter_support.py) is `unsupported_on_interpreter`, never the candidate's error."""
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    if interpreter_support.is_unsupported(exc):
        return "unsupported_on_interpreter"
    if name == "InterpreterError":
        cause = exc.__cause__
        if isinstance(cause, _INTERPRETER_COMPILE_CAUSES) and not mentions_device_error(str(cause)):
            return "compile_error"
        return "runtime_error"
    if name == "CompilationError" or "triton.compiler" in module:
        return "compile_error"
    if isinstance(exc, SyntaxError):
        return "syntax_error"
    if isinstance(exc, AttributeError) and "triton.language" in str(exc):
        return "compile_error"
    return "runtime_error"


def use_triton_cache(folder: str) -> bool:
    """Triton compiles into (and loads from) `folder` from now on in this process, where this
    Triton has knobs (3.4 on); an older one keeps the cache its environment names (False)."""
    import triton

    knobs = getattr(triton, "knobs", None)
    if knobs is None:  # pragma: no cover - older Triton
        return False
    knobs.cache.dir = folder
    return True
