"""The judge's handle on candidate processes: the warm template it forks them from, one process
per candidate with a time limit the judge enforces, and a spare forked ahead of need.

Nothing a candidate process sends is trusted: replies are JSON frames and sealed tensor bytes
(judge/wire.py); a frame that does not parse, a reply out of turn, a process that dies or
overstays its limit ends that candidate with a verdict and the process is killed. The judge
process itself never runs candidate code, so none of this costs a restart of the judge.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bench.slack import raw_bytes
from judge import template, wire
from judge.oracle import CallReport


class CandidateTimeout(Exception):
    pass


class CandidateDied(Exception):
    pass


class TemplateProcess:
    """`python -m judge.template`, started once per judge worker with the worker's environment."""

    def __init__(self, device: str, env: dict[str, str] | None = None, startup_timeout: float = 300.0,
                 prefix: tuple[str, ...] = (), launched: template.Launched | None = None) -> None:
        """`prefix`: a command the template runs under (compute-sanitizer for `--sanitize`).
        `launched`: a template already started for `device` (`template.launch`): waited for here."""
        if launched is None or launched.device != device:
            if launched is not None:
                template.close_launched(launched)
            launched = template.launch(device, env, prefix)
        self.proc = launched.proc
        self.control = launched.control
        self.control.settimeout(startup_timeout)
        hello, _fds = template._recv(self.control)
        if not hello or not hello.get("ready"):
            raise RuntimeError(f"the candidate template did not start: {hello}")
        self.startup: dict[str, float] = dict(hello.get("startup") or {})  # seconds per step of its start
        self.startup_profile = str(hello.get("startup_profile") or "")  # with KMC_PROFILE_TEMPLATE
        self.control.settimeout(60.0)
        self.device = device

    def spawn(self) -> CandidateProcess:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            reply = template.request(self.control, {"op": "spawn"}, theirs.fileno())
        finally:
            theirs.close()
        return CandidateProcess(self, int(reply["pid"]), ours)

    def status(self, pid: int) -> int | None:
        try:
            return template.request(self.control, {"op": "status", "pid": pid}).get("status")
        except (OSError, EOFError):
            return None

    def close(self) -> None:
        template.close_launched(template.Launched(self.proc, self.control, self.device))


