"""What happened while the entry point ran: Triton launches, the PyTorch operations dispatched
around them, and which memory the kernels actually wrote. Runs in the candidate process.

Why: a wrapper can launch a token kernel and compute the answer with PyTorch (or numpy) beside
it; counting launches cannot tell. Three records answer it:

- every aten operation dispatched outside a Triton launch (a `TorchDispatchMode`); anything
  beyond allocation, views, copies and the task's own allow-list is `torch_fallback`;
- provenance per storage: written by a kernel (on the CPU interpreter, only where a store
  actually landed; on a GPU, a launch's tensor arguments other than the inputs), or derived
  from such a storage by a copy, a cast or an allowed operation; a returned tensor whose
  storage is not kernel-derived was not Triton's work, nor is one overwritten after the
  kernel that wrote it (its values no longer match the snapshot taken after that launch);
- on the interpreter, the byte addresses every store wrote, so an output must be covered
  element by element (a decoy launch whose stores are masked off writes nothing);
- where every tensor a launch receives came from: the call's own arguments, or memory made
  by an operation a recorder saw (while a call was recorded, or while the candidate module
  was imported: `registering`) from such memory. A launch given anything else (PyTorch run
  with the dispatch modes switched off or on another thread, whose modes are its own; numpy's
  arrays) copies work the op record never saw: `UNRECORDED`, reported as a fallback. Known
  memory also loses its standing when it is written outside a recorded operation (PyTorch with
  the modes off or on another thread `copy_`ing into a buffer a recorded op made, numpy writing
  through `tensor.numpy()`): on the CPU each known storage carries a seal, the checksum of what
  recorded operations and kernel stores last left in it, checked whenever an operation or a
  launch reads it (`_intact`). Operations are matched by qualified name: only `aten` ops can be
  allowed, so a custom op named `clone` in a candidate's namespace is not `aten::clone`.

These records are self-reported by the process that runs candidate code: a candidate that
sets out to disable them (pops the dispatch mode, patches this module) can pass a correct
PyTorch result off as Triton's. The judge still checks every value; what it cannot prove
from outside is who computed them (docs/ARCHITECTURE.md, threat model).
"""

from __future__ import annotations

import ctypes
import types
import weakref
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from judge.candidate.bit_equality import same_bits

# Operations any wrapper may run: allocation, views and reshapes, copies and casts, scalar
# reads, fills. Names are aten overload packets (`aten.add.Tensor` -> "add").
ALLOWED_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros",
    "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill_", "zero_", "fill",
    "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "expand", "expand_as", "permute", "transpose",
    "t", "squeeze", "unsqueeze", "flatten", "unflatten", "select", "slice", "narrow", "split", "split_with_sizes",
    "chunk", "unbind", "detach", "alias", "view_as", "view_as_real", "view_as_complex", "movedim", "contiguous",
    "clone", "copy_", "_to_copy", "to", "lift_fresh", "lift_fresh_copy", "_local_scalar_dense", "item",
    "resize_", "set_", "arange", "is_nonzero", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset",
    "_has_compatible_shallow_copy_type", "record_stream",
})
# Ops whose output is a new storage holding (a copy of) their first tensor input's values.
_COPY_OPS = frozenset({"clone", "_to_copy", "to", "contiguous", "lift_fresh_copy"})
_FRESH_OPS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
                        "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full",
                        "arange"})
_OVERWRITE_OPS = frozenset({"fill_", "zero_"})
PARTLY_STORED = "(some elements were written by no kernel store)"
HOST_COPY_LIMIT = 64  # elements: a bigger host->device copy inside the entry point is host-side compute
UNRECORDED = "unrecorded_memory"
"""The fallback a launch given memory of unknown making reports (module docstring)."""
UNRECORDED_WHY = ("a kernel was given memory that no recorded operation made, or that was written outside one: "
                  "PyTorch run with its dispatch modes off or on another thread, or numpy")
