"""New shapes from a suite's recorded calls: each size the call's tensors carry, grown to an
odd size just above it and to a large odd size, one size at a time.

Suites test on a handful of shapes, often powers of two and often tiny (five elements), so a
kernel that handles only the first block, or forgets the tail mask, passes them. Growing one
size at a time keeps every other relation between the arguments (a square matrix stays
square: every axis of that size grows together), and integer arguments equal to the size,
or to the element count of a tensor that grew, follow it (the `n_elements` a wrapper or a
launch is given). Sizes an integer tensor carries are never grown (see `sizes`). New rows
are drawn from the recorded ones (the recorded data is kept as a prefix), so value
distributions are the suite's.
A perturbation is kept only where the suite's reference runs on it (geak_record.py checks).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.sequences import same_kind

LARGE_FLOOR = 3000
"""A "large" size is at least this: above the common block sizes (1024, 2048), so a kernel
that covers one block, or one program's worth, is caught on every suite that records small
inputs."""


@dataclass(frozen=True)
class Perturbation:
    size: int
    new: int
    kind: str  # "odd": just above the recorded size; "large": max(2x, 3000), odd
    ints_follow: bool

    def describe(self) -> str:
        return f"size {self.size} -> {self.new} ({self.kind}{'' if self.ints_follow else ', integer arguments kept'})"


def _odd_above(v: int) -> int:
    return v + 1 if v % 2 == 0 else v + 2


def _tensors(call: Sequence[Any]) -> list[Any]:
    import torch

    out = []
    for v in call:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out += [x for x in v if isinstance(x, torch.Tensor)]
    return out


def sizes(call: Sequence[Any]) -> list[int]:
    """Distinct sizes above 1 along any axis of the call's floating-point tensors, largest
    first. Sizes an integer tensor carries are left alone: integer tensors are indices,
    offsets and lengths (`b_start_loc`, `cu_seqlens`, a cumulative sum with one entry per
    batch row), whose values must agree with the other tensors' sizes, and growing them would
    send the reference out of bounds. A call without tensors (an entry point that draws its
    own inputs from sizes it is given) has its integer arguments above 1 as sizes instead."""
    tensors = _tensors(call)
    if not tensors:
        return sorted({v for v in call if type(v) is int and v > 1}, reverse=True)
    structural = {s for t in tensors if not (t.is_floating_point() or t.is_complex()) for s in t.shape}
    return sorted({s for t in tensors for s in t.shape if s > 1} - structural, reverse=True)


def elements(call: Sequence[Any]) -> int:
    """Tensor elements in the call; for a call without tensors, the product of its sizes."""
    tensors = _tensors(call)
    if tensors:
        return sum(t.numel() for t in tensors)
    return max((v for v in call if type(v) is int and v > 1), default=0)


def _grown_elements(call: Sequence[Any], size: int, new: int) -> int:
    if not _tensors(call):
        return elements(call) // size * new if size else 0
    total = 0
    for t in _tensors(call):
        k = list(t.shape).count(size)
        total += t.numel() // size ** k * new ** k
    return total


def candidates(call: Sequence[Any], max_elements: int) -> list[Perturbation]:
    """Every perturbation worth trying on `call`, large ones first (they catch more), each
    with integer arguments following the size and, as a fallback, kept."""
    out: list[Perturbation] = []
    total = elements(call)
    for kind in ("large", "odd"):
        for s in sizes(call):
            new = _odd_above(max(2 * s, LARGE_FLOOR)) if kind == "large" else _odd_above(s)
            if new <= s or _grown_elements(call, s, new) > max(max_elements, total):
                continue
            out += [Perturbation(s, new, kind, True), Perturbation(s, new, kind, False)]
    return out


def _grow(t: Any, size: int, new: int, generator: Any) -> Any:
    import torch

    out = t
    for axis, s in enumerate(t.shape):
        if s != size:
            continue
        extra = torch.randint(0, s, (new - s,), generator=generator)
        index = torch.cat([torch.arange(s), extra]).to(t.device)
        out = out.index_select(axis, index)
    return out.contiguous() if out is not t else t.clone()


def perturb(call: Sequence[Any], p: Perturbation, seed: int) -> tuple:
    """`call` with every axis of size `p.size` grown to `p.new` (new rows drawn from the
    recorded ones), and integer arguments equal to the size or to a grown tensor's element
    count following it when `p.ints_follow`."""
    import torch

    g = torch.Generator().manual_seed(seed)
    numels = {t.numel(): _grown_elements([t], p.size, p.new) for t in _tensors(call) if p.size in t.shape}

    def one(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return _grow(v, p.size, p.new, g)
        if isinstance(v, (list, tuple)):
            return same_kind(v, (one(x) for x in v))
        if isinstance(v, torch.nn.Module):
            return _grown_module(v, p, g)
        if p.ints_follow and type(v) is int:
            if v == p.size:
                return p.new
            if v in numels and v > p.size:
                return numels[v]
        return v

    return tuple(one(v) for v in call)


def _grown_module(module: Any, p: Perturbation, generator: Any) -> Any:
    """A copy of a module passed beside the tensors (a LayerNorm whose weight the wrapper reads)
    whose parameters and buffers grow with them and whose shape attributes (`normalized_shape`)
    follow the size: a module left at the recorded size would send the reference out of bounds."""
    import copy

    import torch

    grown = copy.deepcopy(module)
    for part in grown.modules():
        for store in (part._parameters, part._buffers):
            for name, t in list(store.items()):
                if t is None or p.size not in t.shape:
                    continue
                bigger = _grow(t.detach(), p.size, p.new, generator)
                store[name] = torch.nn.Parameter(bigger, requires_grad=t.requires_grad) \
                    if isinstance(t, torch.nn.Parameter) else bigger
        for name, value in list(vars(part).items()):
            if name.startswith("_"):
                continue
            if type(value) is int and value == p.size:
                setattr(part, name, p.new)
            elif isinstance(value, tuple) and p.size in value and all(type(x) is int for x in value):
                setattr(part, name, tuple(p.new if x == p.size else x for x in value))
    return grown


def describe_shapes(call: Sequence[Any]) -> str:
    """The call's tensor shapes (its integer sizes for a call without tensors), as text."""
    tensors = _tensors(call)
    if not tensors:
        return "sizes " + ",".join(str(v) for v in call if type(v) is int)
    return ", ".join("x".join(map(str, t.shape)) or "scalar" for t in tensors)