class CandidateProcess:
    """One candidate's process: the judge talks to it with `request`, then ends it with `close`."""

    def __init__(self, owner: TemplateProcess, pid: int, sock: socket.socket) -> None:
        self.owner = owner
        self.pid = pid
        self.sock = sock
        self.link = wire.Link(sock, pin=owner.device != "cpu")
        self.plan: dict[str, Any] = {}  # set when the judge sends the source and the containment plan
        self.contained = ""
        self.ready = False
        self.device_started = False  # told to make its device context (`start_device`)
        self.deadline = float("inf")
        self.stopped_allowance = 0.0  # how much longer the judge's own work may still stop the clock
        self.seq = 0
        self.unanswered: list[tuple[int, int]] = []  # (seq, arena) of requests sent and not yet answered, oldest first

    def start_device(self) -> None:
        """Tell a fresh process on a GPU to make its device context (judge/template.py `_child`
        waits for this); `wait_ready` then waits until it has. Not sent on the CPU."""
        if self.owner.device != "cpu":
            self.sock.settimeout(10.0)
            self.link.send({"op": "start"})
        self.device_started = True

    def wait_ready(self, timeout: float) -> None:
        if not self.ready:
            header, _ = self._recv(timeout)
            if header.get("ready") is not True:
                raise wire.WireError("the candidate process did not say it was ready")
            self.ready = True

    def start_clock(self, seconds: float) -> None:
        """Every request from now on shares this limit (the job's)."""
        self.deadline = time.monotonic() + seconds
        self.stopped_allowance = seconds

    @contextlib.contextmanager
    def judge_side(self) -> Iterator[None]:
        """The judge's own work between requests (a case's inputs, the reference's answer, the
        comparison) is not the candidate's time: the clock stops meanwhile, for at most the
        job's limit once more in all. A suite reference that autotunes for each new shape spent
        minutes here on an H200 and timed out the candidate judged against it; the pool's
        backstop allows for the stopped time (runners/pool.py `backstop_seconds`)."""
        started = time.monotonic()
        try:
            yield
        finally:
            stopped = min(time.monotonic() - started, self.stopped_allowance)
            self.stopped_allowance -= stopped
            self.deadline += stopped

    def _recv(self, timeout: float) -> tuple[dict[str, Any], list[torch.Tensor]]:
        self.sock.settimeout(max(0.01, timeout))
        try:
            return self.link.recv(self.owner.device)
        except TimeoutError:
            self.kill()
            raise CandidateTimeout() from None
        except (EOFError, ConnectionResetError, BrokenPipeError):
            raise CandidateDied(self._ended()) from None

    def request(self, header: dict[str, Any], tensors: list[torch.Tensor] | None = None
                ) -> tuple[dict[str, Any], list[torch.Tensor]]:
        self.send(header, tensors)
        return self.receive()

    def send(self, header: dict[str, Any], tensors: list[torch.Tensor] | None = None, arena: int = 0) -> None:
        """Send a request without waiting for its reply (`receive` takes the replies in the
        order their requests went): at most one unanswered request per arena (judge/wire.py)."""
        if any(pending == arena for _seq, pending in self.unanswered):
            raise RuntimeError(f"a request sent into arena {arena} before the last one there was answered")
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.kill()
            raise CandidateTimeout()
        self.seq += 1
        try:
            self.sock.settimeout(max(0.01, left))
            self.link.send({**header, "seq": self.seq}, tensors, arena=arena)
        except TimeoutError:
            self.kill()
            raise CandidateTimeout() from None
        except (BrokenPipeError, ConnectionResetError):
            raise CandidateDied(self._ended()) from None
        self.unanswered.append((self.seq, arena))

    def receive(self) -> tuple[dict[str, Any], list[torch.Tensor]]:
        """The reply to the oldest unanswered request."""
        if not self.unanswered:
            raise RuntimeError("a reply awaited with no request unanswered")
        expected, _arena = self.unanswered.pop(0)
        reply, back = self._recv(self.deadline - time.monotonic())
        if reply.get("seq") != expected:
            raise wire.WireError(f"a reply out of turn (request {expected}, reply {str(reply.get('seq'))[:20]})")
        return reply, back

    def _ended(self) -> str:
        self.kill()
        code = self.owner.status(self.pid)
        how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        return f"the candidate process ended ({how})"

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGKILL)

    def close(self) -> None:
        with contextlib.suppress(OSError, wire.WireError):
            self.sock.settimeout(1.0)
            self.link.send({"op": "exit"})
        self.kill()  # not waited for: the template reaps it with its next request (70 ms a candidate saved)
        with contextlib.suppress(OSError):
            self.sock.close()
        self.link.close()  # the arenas' memory goes back now, not when this object is collected
        folder = Path(self.plan.get("folder") or "/nonexistent")
        if folder.exists():  # without a private mount namespace the folder is a real one
            import shutil

            shutil.rmtree(folder, ignore_errors=True)


SEND_AHEAD_BYTES = 16 << 20
"""A call whose arguments take at most this many bytes may go into the link's second arena while
the call before it is still being answered; a larger one goes into the first arena once the
call there is answered. So the second arena stays small, and the large cases of a hidden set
(up to hundreds of MiB) are never held twice."""


@dataclass
class _Sent:
    """A call sent to the candidate process, and what came of it once its reply was read."""

    args: tuple
    written: tuple[int, ...]
    arena: int | None  # the arena its request went into; None once its reply was read (or it failed)
    report: CallReport | None = None
    failure: Exception | None = None  # raised in its turn (`RemoteRunner.result`), not before


