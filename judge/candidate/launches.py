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
  launch reads it (judge/candidate/known_memory.py). Operations are matched by qualified name:
  only `aten` ops can be allowed, so a custom op named `clone` in a candidate's namespace is not
  `aten::clone`.

This module holds the recorders (the launch and store recorders, the dispatch mode) and the
switches around a call (`recording`, `registering`); what one call recorded, and what is read
from it once the call returned, is judge/candidate/call_record.py.

These records are self-reported by the process that runs candidate code: a candidate that
sets out to disable them (pops the dispatch mode, patches this module) can pass a correct
PyTorch result off as Triton's. The judge still checks every value; what it cannot prove
from outside is who computed them (docs/ARCHITECTURE.md, threat model).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from judge.candidate.call_record import CallRecord, Derived, storage_key
from judge.candidate.known_memory import (
    KNOWN,
    SEALS,
    all_known,
    check_provenance,
    covers_storage,
    has_standing,
    keyed_storage,
    mark_standing,
    seal_known,
    seal_storage,
    take_given,
)

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
HOST_COPY_LIMIT = 64  # elements: a bigger host->device copy inside the entry point is host-side compute
_LIFTED = frozenset({"lift_fresh", "lift_fresh_copy"})  # torch.tensor(data) / from_numpy: Python's values made a tensor


class _State:
    """Module state in one object, so the recorder's switches are not plain module globals."""

    installed = False
    record: CallRecord | None = None
    in_launch = 0
    compiling: CompileOnly | None = None  # the compile pass is on (`compile_only`)
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
                rec.derived[storage_key(t)] = Derived("launch", t.untyped_storage().clone())
                _reseal(rec, t)
    else:
        for t in tensors:
            key = storage_key(t)
            if key not in rec.inputs:
                rec.derived[key] = Derived("launch", t.untyped_storage().clone())
    rec.tensors.extend(tensors)


def _reseal(rec: CallRecord, t: torch.Tensor) -> None:
    """A kernel's stores landed in `t`'s storage: if it is known, its seal is what they left."""
    keyed = keyed_storage(t)
    if keyed is not None and has_standing(rec, keyed[0]):
        seal_storage(*keyed)


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
            if _S.compiling is not None and not _S.in_launch:
                return _S.compiling.warm(self, __original, args, kwargs)
            rec = _S.record
            tensors = _launch_tensors(args, kwargs)
            if rec is not None:
                rec.launches += 1
                if not _S.in_launch:
                    check_provenance(rec, tensors)
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


class _WithoutDynamo(TorchDispatchMode):
    """The candidate process's dispatch modes (`_HostOnly`, `_OpRecorder`) opt out of Dynamo's guard."""

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


@dataclass
class CompileOnly:
    """The compile pass's switch (judge/candidate/precompile.py): every launch compiled, none run."""

    compiled: list[Any]
    launches: int = 0

    def warm(self, kernel: Any, run: Callable, args: tuple, kwargs: dict[str, Any]) -> Any:
        self.launches += 1
        kwargs["warmup"] = True
        _S.in_launch += 1
        try:
            compiled = run(kernel, *args, **kwargs)
        finally:
            _S.in_launch -= 1
        if compiled is not None:
            self.compiled.append(compiled)
        return compiled


@contextmanager
def compile_only(compiled: list[Any]) -> Iterator[CompileOnly]:
    """Launches compiled and never run while this is active, an autotuner's configurations
    each compiled instead of benchmarked (its benchmark would run them); `compiled` receives
    what Triton returned for each."""
    switch = CompileOnly(compiled)
    restore = _autotuners_compile_only()
    _S.compiling = switch
    try:
        with _HostOnly():
            yield switch
    finally:
        _S.compiling = None
        restore()


class GPUWorkRefused(RuntimeError):
    """Raised in the compile pass by an operation on a tensor that lives on a GPU."""


