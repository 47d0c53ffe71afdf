"""The fair GPU gate: many judging jobs share a GPU; a timing job gets it alone, in turn.

Why not one `flock` (shared for judging, exclusive for timing)? Linux grants a new shared lock
whenever no exclusive one is *held*, even while an exclusive request waits, so a steady stream
of judging jobs can keep a timer waiting for as long as it lasts, and which waiter wins when the
lock frees is arbitrary. This gate is a queue of tickets instead, kept in a folder on the local
disk that every process using the GPU shares (the judge workers of a pool, or the Ray actors
placed on one GPU of a node):

- taking a ticket draws the next number from a counter file (under its own `flock`) and creates
  the ticket's file, held with an exclusive `flock` for as long as the ticket lives;
- a *shared* ticket (judging: correctness on a case set) waits only for the exclusive tickets
  drawn before it; an *exclusive* ticket (a timing measurement, or a job retried alone after an
  out-of-memory error) waits for every ticket drawn before it;
- waiting on a ticket is a blocking shared `flock` on its file, granted when its holder lets go
  (or dies: the kernel drops the locks of a dead process, so a crashed worker never wedges the
  gate; its leftover file is removed by whoever waited on it).

So a timing job waits only behind the jobs that were on the GPU, or queued, when it asked; a
judging job that asks later waits until the timer is done (judging pauses while timing
measures); and with no timer queued, judging jobs never wait for each other.

The default order, `timers-first` (`KMC_GATE_ORDER`; `fifo` is the order above), changes one
rule: a judging ticket is let in only while no exclusive ticket exists at all, and a timer waits
only for the judging tickets already let in (renamed `.g` when let in, under the counter's lock)
and the timers before it. Why: every time the GPU goes from judging to timing, the timer waits
for the judging holds in flight to end (a *drain*), and the workers queued behind it wait too;
under FIFO a second timer that asks while the first drains waits behind the judging queued
between them and drains the GPU again. Timers first, the timers queued at once measure one after
another on one drain. Judging waits at most for the timers queued (each worker times one job at
a time, and a timing job's own shared holds queue behind the timers too), so it cannot starve.
Measured on an H100 (2026-12-05, the 7-task command, four interleaved pairs in one sitting):
64.2 s against 68.3 s under FIFO, every pair faster, worker time at the gate 18-24% against
24-28% (benchmarks/results/README.md).

A *background* ticket (`.b`, a spare's GPU context: judge/spares.py) waits for the timers ahead
of it as judging does, but no timer waits for it: such work never starts while a timer measures,
and never holds one up. A judging job
stuck past `TIMER_PATIENCE_S` (a candidate hanging in a kernel until its time limit) does not
hold up the queue: the timer steps back and waits for it without a ticket (`FairGate`). Timers queue in
ticket order: one timing lane per GPU. Waits only ever point at smaller numbers, so there is
no cycle and no deadlock. The gate holds nothing while nobody waits and costs one small file
per ticket.

A job retried alone (it ran out of GPU memory beside other workers' jobs: runners/pool.py) takes
an exclusive ticket marked `<number>.alone`; whoever then waits behind it first runs this
process's hook (`on_waiting_behind_alone`: a judge worker hands back its idle cached GPU blocks,
judge/device_memory.py), so the job alone finds the memory the others' caches held. It never
steps back as a timer does: it waits for every judging job let in to end. Stepping back, it can
starve where judging jobs are long: in a `bench check` of GEAK-eval's references (jobs of 30-150
s, 12 workers, an H100, 2026-12-06) every judging job outlasts the patience, so each retry let the
next ones in and waited again; five retries got no reply before the pool's backstop restarted
their workers, while the host's CPU stood 75-87% idle and the GPU's SM mostly at 0% for minutes.

It is a cooperation protocol between trusted judge processes, not a defence: candidate code
never holds a ticket, and a process that could flock the files could stall the GPU's queue
(denial of service of the GPU is out of scope in docs/ARCHITECTURE.md's threat model).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from judge.phases import PhaseClock

GATE_ENV = "KMC_GPU_GATE"
"""The gate folder of the GPU a judge worker is bound to (set by the pool, or by the Ray actor)."""

_COUNTER = "counter"
_POLL_S = 0.005  # how often a timer with a deadline looks again at a judging job's ticket

TIMER_PATIENCE_S = 10.0
"""How long a timer waits for one judging job ahead of it before stepping back (`FairGate`):
far above a case's seconds on a GPU, far below a job's time limit."""
_SUFFIX = {True: "x", False: "s"}
_LET_IN = "g"  # a judging ticket let in (timers-first): what a timer drawn after it waits for
_BACKGROUND = "b"  # waits for the timers before it, as judging does; no timer waits for it
_ALONE = "alone"  # a file beside an exclusive ticket of a job retried alone: `<number>.alone`
_waiting_behind_alone: Callable[[], int] | None = None


def on_waiting_behind_alone(hook: Callable[[], int] | None) -> None:
    """This process's hook, run once per ticket before it waits behind a job retried alone; it
    returns the bytes it released (`Ticket.released_for_alone`). None: nothing is run."""
    global _waiting_behind_alone
    _waiting_behind_alone = hook
ORDER_ENV = "KMC_GATE_ORDER"
"""`timers-first` (the default) or `fifo` (the module's docstring): every process at one gate
must use the same order (the pool's workers inherit it)."""
ORDERS = ("fifo", "timers-first")
DEFAULT_ORDER = "timers-first"


def timers_first_from_env() -> bool:
    value = os.environ.get(ORDER_ENV, "").strip() or DEFAULT_ORDER
    if value not in ORDERS:
        raise ValueError(f"{ORDER_ENV}={value!r} is not one of {', '.join(ORDERS)}")
    return value == "timers-first"
WAIT_STEPS = {True: "gate:timer waits", False: "gate:judging waits"}
"""The step names under which a job's waits at the gate are summed, by the kind of ticket."""
HELD_STEPS = {True: "gate:timer held", False: "gate:judging held"}
"""... and its seconds holding a ticket: a held judging ticket is what a timer drains."""
RELEASED_FOR_ALONE_STEP = "memory:released_for_alone_gib"
"""GiB this worker's hook released before waiting behind a job retried alone (`on_waiting_behind_alone`)."""
ENTRY_STEPS = {True: "gate:timer entries", False: "gate:judging entries"}
"""... and how many tickets it took (a count, summed like the seconds): waits over entries is
the mean drain a timer waited for, held over entries the mean judging hold."""


@dataclass
class Ticket:
    """One pass through the gate: its number, its kind, the tickets it found ahead of it
    (and so waited for, however briefly) and how long it waited."""

    number: int
    exclusive: bool
    waited_for: list[str] = field(default_factory=list)
    wait_s: float = 0.0
    stepped_back_for: list[str] = field(default_factory=list)  # judging tickets that outlasted the patience
    let_in: bool = False  # a judging ticket renamed `.g` (timers-first)
    background: bool = False  # a spare's context (`FairGate.enter`)
    alone: bool = False  # an exclusive ticket of a job retried alone (marked `<number>.alone`)
    released_for_alone: int | None = None  # bytes the hook released before waiting behind one (None: not run)

    @property
    def name(self) -> str:
        kind = _BACKGROUND if self.background else _LET_IN if self.let_in else _SUFFIX[self.exclusive]
        return f"{self.number:016d}.{kind}"


class FairGate:
    """The FIFO gate of one GPU, kept in `folder` (created when missing).

    `patience`: how long an exclusive ticket waits for one judging job ahead of it. A judging
    job can hold its ticket far longer than a case takes (a candidate hanging inside a kernel
    until the job's time limit), and everything queued behind the timer would wait that long
    too. Past the patience the timer steps back: it gives its ticket up (the judging queued
    behind it goes on), waits without a ticket for that job to let go, and draws a new one. It
    still never measures beside a judging job; it only stops holding the queue for a stuck one."""

    def __init__(self, folder: str | Path, patience: float = TIMER_PATIENCE_S, timers_first: bool | None = None) -> None:
        """`timers_first`: the order (`ORDER_ENV`, read when None)."""
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.patience = patience
        self.timers_first = timers_first_from_env() if timers_first is None else timers_first

    @contextlib.contextmanager
    def enter(self, exclusive: bool, background: bool = False, alone: bool = False) -> Iterator[Ticket]:
        """Hold the GPU: shared (judging) or alone (timing), in ticket order. `background` (not
        exclusive): wait for the timers ahead as judging does, but let no timer wait for it:
        for work that must not start while a timer measures but may overlap one that began
        after it (a spare's context, judge/spares.py). `alone` (exclusive): a job retried alone,
        marked so that those waiting behind it run their hook first (the module's docstring)."""
        started = time.perf_counter()
        stepped_back: list[str] = []
        ticket, fd = self._draw(exclusive, background and not exclusive, alone and exclusive)
        try:
            if ticket.background:
                self._wait_for_timers(ticket)
            elif self.timers_first and not exclusive:
                self._let_in(ticket)
            patience = self.patience if exclusive and not ticket.alone else None
            while not ticket.background and (stuck := self._wait(ticket, patience)):
                self._release(ticket, fd)
                fd = -1
                stepped_back.append(stuck)
                self._wait_for(stuck, None)  # holding no ticket: the queue behind flows meanwhile
                ticket, fd = self._draw(exclusive, alone=ticket.alone)
            ticket.wait_s = time.perf_counter() - started
            ticket.stepped_back_for = stepped_back
            yield ticket
        finally:
            if fd >= 0:
                self._release(ticket, fd)

    def _release(self, ticket: Ticket, fd: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.folder / ticket.name).unlink()
        if ticket.alone:
            with contextlib.suppress(FileNotFoundError):
                self._alone_mark(ticket.name).unlink()
        os.close(fd)  # releases the ticket's lock: whoever waits on it goes on

    @contextlib.contextmanager
    def _counter(self) -> Iterator[int]:
        """The counter file, locked: the gate's one mutex (drawing, letting judging in)."""
        counter = os.open(self.folder / _COUNTER, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(counter, fcntl.LOCK_EX)
            yield counter
        finally:
            os.close(counter)  # releases the counter's lock

    def _draw(self, exclusive: bool, background: bool = False, alone: bool = False) -> tuple[Ticket, int]:
        """The next number and the ticket's file (and an alone ticket's mark), created and locked
        while the counter is held, so whoever draws a later number finds every earlier ticket on disk."""
        with self._counter() as counter:
            text = os.pread(counter, 32, 0).decode(errors="replace").strip()
            number = int(text) + 1 if text.isdigit() else 1
            os.pwrite(counter, f"{number:020d}".encode(), 0)
            ticket = Ticket(number, exclusive, background=background, alone=alone)
            fd = os.open(self.folder / ticket.name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            if alone:
                self._alone_mark(ticket.name).touch(0o600)
            return ticket, fd

    def _alone_mark(self, name: str) -> Path:
        return self.folder / f"{name.partition('.')[0]}.{_ALONE}"

    def _before_waiting(self, ticket: Ticket, name: str) -> None:
        """Once per ticket, this process's hook before it waits behind a job retried alone."""
        if _waiting_behind_alone is None or ticket.released_for_alone is not None:
            return
        if self._alone_mark(name).exists():
            ticket.released_for_alone = _waiting_behind_alone()

    def _tickets(self) -> list[tuple[int, str, str]]:
        """(number, kind, file name) of every ticket on disk."""
        out = []
        for name in os.listdir(self.folder):
            number, _, kind = name.partition(".")
            if number.isdigit() and kind in ("x", "s", _LET_IN, _BACKGROUND):
                out.append((int(number), kind, name))
        return out

    def _wait_for_timers(self, ticket: Ticket) -> None:
        """A background ticket: until no timer's ticket exists that was drawn before it (in
        timers-first order, none at all)."""
        self._until_no_timer(ticket, every_timer=self.timers_first, let_in=False)

    def _let_in(self, ticket: Ticket) -> None:
        """Timers first: wait until no timer's ticket exists, then (under the counter's lock, so
        no timer draws meanwhile) rename this judging ticket `.g`: let in."""
        self._until_no_timer(ticket, every_timer=True, let_in=True)

    def _until_no_timer(self, ticket: Ticket, every_timer: bool, let_in: bool) -> None:
        """Wait, oldest first, for the timers' tickets (every one, or those drawn before
        `ticket`) until none is left; with `let_in`, the last look and the rename to `.g` under
        the counter's lock."""
        while True:
            with self._counter() if let_in else contextlib.nullcontext():
                timers = sorted(name for number, kind, name in self._tickets()
                                if kind == "x" and (every_timer or number < ticket.number))
                if not timers:
                    if let_in:
                        os.rename(self.folder / ticket.name, self.folder / replace(ticket, let_in=True).name)
                        ticket.let_in = True
                    return
            if timers[0] not in ticket.waited_for:
                ticket.waited_for.append(timers[0])
            self._before_waiting(ticket, timers[0])
            self._wait_for(timers[0], None)

    def _earlier(self, ticket: Ticket) -> list[str]:
        """Tickets drawn before this one that it must wait for, oldest first. Timers first: a
        timer waits for the judging let in and the timers before it, a judging ticket let in for
        nothing more."""
        if self.timers_first:
            if not ticket.exclusive:
                return []
            return sorted(name for number, kind, name in self._tickets()
                          if kind == _LET_IN or (kind == "x" and number < ticket.number))
        return sorted(name for number, kind, name in self._tickets()
                      if number < ticket.number and kind != _BACKGROUND and (ticket.exclusive or kind == "x"))

    def _wait(self, ticket: Ticket, patience: float | None) -> str | None:
        """Wait for every ticket ahead to let go: None then. With `patience`, the name of a
        judging (shared) ticket still held that many seconds after the wait began."""
        ahead = self._earlier(ticket)
        ticket.waited_for = [*ticket.waited_for, *ahead] if ticket.let_in else ahead
        deadline = None if patience is None else time.monotonic() + patience
        for name in ahead:
            self._before_waiting(ticket, name)
            if not self._wait_for(name, deadline if not name.endswith(".x") else None):
                return name
        return None

    def _wait_for(self, name: str, deadline: float | None) -> bool:
        """Until the holder of ticket `name` lets go (True), or `deadline` passes first (False)."""
        path = self.folder / name
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return True  # already gone: its holder is done
        try:
            if deadline is None:
                fcntl.flock(fd, fcntl.LOCK_SH)  # blocks until the holder lets go (or dies)
            else:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() >= deadline:
                            return False
                        time.sleep(_POLL_S)
            # Its holder let go. A file still there belongs to a holder that died before
            # removing it (a live one removes it first): remove it for those after us.
            with contextlib.suppress(FileNotFoundError):
                if os.fstat(fd).st_ino == os.stat(path).st_ino:
                    path.unlink()
                    self._alone_mark(name).unlink(missing_ok=True)
            return True
        finally:
            os.close(fd)


_local = threading.local()  # per thread: a worker's spare makes its GPU context on a thread of its own


def _held() -> list[Ticket]:
    """The tickets this thread holds, innermost last."""
    held = getattr(_local, "held", None)
    if held is None:
        held = _local.held = []
    return held


def holds_exclusive() -> bool:
    """Whether this thread holds an exclusive ticket (a job retried alone)."""
    return any(t.exclusive for t in _held())


@contextlib.contextmanager
def gpu_gate(exclusive: bool, clock: PhaseClock | None = None, background: bool = False,
             alone: bool = False) -> Iterator[Ticket | None]:
    """The gate of this process's GPU when it has one (`$KMC_GPU_GATE`), else nothing to wait
    for. Re-entrant: inside an exclusive ticket (a job retried alone) every inner request is
    already served, and a shared one inside a shared one too (a later ticket would wait for this
    thread's own). Tickets are per thread: another thread's request waits like any other
    process's. `clock`: the wait is counted as its `gate` phase. `background`: a shared ticket
    no timer waits for, `alone`: an exclusive one marked as a job retried alone (`FairGate.enter`)."""
    folder = os.environ.get(GATE_ENV)
    held = _held()
    if not folder or (held and (held[-1].exclusive or not exclusive)):
        yield None
        return
    if held:
        raise RuntimeError("an exclusive GPU ticket asked inside a shared one would wait for itself")
    with contextlib.ExitStack() as stack:
        with clock("gate") if clock is not None else contextlib.nullcontext():
            ticket = stack.enter_context(FairGate(folder).enter(exclusive, background, alone))
        if clock is not None:  # which waits the gate phase is made of, for diagnosis (judge/phases.py steps)
            _add_step(clock, WAIT_STEPS[exclusive], ticket.wait_s)
            _add_step(clock, ENTRY_STEPS[exclusive], 1.0)
            if ticket.released_for_alone is not None:
                _add_step(clock, RELEASED_FOR_ALONE_STEP, ticket.released_for_alone / 2**30)
        held.append(ticket)
        entered = time.perf_counter()
        try:
            yield ticket
        finally:
            held.pop()
            if clock is not None:
                _add_step(clock, HELD_STEPS[exclusive], time.perf_counter() - entered)


def _add_step(clock: PhaseClock, step: str, amount: float) -> None:
    clock.steps[step] = clock.steps.get(step, 0.0) + amount
