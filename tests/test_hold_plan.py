"""judge/oracle.py `HOLD_PLAN_BYTES`: a hold's cases are planned (inputs drawn, answers computed)
only up to a byte bound before their calls run and are judged, so the judge never holds eight
large cases' inputs at once. The verdict must not move with the bound: here the bound is forced
to one byte (every case planned, run and judged alone) against the default, on the expert and on
kernels wrong at the first case and only at a later one, on the CPU interpreter."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from bench.registry import get_task
from judge import oracle
from tests.helpers import in_process_runner

_names = itertools.count()
EXPERT = get_task("vector_add").baseline_source()
SOURCES = {
    "expert": EXPERT,
    "wrong everywhere": EXPERT.replace("x + y, mask=mask", "x - y, mask=mask"),
    # right on small inputs, wrong past the first block: a failure on a later case
    "wrong past 4096": EXPERT.replace("x + y, mask=mask", "tl.where(offsets < 4096, x + y, x), mask=mask"),
}


def _judged(source: str, folder: Path, monkeypatch: pytest.MonkeyPatch, bound: int) -> tuple[dict[str, Any], int]:
    task = get_task("vector_add")
    runs: list[int] = []
    real = oracle._Judging.run

    def counted(self: Any, planned: list[Any]) -> Any:
        runs.append(len(planned))
        return real(self, planned)

    monkeypatch.setattr(oracle._Judging, "run", counted)
    monkeypatch.setattr(oracle, "HOLD_PLAN_BYTES", bound)
    folder.mkdir(parents=True, exist_ok=True)
    runner = in_process_runner(task, source, folder, f"kmc_hold_plan_{next(_names)}")
    verdict = oracle.judge_cases(task, runner, task.cases("hidden", True), "cpu", True)
    return verdict.to_json(), sum(1 for n in runs if n)


@pytest.mark.interpreter
@pytest.mark.parametrize("name", list(SOURCES))
def test_the_verdict_is_the_same_whatever_a_hold_plans_at_once(name: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    default, default_runs = _judged(SOURCES[name], tmp_path / "default", monkeypatch, oracle.HOLD_PLAN_BYTES)
    alone, alone_runs = _judged(SOURCES[name], tmp_path / "alone", monkeypatch, 1)
    assert alone == default
    assert (default["kind"] == "correct") == (name == "expert")
    if name != "wrong everywhere":  # judged past the first hold: one run per case with the bound at a byte
        assert alone_runs > default_runs and alone_runs >= oracle.CASES_PER_HOLD
