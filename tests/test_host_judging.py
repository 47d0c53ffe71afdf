"""The host-judging experiment (judge/oracle.py `HOST_JUDGING_ENV`, off by default): a small GPU
case judged in host memory. On this CPU-only machine the host *is* the judge's device, so what
is checked here is what does not need a GPU: the switch, the storage-keeping copies, the
runner's reply device, and that the judging flow with the switch on (forced here) gives the
same verdicts on correct, wrong and racy kernels. The device split itself is for an H200 run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from bench.registry import get_task
from judge import oracle
from tests.helpers import in_process_runner
from tests.test_judge_races import RACY, SHIFT


@pytest.fixture(autouse=True)
def _interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")


@pytest.mark.parametrize(("raw", "expected"), [(None, 0), ("0", 0), ("", 0), ("1", oracle.HOST_CASE_BYTES),
                                               ("65536", 65536), ("-5", 0), ("lots", 0)])
def test_the_switch_is_off_unless_asked(monkeypatch: pytest.MonkeyPatch, raw: str | None, expected: int) -> None:
    if raw is None:
        monkeypatch.delenv(oracle.HOST_JUDGING_ENV, raising=False)
    else:
        monkeypatch.setenv(oracle.HOST_JUDGING_ENV, raw)
    assert oracle.host_judging_bytes() == expected


def test_a_storage_copy_keeps_a_strided_views_layout_in_new_memory() -> None:
    base = torch.arange(60.0).view(6, 10)
    view = base[1:, 2::3]  # a view with gaps: `.to` would make it contiguous
    copied, scalar, nested = oracle.storage_copy((view, 2.5, [view]), "cpu")
    assert copied.stride() == view.stride() and copied.storage_offset() == view.storage_offset()
    assert torch.equal(copied, view) and scalar == 2.5 and isinstance(nested, list)
    assert copied.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    assert copied.untyped_storage().nbytes() == base.untyped_storage().nbytes()  # the whole storage travels


def test_the_remote_runner_reads_a_reply_onto_the_device_it_was_asked_for() -> None:
    from judge.remote import RemoteRunner

    class Proc:
        def __init__(self) -> None:
            self.devices: list[str | None] = []

        def send(self, header: dict[str, Any], tensors: Any = None) -> None:
            pass

        def receive(self, device: str | None = None) -> tuple[dict[str, Any], list[torch.Tensor]]:
            self.devices.append(device)
            return {"ok": False, "kind": "runtime_error", "message": "stop"}, []

    proc = Proc()
    runner = RemoteRunner(proc)  # type: ignore[arg-type]
    assert runner.replies_on_host
    runner.submit(0, (torch.ones(2),), refill=False, reply_device="cpu")
    runner.result()
    runner.submit(1, (torch.ones(2),), refill=False)
    runner.result()
    assert proc.devices == ["cpu", None]
    assert not getattr(oracle.LocalRunner, "replies_on_host", False)  # it would run the candidate on host tensors


class _HostRunner:
    """A LocalRunner that says it can read replies onto the host, recording what it was asked."""

    replies_on_host = True

    def __init__(self, runner: Any) -> None:
        self.runner, self.asked = runner, []

    def submit(self, slot: int, args: tuple, refill: bool, seed: int | None = None,
               written: tuple[int, ...] = (), reply_device: str | None = None) -> None:
        self.asked.append(reply_device)
        self.runner.submit(slot, args, refill, seed, written)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runner, name)


def _judge(tmp_path: Path, shifts: tuple[float, float, float], name: str) -> tuple[Any, _HostRunner]:
    task = get_task("vector_add")
    tmp_path.mkdir()
    runner = _HostRunner(in_process_runner(task, RACY.replace("{SHIFTS}", repr(shifts)), tmp_path, name))
    verdict = oracle.judge_cases(task, runner, task.cases("visible", True), "cpu", True,  # type: ignore[arg-type]
                                 repeat_for_races=True)
    return verdict, runner


@pytest.mark.parametrize(("shifts", "kind"), [((SHIFT, SHIFT, SHIFT), "correct"), ((0.0, 0.0, 0.5), "wrong_result"),
                                              ((SHIFT, SHIFT, -SHIFT), "wrong_result")])
def test_forced_on_the_flow_gives_the_verdicts_it_gives_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             shifts: tuple[float, float, float], kind: str) -> None:
    monkeypatch.setenv(oracle.HOST_JUDGING_ENV, "1")
    off, off_runner = _judge(tmp_path / "off", shifts, f"kmc_host_off_{kind}_{shifts[2]}")
    monkeypatch.setattr(oracle, "_host_apart", lambda device: True)  # as on a GPU: the host is elsewhere
    monkeypatch.setattr(oracle, "_CACHE", oracle._InputCache(1 << 30))  # a worker's cache, for this test only
    on, on_runner = _judge(tmp_path / "on", shifts, f"kmc_host_on_{kind}_{shifts[2]}")
    host_entries = [k for k in oracle._CACHE.entries if k[-1] == "host"]
    assert (on.kind, on.message, on.failing_case) == (off.kind, off.message, off.failing_case) and on.kind == kind
    assert set(off_runner.asked) == {None}
    # every call of the forced run was judged on the host copies (here the host is the device)
    assert on_runner.asked and set(on_runner.asked) == {None}
    assert {k[-3:-1] for k in host_entries} >= {(oracle.FIRST, "inputs"), (oracle.FIRST, "answer"),
                                                (oracle.REFILL, "inputs"), (oracle.REFILL, "answer")}
