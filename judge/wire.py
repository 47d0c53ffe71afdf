"""The conversation between the judge and a candidate process: length-prefixed JSON frames on
a Unix socket, tensors in a sealed memfd passed beside the frame (SCM_RIGHTS).

Why this shape: the judge must never unpickle what a candidate process sends (unpickling runs
code), so frames are JSON and tensors are raw bytes described by dtype, size, stride and
offset, rebuilt by the receiver. Tensors cross as host bytes, not CUDA IPC handles: an IPC
handle maps the sender's whole allocator segment, which would hand the candidate the judge's
other tensors (its expected outputs among them). A memfd needs no file name, no /dev/shm
entry and no helper process; the judge accepts one only when it is sealed against writes,
shrinking and growing, so a candidate cannot change bytes after sending them or make the
judge's mapping fault.
"""

from __future__ import annotations

import fcntl
import json
import mmap
import os
import socket
import struct
from typing import Any

import torch

MAX_FRAME = 64 << 20  # a JSON frame larger than this is a protocol violation
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL
_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128, torch.int8,
    torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool)}


class WireError(Exception):
    """The other side sent something that is not a well-formed message."""


def _pack(tensors: list[torch.Tensor]) -> tuple[int | None, list[dict[str, Any]]]:
    """Each tensor's whole storage (strides and padding kept), copied into one sealed memfd.

    One copy per tensor, straight into the shared mapping (device-to-host for a GPU tensor):
    perf-sized cases move hundreds of megabytes per call, so every extra host copy shows in
    the evaluator's throughput."""
    if not tensors:
        return None, []
    fd = os.memfd_create("kmc-tensors", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    raws = [torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage()) for t in tensors]
    total = sum(r.numel() for r in raws)
    described = []
    offset = 0
    if total:
        os.ftruncate(fd, total)
        with mmap.mmap(fd, total, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE) as mem:
            dest = torch.frombuffer(mem, dtype=torch.uint8)
            for r in raws:
                if r.numel():
                    dest[offset:offset + r.numel()].copy_(r)
                offset += r.numel()
            del dest  # the mapping must have no users left when it closes
    for t, r in zip(tensors, raws, strict=True):
        described.append({"dtype": str(t.dtype).removeprefix("torch."), "size": list(t.shape),
                          "stride": list(t.stride()), "offset": t.storage_offset(), "nbytes": r.numel(),
                          "device": t.device.type})
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
    return fd, described


def send(sock: socket.socket, header: dict[str, Any], tensors: list[torch.Tensor] | None = None) -> None:
    fd, described = _pack(list(tensors or ()))
    frame = json.dumps({**header, "tensors": described}).encode()
    try:
        payload = struct.pack("!I", len(frame)) + frame
        if fd is None:
            sock.sendall(payload)
        else:
            sent = socket.send_fds(sock, [payload[:4096]], [fd])
            sock.sendall(payload[sent:])
    finally:
        if fd is not None:
            os.close(fd)


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


def recv(sock: socket.socket, device: str = "cpu") -> tuple[dict[str, Any], list[torch.Tensor]]:
    """One message; tensors are rebuilt as fresh tensors on `device` (never views of shared memory)."""
    fds: list[int] = []
    try:
        (length,) = struct.unpack("!I", _recv_exact(sock, 4, fds))
        if length > MAX_FRAME:
            raise WireError(f"a frame of {length} bytes")
        try:
            header = json.loads(_recv_exact(sock, length, fds))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise WireError(f"unreadable frame: {exc}") from None
        if not isinstance(header, dict) or not isinstance(header.get("tensors", []), list):
            raise WireError("a frame that is not a message")
        described = header.pop("tensors", [])
        if described and len(fds) != 1:
            raise WireError(f"{len(fds)} descriptors for {len(described)} tensors")
        tensors = _unpack(fds[0], described, device) if described else []
        return header, tensors
    finally:
        for fd in fds:
            os.close(fd)