_LIFTED = frozenset({"lift_fresh", "lift_fresh_copy"})  # torch.tensor(data) / from_numpy: Python's values made a tensor
_KNOWN: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
"""Storages that recorded operations made from known memory, by `storage_key`; an entry goes
with its storage, so memory later reused at the same address is not taken for it."""
_SEALS: dict[tuple[str, int], int] = {}
"""CPU storages' checksums (`_digest`) as recorded operations or kernel stores last left them,
by `storage_key`: known memory whose bytes differ was written out of the records' sight. Only
trusted while the key is known (`_KNOWN` or the call's own arguments); stale ones are pruned
when a call starts. Device memory has none: reading it back would cost a host sync per check."""


def storage_key(t: torch.Tensor) -> tuple[str, int]:
    return t.device.type, t.untyped_storage().data_ptr()


@dataclass
class _Derived:
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
    derived: dict[tuple[str, int], _Derived] = field(default_factory=dict)
    stored: list[Any] = field(default_factory=list)  # numpy arrays of byte addresses (interpreter only)
    inputs: set[tuple[str, int]] = field(default_factory=set)
    tensors: list[torch.Tensor] = field(default_factory=list)  # launch arguments (kept for value matches)
    given: set[tuple[str, int]] = field(default_factory=set)  # every tensor the call's arguments hold
    tainted: set[tuple[str, int]] = field(default_factory=set)  # storages unknown memory was copied into


class _State:
    """Module state in one object, so the recorder's switches are not plain module globals."""

    installed = False
    record: CallRecord | None = None
    in_launch = 0
    allowed: frozenset[str] = ALLOWED_OPS


_S = _State()


def _launch_tensors(args: tuple, kwargs: dict[str, Any]) -> list[torch.Tensor]:
    out = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif hasattr(a, "base") and isinstance(getattr(a, "base", None), torch.Tensor):  # TensorDescriptor
            out.append(a.base)
    return out


def _after_launch(rec: CallRecord, tensors: list[torch.Tensor], stores_before: int, interpreter: bool) -> None:
    if interpreter:
        import numpy as np

        new = rec.stored[stores_before:]
        addresses = np.concatenate(new) if new else np.zeros(0, dtype=np.uint64)
        for t in tensors:
            start = t.untyped_storage().data_ptr()
            end = start + t.untyped_storage().nbytes()
            if addresses.size and bool(((addresses >= start) & (addresses < end)).any()):
                rec.derived[storage_key(t)] = _Derived("launch", t.untyped_storage().clone())
                _reseal(rec, t)
    else:
        for t in tensors:
            key = storage_key(t)
            if key not in rec.inputs:
                rec.derived[key] = _Derived("launch", t.untyped_storage().clone())
    rec.tensors.extend(tensors)


def _reseal(rec: CallRecord, t: torch.Tensor) -> None:
    """A kernel's stores landed in `t`'s storage: if it is known, its seal is what they left."""
    keyed = _keyed(t)
    if keyed is not None and _standing(rec, keyed[0]):
        _seal(*keyed)


def install_launch_recorder() -> None:
    """Wrap every kernel class's `run` (counting launches, pausing the op recorder inside them)
    and, under the interpreter, its store operations (recording written addresses)."""
    if _S.installed:
        return
    _S.installed = True
    from triton.runtime.jit import JITFunction

    classes: list[tuple[Any, bool]] = [(JITFunction, False)]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append((InterpretedFunction, True))
    except ImportError:  # pragma: no cover - every supported triton has it
        pass
    for cls, interpreter in classes:
        original = cls.run

        def run(self: Any, *args: Any, __original: Callable = original, __interp: bool = interpreter,
                **kwargs: Any) -> Any:
            rec = _S.record
            tensors = _launch_tensors(args, kwargs)
            if rec is not None:
                rec.launches += 1
                if not _S.in_launch:
                    _check_provenance(rec, tensors)
            before = len(rec.stored) if rec is not None else 0
            _S.in_launch += 1
            try:
                kernel = __original(self, *args, **kwargs)
                if rec is not None and _S.in_launch == 1 and not kwargs.get("warmup"):
                    _count_kernel(rec, kernel, kwargs.get("grid"))
                return kernel
            finally:
                try:  # still inside the launch: the recorder's own snapshots are not recorded operations
                    if rec is not None and _S.in_launch == 1:
                        _after_launch(rec, tensors, before, __interp)
                finally:
                    _S.in_launch -= 1

        cls.run = run
    _install_store_recorder()


