"""A final submission's race check (judge/oracle.py: each case a third time on its first inputs,
compared with the first run). The interpreter, in this process, on vector_add's visible cases: seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.registry import get_task
from judge import oracle
from tests.helpers import in_process_runner

# Each call's result scaled inside the kernel by 1 + SHIFT or 1 - SHIFT: within vector_add's
# float32 tolerance of the reference (atol = rtol = 1e-4) either way, beyond it of each other.
RACY = '''
import torch
import triton
import triton.language as tl

CALLS = [0]
SHIFTS = {SHIFTS}


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n_elements, scale, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, (x + y) * scale, mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    shift = SHIFTS[CALLS[0] % 3]  # the judge runs each case first, after a refill, then again
    CALLS[0] += 1
    _add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, 1.0 + shift, BLOCK_SIZE=1024)
    return out
'''
SHIFT = 0.9e-4


def _judge(tmp_path: Path, shifts: tuple[float, float, float], name: str, races: bool = True,
           runner_wrap: Any = None) -> Any:
    task = get_task("vector_add")
    source = RACY.replace("{SHIFTS}", repr(shifts))
    runner = in_process_runner(task, source, tmp_path, name)
    if runner_wrap is not None:
        runner = runner_wrap(runner)
    return oracle.judge_cases(task, runner, task.cases("visible", True), "cpu", True, repeat_for_races=races)


@pytest.fixture(autouse=True)
def _interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def test_a_repeat_that_differs_beyond_tolerance_from_the_first_run_is_a_race(tmp_path: Path) -> None:
    v = _judge(tmp_path, (SHIFT, SHIFT, -SHIFT), "kmc_racy_1")
    assert v.kind == "wrong_result" and "a race" in v.message, v.one_line()
    assert v.failing_case == "visible-n1024"


def test_runs_that_agree_pass_and_without_the_check_the_same_kernel_passes(tmp_path: Path) -> None:
    steady = _judge(tmp_path, (SHIFT, SHIFT, SHIFT), "kmc_racy_2")
    assert steady.kind == "correct", steady.one_line()
    unchecked = _judge(tmp_path, (SHIFT, SHIFT, -SHIFT), "kmc_racy_3", races=False)
    assert unchecked.kind == "correct", unchecked.one_line()  # a visible judging makes no third run