class RemoteRunner:
    """judge/oracle.py's Runner over a candidate process.

    Calls are sent ahead (`submit`) and their reports taken in order (`result`), so the
    candidate process runs the next call while the judge compares the last one (judge/oracle.py
    `judge_cases` keeps two unjudged at most). A reply read early, to free the arena a new call
    needs, is kept with what it says, and a failure (a timeout, a dead process, a malformed
    reply) is raised only when its own call's turn comes: whatever an earlier call earned is
    judged first, as one call at a time would."""

    def __init__(self, proc: CandidateProcess) -> None:
        self.proc = proc
        self._sent: deque[_Sent] = deque()
        self.lost = ""  # why the process cannot be asked again: a call dropped after a verdict never came back

    def submit(self, slot: int, args: tuple, refill: bool, seed: int | None = None,
               written: tuple[int, ...] = ()) -> None:
        spec, tensors = wire.encode_values(args)
        call = _Sent(args, written, self._free_arena(sum(raw_bytes(t).numel() for t in tensors)))
        try:
            self.proc.send({"op": "call", "slot": slot, "refill": refill, "args": spec, "seed": seed,
                            "written": list(written)}, tensors, arena=call.arena or 0)
        except Exception as exc:  # noqa: BLE001 - raised in its turn by `result`
            call.arena, call.failure = None, exc
        self._sent.append(call)

    def result(self) -> CallReport:
        """The report of the oldest call submitted and not yet taken."""
        call = self._sent[0]
        if call.arena is not None:
            self._read(call)
        self._sent.popleft()
        if call.failure is not None:
            raise call.failure
        assert call.report is not None
        return call.report

    def discard(self) -> None:
        """Calls submitted and no longer wanted (a verdict came first): their replies read and
        dropped, so the process is idle for what the judge asks next. Where one never comes
        back (the process hung or died on it), `lost` says so."""
        for call in self._sent:
            if call.arena is not None:
                self._read(call)
            if call.failure is not None and not self.lost:
                self.lost = f"{type(call.failure).__name__}: {call.failure}"[:300]
        self._sent.clear()

    def _free_arena(self, size: int) -> int:
        """The arena a call of `size` bytes goes into, once no unanswered call is in it (the
        oldest replies read as needed, and kept)."""
        while True:
            busy = {c.arena for c in self._sent if c.arena is not None}
            if 0 not in busy:
                return 0
            if size <= SEND_AHEAD_BYTES and 1 not in busy:
                return 1
            self._read(next(c for c in self._sent if c.arena is not None))

    def _read(self, call: _Sent) -> None:
        """The reply of `call`, the oldest whose reply is unread, read now and kept on it."""
        call.arena = None
        try:
            reply, back = self.proc.receive()
            call.report = self._report(reply, back, call.args, call.written)
        except Exception as exc:  # noqa: BLE001 - raised in its turn by `result`
            call.failure = exc

    @staticmethod
    def _report(reply: dict[str, Any], back: list[torch.Tensor], args: tuple, written: tuple[int, ...]) -> CallReport:
        if reply.get("ok") is not True:
            return CallReport.from_reply(reply)
        values = wire.decode_values(reply.get("values"), back)
        if not isinstance(values, list) or len(values) != 2 or not isinstance(values[1], list) \
                or len(values[1]) != len(written):
            raise wire.WireError("a call reply without (output, output arguments)")
        after = dict(zip(written, values[1], strict=True))
        return CallReport.from_reply(reply, tuple(after.get(i, a) for i, a in enumerate(args)), values[0])

    def reset(self) -> None:
        self.proc.request({"op": "reset"})

    def judge_side(self) -> contextlib.AbstractContextManager[None]:
        return self.proc.judge_side()

    def disturb(self, rerun: int) -> None:
        self.proc.request({"op": "disturb", "rerun": rerun})

    def collect(self) -> tuple[int, list[int]]:
        reply, _ = self.proc.request({"op": "collect"})
        calls, changed = reply.get("calls"), reply.get("changed")
        if not isinstance(calls, int) or not isinstance(changed, list) \
                or not all(isinstance(i, int) and not isinstance(i, bool) for i in changed):
            raise wire.WireError("collect did not say how many calls it held and which changed")
        return calls, changed
