"""Poisoned allocations in the process that runs candidate code: every `torch.empty*` a judged
call makes returns NaN (or an integer sentinel) instead of whatever memory held, so output a
kernel never writes reads the same in every run and is never taken for an answer; on the CPU
with guard bytes after it, so a write past the end shows (`overruns`). The judge's runs of a
Triton reference use the same wrappers with a finite marker instead (`allocations`).

Shared by the candidate process (judge/candidate/server.py), the internal tests and the judge's
in-process runner; it imports no task, reference or tolerance.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from bench.poison import poison_tensor
from bench.slack import padded_copy

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
    padding = False  # zeroed slack before and after every allocation (the judge's runs of a Triton reference)


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


def _padded(t: torch.Tensor) -> torch.Tensor:
    """`t` copied into a buffer of its own with zeroed slack before and after it, as inputs get
    (bench/slack.py `padded_copy`), on any device. Why: a suite's Triton reference that writes past
    its own output (TritonBench-revised f16_to_f8 masks by its input's storage size, which the
    input's slack makes larger than its output) wrote into the judge's other tensors on a GPU,
    among them the expected output of an earlier case, kept in the cache: the reference then
    failed its own hidden cases (an H100, 2026-12-06). Its writes now land in its own slack.
    What `t`'s memory held is copied too: a disturbed run (judge/reference_habits.py) keeps it."""
    if t.numel() == 0 or t.storage_offset() != 0:
        return t
    padded = padded_copy(t)
    return padded.requires_grad_() if t.requires_grad else padded


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
            if _PoisonState.padding and "out" not in kwargs and not kwargs.get("pin_memory"):
                t = _padded(t)
            if _PoisonState.marker:
                return _mark(t)
            if not _PoisonState.on:
                return t
            plain = not _PoisonState.guarding or _PoisonState.padding or "out" in kwargs or kwargs.get("pin_memory")
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
def allocations(mode: str, padded: bool = False) -> Iterator[None]:
    """`poison`, `marker` or `plain`: what every `torch.empty*` returns meanwhile (the judge's
    runs of a Triton reference, judge/reference_habits.py); `padded`: each in a buffer of its
    own with zeroed slack before and after it (`_padded`)."""
    install_poisoned_allocations()
    _PoisonState.on, _PoisonState.marker, _PoisonState.padding = mode == "poison", mode == "marker", padded
    try:
        yield
    finally:
        _PoisonState.on = _PoisonState.marker = _PoisonState.padding = False