def _count_kernel(rec: CallRecord, kernel: Any, grid: Any) -> None:
    """One launch of `kernel` (what Triton's `run` returned: the compiled kernel, whose name
    is the one the device's trace shows), counted by name for the trace's check. A launch over
    an empty grid runs nothing (Triton's launcher skips it), and a grid given as a function is
    only known inside Triton: such launches count towards the most the trace may show, not
    towards what it must."""
    name = getattr(kernel, "name", None)
    if not isinstance(name, str):
        return
    rec.kernels[name] = rec.kernels.get(name, 0) + 1
    if isinstance(grid, (tuple, list)) and grid and all(isinstance(g, int) and g > 0 for g in grid):
        rec.kernels_sure[name] = rec.kernels_sure.get(name, 0) + 1


def _install_store_recorder() -> None:
    try:
        from triton.runtime import interpreter as interp
    except ImportError:  # pragma: no cover
        return
    builder = type(interp.interpreter_builder)

    def record(ptrs: Any, mask: Any) -> None:
        rec = _S.record
        if rec is not None:
            data = ptrs.data if mask is None else ptrs.data[mask.data.astype(bool)]
            rec.stored.append(data.astype("uint64").ravel())

    masked_store = builder.create_masked_store

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any) -> Any:
        record(ptrs, mask)
        return masked_store(self, ptrs, value, mask, *rest)

    builder.create_masked_store = create_masked_store
    for name in ("create_atomic_rmw", "create_atomic_store"):
        original = getattr(builder, name, None)
        if original is None:
            continue

        def atomic(self: Any, *args: Any, __original: Callable = original, __name: str = name) -> Any:
            # create_atomic_rmw(op, ptr, val, mask, ...), create_atomic_store(ptr, val, mask, ...)
            ptr, mask = (args[1], args[3]) if __name == "create_atomic_rmw" else (args[0], args[2])
            record(ptr, mask)
            return __original(self, *args)

        setattr(builder, name, atomic)
    cas = getattr(builder, "create_atomic_cas", None)
    if cas is not None:
        def atomic_cas(self: Any, ptr: Any, *args: Any, __original: Callable = cas) -> Any:
            record(ptr, None)
            return __original(self, ptr, *args)

        builder.create_atomic_cas = atomic_cas


@dataclass(frozen=True)
class _Op:
    """What the recorder needs to know of an operation, worked out once per overload.

    name: the overload packet's name for an `aten` op ("clone"), the qualified name for any
    other namespace ("mylib::clone"), so a candidate's custom op never matches the allow-list
    or the copy and allocation sets by its bare name. kind: "fresh" (new memory), "lifted"
    (Python values made a tensor), "view" (outputs alias inputs, nothing written; `set_` too,
    whose tensor takes on its source storage's standing), "write" (mutates arguments:
    in-place and `out=` ops), "compute" (new outputs from its inputs). writes: the positions of
    the arguments it mutates."""

    name: str
    kind: str
    writes: tuple[int, ...] = ()


_OPS: dict[Any, _Op] = {}


def _op_info(func: Any) -> _Op:
    op = _OPS.get(func)
    if op is None:
        op = _OPS[func] = _classify(func)
    return op


def _classify(func: Any) -> _Op:
    namespace = getattr(func, "namespace", "aten")
    packet = func.overloadpacket.__name__
    name = packet if namespace == "aten" else f"{namespace}::{packet}"
    schema = func._schema
    writes = tuple(i for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write)
    if name in _LIFTED:
        kind = "lifted"
    elif name in _FRESH_OPS:
        kind = "fresh"
    elif name == "set_" or (not writes and schema.returns and all(r.alias_info is not None for r in schema.returns)):
        kind = "view"
    elif writes:
        kind = "write"
    else:
        kind = "compute"
    return _Op(name, kind, writes)


