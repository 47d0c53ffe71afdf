"""The fair GPU gate (judge/gate.py) with a fake timer: judging jobs share it in parallel, a
timing job waits only behind the jobs that were there when it asked, later judging waits for
it, timers take turns, a dead holder does not wedge it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from judge import gate as gate_module
from judge.gate import GATE_ENV, FairGate, gpu_gate
from judge.phases import PhaseClock

ROOT = Path(__file__).resolve().parent.parent


class Log:
    """Enter/exit times per job name, recorded from the threads that hold tickets."""

    def __init__(self) -> None:
        self.asked: dict[str, float] = {}
        self.entered: dict[str, float] = {}
        self.left: dict[str, float] = {}
        self.waited_for: dict[str, list[str]] = {}
        self.tickets: dict[str, str] = {}
        self.stepped_back: dict[str, list[str]] = {}


def hold(gate: FairGate, log: Log, name: str, exclusive: bool, seconds: float,
         background: bool = False) -> threading.Thread:
    """A job (a fake timer when exclusive: it holds the GPU `seconds` and measures nothing)."""
    drawn = threading.Event()

    def run() -> None:
        log.asked[name] = time.monotonic()
        with gate.enter(exclusive, background) as ticket:
            log.entered[name] = time.monotonic()
            log.waited_for[name] = list(ticket.waited_for)
            log.tickets[name] = ticket.name
            log.stepped_back[name] = list(ticket.stepped_back_for)
            time.sleep(seconds)
            log.left[name] = time.monotonic()

    def watch() -> None:
        # "asked" means the ticket is drawn: wait until its file shows up.
        before = set(os.listdir(gate.folder))
        thread.start()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not (set(os.listdir(gate.folder)) - before - {"counter"}):
            time.sleep(0.002)
        drawn.set()

    thread = threading.Thread(target=run)
    watch()
    assert drawn.is_set()
    return thread


def wait_entered(log: Log, *names: str) -> None:
    """Until the named jobs hold their tickets. Why: a judging ticket is drawn before it is let
    in (timers first), so a timer drawn right after `hold` returns can come between, on a loaded
    machine, and the job meant to be inside finds a timer ahead of it."""
    deadline = time.monotonic() + 5
    while not all(name in log.entered for name in names):
        assert time.monotonic() < deadline, f"not entered: {[n for n in names if n not in log.entered]}"
        time.sleep(0.002)


@pytest.mark.parametrize("timers_first", [False, True])
def test_judging_jobs_share_the_gate_in_parallel(tmp_path: Path, timers_first: bool) -> None:
    gate, log = FairGate(tmp_path / "gate", timers_first=timers_first), Log()
    threads = [hold(gate, log, f"judge{i}", False, 0.4) for i in range(4)]
    for t in threads:
        t.join()
    assert max(log.entered.values()) < min(log.left.values())  # all four on the GPU at once
    assert all(not waited for waited in log.waited_for.values())


@pytest.mark.parametrize("timers_first", [False, True])
def test_a_timer_waits_only_for_the_jobs_inside_and_later_judging_waits_for_it(tmp_path: Path,
                                                                               timers_first: bool) -> None:
    gate, log = FairGate(tmp_path / "gate", timers_first=timers_first), Log()
    inside = [hold(gate, log, f"early{i}", False, 0.5) for i in range(3)]
    wait_entered(log, "early0", "early1", "early2")
    timer = hold(gate, log, "timer", True, 0.4)
    later = [hold(gate, log, f"late{i}", False, 0.1) for i in range(3)]
    for t in (*inside, timer, *later):
        t.join()
    early_names = sorted(log.tickets[f"early{i}"] for i in range(3))
    assert log.waited_for["timer"] == early_names  # behind exactly the jobs inside when it asked
    last_early_exit = max(log.left[f"early{i}"] for i in range(3))
    assert last_early_exit <= log.entered["timer"] < last_early_exit + 0.2
    for i in range(3):
        assert log.asked[f"late{i}"] < log.entered["timer"]  # they asked while the timer waited ...
        assert log.entered[f"late{i}"] >= log.left["timer"]  # ... and entered only after it measured
        assert log.waited_for[f"late{i}"] == [log.tickets["timer"]]


def test_under_fifo_timers_take_turns_in_ticket_order(tmp_path: Path) -> None:
    gate, log = FairGate(tmp_path / "gate", timers_first=False), Log()
    first = hold(gate, log, "timer1", True, 0.3)
    judge = hold(gate, log, "judge", False, 0.2)
    second = hold(gate, log, "timer2", True, 0.2)
    for t in (first, judge, second):
        t.join()
    assert log.entered["judge"] >= log.left["timer1"]
    assert log.entered["timer2"] >= log.left["judge"]  # FIFO: the judging job that asked first goes first
    assert log.waited_for["timer2"] == sorted([log.tickets["timer1"], log.tickets["judge"]])


def test_timers_first_a_second_timer_goes_before_the_judging_queued_between_them(tmp_path: Path) -> None:
    """`KMC_GATE_ORDER=timers-first`: a timer that asks while another measures goes next, on the
    same drain, ahead of the judging that asked between them; that judging goes after both."""
    gate, log = FairGate(tmp_path / "gate", timers_first=True), Log()
    inside = hold(gate, log, "inside", False, 0.3)
    wait_entered(log, "inside")
    first = hold(gate, log, "timer1", True, 0.3)
    judge = hold(gate, log, "judge", False, 0.1)
    second = hold(gate, log, "timer2", True, 0.2)
    for t in (inside, first, judge, second):
        t.join()
    assert log.tickets["inside"].endswith(".g") and log.entered["inside"] < log.asked["timer1"]
    assert log.entered["timer1"] >= log.left["inside"]  # timing never beside judging let in
    assert log.waited_for["timer1"] == [log.tickets["inside"]]
    assert log.entered["timer2"] >= log.left["timer1"]  # timers in ticket order ...
    assert log.entered["judge"] >= log.left["timer2"]  # ... and the judging queued between them after both
    number = log.tickets["judge"].split(".")[0]
    assert log.tickets["timer1"] in log.waited_for["timer2"]  # and the judging still in when it asked,
    assert not [name for name in log.waited_for["timer2"] if name.startswith(number)]  # not the judging it overtook
    assert log.tickets["timer1"] in log.waited_for["judge"]


def test_timers_first_judging_shares_the_gate_when_no_timer_asks(tmp_path: Path) -> None:
    gate, log = FairGate(tmp_path / "gate", timers_first=True), Log()
    threads = [hold(gate, log, f"judge{i}", False, 0.3) for i in range(3)]
    for t in threads:
        t.join()
    assert max(log.entered.values()) < min(log.left.values())
    assert all(not waited for waited in log.waited_for.values())
    assert os.listdir(tmp_path / "gate") == ["counter"]  # every ticket's file gone


@pytest.mark.parametrize("timers_first", [False, True])
def test_a_background_ticket_waits_for_a_timer_but_no_timer_waits_for_it(tmp_path: Path, timers_first: bool) -> None:
    """A spare's context (`background`): it does not start while a timer measures, and a timer
    that asks while it is in goes on at once (judging in goes first as before)."""
    gate, log = FairGate(tmp_path / "gate", timers_first=timers_first), Log()
    context = hold(gate, log, "context", False, 0.6, background=True)
    timer = hold(gate, log, "timer", True, 0.3)
    late = hold(gate, log, "late context", False, 0.1, background=True)
    for t in (context, timer, late):
        t.join()
    assert log.tickets["context"].endswith(".b")
    assert log.entered["timer"] < log.left["context"]  # not waiting for the context in
    assert log.waited_for["timer"] == []
    assert log.entered["late context"] >= log.left["timer"]  # ... while one asked later waits for it
    assert log.waited_for["late context"] == [log.tickets["timer"]]


def test_the_gate_order_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(gate_module.ORDER_ENV, "timers-first")
    assert FairGate(tmp_path / "a").timers_first
    monkeypatch.setenv(gate_module.ORDER_ENV, "fifo")
    assert not FairGate(tmp_path / "b").timers_first
    monkeypatch.delenv(gate_module.ORDER_ENV)
    assert FairGate(tmp_path / "d").timers_first  # the default: queued timers share one drain
    monkeypatch.setenv(gate_module.ORDER_ENV, "lifo")
    with pytest.raises(ValueError, match="KMC_GATE_ORDER='lifo' is not one of fifo, timers-first"):
        FairGate(tmp_path / "c")


@pytest.mark.slow  # seconds: the fast subset stays under two minutes
@pytest.mark.parametrize("timers_first", [False, True])
def test_a_timer_steps_back_from_a_stuck_judging_job_so_the_queue_behind_it_flows(tmp_path: Path,
                                                                                   timers_first: bool) -> None:
    """A judging job holding its ticket past the patience (a candidate hanging until its time
    limit): the timer gives its place up, so judging that asked after it goes on, and it still
    measures only once the stuck job has left."""
    gate, log = FairGate(tmp_path / "gate", patience=0.3, timers_first=timers_first), Log()
    stuck = hold(gate, log, "stuck", False, 2.0)
    timer = hold(gate, log, "timer", True, 0.2)
    late = hold(gate, log, "late", False, 0.2)
    for t in (stuck, timer, late):
        t.join()
    assert log.asked["late"] < log.entered["timer"]
    assert log.entered["late"] < log.asked["late"] + 1.0  # behind the timer's patience, not the stuck job
    assert log.entered["late"] < log.left["stuck"]
    assert log.entered["timer"] >= log.left["stuck"]  # never beside a judging job
    assert log.stepped_back["timer"] == [log.tickets["stuck"]]


@pytest.mark.slow  # seconds, as the test above
@pytest.mark.parametrize("timers_first", [False, True])
def test_a_job_retried_alone_never_steps_back_so_judging_cannot_starve_it(tmp_path: Path,
                                                                          timers_first: bool) -> None:
    """Where every judging job outlasts the patience (GEAK-eval references: 30-150 s each), a
    job retried alone that stepped back like a timer would let each new one in and wait again.
    It holds its place: judging that asks after it waits until it is done, and it enters once
    the judging ahead has left, having stepped back from nothing."""
    gate, log = FairGate(tmp_path / "gate", patience=0.2, timers_first=timers_first), Log()
    long = hold(gate, log, "long", False, 1.0)
    wait_entered(log, "long")
    alone_in = threading.Event()

    def alone() -> None:
        with gate.enter(True, alone=True) as ticket:
            log.entered["alone"] = time.monotonic()
            log.stepped_back["alone"] = list(ticket.stepped_back_for)
            alone_in.set()
            time.sleep(0.2)
            log.left["alone"] = time.monotonic()

    drawn = len(os.listdir(gate.folder))
    retried = threading.Thread(target=alone)
    retried.start()
    deadline = time.monotonic() + 5
    while len(os.listdir(gate.folder)) == drawn and time.monotonic() < deadline:
        time.sleep(0.002)  # the alone ticket is on disk before the late judging asks
    late = hold(gate, log, "late", False, 0.1)
    for t in (long, retried, late):
        t.join()
    assert alone_in.is_set()
    assert log.stepped_back["alone"] == []
    assert log.entered["alone"] >= log.left["long"]
    assert log.entered["late"] >= log.left["alone"]  # not let in past the job alone


@pytest.mark.parametrize("timers_first", [False, True])
def test_a_dead_holder_does_not_wedge_the_gate(tmp_path: Path, timers_first: bool) -> None:
    folder = tmp_path / "gate"
    script = ("import sys, time; from judge.gate import FairGate\n"
              f"with FairGate({str(folder)!r}, timers_first={timers_first}).enter(True):\n"
              "    print('in', flush=True); time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"in"
        stale = [n for n in os.listdir(folder) if n.endswith(".x")]
        assert len(stale) == 1
        holder.kill()
        holder.wait(10)
        started = time.monotonic()
        with FairGate(folder, timers_first=timers_first).enter(False) as ticket:
            assert ticket.waited_for == stale
        assert time.monotonic() - started < 2
        assert not [n for n in os.listdir(folder) if n.endswith(".x")]  # the dead holder's file is removed
    finally:
        holder.kill()
        holder.wait(10)


def test_gpu_gate_is_reentrant_and_counts_its_wait(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(GATE_ENV, str(tmp_path / "gate"))
    clock = PhaseClock()
    with gpu_gate(exclusive=True, clock=clock) as outer:
        assert outer is not None and outer.exclusive
        with gpu_gate(exclusive=False, clock=clock) as inner:  # a job retried alone: served already
            assert inner is None
    assert "gate" in clock.seconds
    # one exclusive ticket taken (the inner request took none), held for the sleep at least
    assert clock.steps["gate:timer entries"] == 1.0 and "gate:judging entries" not in clock.steps
    with gpu_gate(exclusive=False, clock=clock):
        time.sleep(0.02)
    assert clock.steps["gate:judging entries"] == 1.0 and clock.steps["gate:judging held"] >= 0.02
    assert clock.steps["gate:timer held"] >= 0.0 and clock.steps["gate:judging waits"] >= 0.0
    with gpu_gate(exclusive=False), pytest.raises(RuntimeError, match="wait for itself"):
        with gpu_gate(exclusive=True):
            pass
    assert gate_module._held() == [] and not gate_module.holds_exclusive()
    monkeypatch.delenv(GATE_ENV)
    with gpu_gate(exclusive=True) as none:  # no GPU gate here: nothing to wait for
        assert none is None


def gpu_gate_entry(clock: PhaseClock) -> None:
    """A judging job's pass through the gate (judge/worker.py's shared ticket), its steps on `clock`."""
    with gpu_gate(exclusive=False, clock=clock):
        pass


@pytest.mark.parametrize("timers_first", [False, True])
def test_whoever_waits_behind_a_job_retried_alone_runs_its_hook_first_and_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timers_first: bool) -> None:
    """A job retried alone after running out of GPU memory needs what the other workers' caches
    hold: a ticket that finds it ahead runs this process's hook (a judge worker's: hand back its
    idle cached blocks) before it waits, once, and records what was released. Behind a timer,
    and with no job alone ahead, nothing is run."""
    monkeypatch.setenv(GATE_ENV, str(tmp_path / "gate"))
    monkeypatch.setenv(gate_module.ORDER_ENV, "timers-first" if timers_first else "fifo")
    calls: list[str] = []

    def hook() -> int:
        calls.append(threading.current_thread().name)
        return 3 << 30

    monkeypatch.setattr(gate_module, "_waiting_behind_alone", None)
    gate_module.on_waiting_behind_alone(hook)
    gate, log = FairGate(tmp_path / "gate"), Log()

    def alone_job(release: threading.Event) -> threading.Thread:
        entered = threading.Event()

        def run() -> None:
            with gate.enter(True, alone=True) as ticket:
                assert (gate.folder / f"{ticket.number:016d}.alone").exists()
                entered.set()
                release.wait(5)

        thread = threading.Thread(target=run)
        thread.start()
        assert entered.wait(5)
        return thread

    release = threading.Event()
    first = alone_job(release)
    clock = PhaseClock()
    waiter = threading.Thread(target=lambda: gpu_gate_entry(clock), name="judging")
    waiter.start()
    deadline = time.monotonic() + 5
    while not calls and time.monotonic() < deadline:
        time.sleep(0.002)
    assert calls == ["judging"] and waiter.is_alive()  # run before the wait, while the job alone holds the GPU
    release.set()
    first.join()
    waiter.join()
    assert calls == ["judging"] and clock.steps[gate_module.RELEASED_FOR_ALONE_STEP] == 3.0
    assert not [n for n in os.listdir(gate.folder) if n.endswith(".alone")]  # the mark goes with its ticket
    # Behind a plain timer, or with nothing ahead, the hook is not run.
    timer = hold(gate, log, "timer", True, 0.2)
    behind_timer = hold(gate, log, "judge", False, 0.0)
    for t in (timer, behind_timer):
        t.join()
    assert log.waited_for["judge"] == [log.tickets["timer"]] and calls == ["judging"]


def test_nested_phases_count_each_second_once() -> None:
    clock = PhaseClock()
    with clock("timing"):
        time.sleep(0.05)
        with clock("gate"):
            time.sleep(0.1)
    assert clock.seconds["gate"] >= 0.1
    assert 0.05 <= clock.seconds["timing"] < 0.1  # the gate's wait is not timing's too


def test_judging_holds_the_gate_a_few_cases_at_a_time_and_lets_go_on_return_or_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """judge/oracle.py's loop over a case set: one hold per `CASES_PER_HOLD` cases (every call
    sent under it judged before it is let go) and one for the end-of-set check; let go when a
    failing case returns its verdict, and when the judge's own side raises."""
    import dataclasses

    from bench.registry import get_task
    from judge import oracle
    from tests.helpers import in_process_runner

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(oracle, "CASES_PER_HOLD", 1)
    task = get_task("vector_add")
    cases = task.cases("visible", True)
    events: list[str] = []

    @contextlib.contextmanager
    def hold() -> Iterator[None]:
        events.append("enter")
        try:
            yield
        finally:
            events.append("exit")

    def judged(source: str, name: str, judged_task: object = task) -> object:
        events.clear()
        runner = in_process_runner(task, source, tmp_path, name)
        return oracle.judge_cases(judged_task, runner, cases, "cpu", True, hold=hold)  # type: ignore[arg-type]

    verdict = judged(task.baseline_source(), "kmc_candidate_gate_1")
    assert verdict.correct, verdict  # type: ignore[attr-defined]
    assert events == ["enter", "exit"] * (len(cases) + 1)
    wrong = task.baseline_source().replace("x + y", "x - y")
    assert wrong != task.baseline_source()
    verdict = judged(wrong, "kmc_candidate_gate_2")
    assert verdict.kind == "wrong_result" and events == ["enter", "exit"]  # type: ignore[attr-defined]

    def failing_reference(*args: object) -> object:
        raise ValueError("a judge-side failure")

    broken = dataclasses.replace(task, id="vector_add_gate_test", reference=failing_reference)
    with pytest.raises(ValueError):
        judged(task.baseline_source(), "kmc_candidate_gate_3", broken)
    assert events == ["enter", "exit"]


