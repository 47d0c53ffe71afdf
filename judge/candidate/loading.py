"""What the process that runs candidate code needs, and nothing of the judge: importing a
candidate from its file, classifying what it raised, poisoned allocations.

Shared by the candidate process (judge/candidate/server.py) and the in-process runner the naive
benchmark harness uses; it imports no task, reference or tolerance.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from bench.faults import DEVICE_ERROR_MARKERS, mentions_device_error  # noqa: F401 - named here by the judge
from bench.modules import import_file
from bench.poison import poison_tensor
from judge.candidate import interpreter_support
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


# ---------------------------------------------------------------- poisoned allocations

MARK_FLOAT = 7.25e3
_MARK_INT = 0x3C3C


def _mark(t: torch.Tensor) -> torch.Tensor:
    """A finite marker (the judge's run of a Triton reference, finding what it leaves unwritten)."""
    if t.numel() == 0:
        return t
    if t.is_floating_point() or t.is_complex():
        t.fill_(MARK_FLOAT)
    elif t.dtype == torch.bool:
        t.fill_(False)
    else:
        t.fill_(min(torch.iinfo(t.dtype).max, _MARK_INT))
    return t


class _PoisonState:
    installed = False
    on = False
    marker = False  # fill with a finite marker instead of poison
    guards: list[tuple[torch.Tensor, int, str]] = []  # (the buffer's bytes, where its guard starts, what it holds)
    guarding = True  # guard bytes after each CPU allocation (off for a suite checker's emulation)
    allocate: Callable[..., torch.Tensor] | None = None  # the unwrapped torch.empty


GUARD_BYTES = 4096
"""Bytes after every CPU tensor a candidate's call allocates, filled with `GUARD_BYTE` and
checked after the call: a kernel whose mask lets one lane past the end (`<=` for `<`) writes
there, which on the interpreter otherwise corrupts the heap unseen or only sometimes (the
test-strength report's five surviving mutants, issue 44). Device memory is not guarded: there
such a write faults or is compute-sanitizer's to find (`--sanitize`)."""
GUARD_BYTE = 0xA5


def _guarded(t: torch.Tensor) -> torch.Tensor:
    """`t`'s shape and strides over a buffer with `GUARD_BYTES` after its last element."""
    if t.device.type != "cpu" or t.numel() == 0 or t.storage_offset() != 0 or _PoisonState.allocate is None:
        return t
    span = 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride(), strict=True))
    size = t.element_size()
    extra = -(-GUARD_BYTES // size)
    buf = _PoisonState.allocate(span + extra, dtype=t.dtype, device="cpu")
    raw = buf.view(torch.uint8)
    raw[span * size:].fill_(GUARD_BYTE)
    _PoisonState.guards.append((raw, span * size, f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}"))
    view = buf.as_strided(t.shape, t.stride(), 0)
    return view.requires_grad_() if t.requires_grad else view


def overruns() -> str:
    """What the call just made wrote past the end of the tensors it allocated ("" when nothing);
    the guards are forgotten after."""
    found = []
    for raw, start, what in _PoisonState.guards:
        changed = int((raw[start:] != GUARD_BYTE).sum())
        if changed:
            found.append(f"{changed} byte(s) past the end of a {what} tensor it allocated")
    _PoisonState.guards = []
    return "; ".join(found[:3])


def install_poisoned_allocations() -> None:
    """Wrap `torch.empty*` and `Tensor.new_empty` once, for the life of the process; the
    wrappers poison only while `poisoned_allocations()` is active (judging, not timing)."""
    if _PoisonState.installed:
        return
    _PoisonState.installed = True

    def wrap(fn: Callable) -> Callable:
        def maybe_poisoned(*args: Any, **kwargs: Any) -> Any:
            t = fn(*args, **kwargs)
            if _PoisonState.marker:
                return _mark(t)
            if not _PoisonState.on:
                return t
            plain = not _PoisonState.guarding or "out" in kwargs or kwargs.get("pin_memory")
            return poison_tensor(t if plain else _guarded(t))

        maybe_poisoned.__wrapped__ = fn  # type: ignore[attr-defined]
        return maybe_poisoned

    _PoisonState.allocate = torch.empty
    for name in ("empty", "empty_like", "empty_strided"):
        setattr(torch, name, wrap(getattr(torch, name)))
    torch.Tensor.new_empty = wrap(torch.Tensor.new_empty)  # type: ignore[method-assign]


@contextlib.contextmanager
def poisoned_allocations(guard: bool = True) -> Iterator[None]:
    """Make every `torch.empty*` the candidate calls return poisoned memory, on the CPU with a
    guard after it unless `guard` is off (`overruns` says what was written there)."""
    install_poisoned_allocations()
    _PoisonState.guards = []
    _PoisonState.guarding = guard
    _PoisonState.on = True
    try:
        yield
    finally:
        _PoisonState.on = False


@contextlib.contextmanager
def allocations(mode: str) -> Iterator[None]:
    """`poison` or `marker`: what every `torch.empty*` returns meanwhile (the judge's runs of a
    Triton reference, judge/oracle.py)."""
    install_poisoned_allocations()
    _PoisonState.on, _PoisonState.marker = mode == "poison", mode == "marker"
    try:
        yield
    finally:
        _PoisonState.on = _PoisonState.marker = False


def use_triton_cache(folder: str) -> bool:
    """Triton compiles into (and loads from) `folder` from now on in this process, where this
    Triton has knobs (3.4 on); an older one keeps the cache its environment names (False)."""
    import triton

    knobs = getattr(triton, "knobs", None)
    if knobs is None:  # pragma: no cover - older Triton
        return False
    knobs.cache.dir = folder
    return True