def _written(op: _Op, func: Any, args: tuple, kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors an operation of kind "write" mutates (by its schema), positional or keyword."""
    arguments = func._schema.arguments
    values = [args[i] if i < len(args) else kwargs.get(arguments[i].name) for i in op.writes]
    return _op_tensors(tuple(values))


class _OpRecorder(TorchDispatchMode):
    """Records aten operations outside Triton launches and tracks storage provenance."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """False: torch must not wrap this mode's `__torch_dispatch__` in `torch._disable_dynamo`.
        That wrapper imports `torch._dynamo` at the first operation recorded (2.75 s on a 2-core
        host, in every fresh process that records a call: a judge worker's template, and each
        candidate process of the naive benchmark harness, which does not fork from a template)
        and adds Dynamo's frame switching to every operation after. It keeps `torch.compile`
        from tracing into the mode; an entry point that calls a compiled function under the
        recorder still runs, and what it dispatches is still recorded (tests/test_launches.py)."""
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if _S.in_launch:  # Triton's own moves of the launch's arguments; its stores are sealed after it
            return func(*args, **kwargs)
        rec = _S.record
        op = _op_info(func)
        name = op.name
        tensors_in = _op_tensors((*args, *kwargs.values()))
        clean = _clean_before(rec, op, tensors_in)  # the inputs' standing before the op changes them
        out = func(*args, **kwargs)
        tensors_out = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, torch.Tensor)]
        written = _written(op, func, args, kwargs) if op.kind == "write" else []
        _vouch(rec, op, clean, tensors_in, [*written, *tensors_out])
        if rec is None:
            return out
        rec.ops.append(name)
        if name not in _S.allowed:
            rec.fallback[name] = rec.fallback.get(name, 0) + 1
        elif name in ("copy_", "_to_copy") and tensors_in:
            src = tensors_in[-1] if name == "copy_" else tensors_in[0]
            dst = tensors_in[0] if name == "copy_" else (tensors_out[0] if tensors_out else None)
            if src.device.type == "cpu" and dst is not None and dst.device.type != "cpu" \
                    and src.numel() > HOST_COPY_LIMIT:
                rec.fallback["host_to_device_copy"] = rec.fallback.get("host_to_device_copy", 0) + 1
        self._track(rec, name, tensors_in, tensors_out)
        return out

    @staticmethod
    def _track(rec: CallRecord, name: str, tensors_in: list[torch.Tensor], tensors_out: list[torch.Tensor]) -> None:
        if name == "copy_" and len(tensors_in) >= 2:
            dst, src = tensors_in[0], tensors_in[1]
            if storage_key(src) in rec.derived:
                rec.derived[storage_key(dst)] = _Derived("op")
            else:
                rec.derived.pop(storage_key(dst), None)
            return
        if name in _OVERWRITE_OPS and tensors_in:
            rec.derived.pop(storage_key(tensors_in[0]), None)
            return
        if name in _FRESH_OPS:
            return
        same_storage = {storage_key(t) for t in tensors_in}
        derived_in = any(storage_key(t) in rec.derived for t in tensors_in)
        for o in tensors_out:
            key = storage_key(o)
            if key in same_storage:
                continue  # a view: provenance is the storage's own
            if derived_in and (name in _COPY_OPS or name not in ALLOWED_OPS):
                rec.derived[key] = _Derived("op")


def _op_tensors(values: tuple) -> list[torch.Tensor]:
    """An operation's tensor arguments, those inside a list argument included (`cat`, `stack`)."""
    out: list[torch.Tensor] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (tuple, list)):
            out.extend(x for x in v if isinstance(x, torch.Tensor))
    return out


def _keyed(t: torch.Tensor) -> tuple[tuple[str, int], torch.UntypedStorage] | None:
    """`t`'s `storage_key` and storage, or None for a tensor without one (sparse, nested)."""
    try:
        storage = t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None
    return (t.device.type, storage.data_ptr()), storage


