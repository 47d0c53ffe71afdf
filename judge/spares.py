"""A judge worker's candidate processes, forked from its template ahead of need (judge/worker.py).

Each candidate is judged in a fresh process forked from the warm template (judge/template.py,
judge/remote.py). Forking one, and on a GPU making its device context, takes long enough to
show in every job, so the worker keeps spares: forked while the previous candidate is judged,
each making its GPU context in a thread of its own under a judging ticket at the GPU's gate
(`start_on_device`). A job takes the oldest spare that is alive and ready, or forks a fresh
process when none is (`Spares.take`); a template that died is replaced.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import threading
import time
from typing import Any

from judge.gate import gpu_gate, holds_exclusive

SPARE_START_S = 120.0  # how long a spare may take to make its GPU context before the gate is let go
SPARES_ENV = "KMC_SPARES"  # candidate processes forked ahead of need (default 1; each holds a GPU context)
MAX_SPARES = 4
CONTEXT_GATE_ENV = "KMC_GATE_CONTEXTS"
"""How a candidate process's GPU context is made at the gate: `1` (the default), under a
shared ticket; `background`, under a ticket that waits for the timers ahead but that no timer
waits for (judge/gate.py `FairGate.enter`); `0`, without a ticket. Why not always shared: a
context takes 0.6 s under a full run's load, several times an idle GPU's, and every timer that
asks meanwhile waits for it, with the judging queued behind that timer
(benchmarks/gate_policy_model.py put the 7-task command's gate share at 30% with contexts
shared, 20% without). Why not none by default: a context made while a timer measures (with
eight workers some feedback samples once read many times the kernel's time). `background` never
starts one while a timer measures, but lets one already started overlap a timer that asked
after it; benchmarks/bench_lanes_gpu.py --ungated-contexts measured fully ungated contexts
beside a timer, its medians unmoved (benchmarks/results/README.md, "Two lanes")."""
CONTEXT_GATES = ("1", "background", "0")


def context_gate() -> str:
    """`CONTEXT_GATE_ENV` read: one of `CONTEXT_GATES` (anything else is `1`, the default)."""
    value = os.environ.get(CONTEXT_GATE_ENV, "1").strip()
    return value if value in CONTEXT_GATES else "1"


def contexts_gated() -> bool:
    return context_gate() != "0"


def _context_ticket(clock: Any = None) -> Any:
    """The ticket a candidate process's context is made under (`CONTEXT_GATE_ENV`)."""
    gate = context_gate()
    if gate == "0":
        return contextlib.nullcontext()
    return gpu_gate(exclusive=False, clock=clock, background=gate == "background")


def _spare_count(value: str) -> int:
    """`KMC_SPARES` read: 1 to `MAX_SPARES`, 1 when unset; anything else is 1 with a line on
    stderr (the worker's log), never a worker that fails to start."""
    if not value.strip():
        return 1
    try:
        count = int(value)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_SPARES:
        print(f"judge worker: {SPARES_ENV}={value!r} is not a whole number from 1 to {MAX_SPARES}; using 1",
              file=sys.stderr)
        return 1
    return count


def start_on_device(proc: Any, timeout: float) -> None:
    """A fresh candidate process makes its GPU context while this worker holds the GPU's gate
    for judging, as every other use of the GPU by judging does: making a context touches
    the GPU, and before, spares made theirs whenever they were forked, timings in progress
    or not (with eight workers some feedback samples read many times the kernel's time; judge/candidate/sampling.py `hold_gpu` names the other cause that fits). With
    `KMC_GATE_CONTEXTS=0` it holds no ticket (an experiment, `CONTEXT_GATE_ENV`). Failures
    are left to whoever uses the process next (it finds it dead or not ready)."""
    asked = time.perf_counter()
    try:
        with _context_ticket():
            entered = time.perf_counter()
            proc.start_device()
            proc.wait_ready(timeout)
            # Read into the job's steps by `Spares.take` (`$KMC_JOB_STEPS`): the spare's own wait.
            proc.spare_steps = {"spare:gate": entered - asked, "spare:context": time.perf_counter() - entered}
    except Exception as exc:  # noqa: BLE001 - kept for `check_boundary`; the next user finds it not ready
        proc.start_error = f"{type(exc).__name__}: {exc}"


class Spares:
    """The worker's template (judge/remote.py `TemplateProcess`) and the candidate processes
    forked from it ahead of need, oldest first: each with the thread making its GPU context
    (None on the interpreter). More than one (`KMC_SPARES`) lets a short job find its process
    ready although the one before it was short too (`take`)."""

    def __init__(self, template: Any, device: str, interpreter: bool, contexts: bool = True) -> None:
        """`contexts=False`: on a GPU, processes that make no device context (a compile-ahead
        worker's, judge/compile_ahead.py): told to go on without one at once, no ticket taken."""
        self.template = template
        self.device, self.interpreter, self.contexts = device, interpreter, contexts
        self.waiting: collections.deque[tuple[Any, threading.Thread | None]] = collections.deque()
        self.count = _spare_count(os.environ.get(SPARES_ENV, ""))
        self.spawn_error = ""  # why the template could not fork a candidate's process, when it could not

    def refill(self) -> None:
        """Fork the next candidates' processes now, up to `count`; on a GPU each makes its
        device context in the background (`start_on_device`), so that overlaps the current
        candidate's judging. Forked here only, never in those threads: the template's control
        socket serves one request at a time."""
        while len(self.waiting) < self.count:
            try:
                proc = self.template.spawn()
            except (OSError, EOFError) as exc:
                self.spawn_error = str(exc)
                print(f"judge worker: could not fork a spare candidate process: {exc}", file=sys.stderr)
                return
            started = None
            if not self.interpreter and not self.contexts:
                with contextlib.suppress(OSError):  # a process that cannot be told is found not ready in `take`
                    proc.start_device(context=False)
            elif not self.interpreter:
                started = threading.Thread(target=start_on_device, args=(proc, SPARE_START_S),
                                           name="spare-start", daemon=True)
                started.start()
            self.waiting.append((proc, started))

    def check_boundary(self) -> None:
        """The first spare must come up inside its boundary (judge/sandbox.py), on a GPU with
        its device context made there: where it cannot, no candidate could be judged, and the
        worker stops with one line saying why (runners/pool.py reports it) instead of judging
        every candidate a crash."""
        if not self.waiting:
            why = self.spawn_error or "no reason given"
            print(f"judge worker: no candidate process could be forked: {why}", file=sys.stderr)
            raise SystemExit(f"judge worker: no candidate process could be forked: {why}")
        proc, started = self.waiting[0]
        try:
            if started is not None:
                started.join(SPARE_START_S)
                if not proc.ready:
                    raise RuntimeError(proc.start_error or "its GPU context was not made in time")
            else:
                proc.wait_ready(60.0)
            if getattr(proc, "trace_problem", ""):
                # judged without the device's trace: the launch and dispatch records alone
                print(f"judge worker: warning: {proc.trace_problem}; calls are judged without it", file=sys.stderr)
        except Exception as exc:  # noqa: BLE001 - any failure here stops the worker, said in one line
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            print(f"judge worker: a candidate process could not start: {why}", file=sys.stderr)
            raise SystemExit(f"judge worker: a candidate process could not start: {why}") from None

    def restart_template(self) -> None:
        """A template that died (a candidate that reached it, where no seccomp filter stops
        signals) is replaced; the judge worker itself goes on."""
        from judge.remote import TemplateProcess

        self.template.close()
        self.template = TemplateProcess(self.device)

    def take(self, limit: float, clock: Any) -> Any:
        """A ready candidate process, its clock started: the spare when it is alive (it can
        have died with a template that the previous candidate killed, where no seccomp filter
        stops signals), else a fresh one. The next spare is forked at once, so it makes its
        GPU context while this candidate is judged. `clock`: the job's phase clock (its steps)."""
        from judge.candidate.wire import WireError
        from judge.remote import CandidateDied, CandidateTimeout

        proc, started = self.waiting.popleft() if self.waiting else (None, None)
        if started is not None:
            # In a job alone this thread holds the GPU exclusively, and the spare's start waits
            # behind it: that spare is given up, and a fresh process starts under this ticket.
            with clock.step("start:spare_join"):
                started.join(timeout=0 if holds_exclusive() else None)
            if proc is not None and (started.is_alive() or not proc.device_started):  # or its start failed
                proc.close()
                proc = None
        if proc is not None:
            clock.steps.update(proc.spare_steps)
            clock.steps["spare:age"] = time.perf_counter() - proc.forked
            proc.start_clock(limit)
            try:
                with clock.step("start:spare_ready"):
                    proc.wait_ready(max(1.0, proc.deadline - time.monotonic()))
                    proc.request({"op": "reset"})  # alive now, not only when it said it was ready
            except (CandidateDied, CandidateTimeout, WireError, OSError):
                proc.close()
                proc = None
        if proc is None:
            with clock.step("start:fresh"):
                try:
                    proc = self.template.spawn()
                except (OSError, EOFError):
                    self.restart_template()
                    proc = self.template.spawn()
                proc.start_clock(limit)
                with _context_ticket(clock) if self.contexts else contextlib.nullcontext():
                    proc.start_device(context=self.contexts)
                    proc.wait_ready(max(1.0, proc.deadline - time.monotonic()))
        with clock.step("start:refill"):
            self.refill()
        return proc

    def close(self) -> None:
        """Every spare closed, then the template."""
        for proc, _ in self.waiting:
            proc.close()
        self.template.close()
