"""The next call sent before the last is judged (judge/remote.py `RemoteRunner`, judge/oracle.py
`judge_cases`): the candidate process runs it while the judge compares the last, yet every
verdict is the one that judging one call at a time gives. One call in flight; a call that could
not be sent fails in its own turn, after the call before it is judged; and a candidate wrong on
a first run that hangs on the refill sent after it is still judged by the wrong result."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from judge.candidate import wire
from judge.remote import CandidateDied, CandidateTimeout, RemoteRunner


class _FakeProcess:
    """A candidate process that answers every call with its slot number as the output; `dies_at`:
    sending that slot's call fails as to a process that has died."""

    def __init__(self, hangs_at: int | None = None, dies_at: int | None = None) -> None:
        self.unanswered: int | None = None
        self.log: list[str] = []
        self.hangs_at, self.dies_at = hangs_at, dies_at

    def send(self, header: dict[str, Any], tensors: list[torch.Tensor] | None = None) -> None:
        assert self.unanswered is None, "a second call sent before the first was answered"
        slot = int(header["slot"])
        if slot == self.dies_at:
            raise CandidateDied("the candidate process ended (signal 9)")
        self.unanswered = slot
        self.log.append(f"send {slot}")

    def receive(self) -> tuple[dict[str, Any], list[torch.Tensor]]:
        slot, self.unanswered = self.unanswered, None
        assert slot is not None
        self.log.append(f"read {slot}")
        if slot == self.hangs_at:
            raise CandidateTimeout()
        spec, tensors = wire.encode_values([torch.full((1,), float(slot)), []], objects=False)
        return {"ok": True, "launched": 1, "values": spec}, tensors


def test_one_call_in_flight_and_its_report_in_turn() -> None:
    proc = _FakeProcess()
    runner = RemoteRunner(proc)  # type: ignore[arg-type]
    runner.submit(0, (torch.zeros(4),), refill=False)
    with pytest.raises(RuntimeError, match="before the last one"):
        runner.submit(1, (torch.zeros(4),), refill=False)
    assert float(runner.result().output[0]) == 0.0
    runner.submit(1, (torch.zeros(4),), refill=True)
    assert float(runner.result().output[0]) == 1.0
    assert proc.log == ["send 0", "read 0", "send 1", "read 1"]


def test_a_call_that_could_not_be_sent_fails_in_its_own_turn() -> None:
    """The process died after answering call 0: sending call 1 fails, but call 0 is judged
    first (its report taken before the failure shows), as one call at a time would."""
    runner = RemoteRunner(_FakeProcess(dies_at=1))  # type: ignore[arg-type]
    runner.submit(0, (torch.zeros(4),), refill=False)
    report = runner.result()
    runner.submit(1, (torch.zeros(4),), refill=False)  # no exception yet
    assert report.ok and float(report.output[0]) == 0.0
    with pytest.raises(CandidateDied):
        runner.result()


def test_a_call_dropped_after_a_verdict_is_read_and_a_lost_process_is_said() -> None:
    proc = _FakeProcess(hangs_at=1)
    runner = RemoteRunner(proc)  # type: ignore[arg-type]
    runner.submit(0, (torch.zeros(4),), refill=False)
    runner.result()
    runner.submit(1, (torch.zeros(4),), refill=False)
    runner.discard()
    assert proc.unanswered is None and "CandidateTimeout" in runner.lost
    runner.discard()  # nothing in flight: nothing to do
    fine = RemoteRunner(_FakeProcess())  # type: ignore[arg-type]
    fine.submit(0, (torch.zeros(4),), refill=False)
    fine.discard()
    assert fine.lost == ""


HANGS_ON_A_REFILL = '''
import time
import weakref
import torch
import triton
import triton.language as tl


@triton.jit
def _sub_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) - tl.load(y_ptr + offsets, mask=mask), mask=mask)


_last = [lambda: None]


def vector_add(x, y):
    if _last[0]() is x:  # the same tensor again: the judge refilled it in place; never returns
        time.sleep(3600)
    _last[0] = weakref.ref(x)
    out = torch.empty_like(x)
    _sub_kernel[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK=256)
    return out
'''


