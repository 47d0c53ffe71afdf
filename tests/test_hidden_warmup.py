"""judge/hidden_warmup.py: a visible (or own-test) job's process that passed goes on compiling the hidden cases
in the background, turned to its source's hidden cache side first, and is closed once it
replies or its limit passes; nothing it does can change a verdict (CPU, with stand-in
processes; the GPU run is in benchmarks/results/)."""

from __future__ import annotations

import json
import socket
import time
from types import SimpleNamespace
from typing import Any

import pytest

from bench.registry import get_task
from judge import hidden_warmup
from judge.candidate.verdict import Verdict
from judge.hidden_warmup import MAX_WARMING, WARMUP_ENV, HiddenWarmups, worth_warming
from judge.job import Job
from judge.phases import PhaseClock
from judge.worker import Worker

LAYOUTS = [{"args": ["layout"], "tensors": []}]


class StandIn:
    """What the warm-ups use of a candidate process (judge/remote.py `CandidateProcess`)."""

    def __init__(self) -> None:
        self.sock, self.other_end = socket.socketpair()
        self.cache = "/a/lent/folder"
        self.unanswered: int | None = None
        self.deadline = float("inf")
        self.sent: list[dict[str, Any]] = []
        self.closed = False

    def send(self, header: dict[str, Any]) -> None:
        self.sent.append(header)
        self.unanswered = 1

    def reply(self) -> None:
        self.other_end.sendall(json.dumps({"pass": {}}).encode())

    def close(self) -> None:
        self.closed = True
        self.sock.close()
        self.other_end.close()


class Caches:
    def __init__(self) -> None:
        self.hidden: list[tuple[StandIn, str]] = []

    def hide(self, proc: StandIn, source: str) -> None:
        assert not proc.sent, "turned to the hidden side before the hidden cases were sent"
        self.hidden.append((proc, source))


@pytest.fixture
def warmups(monkeypatch: pytest.MonkeyPatch) -> HiddenWarmups:
    monkeypatch.setenv(WARMUP_ENV, "1")  # off by default (judge/hidden_warmup.py says why)
    monkeypatch.delenv("KMC_PRECOMPILE", raising=False)
    monkeypatch.setattr(hidden_warmup, "case_descriptions", lambda task, cases, device, interpreter: LAYOUTS)
    return HiddenWarmups(Caches(), "cuda", interpreter=False)


def test_a_passing_visible_process_compiles_the_hidden_cases_and_is_closed_when_it_replies(
        warmups: HiddenWarmups) -> None:
    proc = StandIn()
    assert warmups.start(proc, get_task("softmax"), "source")
    assert warmups.caches.hidden == [(proc, "source")]
    assert proc.sent == [{"op": "compile", "cases": LAYOUTS}]
    assert warmups.reap() == 1 and not proc.closed  # still compiling
    proc.reply()
    deadline = time.monotonic() + 5
    while not proc.closed:  # the reaper thread closes it, what it compiled kept
        assert time.monotonic() < deadline, "a process that replied was never closed"
        time.sleep(0.02)
    assert warmups.reap() == 0
    warmups.close()


def test_one_past_its_limit_is_closed_and_none_starts_beyond_the_cap_or_twice(warmups: HiddenWarmups) -> None:
    first = StandIn()
    assert warmups.start(first, get_task("softmax"), "first")
    first.deadline = time.monotonic() - 1
    assert warmups.reap() == 0 and first.closed
    assert not warmups.start(StandIn(), get_task("softmax"), "first")  # that source was handed over already
    procs = [StandIn() for _ in range(MAX_WARMING + 1)]
    handed = [warmups.start(p, get_task("softmax"), f"source {i}") for i, p in enumerate(procs)]
    # at the cap the new process stays the caller's; none still compiling is cut short
    assert handed == [True] * MAX_WARMING + [False] and not any(p.closed for p in procs)
    warmups.close()
    assert all(p.closed for p in procs[:MAX_WARMING]) and not procs[-1].closed


def test_nothing_is_taken_where_it_is_off_or_cannot_be_asked(warmups: HiddenWarmups,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    busy = StandIn()
    busy.unanswered = 3  # a request still unanswered: the link holds one message each way
    assert not warmups.start(busy, get_task("softmax"), "source")
    monkeypatch.delenv(WARMUP_ENV)  # the default: off
    assert not warmups.start(StandIn(), get_task("softmax"), "source")
    monkeypatch.setenv(WARMUP_ENV, "1")
    assert not HiddenWarmups(Caches(), "cpu", interpreter=True).start(StandIn(), get_task("softmax"), "source")
    monkeypatch.setattr(hidden_warmup, "case_descriptions", lambda *args: [])
    assert not warmups.start(StandIn(), get_task("softmax"), "source")
    assert not warmups.caches.hidden and not warmups.warming


@pytest.mark.parametrize(("job", "verdict", "warmed"), [
    (Job("softmax", "src", case_set="visible", timing=True), Verdict("correct", ""), True),
    (Job("softmax", "src", case_set="visible"), Verdict("wrong_result", "no"), False),
    (Job("softmax", "src", case_set="hidden"), Verdict("correct", ""), False),
    (Job("softmax", "src", kind="internal_tests", tests="def test_x(): pass"), Verdict("correct", ""), True),
    (Job("softmax", "src", kind="internal_tests", tests="def test_x(): pass"), Verdict("wrong_result", "no"), False),
])
def test_only_a_visible_evaluation_or_own_tests_that_passed_are_worth_warming(job: Job, verdict: Verdict, warmed: bool) -> None:
    assert worth_warming(job, verdict) is warmed


def test_a_failure_handing_over_leaves_the_process_to_the_worker_and_the_verdict_alone(
        capsys: pytest.CaptureFixture[str]) -> None:
    def broken(*args: Any) -> bool:
        raise OSError("disk full")

    worker = SimpleNamespace(warmups=SimpleNamespace(start=broken), clock=PhaseClock())
    job = Job("softmax", "src", case_set="visible")
    assert Worker._warm_hidden(worker, get_task("softmax"), job, StandIn(), Verdict("correct", "")) is False  # type: ignore[arg-type]
    assert "hidden cases not compiled ahead (OSError: disk full)" in capsys.readouterr().err
    handing = SimpleNamespace(warmups=SimpleNamespace(start=lambda *args: True), clock=PhaseClock())
    assert Worker._warm_hidden(handing, get_task("softmax"), job, StandIn(), Verdict("correct", "")) is True  # type: ignore[arg-type]
    assert handing.clock.steps["warmup:started"] == 1.0
