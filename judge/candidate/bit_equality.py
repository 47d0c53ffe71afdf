"""Exact comparisons of tensors by their bits, shared by the judge and the candidate process.

Why bits: a check that a tensor did not change must see every change, NaN payloads and the
sign of zero included, and must call NaN equal to itself (`torch.equal` on values does not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

_INTS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def as_bits(t: torch.Tensor) -> torch.Tensor:
    """`t`'s elements as integers of the same width (a bool, complex or odd-width tensor as itself)."""
    size = t.element_size()
    if t.dtype == torch.bool or t.is_complex() or size not in _INTS:
        return t
    return t.contiguous().view(_INTS[size])


def flat_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in flat_tensors(v)]
    return []


def same_bits(a: Any, b: Any) -> bool:
    """Both values hold the same tensors bit for bit (compared on `a`'s device: copying to the
    host cost a third of a hidden case set's judging time on an H200)."""
    pa, pb = flat_tensors(a), flat_tensors(b)
    return len(pa) == len(pb) and all(
        x.shape == y.shape and x.dtype == y.dtype and torch.equal(as_bits(x), as_bits(y.to(x.device)))
        for x, y in zip(pa, pb, strict=True))


def unchanged(before: torch.Tensor, after: torch.Tensor) -> bool:
    """An input the call did not change: the same bits, or for floating point the same values
    with NaN where NaN was (a kernel that writes back what it read changed nothing)."""
    if before.shape != after.shape or before.dtype != after.dtype:
        return False
    after = after.to(before.device)
    if torch.equal(as_bits(before), as_bits(after)):
        return True
    if before.is_floating_point():
        return bool(torch.equal(torch.nan_to_num(before, nan=0.0), torch.nan_to_num(after, nan=0.0)))
    return False


_DIGEST_CHUNK = 1 << 24
"""Words summed per step of `bits_digest`: bounds its scratch memory (three int64 tensors of
this many elements, 384 MiB) whatever the output's size."""

_MIX = 0x9E3779B97F4A7C15 - (1 << 64)  # the golden-ratio constant, as a signed int64


@dataclass(frozen=True)
class Digest:
    """A fingerprint of one value's tensors: shapes, dtypes, and per tensor three wrapping
    int64 sums of its elements' bits (plain, weighted by position, and of a mixed word)."""

    layout: tuple[tuple[tuple[int, ...], str], ...]
    sums: tuple[int, ...]


def bits_digest(value: Any) -> Digest:
    """`value`'s fingerprint, made on the tensors' device with one read back to the host.

    Why a fingerprint and not a copy: the candidate process keeps every output of a case set
    until the set's end, to see whether a later call changed it (a buffer reused across
    calls); a copy of each doubled that memory, and four judge workers' candidate processes
    filled an H200's memory on the hidden sets. Any change of a single element, and any swap
    of two unequal elements, changes the sums; a change built on purpose to keep all three
    could pass, but it buys a candidate nothing, as every output was judged when its call
    returned."""
    tensors = flat_tensors(value)
    sums: list[torch.Tensor] = []
    for t in tensors:
        sums.extend(_word_sums(t))
    read = torch.stack([s.to(sums[0].device) for s in sums]).tolist() if sums else []
    return Digest(_layout(tensors), tuple(int(x) for x in read))


def same_digest(digest: Digest, value: Any) -> bool:
    """Whether `value` still has the fingerprint `digest` (`bits_digest`)."""
    return bits_digest(value) == digest


@dataclass(frozen=True)
class BitCopy:
    """One value's tensors copied bit for bit (as integers of their width, `as_bits`), with
    their shapes and dtypes. Exact where `Digest` is a fingerprint, and for a small output far
    cheaper: one copy now and one comparison at the end, where `bits_digest` is a dozen
    launches and a read back to the host each time (on an H200 the digests were a third of a
    candidate process's work per call of a hidden case set). It doubles the memory held, so
    it is kept only within a budget (judge/candidate/server.py `HeldOutputs`)."""

    layout: tuple[tuple[tuple[int, ...], str], ...]
    words: tuple[torch.Tensor, ...]


def bit_copy(value: Any) -> BitCopy:
    tensors = flat_tensors(value)
    return BitCopy(_layout(tensors), tuple(as_bits(t.detach()).clone() for t in tensors))


def tensor_bytes(value: Any) -> int:
    """Bytes of `value`'s tensors' elements (what `bit_copy` would copy)."""
    return sum(t.numel() * t.element_size() for t in flat_tensors(value))


def still_same(record: Digest | BitCopy, value: Any) -> bool:
    """Whether `value` still holds the bits `record` (a copy or a fingerprint) was made of."""
    if isinstance(record, Digest):
        return same_digest(record, value)
    tensors = flat_tensors(value)
    return _layout(tensors) == record.layout and all(
        torch.equal(as_bits(t.detach()), w) for t, w in zip(tensors, record.words, strict=True))


def _layout(tensors: list[torch.Tensor]) -> tuple[tuple[tuple[int, ...], str], ...]:
    return tuple((tuple(t.shape), str(t.dtype)) for t in tensors)


def _word_sums(t: torch.Tensor) -> list[torch.Tensor]:
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    words = as_bits(t).reshape(-1)
    plain = torch.zeros((), dtype=torch.int64, device=t.device)
    placed = torch.zeros_like(plain)
    mixed = torch.zeros_like(plain)
    for start in range(0, words.numel(), _DIGEST_CHUNK):
        chunk = words[start:start + _DIGEST_CHUNK].to(torch.int64)
        place = torch.arange(start + 1, start + 1 + chunk.numel(), dtype=torch.int64, device=t.device)
        plain += chunk.sum()
        placed += (chunk * place).sum()
        mixed += ((chunk * _MIX) ^ (chunk >> 29)).sum()
    return [plain, placed, mixed]
