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

    def receive(self) -> tuple[dict[str, Any], list[Any]]:
        self.unanswered = None
        return {"pass": {"launches": 3, "kernels": 2, "stopped": ""}}, []

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


def test_a_finished_warmup_leaves_a_step_line_with_what_it_compiled(warmups: HiddenWarmups, tmp_path: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """For telling on a GPU run whether the warm-ups compiled what the hidden jobs then found
    (benchmarks/bench_compare_gpu.py --steps, kind `warmup`): the counts its process replied and
    the entries counted in its folder."""
    from judge.phases import STEPS_ENV

    steps, cache = tmp_path / "steps", tmp_path / "cache"
    steps.mkdir()
    cache.mkdir()
    monkeypatch.setenv(STEPS_ENV, str(steps))
    proc = StandIn()
    proc.cache = str(cache)
    (cache / "OLDHASH").mkdir()  # compiled for the visible cases, before the hand-over
    assert warmups.start(proc, get_task("softmax"), "source")
    (cache / "HIDDENHASH").mkdir()  # what the hidden cases needed
    proc.reply()
    deadline = time.monotonic() + 5
    while not proc.closed:
        assert time.monotonic() < deadline, "a process that replied was never closed"
        time.sleep(0.02)
    warmups.close()
    (line,) = [json.loads(text) for path in steps.iterdir() for text in path.read_text().splitlines()]
    assert line["kind"] == "warmup" and line["wall"] >= 0
    assert line["compile_pass"] == {"launches": 3, "kernels": 2, "stopped": "", "written": 1}


@pytest.mark.gpu
@pytest.mark.slow
def test_on_a_gpu_a_warmed_sources_hidden_job_finds_its_kernels_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up's whole point, end to end in a judge worker on a GPU: after a passing visible
    job's process compiled the hidden cases in the background, the source's hidden job compiles
    nothing (its pass writes no cache entry), and its verdict is the same."""
    import os
    from pathlib import Path

    import torch

    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs a GPU and Triton's compiler")
    monkeypatch.setenv(WARMUP_ENV, "1")
    monkeypatch.chdir(Path.cwd())  # Worker.close changes directory to /
    task = get_task("softmax")
    source = task.baseline_source().replace("def softmax(", "def softmax(  ")  # a source of this test's own
    worker = Worker()
    try:
        visible = worker.handle({"id": 1, "task": "softmax", "source": source, "case_set": "visible", "timeout": 300})
        assert visible["evaluation"]["verdict"]["kind"] == "correct", visible
        assert worker.clock.steps.get("warmup:started") == 1.0, "the passing visible job's process was not handed over"
        deadline = time.monotonic() + 60
        while worker.warmups.reap():
            assert time.monotonic() < deadline, "the warm-up did not finish in a minute"
            time.sleep(0.2)
        hidden = worker.handle({"id": 2, "task": "softmax", "source": source, "case_set": "hidden", "timeout": 300})
        assert hidden["evaluation"]["verdict"]["kind"] == "correct", hidden
        assert worker.compile_pass.get("kernels", 0) > 0, worker.compile_pass
        assert worker.compile_pass.get("written") == 0, worker.compile_pass  # every kernel found compiled
    finally:
        worker.close()
