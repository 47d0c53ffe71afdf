"""The conversation between the judge and a candidate process: length-prefixed JSON frames on
a Unix socket, tensors in shared memory (a memfd passed beside the frame, SCM_RIGHTS).

Why this shape: the judge must never unpickle what a candidate process sends (unpickling runs
code), so frames are JSON and tensors are raw bytes described by dtype, size, stride and
offset, rebuilt by the receiver. Tensors cross as host bytes, not CUDA IPC handles: an IPC
handle maps the sender's whole allocator segment, which would hand the candidate the judge's
other tensors (its expected outputs among them). A memfd needs no file name, no /dev/shm
entry and no helper process. Each side of a link writes into its own arena, reused for the
link's life (one candidate process); the judge accepts a candidate's arena only when it is
sealed against shrinking (so its mapping cannot fault) and copies every tensor out of it at
once (so bytes the candidate changes later change nothing the judge looks at).
"""

from __future__ import annotations

import copyreg
import fcntl
import json
import mmap
import os
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

import torch

from bench.sequences import of_type
from bench.slack import front_bytes, raw_bytes, slack_bytes

MAX_FRAME = 64 << 20  # a JSON frame larger than this is a protocol violation
_DTYPES = {str(d).removeprefix("torch."): d for d in vars(torch).values() if isinstance(d, torch.dtype)}
"""Every dtype this torch build has (float8 and unsigned kinds included), by its canonical name."""


_ARENA_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
"""What a receiver requires of the other side's memory: it can never shrink under the
receiver's mapping (a read past the new end would kill the receiver with SIGBUS)."""
_MIN_ARENA = 1 << 20
PIN_ENV = "KMC_PIN_ARENAS"
"""0 turns page-locking of the arenas off (scripts/judge_profile.py compares both ways)."""


class WireError(Exception):
    """The other side sent something that is not a well-formed message."""