def test_another_threads_request_waits_for_this_threads_exclusive_ticket(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tickets are per thread: a worker's spare, making its GPU context on a thread of its own,
    is not let through by the worker's timing ticket (it would overlap the timing), it waits."""
    monkeypatch.setenv(GATE_ENV, str(tmp_path / "gate"))
    entered: list[float] = []

    def spare_start() -> None:
        with gpu_gate(exclusive=False) as ticket:
            assert ticket is not None  # a ticket of its own, not served by the other thread's
            entered.append(time.monotonic())

    with gpu_gate(exclusive=True):
        assert gate_module.holds_exclusive()
        other = threading.Thread(target=spare_start)
        other.start()
        other.join(0.5)
        assert other.is_alive() and not entered  # still waiting behind the timing
        released = time.monotonic()
    other.join(10)
    assert entered and entered[0] >= released


class _FakeSpare:
    """A candidate process as the worker's spare start sees it: when it was told to start."""

    def __init__(self) -> None:
        self.started_at: float | None = None
        self.spare_steps: dict[str, float] = {}

    def start_device(self) -> None:
        self.started_at = time.monotonic()

    def wait_ready(self, timeout: float) -> None:
        pass


@pytest.mark.parametrize("gated", ["1", "background", "0"])
def test_a_spares_context_waits_for_a_timer_unless_contexts_are_ungated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gated: str) -> None:
    """judge/spares.py `KMC_GATE_CONTEXTS`: by default a spare makes its GPU context under a
    shared ticket, so not while a timer holds the GPU; set to 0 it takes no ticket (the
    experiment bench_lanes_gpu.py --ungated-contexts measures)."""
    from judge.spares import CONTEXT_GATE_ENV, start_on_device

    folder = tmp_path / "gate"
    monkeypatch.setenv(GATE_ENV, str(folder))
    monkeypatch.setenv(CONTEXT_GATE_ENV, gated)
    gate, log = FairGate(folder), Log()
    timer = hold(gate, log, "timer", exclusive=True, seconds=1.0)  # far longer than a thread start on a busy box
    spare = _FakeSpare()
    starting = threading.Thread(target=start_on_device, args=(spare, 5.0))
    starting.start()
    starting.join(timeout=10)
    timer.join(timeout=10)
    assert spare.started_at is not None and set(spare.spare_steps) == {"spare:gate", "spare:context"}
    if gated in ("1", "background"):  # a timer already measuring: neither kind of ticket starts beside it
        assert spare.started_at >= log.left["timer"] and spare.spare_steps["spare:gate"] >= 0.3
    else:
        assert spare.started_at < log.left["timer"] and spare.spare_steps["spare:gate"] < 0.3