@pytest.mark.slow
def test_a_wrong_first_run_decides_even_when_the_refill_sent_after_it_hangs() -> None:
    """One call at a time, the judge would never have run the refill, which hangs: the verdict is
    the first run's wrong result, not a timeout (the refill, sent ahead, costs the process and
    the job's time limit: the failure's re-runs cannot be made, and its first text stays)."""
    from judge.device import detect_target
    from runners.pool import LocalPool

    with LocalPool(detect_target(force_cpu=True), workers=1, job_timeout=20.0) as pool:
        verdict = pool.evaluate("vector_add", HANGS_ON_A_REFILL, "visible").verdict
        assert verdict.kind == "wrong_result", verdict.one_line()
        expert = pool.evaluate("vector_add", pool_task_source("vector_add"), "visible").verdict
    assert expert.correct, expert.one_line()  # the worker judges on


def pool_task_source(task_id: str) -> str:
    from bench.registry import get_task

    return get_task(task_id).baseline_source()


def test_the_oracle_sends_the_next_call_before_it_judges_the_last(tmp_path: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`judge_cases` submits each call once the one before it has reported, then judges that one:
    every call taken, in order, before the end-of-set check."""
    from bench.registry import get_task
    from judge import oracle
    from tests.helpers import in_process_runner

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    task = get_task("vector_add")
    inner = in_process_runner(task, task.baseline_source(), tmp_path, "kmc_candidate_ahead_1")
    events: list[str] = []

    class Recording:
        def submit(self, slot: int, *args: Any, **kwargs: Any) -> None:
            events.append(f"submit {slot}")
            inner.submit(slot, *args, **kwargs)

        def result(self) -> Any:
            events.append("result")
            return inner.result()

        def collect(self) -> Any:
            events.append("collect")
            return inner.collect()

        def __getattr__(self, name: str) -> Any:
            return getattr(inner, name)

    judge_call = oracle._judge_call

    def judging(*args: Any, **kwargs: Any) -> Any:
        events.append("judge")
        return judge_call(*args, **kwargs)

    monkeypatch.setattr(oracle, "_judge_call", judging)
    cases = task.cases("visible", True)[:2]
    verdict = oracle.judge_cases(task, Recording(), cases, "cpu", True)  # type: ignore[arg-type]
    assert verdict.correct, verdict.one_line()
    assert events == ["submit 0", "result", "submit 0", "judge", "result", "submit 1", "judge", "result", "submit 1",
                      "judge", "result", "judge", "collect"]


@pytest.mark.parametrize("races", [False, True])
def test_the_judge_keeps_no_output_past_its_judging(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                    races: bool) -> None:
    """Each output the judge received is freed once its call is judged (a race check's first
    output once its repeat is): when the end-of-set check runs, none is alive. Keeping them all
    until the set's end held gigabytes per judge worker on an H200's hidden sets."""
    import weakref

    from bench.registry import get_task
    from judge import oracle
    from tests.helpers import in_process_runner

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    task = get_task("vector_add")
    inner = in_process_runner(task, task.baseline_source(), tmp_path, f"kmc_candidate_kept_{int(races)}")
    outputs: list[weakref.ref] = []
    alive_at_collect: list[int] = []

    class Watching:
        def result(self) -> Any:
            report = inner.result()
            if isinstance(report.output, torch.Tensor):
                outputs.append(weakref.ref(report.output))
            return report

        def collect(self) -> Any:
            alive_at_collect.append(sum(ref() is not None for ref in outputs))
            return inner.collect()

        def __getattr__(self, name: str) -> Any:
            return getattr(inner, name)

    cases = task.cases("visible", True)[:3]
    verdict = oracle.judge_cases(task, Watching(), cases, "cpu", True,  # type: ignore[arg-type]
                                 repeat_for_races=races)
    assert verdict.correct, verdict.one_line()
    assert len(outputs) == len(cases) * (3 if races else 2)
    assert alive_at_collect == [0]
