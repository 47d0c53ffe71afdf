"""The candidates' stderr, relayed by the template to its own (the worker's log), capped.

A sandboxed candidate holds no descriptor of the judge's (judge/sandbox.py), so its stderr is
a pipe of its own whose read end only the template holds. The template drains every such pipe
while it waits for its next control message, so a candidate that writes much never blocks on a
full pipe, and passes on at most `CAP` bytes per candidate, each line marked with its pid. It
also keeps each candidate's last lines (`tail`), which the judge puts in the verdict of a process
that ended: its own words say why it ended (a CUDA error, out of memory), where an exit status
alone does not, and a process ended by running out of GPU memory beside other jobs is then
judged again, as a call that raised that error is.
"""

from __future__ import annotations

import collections
import contextlib
import os
import selectors
import socket
from dataclasses import dataclass, field

CAP = 64 << 10
TAIL_LINES = 3  # the last non-blank lines of a candidate's stderr kept for its verdict
LINE_CHARS = 240
"""The first characters of each such line: an error's name leads its line (PyTorch's out-of-memory
line runs to 500 characters; kept by its end, on an H100 (2026-12-06), it lost "out of memory")."""
ENDED_KEPT = 64  # tails of processes whose pipes closed, kept until asked for (the newest)


@dataclass
class _Pipe:
    pid: int
    passed: int = 0
    partial: bytes = b""
    tail: collections.deque[bytes] = field(default_factory=lambda: collections.deque(maxlen=TAIL_LINES))


class StderrRelay:
    def __init__(self, out: int = 2) -> None:
        self.selector = selectors.DefaultSelector()
        self.out = out
        self._ended: dict[int, collections.deque[bytes]] = {}  # pid: the tail of a pipe that closed

    def add(self, read_fd: int, pid: int) -> None:
        os.set_blocking(read_fd, False)
        self.selector.register(read_fd, selectors.EVENT_READ, _Pipe(pid))

    def wait_for(self, control: socket.socket) -> None:
        """Relays until `control` has something to read."""
        self.selector.register(control, selectors.EVENT_READ, None)
        try:
            while True:
                ready = self.selector.select()
                if any(key.data is None for key, _ in ready):
                    return
                for key, _ in ready:
                    self._drain(key.fd, key.data)
        finally:
            self.selector.unregister(control)

    def tail(self, pid: int) -> str:
        """The last lines candidate `pid` wrote to stderr, up to where it has written (asked once
        its process has ended, so everything it wrote is in the pipe); "" for none."""
        for key in list(self.selector.get_map().values()):
            if isinstance(key.data, _Pipe) and key.data.pid == pid:
                while self._drain(key.fd, key.data):
                    pass
                lines = key.data.tail
                self._ended.pop(pid, None)
                break
        else:
            lines = self._ended.pop(pid, collections.deque())
        return " | ".join(line.decode(errors="replace") for line in lines)

    def _drain(self, fd: int, pipe: _Pipe) -> bool:
        """Read what `fd` holds now; False once it holds nothing more for now or has closed."""
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if not chunk:
            self._pass(pipe, pipe.partial, end=True)
            self.selector.unregister(fd)
            os.close(fd)
            self._ended[pipe.pid] = pipe.tail
            while len(self._ended) > ENDED_KEPT:
                self._ended.pop(next(iter(self._ended)))
            return False
        lines = (pipe.partial + chunk).split(b"\n")
        pipe.partial = lines.pop()
        for line in lines:
            self._pass(pipe, line)
        return True

    def _pass(self, pipe: _Pipe, line: bytes, end: bool = False) -> None:
        if end and not line:
            return
        if said := line.strip():
            pipe.tail.append(said[:LINE_CHARS])
        if pipe.passed >= CAP:
            return
        text = b"candidate %d: " % pipe.pid + line[:CAP - pipe.passed] + b"\n"
        pipe.passed += len(line)
        with contextlib.suppress(OSError):
            os.write(self.out, text)
        if pipe.passed >= CAP:
            with contextlib.suppress(OSError):
                os.write(self.out, b"candidate %d: (stderr cut at %d bytes)\n" % (pipe.pid, CAP))

    def close_in_child(self) -> None:
        """In a forked child: the other candidates' pipes and the selector are not its own."""
        for key in list(self.selector.get_map().values()):
            with contextlib.suppress(OSError):
                os.close(key.fd)
        self.selector.close()
