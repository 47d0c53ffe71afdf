"""The candidates' stderr, relayed by the template to its own (the worker's log), capped.

A sandboxed candidate holds no descriptor of the judge's (judge/sandbox.py), so its stderr is
a pipe of its own whose read end only the template holds. The template drains every such pipe
while it waits for its next control message, so a candidate that writes much never blocks on a
full pipe, and passes on at most `CAP` bytes per candidate, each line marked with its pid.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
from dataclasses import dataclass

CAP = 64 << 10


@dataclass
class _Pipe:
    pid: int
    passed: int = 0
    partial: bytes = b""


class StderrRelay:
    def __init__(self, out: int = 2) -> None:
        self.selector = selectors.DefaultSelector()
        self.out = out

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

    def _drain(self, fd: int, pipe: _Pipe) -> None:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._pass(pipe, pipe.partial, end=True)
            self.selector.unregister(fd)
            os.close(fd)
            return
        lines = (pipe.partial + chunk).split(b"\n")
        pipe.partial = lines.pop()
        for line in lines:
            self._pass(pipe, line)

    def _pass(self, pipe: _Pipe, line: bytes, end: bool = False) -> None:
        if end and not line:
            return
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