def _digest(storage: torch.UntypedStorage) -> int:
    """CRC-32 of a CPU storage's bytes, read in place (no copy, nothing dispatched): about 2 GB/s."""
    return zlib.crc32((ctypes.c_char * storage.nbytes()).from_address(storage.data_ptr()))


def _seal(key: tuple[str, int], storage: torch.UntypedStorage) -> None:
    """Remember what a CPU storage holds now, as a recorded operation or kernel store left it."""
    if key[0] == "cpu" and storage.nbytes():
        _SEALS[key] = _digest(storage)


def _intact(key: tuple[str, int], storage: torch.UntypedStorage) -> bool:
    """Whether a known storage still holds what the records last left in it. A CPU storage without
    a seal yet is sealed now (nothing to compare with); device memory is not checked."""
    if key[0] != "cpu":
        return True
    seal = _SEALS.get(key)
    if seal is None:
        _seal(key, storage)
        return True
    return _digest(storage) == seal


def _standing(rec: CallRecord | None, key: tuple[str, int]) -> bool:
    """Known by the records alone (the call's own argument, or made by recorded operations from
    known memory), without reading the bytes."""
    if rec is not None and key in rec.tainted:
        return False
    return (rec is not None and key in rec.given) or key in _KNOWN


def _known(rec: CallRecord | None, t: torch.Tensor) -> bool:
    """Whether `t`'s memory is known (module docstring): its standing, and during a call on the
    CPU its bytes still sealed; memory written out of the records' sight loses its standing
    here. A tensor without memory of its own is not in question."""
    keyed = _keyed(t)
    if keyed is None or keyed[1].nbytes() == 0:
        return True
    key, storage = keyed
    if not _standing(rec, key):
        return False
    if rec is not None and not _intact(key, storage):
        _mark(rec, t, False)
        return False
    return True


def _all_known(rec: CallRecord | None, tensors: list[torch.Tensor]) -> bool:
    """`_known` for every tensor, each storage read once (views of one buffer are common)."""
    seen: set[tuple[str, int]] = set()
    clean = True
    for t in tensors:
        keyed = _keyed(t)
        if keyed is None or keyed[0] in seen:
            continue
        seen.add(keyed[0])
        clean = _known(rec, t) and clean  # every storage checked: a stale one loses its standing
    return clean


def _clean_before(rec: CallRecord | None, op: _Op, tensors_in: list[torch.Tensor]) -> bool:
    """The standing of what an operation reads, taken before it runs (a write changes the bytes).
    Views and set_ read no values, so their inputs' bytes are not checked; allocations and
    lifts read none at all."""
    if rec is None or op.kind in ("fresh", "lifted"):
        return True
    if op.kind == "view":
        return all(k is None or not k[1].nbytes() or _standing(rec, k[0]) for k in map(_keyed, tensors_in))
    if op.name in _OVERWRITE_OPS or (op.name == "copy_" and tensors_in and _covers_storage(tensors_in[0])):
        tensors_in = tensors_in[1:]  # the destination's old bytes are all overwritten: only the source counts
    return _all_known(rec, tensors_in)


def _covers_storage(t: torch.Tensor) -> bool:
    keyed = _keyed(t)
    return (keyed is not None and t.is_contiguous() and t.storage_offset() == 0
            and t.numel() * t.element_size() == keyed[1].nbytes())


def _mark(rec: CallRecord | None, t: torch.Tensor, known: bool) -> None:
    keyed = _keyed(t)
    if keyed is None:
        return
    key, storage = keyed
    if known:
        _KNOWN[key] = storage
        if rec is not None:
            rec.tainted.discard(key)
            _seal(key, storage)  # outside a call, `registering` seals everything once at its end
    else:
        _KNOWN.pop(key, None)
        _SEALS.pop(key, None)
        if rec is not None:
            rec.tainted.add(key)


