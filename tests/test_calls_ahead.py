"""Calls sent ahead (judge/remote.py `RemoteRunner`, judge/oracle.py `judge_cases`): the candidate
process runs the next call while the judge compares the last, yet every verdict is the one that
judging one call at a time gives. Never two unanswered calls in one arena of the link; a large
call waits for the first arena; a failure read early (to free an arena) is raised in its own
call's turn, after what the calls before it earned; and a candidate that fails one case and
hangs on the next, sent ahead, is still judged by the failure."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from judge import remote, wire
from judge.remote import CandidateTimeout, RemoteRunner


class _FakeProcess:
    """A candidate process that answers every call with its slot number as the output."""

    def __init__(self, fail_on: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.unanswered: list[tuple[int, int]] = []
        self.log: list[tuple[str, int, int]] = []
        self.fail_on = fail_on

    def send(self, header: dict[str, Any], tensors: list[torch.Tensor] | None = None, arena: int = 0) -> None:
        assert all(a != arena for _slot, a in self.unanswered), "two unanswered calls in one arena"
        self.unanswered.append((int(header["slot"]), arena))
        self.log.append(("send", int(header["slot"]), arena))

    def receive(self) -> tuple[dict[str, Any], list[torch.Tensor]]:
        slot, arena = self.unanswered.pop(0)
        self.log.append(("read", slot, arena))
        if slot in self.fail_on:
            raise CandidateTimeout()
        spec, tensors = wire.encode_values([torch.full((1,), float(slot)), []], objects=False)
        return {"ok": True, "launched": 1, "values": spec}, tensors


def _outputs(runner: RemoteRunner, n: int) -> list[float]:
    return [float(runner.result().output[0]) for _ in range(n)]


def test_small_calls_alternate_arenas_and_come_back_in_order() -> None:
    proc = _FakeProcess()
    runner = RemoteRunner(proc)  # type: ignore[arg-type]
    x = (torch.zeros(4),)
    runner.submit(0, x, refill=False)
    runner.submit(1, x, refill=True)
    assert _outputs(runner, 1) == [0.0]
    runner.submit(2, x, refill=False)
    assert _outputs(runner, 2) == [1.0, 2.0]
    assert [(what, arena) for what, _slot, arena in proc.log if what == "send"] == [("send", 0), ("send", 1),
                                                                                    ("send", 0)]


def test_a_large_call_waits_for_the_first_arena_and_its_reply_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "SEND_AHEAD_BYTES", 64)
    proc = _FakeProcess()
    runner = RemoteRunner(proc)  # type: ignore[arg-type]
    runner.submit(0, (torch.zeros(4),), refill=False)  # 16 bytes: arena 0
    runner.submit(1, (torch.zeros(4),), refill=False)  # arena 1
    runner.submit(2, (torch.zeros(1000),), refill=False)  # large: arena 0, once call 0 is answered
    assert proc.log[:4] == [("send", 0, 0), ("send", 1, 1), ("read", 0, 0), ("send", 2, 0)]
    assert _outputs(runner, 3) == [0.0, 1.0, 2.0]


def test_a_failure_read_early_is_raised_in_its_own_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "SEND_AHEAD_BYTES", 64)
    proc = _FakeProcess(fail_on={1})
    runner = RemoteRunner(proc)  # type: ignore[arg-type]
    runner.submit(0, (torch.zeros(4),), refill=False)
    runner.submit(1, (torch.zeros(4),), refill=False)
    runner.submit(2, (torch.zeros(1000),), refill=False)  # reads call 0, whose turn is first
    assert _outputs(runner, 1) == [0.0]  # call 0 earned its report before call 1's failure shows
    with pytest.raises(CandidateTimeout):
        runner.result()


def test_calls_dropped_after_a_verdict_are_read_and_a_lost_process_is_said() -> None:
    proc = _FakeProcess(fail_on={1})
    runner = RemoteRunner(proc)  # type: ignore[arg-type]
    runner.submit(0, (torch.zeros(4),), refill=False)
    runner.submit(1, (torch.zeros(4),), refill=False)
    assert _outputs(runner, 1) == [0.0]
    runner.discard()
    assert proc.unanswered == [] and "CandidateTimeout" in runner.lost


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
    """`judge_cases` keeps `AHEAD` calls unjudged: a call is submitted before the one before it
    is taken, and every call is taken, in order, before the end-of-set check."""
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

    cases = task.cases("visible", True)[:2]
    verdict = oracle.judge_cases(task, Recording(), cases, "cpu", True)  # type: ignore[arg-type]
    assert verdict.correct, verdict.one_line()
    assert events == ["submit 0", "submit 0", "result", "submit 1", "result", "submit 1", "result", "result",
                      "collect"]