def _unpack(fd: int, described: list[Any], device: str) -> list[torch.Tensor]:
    seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    if seals & _SEALS != _SEALS:
        raise WireError("tensor memory that is not sealed")
    total = os.fstat(fd).st_size
    out = []
    # A private copy-on-write mapping (the memfd is sealed against shared writable ones): the
    # bytes are read in place and copied once, into the receiver's own tensor.
    with mmap.mmap(fd, total, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE) if total \
            else _Empty() as mem:
        offset = 0
        for d in described:
            try:
                dtype = _DTYPES[d["dtype"]]
                size, stride, storage_offset, nbytes = (list(map(int, d["size"])), list(map(int, d["stride"])),
                                                        int(d["offset"]), int(d["nbytes"]))
            except (KeyError, TypeError, ValueError):
                raise WireError(f"a tensor description that makes no sense: {str(d)[:200]}") from None
            if nbytes < 0 or offset + nbytes > total or len(size) != len(stride) or storage_offset < 0 \
                    or min(size, default=1) < 0 or min(stride, default=0) < 0:
                raise WireError(f"a tensor description out of bounds: {str(d)[:200]}")
            itemsize = torch.empty(0, dtype=dtype).element_size()
            needed = (storage_offset + sum((s - 1) * st for s, st in zip(size, stride, strict=True)) + 1) * itemsize \
                if all(size) else 0
            if needed > nbytes:
                raise WireError(f"a tensor reaching past its bytes: {str(d)[:200]}")
            if nbytes:
                view = torch.frombuffer(mem, dtype=torch.uint8, count=nbytes, offset=offset)
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


def encode_values(values: Any) -> tuple[Any, list[torch.Tensor]]:
    """A call's arguments or outputs as JSON-able structure plus the tensors it refers to."""
    tensors: list[torch.Tensor] = []

    def enc(v: Any) -> Any:
        if type(v) is torch.Tensor:
            tensors.append(v.detach())
            return {"tensor": len(tensors) - 1}
        if isinstance(v, torch.Tensor):
            return {"subclass": type(v).__name__}
        if isinstance(v, (tuple, list)):
            return {"seq": [enc(x) for x in v], "tuple": isinstance(v, tuple)}
        if v is None or isinstance(v, (bool, int, float, str)):
            return {"value": v}
        if isinstance(v, dict) and all(isinstance(k, str) for k in v):
            return {"map": [[k, enc(x)] for k, x in v.items()]}  # launch options of a replayed launch
        if isinstance(v, torch.dtype):
            return {"dtype": str(v).removeprefix("torch.")}
        return {"other": type(v).__name__}

    return enc(values), tensors


class Opaque:
    """An output that is not a tensor or a sequence of them (its type name is all that crossed)."""

    def __init__(self, type_name: str, subclass: bool = False) -> None:
        self.type_name = type_name
        self.subclass = subclass

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


def decode_values(spec: Any, tensors: list[torch.Tensor]) -> Any:
    if not isinstance(spec, dict):
        raise WireError("a value description that is not an object")
    if "tensor" in spec:
        i = spec["tensor"]
        if not isinstance(i, int) or not 0 <= i < len(tensors):
            raise WireError("a tensor reference out of range")
        return tensors[i]
    if "seq" in spec and isinstance(spec["seq"], list):
        items = [decode_values(s, tensors) for s in spec["seq"]]
        return tuple(items) if spec.get("tuple") else items
    if "value" in spec:
        v = spec["value"]
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
    if "map" in spec and isinstance(spec["map"], list):
        pairs = spec["map"]
        if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in pairs):
            raise WireError("a mapping that is not a list of [name, value] pairs")
        return {k: decode_values(x, tensors) for k, x in pairs}
    if "dtype" in spec:
        if spec["dtype"] not in _DTYPES:
            raise WireError(f"an unknown dtype {str(spec['dtype'])[:40]}")
        return _DTYPES[spec["dtype"]]
    if "subclass" in spec:
        return Opaque(str(spec["subclass"])[:80], subclass=True)
    if "other" in spec:
        return Opaque(str(spec["other"])[:80])
    raise WireError(f"a value description that makes no sense: {str(spec)[:200]}")
