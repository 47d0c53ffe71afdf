"""Calls go to the candidate process in batches (judge/remote.py `RemoteRunner`, judge/oracle.py
`judge_cases`): it runs them while the judge compares the ones already answered, and every
verdict is the one that judging one call at a time gives. A batch goes out in one request and
its replies come one per call, in order; a request that could not be sent fails in its own turn;
a candidate process that stops early gets the rest again; a candidate wrong on a first run that
hangs on the refill after it is still judged by the wrong result."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from judge.candidate import structure, wire
from judge.remote import CandidateDied, CandidateTimeout, RemoteRunner
from judge.runner import Call


class _FakeProcess:
    """A candidate process that answers every call of a batch with its slot number as the
    output, one reply per call. `dies_at`: a request holding that slot cannot be sent (the
    process died); `hangs_at`: reading that slot's reply times out; `stops_after`: the batch
    ends after that slot (an output too large to send inline); `fails_at`: that slot's call
    raised; `shuffled`: replies name the wrong call."""

    def __init__(self, hangs_at: int | None = None, dies_at: int | None = None, stops_after: int | None = None,
                 fails_at: int | None = None, shuffled: bool = False) -> None:
        self.pending: list[int] = []
        self.log: list[str] = []
        self.hangs_at, self.dies_at, self.stops_after = hangs_at, dies_at, stops_after
        self.fails_at, self.shuffled = fails_at, shuffled

    def send(self, header: dict[str, Any], tensors: list[torch.Tensor] | None = None) -> None:
        assert not self.pending, "a request sent before the last one was answered"
        assert header["op"] == "calls"
        slots = [int(c["slot"]) for c in header["calls"]]
        if self.dies_at in slots:
            raise CandidateDied("the candidate process ended (signal 9)")
        self.pending = slots
        self.index = 0
        self.log.append("send " + " ".join(map(str, slots)))

    def receive(self) -> tuple[dict[str, Any], list[torch.Tensor]]:
        slot = self.pending.pop(0)
        index, self.index = self.index, self.index + 1
        self.log.append(f"read {slot}")
        if slot == self.hangs_at:
            raise CandidateTimeout()
        if slot == self.fails_at:
            self.pending = []
            return {"ok": False, "kind": "runtime_error", "message": "boom", "index": index}, []
        if slot == self.stops_after:
            self.pending = []
        spec, tensors = structure.encode_values([torch.full((1,), float(slot)), []], objects=False)
        more = bool(self.pending)
        return {"ok": True, "launched": 1, "values": spec, "index": index + self.shuffled, "more": more}, tensors


def _calls(*slots: int) -> list[Call]:
    return [Call(slot, (torch.zeros(4),)) for slot in slots]


def test_a_batch_goes_in_one_request_and_its_reports_come_in_turn() -> None:
    proc = _FakeProcess()
    runner = RemoteRunner(proc)  # type: ignore[arg-type]
    runner.submit(_calls(0, 1, 2))
    assert float(runner.result().output[0]) == 0.0
    with pytest.raises(RuntimeError, match="before the last ones"):
        runner.submit(_calls(3))
    assert [float(runner.result().output[0]) for _ in range(2)] == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="no call submitted"):
        runner.result()
    runner.submit(_calls(3))
    assert float(runner.result().output[0]) == 3.0
    assert proc.log == ["send 0 1 2", "read 0", "read 1", "read 2", "send 3", "read 3"]


def test_a_request_that_could_not_be_sent_fails_in_its_own_turn() -> None:
    """The process died after answering call 0: sending call 1 fails, but call 0 is judged
    first (its report taken before the failure shows), as one call at a time would."""
    runner = RemoteRunner(_FakeProcess(dies_at=1))  # type: ignore[arg-type]
    runner.submit(_calls(0))
    report = runner.result()
    runner.submit(_calls(1))  # no exception yet
    assert report.ok and float(report.output[0]) == 0.0
    with pytest.raises(CandidateDied):
        runner.result()


def test_calls_dropped_after_a_verdict_are_read_and_a_lost_process_is_said() -> None:
    proc = _FakeProcess(hangs_at=1)
    runner = RemoteRunner(proc)  # type: ignore[arg-type]
    runner.submit(_calls(0, 1, 2))
    runner.result()
    runner.discard()
    assert "CandidateTimeout" in runner.lost
    runner.discard()  # nothing in flight: nothing to do
    fine = _FakeProcess()
    drained = RemoteRunner(fine)  # type: ignore[arg-type]
    drained.submit(_calls(0, 1, 2))
    drained.result()
    drained.discard()
    assert drained.lost == "" and fine.log[-2:] == ["read 1", "read 2"] and not fine.pending
    endless = _FakeProcess()
    flooded = RemoteRunner(endless)  # type: ignore[arg-type]
    flooded.submit(_calls(0, 1))
    flooded.result()
    endless.receive = lambda: ({"ok": True, "index": 1, "more": True}, [])  # type: ignore[method-assign]
    flooded.discard()  # a candidate that never stops answering is read no further than its calls
    assert "more replies than calls" in flooded.lost


def test_a_batch_the_candidate_stopped_early_is_sent_again_from_where_it_stopped() -> None:
    proc = _FakeProcess(stops_after=1)
    runner = RemoteRunner(proc)  # type: ignore[arg-type]
    runner.submit(_calls(0, 1, 2, 3))
    assert [float(runner.result().output[0]) for _ in range(4)] == [0.0, 1.0, 2.0, 3.0]
    assert proc.log == ["send 0 1 2 3", "read 0", "read 1", "send 2 3", "read 2", "read 3"]


def test_nothing_runs_after_a_failed_call_and_replies_out_of_turn_are_refused() -> None:
    proc = _FakeProcess(fails_at=1)
    runner = RemoteRunner(proc)  # type: ignore[arg-type]
    runner.submit(_calls(0, 1, 2))
    assert runner.result().ok and not runner.result().ok
    runner.discard()  # the process stopped at the failure: nothing to read
    assert proc.log == ["send 0 1 2", "read 0", "read 1"] and runner.lost == ""
    runner.submit(_calls(5))
    assert runner.result().ok
    shuffled = RemoteRunner(_FakeProcess(shuffled=True))  # type: ignore[arg-type]
    shuffled.submit(_calls(0, 1))
    with pytest.raises(wire.WireError, match="where call 0 was due"):
        shuffled.result()
    forged = _FakeProcess()
    forged_runner = RemoteRunner(forged)  # type: ignore[arg-type]
    forged_runner.submit(_calls(0, 1))
    forged.receive = lambda: ({"ok": False, "kind": "runtime_error", "index": 0, "more": True}, [])  # type: ignore[method-assign]
    with pytest.raises(wire.WireError, match="after a failed call"):
        forged_runner.result()


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


def test_the_oracle_sends_a_holds_calls_in_one_batch_and_judges_them_in_turn(tmp_path: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`judge_cases` submits a case set's first case alone, then the rest of the hold together,
    sent before the first case's last call is judged; every call taken and judged in order
    before the end-of-set check."""
    from bench.registry import get_task
    from judge import oracle
    from tests.helpers import in_process_runner

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    task = get_task("vector_add")
    inner = in_process_runner(task, task.baseline_source(), tmp_path, "kmc_candidate_ahead_1")
    events: list[str] = []

    class Recording:
        def submit(self, calls: list[Any]) -> None:
            events.append("submit " + " ".join(str(c.slot) for c in calls))
            inner.submit(calls)

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
    assert events == ["submit 0 0", "result", "judge", "result", "submit 1 1", "judge", "result", "judge", "result",
                      "judge", "collect"]  # the first case alone, the next request sent before its last call is judged


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