class _Arena:
    """Shared memory one side writes its messages' tensors into, reused for the link's life.

    Why reused: a fresh memfd per message pays a page fault and a zeroed page for every 4 KiB
    it carries (measured, about ten times the cost of writing into a reused one), and a
    hidden case set moves gigabytes per candidate. An arena lives as long as one candidate
    process's link, so nothing written into it reaches another candidate."""

    def __init__(self, capacity: int, pin: bool = False) -> None:
        self.fd = os.memfd_create("kmc-tensors", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, capacity)  # sparse: pages exist only once written
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, _ARENA_SEALS)
        self.size = capacity
        self.mem = mmap.mmap(self.fd, capacity, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        self.bytes = torch.frombuffer(self.mem, dtype=torch.uint8)
        self.pinned = pin_host_memory(self.bytes) if pin else 0

    def close(self) -> None:
        unpin_host_memory(self.pinned)
        del self.bytes  # the mapping must have no users left when it closes
        self.mem.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class _Mapped:
    """The other side's arena, mapped here (writable only because torch views no read-only
    buffer without a warning; nothing here writes it); every tensor is copied out of it at once."""

    def __init__(self, fd: int, pin: bool = False) -> None:
        try:
            seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        except OSError:
            raise WireError("tensor memory that is not a sealable memfd") from None
        if seals & (fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW) != fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW:
            raise WireError("tensor memory that is not sealed against shrinking")
        self.size = os.fstat(fd).st_size
        self.mem: Any = mmap.mmap(fd, self.size, flags=mmap.MAP_SHARED,
                                           prot=mmap.PROT_READ | mmap.PROT_WRITE) if self.size \
            else _Empty()
        self.pinned = 0
        if pin and self.size:
            view = torch.frombuffer(self.mem, dtype=torch.uint8)
            self.pinned = pin_host_memory(view)
            del view

    def close(self) -> None:
        unpin_host_memory(self.pinned)
        if isinstance(self.mem, mmap.mmap):
            self.mem.close()


class Link:
    """One side of a judge-candidate socket: JSON frames, and tensors through an arena.

    A message's tensors are written from offset 0 of the sender's arena; a new arena (the
    first, or a larger one when a message does not fit) travels with the message that first
    uses it, and the receiver keeps its mapping until the next one arrives. Messages strictly
    alternate (a request, then its reply), and a receiver copies every tensor out before it
    answers, so the sender may overwrite its arena with the next message."""

    def __init__(self, sock: socket.socket, pin: bool = False) -> None:
        """`pin`: this side copies between its GPU and the arenas, so it page-locks its
        mappings of them (`pin_host_memory`)."""
        self.sock = sock
        self.pin = pin and os.environ.get(PIN_ENV, "1") != "0"
        self._out: _Arena | None = None
        self._out_shared = False  # whether the receiver has been handed `_out` yet
        self._in: _Mapped | None = None
        self.copy_in_seconds = 0.0  # spent copying received tensors out of the other side's arena

    def send(self, header: dict[str, Any], tensors: list[torch.Tensor] | None = None) -> None:
        raws = [raw_bytes(t) for t in tensors or ()]
        total = sum(r.numel() for r in raws)
        if total and (self._out is None or self._out.size < total):
            before = 0
            if self._out is not None:
                before = self._out.size
                self._out.close()
                self._out = None
            self._out = _Arena(max(total, 2 * before, _MIN_ARENA), self.pin)
            self._out_shared = False
        described = []
        offset = 0
        for t, r in zip(tensors or (), raws, strict=True):
            if r.numel():
                assert self._out is not None
                self._out.bytes[offset:offset + r.numel()].copy_(r)  # device-to-host for a GPU tensor
            offset += r.numel()
            described.append(describe(t, r.numel()))
        frame = json.dumps({**header, "tensors": described}).encode()
        payload = struct.pack("!I", len(frame)) + frame
        if not total or self._out_shared:
            self.sock.sendall(payload)
            return
        assert self._out is not None
        sent = socket.send_fds(self.sock, [payload[:4096]], [self._out.fd])
        self._out_shared = True
        os.close(self._out.fd)  # the receiver holds its own copy of the descriptor now
        self._out.fd = -1
        self.sock.sendall(payload[sent:])

    def recv(self, device: str = "cpu", slack: bool = False) -> tuple[dict[str, Any], list[torch.Tensor]]:
        """One message; tensors are rebuilt as fresh tensors on `device` (never views of shared
        memory), with `slack` zeroed bytes after each storage (the candidate process: see
        `slack_bytes`)."""
        fds: list[int] = []
        try:
            (length,) = struct.unpack("!I", _recv_exact(self.sock, 4, fds))
            if length > MAX_FRAME:
                raise WireError(f"a frame of {length} bytes")
            try:
                header = json.loads(_recv_exact(self.sock, length, fds))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise WireError(f"unreadable frame: {exc}") from None
            if not isinstance(header, dict) or not isinstance(header.get("tensors", []), list):
                raise WireError("a frame that is not a message")
            if len(fds) > 1:
                raise WireError(f"{len(fds)} descriptors with one message")
            if fds:
                mapped = _Mapped(fds[0], self.pin)
                if self._in is not None:
                    self._in.close()
                self._in = mapped
            described = header.pop("tensors", [])
            if not described:
                return header, []
            if self._in is None:
                raise WireError("tensors described without memory to read them from")
            started = time.perf_counter()
            tensors = _unpack(self._in.mem, self._in.size, described, device, slack)
            self.copy_in_seconds += time.perf_counter() - started
            return header, tensors
        finally:
            for fd in fds:
                os.close(fd)

    def close(self) -> None:
        for end in (self._out, self._in):
            if end is not None:
                end.close()
        self._out = self._in = None


def pin_host_memory(t: torch.Tensor) -> int:
    """Page-locks a CPU tensor's memory for the GPU's copy engines (cudaHostRegister, or HIP's
    through the same binding) and returns its address, or 0 where that is not possible (no
    GPU in this process, an old driver). Why: copies between a GPU and pageable memory go
    through the driver's staging buffers, measured several times slower than page-locked ones,
    and a hidden case set moves gigabytes through the arenas."""
    if t.numel() == 0 or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return 0
    try:
        failed = int(torch.cuda.cudart().cudaHostRegister(t.data_ptr(), t.numel(), 0))
    except (AttributeError, RuntimeError):
        return 0
    if failed:
        # The runtime keeps the error as its last one, and torch reads that after its next
        # kernel launch: take it now, with a launch of our own, so it lands here.
        try:
            torch.zeros(1, device="cuda")
        except RuntimeError:
            pass
        return 0
    return t.data_ptr()


def unpin_host_memory(address: int) -> None:
    """Before the mapping goes: the driver must not keep a registration of unmapped memory."""
    if address:
        try:
            torch.cuda.cudart().cudaHostUnregister(address)
        except (AttributeError, RuntimeError):
            pass


def send(sock: socket.socket, header: dict[str, Any], tensors: list[torch.Tensor] | None = None) -> None:
    """A one-off message (the template's hello): its own arena, gone afterwards."""
    link = Link(sock)
    try:
        link.send(header, tensors)
    finally:
        link.close()


def recv(sock: socket.socket, device: str = "cpu", slack: bool = False) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """A one-off message (see `send`)."""
    link = Link(sock)
    try:
        return link.recv(device, slack)
    finally:
        link.close()


def _recv_exact(sock: socket.socket, n: int, fds: list[int]) -> bytes:
    chunks = []
    while n:
        data, got_fds, _flags, _addr = socket.recv_fds(sock, min(n, 1 << 20), 4)
        fds.extend(got_fds)
        if not data:
            raise EOFError("the other side closed the connection")
        chunks.append(data)
        n -= len(data)
    return b"".join(chunks)


def describe(t: torch.Tensor, nbytes: int | None = None) -> dict[str, Any]:
    """A tensor as a frame describes it: dtype, size, strides, storage offset and the bytes of
    its whole storage (`nbytes`, the storage's own size unless given)."""
    if nbytes is None:
        nbytes = t.untyped_storage().nbytes()
    return {"dtype": str(t.dtype).removeprefix("torch."), "size": list(t.shape), "stride": list(t.stride()),
            "offset": t.storage_offset(), "nbytes": int(nbytes), "device": t.device.type}


def description_fields(d: Any) -> tuple[torch.dtype, list[int], list[int], int, int]:
    """A tensor description's dtype, size, strides, storage offset and bytes, checked: the
    tensor lies inside its bytes (`WireError` otherwise)."""
    try:
        dtype = _DTYPES[d["dtype"]]
        size, stride, storage_offset, nbytes = (list(map(int, d["size"])), list(map(int, d["stride"])),
                                                int(d["offset"]), int(d["nbytes"]))
    except (KeyError, TypeError, ValueError):
        raise WireError(f"a tensor description that makes no sense: {str(d)[:200]}") from None
    if nbytes < 0 or len(size) != len(stride) or storage_offset < 0 \
            or min(size, default=1) < 0 or min(stride, default=0) < 0:
        raise WireError(f"a tensor description out of bounds: {str(d)[:200]}")
    itemsize = torch.empty(0, dtype=dtype).element_size()
    needed = (storage_offset + sum((s - 1) * st for s, st in zip(size, stride, strict=True)) + 1) * itemsize \
        if all(size) else 0
    if needed > nbytes:
        raise WireError(f"a tensor reaching past its bytes: {str(d)[:200]}")
    return dtype, size, stride, storage_offset, nbytes


def _unpack(mem: Any, total: int, described: list[Any], device: str, slack: bool = False) -> list[torch.Tensor]:
    out = []
    offset = 0
    for d in described:
        dtype, size, stride, storage_offset, nbytes = description_fields(d)
        if offset + nbytes > total:
            raise WireError(f"a tensor description out of bounds: {str(d)[:200]}")
        itemsize = torch.empty(0, dtype=dtype).element_size()
        if nbytes:
            # Copied once, into the receiver's own tensor: the sender may write its arena at
            # any time, so nothing here ever stays a view of it.
            view = torch.frombuffer(mem, dtype=torch.uint8, count=nbytes, offset=offset)
            if slack:  # known bytes before and after (bench/slack.py), as the judge's reference runs get
                front = front_bytes(nbytes)
                raw = torch.zeros(front + nbytes + slack_bytes(nbytes), dtype=torch.uint8, device=device)
                raw[front:front + nbytes].copy_(view)
                storage_offset += front // itemsize
            else:
                raw = view.to(device, copy=True)
            del view
        else:
            raw = torch.empty(0, dtype=torch.uint8, device=device)
        t = torch.empty(0, dtype=dtype, device=device).set_(raw.untyped_storage(), storage_offset, size, stride)
        out.append(t)
        offset += nbytes
    return out


class _Empty:
    def __enter__(self) -> bytes:
        return b""

    def __exit__(self, *exc: Any) -> None:
        return None


# ---------------------------------------------------------------- argument and output structure
# Two directions, two trust levels. The judge sends a call's arguments: its own objects, so the
# candidate process may rebuild them faithfully (`encode_values(..., objects=True)` and
# `decode_values(..., rebuild=Rebuilder(module))`): torch.nn modules, a suite's config classes,
# namedtuples, devices, every torch and Triton dtype. The candidate process sends back outputs
# and its arguments after the call: untrusted, so the judge decodes plain values only (tensors,
# numbers, strings, nested lists, tuples and dicts, dtypes, devices); anything else becomes an
# `Opaque` carrying its type name, and nothing it sends is ever unpickled or constructed.

_STDLIB_OBJECTS = ("builtins", "collections", "types", "dataclasses", "enum", "functools", "fractions",
                   "decimal", "datetime", "numbers", "operator", "math")
"""Top-level packages whose classes the candidate process may import to rebuild an object (the
judge's interpreter has the same ones): torch, triton and these standard modules."""
IMPORTABLE = ("torch", "triton", *_STDLIB_OBJECTS)
_MAX_DEPTH = 24
_NEWOBJ = copyreg.__newobj__  # type: ignore[attr-defined]  # how pickle rebuilds an ordinary class's instance


def _importable(module: str) -> bool:
    return module.split(".")[0] in IMPORTABLE


def _tuple_fields(cls: type) -> list[str] | None:
    """The field names of a namedtuple class or of a struct sequence (torch.return_types.max:
    named fields, no `_fields` in every Python and torch), else None."""
    fields = getattr(cls, "_fields", None)
    if fields is None and isinstance(getattr(cls, "n_fields", None), int):
        fields = getattr(cls, "__match_args__", None)
    return [str(f) for f in fields] if isinstance(fields, tuple) else None


def encode_values(values: Any, objects: bool = True) -> tuple[Any, list[torch.Tensor]]:
    """A call's arguments or outputs as JSON-able structure plus the tensors it refers to.

    `objects` (the judge's messages): objects other than plain values cross as recipes (their
    class's module and qualified name, the arguments of `__new__` and their state, encoded the
    same way, so tensors inside them still cross as bytes), a function by its name. The
    candidate process encodes with `objects=False`: its objects cross as their type name
    (the judge would not rebuild them anyway)."""
    tensors: list[torch.Tensor] = []

    def enc(v: Any, depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            return {"other": type(v).__name__}
        if type(v) is torch.Tensor:
            tensors.append(v.detach())
            return {"tensor": len(tensors) - 1}
        if objects and type(v) is torch.nn.Parameter:
            tensors.append(v.detach())
            return {"parameter": len(tensors) - 1, "grad": bool(v.requires_grad)}
        if isinstance(v, torch.Tensor):
            return {"subclass": type(v).__name__}
        if v is None or isinstance(v, (bool, int, float, str)):
            return {"value": v}
        if isinstance(v, torch.dtype):
            return {"dtype": str(v).removeprefix("torch.")}
        if isinstance(v, torch.device):
            return {"device": str(v)}
        if isinstance(v, torch.Size):
            return {"size": [int(x) for x in v]}
        if _is_triton_dtype(v):
            return {"tl_dtype": v.name}
        if objects and isinstance(v, tuple) and _tuple_fields(type(v)) is not None:
            fields = _tuple_fields(type(v))
            return {"namedtuple": [type(v).__module__, type(v).__qualname__, fields],
                    "seq": [enc(x, depth + 1) for x in v]}
        if isinstance(v, (tuple, list)):
            return {"seq": [enc(x, depth + 1) for x in v], "tuple": isinstance(v, tuple)}
        if isinstance(v, dict) and all(type(k) is str for k in v):
            return {"map": [[k, enc(x, depth + 1)] for k, x in v.items()]}  # e.g. launch options
        if isinstance(v, dict):
            return {"pairs": [[enc(k, depth + 1), enc(x, depth + 1)] for k, x in v.items()]}
        if isinstance(v, (set, frozenset)):
            return {"set": [enc(x, depth + 1) for x in v], "frozen": isinstance(v, frozenset)}
        if objects:
            return _encode_object(v, lambda x: enc(x, depth + 1))
        return {"other": type(v).__name__}

    return enc(values), tensors


def _is_triton_dtype(v: Any) -> bool:
    """A `triton.language` dtype (tl.float8e5 passed to `triton.reinterpret`), not a pointer type."""
    cls = type(v)
    return cls.__name__ == "dtype" and cls.__module__.startswith("triton.language") and isinstance(
        getattr(v, "name", None), str)


def _encode_object(v: Any, enc: Callable[[Any], Any]) -> Any:
    """The recipe of an object the judge passes (see `Rebuilder`), or its type name when it has
    none: a class's instance by `copyreg.__newobj__` (what pickle does for ordinary classes,
    nn.Module and dataclasses included), a function or class by its name."""
    import types

    cls = type(v)
    if isinstance(v, (types.FunctionType, types.BuiltinFunctionType, type)):
        name = getattr(v, "__qualname__", "")
        if "<" not in name:  # a lambda or a local function has no name to find it by
            return {"named": [getattr(v, "__module__", "") or "", name]}
        return {"other": cls.__name__}
    try:
        reduced = v.__reduce_ex__(4)
    except Exception:  # noqa: BLE001 - an object that refuses to be reduced has no recipe
        return {"other": cls.__name__}
    if isinstance(reduced, tuple) and len(reduced) >= 2 and reduced[0] is _NEWOBJ \
            and reduced[1] and reduced[1][0] is cls:
        state = reduced[2] if len(reduced) > 2 else None
        return {"object": [cls.__module__, cls.__qualname__], "new": enc(tuple(reduced[1][1:])), "state": enc(state)}
    return {"other": cls.__name__}


class Opaque:
    """A value that is not a tensor or a structure of plain values (its type name is all that crossed)."""

    def __init__(self, type_name: str, subclass: bool = False) -> None:
        self.type_name = type_name
        self.subclass = subclass

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


class Rebuilder:
    """Rebuilds the judge's objects in the candidate process from their recipes.

    A class is taken from torch, triton or the standard library (`IMPORTABLE`), else by its
    qualified name from the candidate's own module (a suite's config class or nn.Module
    subclass that the candidate's source defines as the suite's does); a class found nowhere
    becomes a `types.SimpleNamespace` with the same attributes (a namedtuple: one made on the
    spot), so code that reads `config.num_warps` still works. Only the judge's messages are
    decoded this way; the judge never rebuilds what a candidate process sends."""

    def __init__(self, local: Any = None) -> None:
        self.local = local

    def find(self, module: str, qualname: str) -> Any:
        import importlib

        owner: Any = None
        if _importable(module):
            try:
                owner = importlib.import_module(module)
            except ImportError:
                owner = None
        elif self.local is not None:
            owner = self.local
        for part in qualname.split("."):
            owner = getattr(owner, part, None) if owner is not None else None
        return owner

    def named(self, spec: Any) -> Any:
        module, qualname = (str(x) for x in spec)
        found = self.find(module, qualname)
        return found if found is not None else Opaque(qualname[:80])

    def namedtuple(self, spec: Any, items: list[Any]) -> Any:
        import collections

        module, qualname, fields = str(spec[0]), str(spec[1]), [str(f) for f in spec[2]]
        cls = self.find(module, qualname)
        if isinstance(cls, type) and issubclass(cls, tuple):
            return of_type(cls, items)  # a namedtuple, or a struct sequence (torch.return_types.max)
        return collections.namedtuple(qualname.rsplit(".", 1)[-1], fields)(*items)

    def object(self, spec: Any, new_args: Any, state: Any) -> Any:
        import types

        module, qualname = (str(x) for x in spec)
        cls = self.find(module, qualname)
        if not isinstance(cls, type):
            obj: Any = types.SimpleNamespace()
            _set_state(obj, state, use_setstate=False)
            return obj
        obj = cls.__new__(cls, *(new_args or ()))
        _set_state(obj, state, use_setstate=True)
        return obj


def _set_state(obj: Any, state: Any, use_setstate: bool) -> None:
    """What pickle does with an object's state: `__setstate__` when the class has one, else the
    instance dictionary and slots."""
    if state is None:
        return
    setstate = getattr(obj, "__setstate__", None) if use_setstate else None
    if setstate is not None and getattr(type(obj), "__setstate__", None) is not getattr(object, "__setstate__", None):
        setstate(state)
        return
    slots: Any = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    for source in (state, slots):
        if isinstance(source, dict):
            for k, x in source.items():
                setattr(obj, k, x)


def decode_values(spec: Any, tensors: list[torch.Tensor], rebuild: Rebuilder | None = None) -> Any:
    """The structure `encode_values` described. Object recipes are rebuilt only with `rebuild`
    (the candidate process decoding the judge's arguments); otherwise they become `Opaque`."""

    def dec(s: Any) -> Any:
        return decode_values(s, tensors, rebuild)

    if not isinstance(spec, dict):
        raise WireError("a value description that is not an object")
    try:
        return _decode(spec, tensors, rebuild, dec)
    except WireError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, RuntimeError) as exc:
        raise WireError(f"a value description that cannot be rebuilt ({type(exc).__name__}: {str(exc)[:120]}): "
                        f"{str(spec)[:200]}") from None


def _decode(spec: dict[str, Any], tensors: list[torch.Tensor], rebuild: Rebuilder | None,
            dec: Callable[[Any], Any]) -> Any:
    if "tensor" in spec or "parameter" in spec:
        i = spec.get("tensor", spec.get("parameter"))
        if not isinstance(i, int) or not 0 <= i < len(tensors):
            raise WireError("a tensor reference out of range")
        if "parameter" in spec:
            if rebuild is None:
                return Opaque("Parameter", subclass=True)
            return torch.nn.Parameter(tensors[i], requires_grad=bool(spec.get("grad")))
        return tensors[i]
    if "namedtuple" in spec and isinstance(spec.get("seq"), list):
        items = [dec(s) for s in spec["seq"]]
        return rebuild.namedtuple(spec["namedtuple"], items) if rebuild is not None else tuple(items)
    if "seq" in spec and isinstance(spec["seq"], list):
        items = [dec(s) for s in spec["seq"]]
        return tuple(items) if spec.get("tuple") else items
    if "value" in spec:
        v = spec["value"]
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
    if "map" in spec and isinstance(spec["map"], list):
        pairs = spec["map"]
        if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in pairs):
            raise WireError("a mapping that is not a list of [name, value] pairs")
        return {k: dec(x) for k, x in pairs}
    if "pairs" in spec and isinstance(spec["pairs"], list):
        return {dec(k): dec(x) for k, x in spec["pairs"]}
    if "set" in spec and isinstance(spec["set"], list):
        items = [dec(s) for s in spec["set"]]
        return frozenset(items) if spec.get("frozen") else set(items)
    if "dtype" in spec:
        if spec["dtype"] not in _DTYPES:
            raise WireError(f"an unknown dtype {str(spec['dtype'])[:40]}")
        return _DTYPES[spec["dtype"]]
    if "device" in spec:
        return torch.device(str(spec["device"])[:40])
    if "size" in spec and isinstance(spec["size"], list):
        return torch.Size([int(x) for x in spec["size"]])
    if "tl_dtype" in spec:
        import triton.language as tl

        return tl.dtype(str(spec["tl_dtype"])[:40])
    if "named" in spec:
        return rebuild.named(spec["named"]) if rebuild is not None else Opaque(str(spec["named"])[:80])
    if "object" in spec:
        if rebuild is None:
            return Opaque(str(spec["object"][-1])[:80])
        return rebuild.object(spec["object"], dec(spec["new"]), dec(spec["state"]))
    if "subclass" in spec:
        return Opaque(str(spec["subclass"])[:80], subclass=True)
    if "other" in spec:
        return Opaque(str(spec["other"])[:80])
    raise WireError(f"a value description that makes no sense: {str(spec)[:200]}")
