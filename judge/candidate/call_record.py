"""What one call of the entry point recorded (`CallRecord`, filled by the recorders in
judge/candidate/launches.py while the call runs) and what is read from it once the call returned:
returned tensors that are not Triton's work (`unwritten_outputs`), output arguments no kernel
received (`unreceived_outputs`), outputs sharing memory with an input (`aliased_inputs`). Runs in
the candidate process (judge/candidate/server.py), and in the judge for a suite's own Triton
reference (judge/reference_habits.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from judge.candidate.bit_equality import same_bits

PARTLY_STORED = "(some elements were written by no kernel store)"


def storage_key(t: torch.Tensor) -> tuple[str, int]:
    return t.device.type, t.untyped_storage().data_ptr()


@dataclass
class Derived:
    how: str  # "launch" or "op"
    snapshot: torch.UntypedStorage | None = None  # the storage's bytes right after the launch


@dataclass
class CallRecord:
    """Everything recorded during one call of the entry point."""

    launches: int = 0
    kernels: dict[str, int] = field(default_factory=dict)  # launches by compiled kernel name (judge/candidate/kernel_trace.py)
    kernels_sure: dict[str, int] = field(default_factory=dict)  # those of them whose grid was given and not empty
    ops: list[str] = field(default_factory=list)
    fallback: dict[str, int] = field(default_factory=dict)
    derived: dict[tuple[str, int], Derived] = field(default_factory=dict)
    stored: list[Any] = field(default_factory=list)  # numpy arrays of byte addresses (interpreter only)
    inputs: set[tuple[str, int]] = field(default_factory=set)
    tensors: list[torch.Tensor] = field(default_factory=list)  # launch arguments (kept for value matches)
    given: set[tuple[str, int]] = field(default_factory=set)  # every tensor the call's arguments hold
    tainted: set[tuple[str, int]] = field(default_factory=set)  # storages unknown memory was copied into



def flatten(out: Any, path: str = "output") -> list[tuple[str, Any]]:
    if isinstance(out, (tuple, list)):
        return [item for i, o in enumerate(out) for item in flatten(o, f"{path}[{i}]")]
    return [(path, out)]


def _covered(t: torch.Tensor, rec: CallRecord) -> bool:
    """Every element of `t` was written by a kernel store (interpreter only)."""
    import numpy as np

    if not rec.stored:
        return False
    if t.numel() == 0:
        return True
    span = sum((s - 1) * st for s, st in zip(t.shape, t.stride(), strict=True)) + 1
    offsets = torch.as_strided(torch.arange(span, dtype=torch.int64), t.shape, t.stride()).flatten().numpy()
    addresses = np.uint64(t.data_ptr()) + offsets.astype(np.uint64) * np.uint64(t.element_size())
    return bool(np.isin(addresses, np.concatenate(rec.stored)).all())


def _matches_snapshot(t: torch.Tensor, snapshot: torch.UntypedStorage) -> bool:
    view = torch.empty(0, dtype=t.dtype, device=t.device)
    view.set_(snapshot, t.storage_offset(), t.size(), t.stride())
    return same_bits(view, t)


def unwritten_outputs(out: Any, rec: CallRecord, interpreter: bool,
                      exempt: set[tuple[str, int]] | frozenset[tuple[str, int]] = frozenset()) -> list[str]:
    """Returned tensors that are not Triton's work: not written by a kernel nor derived from
    one, overwritten after the kernel that wrote them, or (interpreter) not covered by stores.
    `exempt`: storages checked otherwise (output arguments, `unreceived_outputs`)."""
    missing = []
    for path, t in flatten(out):
        if not isinstance(t, torch.Tensor) or t.numel() == 0 or storage_key(t) in exempt:
            continue
        d = rec.derived.get(storage_key(t))
        if d is None:
            missing.append(f"{path} (no kernel wrote it)")
        elif d.how == "launch" and d.snapshot is not None and not _matches_snapshot(t, d.snapshot):
            missing.append(f"{path} (changed after the kernel that wrote it)")
        elif d.how == "launch" and interpreter and not _covered(t, rec):
            missing.append(f"{path} {PARTLY_STORED}")
    return missing


def unreceived_outputs(inputs: tuple, written: tuple[int, ...], rec: CallRecord) -> list[str]:
    """Output arguments (an adapted task's entry point writing into tensors the caller gives)
    that no launched kernel received: the result was written into them by PyTorch."""
    received = {storage_key(t) for t in rec.tensors}
    return [f"output argument {i} (no kernel received it)" for i in written
            if i < len(inputs) and isinstance(inputs[i], torch.Tensor) and inputs[i].numel()
            and storage_key(inputs[i]) not in received]


def aliased_inputs(out: Any, inputs: tuple, written: tuple[int, ...] = ()) -> list[str]:
    """Returned tensors sharing memory with an input (a view such as `x.t()`); output
    arguments (`written`) may be returned."""
    keys = {storage_key(a): i for i, a in enumerate(inputs) if isinstance(a, torch.Tensor) and i not in written}
    return [alias_text(path, keys[storage_key(t)]) for path, t in flatten(out)
            if isinstance(t, torch.Tensor) and t.numel() and storage_key(t) in keys]


def alias_text(path: str, index: int) -> str:
    """How an output sharing memory with argument `index` is reported (and, for a task whose
    reference returns a view of that argument there, recognised as allowed: judge/oracle.py)."""
    return f"{path} shares memory with input {index}"