class _HostOnly(_WithoutDynamo):
    """No GPU work while the compile pass runs without a ticket at the GPU's gate. An operation
    that would make a tensor on a GPU (`torch.randn(..., device="cuda")`, `x.cuda()`) makes it
    on the host instead, so code that names the GPU itself (a method's tests mostly do) still
    reaches its launches, with host pointers of the same alignment; an operation on a tensor
    already on a GPU (one the candidate's import made) is refused: the code that asked raises,
    and its kernels compile at their first judged launch instead."""

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if _on_gpu((*args, *kwargs.values())):
            raise GPUWorkRefused(f"{func._schema.name} on a GPU tensor during the compile pass")
        if _names_gpu(kwargs.get("device")):
            kwargs = {**kwargs, "device": torch.device("cpu")}
            kwargs.pop("pin_memory", None)
        return func(*args, **kwargs)


def _on_gpu(values: tuple) -> bool:
    return any(t.device.type not in ("cpu", "meta") for t in _op_tensors(values))


def _names_gpu(device: Any) -> bool:
    return device is not None and torch.device(device).type not in ("cpu", "meta")


def _autotuners_compile_only() -> Callable[[], None]:
    """`Autotuner.run` replaced by its compile-only `warmup` (each pruned configuration compiled
    through the wrapped `JITFunction.run`); returns what puts it back."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:  # pragma: no cover - every supported triton has it
        return lambda: None
    original = Autotuner.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("warmup", None)
        return self.warmup(*args, **kwargs)

    Autotuner.run = run

    def restore() -> None:
        Autotuner.run = original

    return restore


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


class _OpRecorder(_WithoutDynamo):
    """Records aten operations outside Triton launches and tracks storage provenance."""

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
                rec.derived[storage_key(dst)] = Derived("op")
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
                rec.derived[key] = Derived("op")


def _op_tensors(values: tuple) -> list[torch.Tensor]:
    """An operation's tensor arguments, those inside a list argument included (`cat`, `stack`)."""
    out: list[torch.Tensor] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (tuple, list)):
            out.extend(x for x in v if isinstance(x, torch.Tensor))
    return out


def _clean_before(rec: CallRecord | None, op: _Op, tensors_in: list[torch.Tensor]) -> bool:
    """The standing of what an operation reads, taken before it runs (a write changes the bytes).
    Views and set_ read no values, so their inputs' bytes are not checked; allocations and
    lifts read none at all."""
    if rec is None or op.kind in ("fresh", "lifted"):
        return True
    if op.kind == "view":
        return all(k is None or not k[1].nbytes() or has_standing(rec, k[0]) for k in map(keyed_storage, tensors_in))
    if op.name in _OVERWRITE_OPS or (op.name == "copy_" and tensors_in and covers_storage(tensors_in[0])):
        tensors_in = tensors_in[1:]  # the destination's old bytes are all overwritten: only the source counts
    return all_known(rec, tensors_in)



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
            mark_standing(rec, o, True)
        return
    if op.kind in ("fresh", "lifted"):  # new memory: only a `*_like`'s shape comes from its input
        for o in tensors_out:
            mark_standing(rec, o, op.kind == "fresh" or o.numel() <= HOST_COPY_LIMIT)
        return
    if op.kind == "view":
        if not clean:
            for o in tensors_out:
                mark_standing(rec, o, False)
        return
    done: set[tuple[str, int]] = set()
    for o in tensors_out:  # an in-place result's too (`resize_` may have moved its memory)
        keyed = keyed_storage(o)
        if keyed is not None and keyed[0] not in done:
            done.add(keyed[0])
            mark_standing(rec, o, clean)


@contextmanager
def registering() -> Iterator[None]:
    """Memory that operations make while this is active counts as known (`KNOWN`): around a
    candidate's import, where module-level tensors (tables, workspaces) are made."""
    try:
        with _OpRecorder():
            yield
    finally:
        seal_known()


def set_allowed_ops(extra: tuple[str, ...]) -> None:
    """The task's own additions to the allow-list (e.g. a final `sum` over partial results):
    `aten` ops by bare or qualified name ("sum", "aten::sum"), any other namespace's qualified."""
    _S.allowed = ALLOWED_OPS | frozenset(name.removeprefix("aten::") for name in extra)


@contextmanager
def recording(inputs: tuple) -> Iterator[CallRecord]:
    """Record one call of the entry point."""
    rec = CallRecord(inputs={storage_key(a) for a in inputs if isinstance(a, torch.Tensor)})
    for key in [k for k in SEALS if k not in KNOWN]:  # the last call's arguments, storages gone
        del SEALS[key]
    take_given(rec, inputs)
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
        take_given(rec, values)
