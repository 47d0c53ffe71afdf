"""The judge's handle on candidate processes: the warm template it forks them from, one process
per candidate with a time limit the judge enforces, and a spare forked ahead of need.

Nothing a candidate process sends is trusted: replies are JSON frames and sealed tensor bytes
(judge/candidate/wire.py); a frame that does not parse, a reply out of turn, a process that dies or
overstays its limit ends that candidate with a verdict and the process is killed. The judge
process itself never runs candidate code, so none of this costs a restart of the judge.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from judge import template
from judge.candidate import structure, wire
from judge.candidate.launchers import MAX_NOTED
from judge.runner import Call, CallReport
from judge.source_caches import harvest

ENDING_GRACE_S = 2.0
"""How long a candidate process whose connection closed may take to end by itself before it is
killed (`CandidateProcess._ended`): a process ending on its own closes its socket before it has
ended (a CUDA context's teardown takes a while), and only its own end says why."""
JUDGE_SIDE_STEP = "judge side"
"""The job's step (judge/phases.py) for the judge's own work between requests: inputs made (an
adapted task's new shapes probed where its first job needs them), the reference's answers,
comparisons. 80-97% of a GEAK-eval reference's check job on an H100 (2026-12-06)."""


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
        self.root = str(hello.get("root") or "")  # the candidates' folders, made by the template
        self.sandboxed = bool(hello.get("sandboxed"))
        self.control.settimeout(60.0)
        self.device = device

    def spawn(self) -> CandidateProcess:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            reply = template.request(self.control, {"op": "spawn"}, theirs.fileno())
        finally:
            theirs.close()
        if "pid" not in reply:
            ours.close()
            raise OSError(str(reply.get("error") or "the template forked no candidate process")[:500])
        proc = CandidateProcess(self, int(reply["pid"]), ours)
        proc.folder = str(reply.get("folder") or "")
        proc.cache = str(reply.get("cache") or "")
        return proc

    def status(self, pid: int, wait_s: float = 0.0) -> tuple[int | None, str]:
        """Candidate `pid`'s exit code, waited for until it ends; with `wait_s`, for at most that
        long (None: it still runs), and once it has ended the last lines it wrote to stderr
        (judge/relay.py). None where it cannot be had."""
        try:
            reply = template.request(self.control, {"op": "status", "pid": pid, "wait_s": wait_s})
        except (OSError, EOFError):
            return None, ""
        return reply.get("status"), str(reply.get("stderr_tail") or "")

    def close(self) -> None:
        template.close_launched(template.Launched(self.proc, self.control, self.device))
        if self.root and Path(self.root).name.startswith("kmc-candidates-"):
            shutil.rmtree(self.root, ignore_errors=True)


class CandidateProcess:
    """One candidate's process: the judge talks to it with `request`, then ends it with `close`."""

    def __init__(self, owner: TemplateProcess, pid: int, sock: socket.socket) -> None:
        self.owner = owner
        self.pid = pid
        self.sock = sock
        self.link = wire.Link(sock, pin=owner.device != "cpu")
        self.folder = ""  # the template made it for this process: its Triton cache's parent
        self.cache = ""  # on a GPU, the Triton cache bound into its sandbox (judge/source_caches.py)
        self.source_cache: Path | None = None  # the source's shared cache, filled from `cache` at close
        self.contained = ""
        self.ready = False
        self.trace_problem = ""  # on a GPU: why the device's trace of calls is not had (judge/candidate/kernel_trace.py)
        self.device_started = False  # told to make its device context (`start_device`)
        self.deadline = float("inf")
        self.stopped_allowance = 0.0  # how much longer the judge's own work may still stop the clock
        self.seq = 0
        self.unanswered: int | None = None  # the seq of the request sent and not yet answered
        self.forked = time.perf_counter()
        self.spare_steps: dict[str, float] = {}  # a spare's gate wait and context seconds (judge/spares.py)
        self.start_error = ""  # why a spare's device start failed (judge/spares.py `Spares.check_boundary`)
        self.steps: Any = None  # the job's PhaseClock (judge/phases.py): the judge's own work is its step

    def start_device(self, context: bool = True) -> None:
        """Tell a fresh process on a GPU to make its device context (judge/candidate/server.py
        `CandidateServer.start` waits for this); `wait_ready` then waits until it has. Not sent on the CPU.
        `context=False`: to go on without one (a compile-ahead process, judge/compile_ahead.py)."""
        if self.owner.device != "cpu":
            self.sock.settimeout(10.0)
            self.link.send({"op": "start"} if context else {"op": "start", "context": False})
        self.device_started = True

    def wait_ready(self, timeout: float) -> None:
        if not self.ready:
            header, _ = self._recv(timeout)
            if header.get("ready") is not True:
                why = str(header.get("error") or "")[:500]
                raise wire.WireError(why or "the candidate process did not say it was ready")
            self.trace_problem = str(header.get("trace_problem") or "")[:300]
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
            with self.steps.step(JUDGE_SIDE_STEP) if self.steps is not None else contextlib.nullcontext():
                yield
        finally:
            stopped = min(time.monotonic() - started, self.stopped_allowance)
            self.stopped_allowance -= stopped
            self.deadline += stopped

    @contextlib.contextmanager
    def limited(self, seconds: float) -> Iterator[None]:
        """Requests meanwhile answered within `seconds` at most (the compile pass's own bound,
        judge/worker.py), the job's deadline as it was afterwards."""
        saved = self.deadline
        self.deadline = min(saved, time.monotonic() + seconds)
        try:
            yield
        finally:
            self.deadline = saved

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

    def send(self, header: dict[str, Any], tensors: list[torch.Tensor] | None = None) -> None:
        """Send a request without waiting for its reply (`receive` takes it). One at a time:
        the link's arenas hold one message each way (judge/candidate/wire.py)."""
        if self.unanswered is not None:
            raise RuntimeError("a request sent before the last one was answered")
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.kill()
            raise CandidateTimeout()
        self.seq += 1
        try:
            self.sock.settimeout(max(0.01, left))
            self.link.send({**header, "seq": self.seq}, tensors)
        except TimeoutError:
            self.kill()
            raise CandidateTimeout() from None
        except (BrokenPipeError, ConnectionResetError):
            raise CandidateDied(self._ended()) from None
        self.unanswered = self.seq

    def receive(self) -> tuple[dict[str, Any], list[torch.Tensor]]:
        """The reply to the request sent last; a reply that says `more` (a batch of calls,
        judge/candidate/server.py `_op_calls`) leaves the request unanswered for the next."""
        expected, self.unanswered = self.unanswered, None
        if expected is None:
            raise RuntimeError("a reply awaited with no request unanswered")
        reply, back = self._recv(self.deadline - time.monotonic())
        if reply.get("seq") != expected:
            raise wire.WireError(f"a reply out of turn (request {expected}, reply {str(reply.get('seq'))[:20]})")
        if reply.get("more") is True:
            self.unanswered = expected
        return reply, back

    def _ended(self) -> str:
        """Why the process at the other end of a closed connection ended. It is given
        `ENDING_GRACE_S` to end by itself before it is killed: killed at once, every such process
        read as killed by signal 9 whatever ended it (two TritonBench-revised references judged
        beside 12 workers on an H100, 2026-12-06, whose cause the verdict then hid)."""
        code, said = self.owner.status(self.pid, wait_s=ENDING_GRACE_S)
        if code is None:
            self.kill()
            code, said = self.owner.status(self.pid)
            if code == -signal.SIGKILL:
                return (f"the candidate process closed its connection to the judge and was killed "
                        f"({ENDING_GRACE_S:.0f} s later it still ran)") + _last_words(said)
        how = "exit status unknown" if code is None else f"signal {-code}" if code < 0 else f"exit status {code}"
        return f"the candidate process ended ({how})" + _last_words(said)

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
        if self.cache and self.source_cache is not None:
            harvest(Path(self.cache), self.source_cache)
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)


