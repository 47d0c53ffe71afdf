"""Known memory: where every tensor a Triton launch receives came from. Runs in the candidate
process, for the recorders of judge/candidate/launches.py.

Memory is known when it is the call's own arguments, or was made by an operation a recorder saw
(while a call was recorded, or while the candidate module was imported: `registering`) from such
memory. A launch given anything else (PyTorch run with the dispatch modes switched off or on
another thread, whose modes are its own; numpy's arrays) copies work the op record never saw:
`UNRECORDED`, reported as a fallback (`check_provenance`). Known memory also loses its standing
when it is written outside a recorded operation (PyTorch with the modes off or on another thread
`copy_`ing into a buffer a recorded op made, numpy writing through `tensor.numpy()`): on the CPU
each known storage carries a seal, the checksum of what recorded operations and kernel stores
last left in it, checked whenever an operation or a launch reads it (`is_known`).
"""

from __future__ import annotations

import ctypes
import types
import weakref
import zlib
from typing import Any

import torch

from judge.candidate.call_record import CallRecord

UNRECORDED = "unrecorded_memory"
"""The fallback a launch given memory of unknown making reports (module docstring)."""
UNRECORDED_WHY = ("a kernel was given memory that no recorded operation made, or that was written outside one: "
                  "PyTorch run with its dispatch modes off or on another thread, or numpy")
KNOWN: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
"""Storages that recorded operations made from known memory, by `storage_key`; an entry goes
with its storage, so memory later reused at the same address is not taken for it."""
SEALS: dict[tuple[str, int], int] = {}
"""CPU storages' checksums (`_digest`) as recorded operations or kernel stores last left them,
by `storage_key`: known memory whose bytes differ was written out of the records' sight. Only
trusted while the key is known (`KNOWN` or the call's own arguments); stale ones are pruned
when a call starts. Device memory has none: reading it back would cost a host sync per check."""


def keyed_storage(t: torch.Tensor) -> tuple[tuple[str, int], torch.UntypedStorage] | None:
    """`t`'s `storage_key` and storage, or None for a tensor without one (sparse, nested)."""
    try:
        storage = t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None
    return (t.device.type, storage.data_ptr()), storage


def _digest(storage: torch.UntypedStorage) -> int:
    """CRC-32 of a CPU storage's bytes, read in place (no copy, nothing dispatched): about 2 GB/s."""
    return zlib.crc32((ctypes.c_char * storage.nbytes()).from_address(storage.data_ptr()))


def seal_storage(key: tuple[str, int], storage: torch.UntypedStorage) -> None:
    """Remember what a CPU storage holds now, as a recorded operation or kernel store left it."""
    if key[0] == "cpu" and storage.nbytes():
        SEALS[key] = _digest(storage)


def _intact(key: tuple[str, int], storage: torch.UntypedStorage) -> bool:
    """Whether a known storage still holds what the records last left in it. A CPU storage without
    a seal yet is sealed now (nothing to compare with); device memory is not checked."""
    if key[0] != "cpu":
        return True
    seal = SEALS.get(key)
    if seal is None:
        seal_storage(key, storage)
        return True
    return _digest(storage) == seal


def has_standing(rec: CallRecord | None, key: tuple[str, int]) -> bool:
    """Known by the records alone (the call's own argument, or made by recorded operations from
    known memory), without reading the bytes."""
    if rec is not None and key in rec.tainted:
        return False
    return (rec is not None and key in rec.given) or key in KNOWN


def is_known(rec: CallRecord | None, t: torch.Tensor) -> bool:
    """Whether `t`'s memory is known (module docstring): its standing, and during a call on the
    CPU its bytes still sealed; memory written out of the records' sight loses its standing
    here. A tensor without memory of its own is not in question."""
    keyed = keyed_storage(t)
    if keyed is None or keyed[1].nbytes() == 0:
        return True
    key, storage = keyed
    if not has_standing(rec, key):
        return False
    if rec is not None and not _intact(key, storage):
        mark_standing(rec, t, False)
        return False
    return True


def all_known(rec: CallRecord | None, tensors: list[torch.Tensor]) -> bool:
    """`is_known` for every tensor, each storage read once (views of one buffer are common)."""
    seen: set[tuple[str, int]] = set()
    clean = True
    for t in tensors:
        keyed = keyed_storage(t)
        if keyed is None or keyed[0] in seen:
            continue
        seen.add(keyed[0])
        clean = is_known(rec, t) and clean  # every storage checked: a stale one loses its standing
    return clean



def covers_storage(t: torch.Tensor) -> bool:
    keyed = keyed_storage(t)
    return (keyed is not None and t.is_contiguous() and t.storage_offset() == 0
            and t.numel() * t.element_size() == keyed[1].nbytes())


def mark_standing(rec: CallRecord | None, t: torch.Tensor, known: bool) -> None:
    keyed = keyed_storage(t)
    if keyed is None:
        return
    key, storage = keyed
    if known:
        KNOWN[key] = storage
        if rec is not None:
            rec.tainted.discard(key)
            seal_storage(key, storage)  # outside a call, `registering` seals everything once at its end
    else:
        KNOWN.pop(key, None)
        SEALS.pop(key, None)
        if rec is not None:
            rec.tainted.add(key)



def seal_known() -> None:
    """Seal every known CPU storage as it is now, and forget seals of storages no longer known:
    at the end of `registering`, where tensors were made and filled freely (numpy included)."""
    for key in [k for k in SEALS if k not in KNOWN]:
        del SEALS[key]
    for key, storage in list(KNOWN.items()):
        seal_storage(key, storage)


def check_provenance(rec: CallRecord, tensors: list[torch.Tensor]) -> None:
    unknown = sum(1 for t in tensors if not is_known(rec, t))
    if unknown:
        rec.fallback[UNRECORDED] = rec.fallback.get(UNRECORDED, 0) + unknown


_NOT_HOLDERS = (type, str, bytes, int, float, bool, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                types.MethodType)


def given_storages(values: Any) -> set[tuple[str, int]]:
    """The storages of every tensor `values` holds: in sequences, mappings and objects'
    attributes and slots (a module's parameters, a submodule's included), a few levels deep."""
    return set(_given(values))


def _given(values: Any, depth: int = 0) -> dict[tuple[str, int], torch.UntypedStorage]:
    """`given_storages` with the storages themselves (to seal them)."""
    if isinstance(values, torch.Tensor):
        keyed = keyed_storage(values)
        return {} if keyed is None else {keyed[0]: keyed[1]}
    if depth > 6 or values is None or isinstance(values, _NOT_HOLDERS):
        return {}
    if isinstance(values, dict):
        items: Any = list(values.values())
    elif isinstance(values, (tuple, list, set, frozenset)):
        items = values
    else:
        items = list(getattr(values, "__dict__", {}).values())
        items += [getattr(values, name, None) for cls in type(values).__mro__
                  for name in getattr(cls, "__slots__", ()) if isinstance(name, str)]
    found: dict[tuple[str, int], torch.UntypedStorage] = {}
    for v in items:
        found.update(_given(v, depth + 1))
    return found


def take_given(rec: CallRecord, values: Any) -> None:
    """The call's own arguments are known memory, sealed as the judge sent them: an answer
    written into one out of the records' sight (and the input put back afterwards) is caught."""
    given = _given(values)
    rec.given |= set(given)
    for key, storage in given.items():
        seal_storage(key, storage)