def test_a_holds_calls_are_cut_into_requests_by_the_case_set_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """`batches`: a call joins the request before it while that request's inputs stay within
    the input limit and the call before it answers with bytes that may go inline; a large
    answer ends its request; a case set's first case goes alone; `KMC_CALL_BATCH=0` sends one
    call per request."""
    from dataclasses import replace

    from judge.oracle import BATCH_ENV, _Planned, batches

    def planned(input_elems: int, answer_elems: int) -> _Planned:
        args = (torch.zeros(input_elems),)
        return _Planned(0, None, "first", None, (torch.zeros(answer_elems), None), True,  # type: ignore[arg-type]
                        Call(0, args))

    small, big_answer, big_input = planned(4, 4), planned(4, 1000), planned(300, 4)
    cut = batches([small, small, big_answer, small, big_input, small], inline_limit=400, input_limit=1200)
    assert [len(b) for b in cut] == [3, 1, 1, 1]  # the big answer ends a request; 1200 input bytes fill one
    assert cut[0][2] is big_answer and cut[2][0] is big_input
    assert [len(b) for b in batches([small, big_input, small], 400, 1300)] == [3]
    two_cases = [small, small, replace(small, slot=1), replace(small, slot=1)]
    assert [len(b) for b in batches(two_cases, 400, 1200, first_case_alone=True)] == [2, 2]
    assert [len(b) for b in batches(two_cases, 400, 1200)] == [4]
    monkeypatch.setenv(BATCH_ENV, "0")
    assert [len(b) for b in batches([small, small, small], 400, 1200)] == [1, 1, 1]


BOTH_WAYS = ("wrong_tail_mask.py", "off_by_one.py", "modifies_input.py", "caches_data_ptr.py", "caches_by_shape.py",
             "stale_empty_like.py", "raises.py", "segfault_ctypes.py", "forges_reply.py", "softmax_tail_mask.py",
             "reused_output_buffer.py", "scribbles_shared_memory.py")


@pytest.mark.slow
def test_batched_calls_give_the_verdicts_of_one_call_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sample of the hostile corpus (wrong on a first run, only after a refill, by a memo, a
    reused output buffer, a crash, a forged reply, a scribble on the shared memory) and two
    experts, judged with a hold's calls batched and with one call per request
    (`KMC_CALL_BATCH=0`): every verdict's kind, failing case and message alike, and each the
    one the corpus expects."""
    from judge.device import detect_target
    from runners.pool import LocalPool
    from tests.test_hostile import CORPUS, HOSTILE

    entries = [h for h in CORPUS if h.file in BOTH_WAYS]
    assert len(entries) == len(BOTH_WAYS)
    jobs = [(h.task, (HOSTILE / h.file).read_text(), h.case_set) for h in entries]
    jobs += [(task, pool_task_source(task), "hidden") for task in ("vector_add", "softmax")]
    seen: dict[str, list[str]] = {}
    for mode in ("0", "1"):
        monkeypatch.setenv("KMC_CALL_BATCH", mode)
        with LocalPool(detect_target(force_cpu=True), workers=1, job_timeout=120.0) as pool:
            seen[mode] = [pool.evaluate(task, source, case_set).verdict.one_line() for task, source, case_set in jobs]
    assert seen["1"] == seen["0"]
    kinds = [line.split(" ", 1)[0].rstrip(":") for line in seen["1"]]
    assert kinds == [h.kind for h in entries] + ["correct", "correct"], seen["1"]