def _vouch(rec: CallRecord | None, op: _Op, clean: bool, tensors_in: list[torch.Tensor],
           tensors_out: list[torch.Tensor]) -> None:
    """Provenance of the memory an operation wrote (`tensors_out`: what it returned and the
    arguments it mutated): known when everything it read was (`clean`, taken before it ran).
    A view keeps its storage's standing (and seal) unless unknown memory went into it; a write
    or a new result is known when clean, and sealed as it now is. A fresh allocation is known
    whatever a `*_like` took its shape from; a tensor PyTorch lifted from Python values
    (`torch.tensor`, `from_numpy`) is known when small, as a constant is (`HOST_COPY_LIMIT`)."""
    if rec is None:  # no call is running (an import, a method's own tests): nothing can hold an answer yet
        for o in tensors_out:
            _mark(rec, o, True)
        return
    if op.kind in ("fresh", "lifted"):  # new memory: only a `*_like`'s shape comes from its input
        for o in tensors_out:
            _mark(rec, o, op.kind == "fresh" or o.numel() <= HOST_COPY_LIMIT)
        return
    if op.kind == "view":
        if not clean:
            for o in tensors_out:
                _mark(rec, o, False)
        return
    done: set[tuple[str, int]] = set()
    for o in tensors_out:  # an in-place result's too (`resize_` may have moved its memory)
        keyed = _keyed(o)
        if keyed is not None and keyed[0] not in done:
            done.add(keyed[0])
            _mark(rec, o, clean)


def _seal_known() -> None:
    """Seal every known CPU storage as it is now, and forget seals of storages no longer known:
    at the end of `registering`, where tensors were made and filled freely (numpy included)."""
    for key in [k for k in _SEALS if k not in _KNOWN]:
        del _SEALS[key]
    for key, storage in list(_KNOWN.items()):
        _seal(key, storage)


def _check_provenance(rec: CallRecord, tensors: list[torch.Tensor]) -> None:
    unknown = sum(1 for t in tensors if not _known(rec, t))
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
        keyed = _keyed(values)
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


def _take_given(rec: CallRecord, values: Any) -> None:
    """The call's own arguments are known memory, sealed as the judge sent them: an answer
    written into one out of the records' sight (and the input put back afterwards) is caught."""
    given = _given(values)
    rec.given |= set(given)
    for key, storage in given.items():
        _seal(key, storage)


@contextmanager
def registering() -> Iterator[None]:
    """Memory that operations make while this is active counts as known (`_KNOWN`): around a
    candidate's import, where module-level tensors (tables, workspaces) are made."""
    try:
        with _OpRecorder():
            yield
    finally:
        _seal_known()


def set_allowed_ops(extra: tuple[str, ...]) -> None:
    """The task's own additions to the allow-list (e.g. a final `sum` over partial results):
    `aten` ops by bare or qualified name ("sum", "aten::sum"), any other namespace's qualified."""
    _S.allowed = ALLOWED_OPS | frozenset(name.removeprefix("aten::") for name in extra)


@contextmanager
def recording(inputs: tuple) -> Iterator[CallRecord]:
    """Record one call of the entry point."""
    rec = CallRecord(inputs={storage_key(a) for a in inputs if isinstance(a, torch.Tensor)})
    for key in [k for k in _SEALS if k not in _KNOWN]:  # the last call's arguments, storages gone
        del _SEALS[key]
    _take_given(rec, inputs)
    _S.record = rec
    try:
        with _OpRecorder():
            yield rec
    finally:
        _S.record = None


def add_inputs(values: tuple) -> None:
    """Tensors the call being recorded receives as inputs besides those `recording` was given
    (the judge's copies of them for a suite's reference): on a GPU a launch that takes one is
    then not taken to have written it. Without this the judge saw a reference that returns its
    input (layer_norm_fwd's residual) as a kernel's work, while a candidate returning the same
    input got `no_kernel`. Nothing while no call is recorded."""
    rec = _S.record
    if rec is not None:
        rec.inputs |= {storage_key(a) for a in values if isinstance(a, torch.Tensor)}
        _take_given(rec, values)


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