@dataclass
class _Sent:
    """A call sent to the candidate process whose reply is not yet read."""

    call: Call
    index: int = 0  # its place in the request that carried it


class RemoteRunner:
    """judge/oracle.py's Runner over a candidate process.

    A batch of calls goes out in one request (judge/oracle.py sends a hold's calls together);
    the candidate process copies every input out first, then runs the calls in order, sending
    each reply but the last inline, out of its own reach, before it runs the next
    (judge/candidate/server.py `_op_calls`). So the candidate process runs ahead while the
    judge judges, and still never runs code while a message of either side waits in an arena
    unread: a candidate that scribbles over the link's shared memory can spoil nothing the
    judge has yet to read (tests/hostile/scribbles_shared_memory.py). Replies are read one call
    at a time and judged in order, so a later call that hangs or kills the process costs no
    earlier call its verdict. Where the candidate process stopped early (an output too large
    to send inline), the calls it did not run are sent again in a request of their own when
    their reports are asked for. A request that could not be sent (a dead process, a passed
    deadline) raises in its turn, when its first report is taken."""

    def __init__(self, proc: CandidateProcess) -> None:
        self.proc = proc
        self._queue: list[_Sent] = []  # calls submitted whose reports are not yet taken, in order
        self._open = False  # replies to the request sent last are still to come
        self._failure: Exception | None = None  # sending the request failed: raised in its turn
        self.lost = ""  # why the process cannot be asked again: a call dropped after a verdict never came back
        # Signatures the process says it made launchers for: a hint (judge/candidate/launchers.py).
        self.launchers: list[Any] = []

    def submit(self, calls: list[Call]) -> None:
        if self._queue:
            raise RuntimeError("calls submitted before the last ones' reports were taken")
        self._queue = [_Sent(c) for c in calls]
        self._send(self._queue)

    def _send(self, pending: list[_Sent]) -> None:
        for index, sent in enumerate(pending):
            sent.index = index
        spec, tensors = structure.encode_values([list(s.call.args) for s in pending])
        described = [{"slot": s.call.slot, "refill": s.call.refill, "seed": s.call.seed,
                      "written": list(s.call.written)} for s in pending]
        try:
            self.proc.send({"op": "calls", "calls": described, "args": spec}, tensors)
            self._open = True
        except Exception as exc:  # noqa: BLE001 - raised in its turn by `result`
            self._failure = exc

    def result(self) -> CallReport:
        """The report of the oldest call submitted and not yet taken."""
        if not self._queue:
            raise RuntimeError("a report taken with no call submitted")
        if self._failure is None and not self._open:
            self._send(self._queue)  # the candidate process stopped early: the rest again
        sent = self._queue.pop(0)
        if self._failure is not None:
            failure, self._failure, self._queue = self._failure, None, []
            raise failure
        self._open = False
        reply, back = self.proc.receive()
        index = reply.get("index", sent.index if reply.get("ok") is not True else None)
        if index != sent.index:
            raise wire.WireError(f"a reply for call {str(index)[:20]} where call {sent.index} was due")
        self._open = reply.get("more") is True
        if self._open and (not self._queue or reply.get("ok") is not True):
            raise wire.WireError("more replies than calls" if not self._queue else "more replies after a failed call")
        if reply.get("ok") is not True:
            self._queue = []  # the candidate process stops at a failed call: nothing after it runs
        return self._report(reply, back, sent.call.args, sent.call.written)

    def discard(self) -> None:
        """The calls submitted and not yet taken are no longer wanted (a verdict came first):
        the replies still to come read and dropped, so the process is idle for what the judge
        asks next. Where they never come (the process hung or died on one), `lost` says so."""
        due, self._queue = len(self._queue), []
        if self._failure is not None:
            self.lost, self._failure = f"{type(self._failure).__name__}: {self._failure}"[:300], None
            return
        while self._open:
            try:
                if due <= 0:  # a reply past the last call's: never read one more than was asked for
                    raise wire.WireError("more replies than calls")
                reply, _ = self.proc.receive()
            except Exception as exc:  # noqa: BLE001 - said by `lost`; the verdict is already decided
                self.lost, self._open = f"{type(exc).__name__}: {exc}"[:300], False
                return
            self._open, due = reply.get("more") is True, due - 1

    @staticmethod
    def _report(reply: dict[str, Any], back: list[torch.Tensor], args: tuple, written: tuple[int, ...]) -> CallReport:
        if reply.get("ok") is not True:
            return CallReport.from_reply(reply)
        values = structure.decode_values(reply.get("values"), back)
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
        hints = reply.get("launchers")
        if isinstance(hints, list):
            self.launchers.extend(hints[:MAX_NOTED])
        calls, changed = reply.get("calls"), reply.get("changed")
        if not isinstance(calls, int) or not isinstance(changed, list) \
                or not all(isinstance(i, int) and not isinstance(i, bool) for i in changed):
            raise wire.WireError("collect did not say how many calls it held and which changed")
        return calls, changed


def _last_words(stderr_tail: str) -> str:
    """A verdict's note of what an ended candidate process last wrote to stderr: the candidate's
    own words, capped (judge/relay.py `TAIL_LINES`, `LINE_CHARS`), so marked as its own."""
    return f"; its stderr ended: {stderr_tail}" if stderr_tail else ""
