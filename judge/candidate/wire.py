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

import fcntl
import json
import mmap
import os
import socket
import struct
import time
from typing import Any

import torch

from bench.slack import front_bytes, raw_bytes, slack_bytes

MAX_FRAME = 64 << 20  # a JSON frame larger than this is a protocol violation
INLINE_LIMIT = 256 << 10
"""The most tensor bytes a message may carry inline, in the socket after its frame (`Link.send`
with `inline`): a batched call's reply that the candidate process sends before running the
next call of its batch (judge/candidate/server.py `_op_calls`). Small: inline bytes cross
pageable memory and the socket, page-locked arenas are faster for large ones (on an H100,
vector_add's hidden set with multi-megabyte outputs inline took longer per call than one call
per request)."""
DTYPES = {str(d).removeprefix("torch."): d for d in vars(torch).values() if isinstance(d, torch.dtype)}
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

    def send(self, header: dict[str, Any], tensors: list[torch.Tensor] | None = None, inline: bool = False) -> None:
        """`inline`: the tensors' bytes follow the frame in the socket instead of the arena
        (at most `INLINE_LIMIT`). Why: once in the socket they are out of the sender's reach, so
        it may run code at once, before the receiver has read them; what waits in an arena is
        read only after the sender has stopped (`Link`)."""
        raws = [raw_bytes(t) for t in tensors or ()]
        total = sum(r.numel() for r in raws)
        if inline:
            self._send_inline(header, tensors or [], raws, total)
            return
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

    def _send_inline(self, header: dict[str, Any], tensors: list[torch.Tensor], raws: list[torch.Tensor],
                     total: int) -> None:
        if total > INLINE_LIMIT:
            raise WireError(f"{total} bytes of tensors inline (at most {INLINE_LIMIT})")
        body = torch.empty(total, dtype=torch.uint8)
        offset = 0
        for r in raws:
            body[offset:offset + r.numel()].copy_(r)  # device-to-host for a GPU tensor
            offset += r.numel()
        described = [describe(t, r.numel()) for t, r in zip(tensors, raws, strict=True)]
        frame = json.dumps({**header, "tensors": described, "inline": total}).encode()
        self.sock.sendall(struct.pack("!I", len(frame)) + frame)
        if total:
            self.sock.sendall(body.numpy().data)

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
            inline = header.pop("inline", None)
            if inline is not None:
                return header, self._recv_inline(inline, header.pop("tensors", []), fds, device, slack)
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

    def _recv_inline(self, total: Any, described: list[Any], fds: list[int], device: str,
                     slack: bool) -> list[torch.Tensor]:
        if fds or type(total) is not int or not 0 <= total <= INLINE_LIMIT:
            raise WireError(f"an inline message of {str(total)[:20]} bytes" + (" with a descriptor" if fds else ""))
        body = bytearray(total)
        view, got = memoryview(body), 0
        while got < total:
            n = self.sock.recv_into(view[got:], total - got)
            if not n:
                raise EOFError("the other side closed the connection")
            got += n
        started = time.perf_counter()
        tensors = _unpack(body, total, described, device, slack) if described else []
        self.copy_in_seconds += time.perf_counter() - started
        return tensors

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
        dtype = DTYPES[d["dtype"]]
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
