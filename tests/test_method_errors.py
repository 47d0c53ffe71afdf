"""A method that raises unexpectedly ends its own unit, never the run (robustness): the unit is
an errored unit (`units.error` says what the method raised, `errored_units` in summary.json,
exit status 3 from the command line), every other unit runs to its end, and what the unit had
submitted before it raised is still judged. The run's own errors (a replay that misses or
diverges, no worker, a broken store) still stop the run when they surface inside a method."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import runners.compare
import tests.raising_plugin  # noqa: F401 - registers raises_on_a_task
from judge.device import Target
from modelio.replay import ReplayMiss
from modelio.simulated import SimulatedModel
from record.store import Store
from runners.config import CompareConfig
from tests.test_methods_context import ScriptedExecutor

CPU = Target("cpu", True, "Triton CPU interpreter", 0)


def _run(tmp_path: Path, options: dict[str, Any]) -> runners.compare.CompareRun:
    config = CompareConfig(budget=2, methods=["direct", "raises_on_a_task"], tasks=["vector_add", "softmax"],
                           device="cpu", workers=1, method_options={"raises_on_a_task": options})
    config.validate()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    return runners.compare.CompareRun(config, run_dir, SimulatedModel(), CPU, executor=ScriptedExecutor())


def test_a_method_that_raises_ends_only_its_own_unit(tmp_path: Path) -> None:
    run = _run(tmp_path, {})
    try:
        run.run()
    finally:
        run.close()
    store = Store.for_reading(tmp_path / "run" / "store.sqlite")
    try:
        units = {(u["method"], u["task"]): u for u in store.units()}
        assert set(units) == {(m, t) for m in ("direct", "raises_on_a_task") for t in ("vector_add", "softmax")}
        assert store.errored_units() == [("raises_on_a_task", "softmax", 0)]
        assert units[("raises_on_a_task", "softmax")]["error"] == \
            "the method raised ZeroDivisionError: division by zero"
        assert units[("raises_on_a_task", "softmax")]["calls_used"] == 1  # it raised after its first call
        assert units[("raises_on_a_task", "vector_add")]["calls_used"] == 2  # its other unit ran to the budget
        assert all(units[("direct", t)]["error"] is None for t in ("vector_add", "softmax"))
        final = store.final_submission("raises_on_a_task", "softmax", 0)
        assert final is not None  # submitted before it raised, and judged on the hidden cases
        hidden = [e for e in store.evaluations() if e["source_hash"] == final and e["case_set"] == "hidden"]
        assert len(hidden) == 1
    finally:
        store.close()


def test_the_runs_own_errors_still_stop_the_run_when_a_method_lets_them_through(tmp_path: Path) -> None:
    run = _run(tmp_path, {"raise_kind": "replay_miss"})
    try:
        with pytest.raises(ReplayMiss, match="no answer for this call"):
            run.run()
    finally:
        run.close()
    store = Store.for_reading(tmp_path / "run" / "store.sqlite")
    try:
        assert ("raises_on_a_task", "softmax") not in {(u["method"], u["task"]) for u in store.units()}
    finally:
        store.close()


@pytest.mark.slow
def test_the_command_line_finishes_the_run_warns_and_exits_3(tmp_path: Path) -> None:
    from tests.helpers import cli_env, run_cli

    proc = run_cli("compare", "--budget", "2", "--tasks", "vector_add,softmax", "--methods", "direct,raises_on_a_task",
                   "--workers", "1", "--quiet", "--out", str(tmp_path),
                   env=cli_env(KMC_METHOD_MODULES="tests.raising_plugin"))
    assert proc.returncode == 3, proc.stderr[-3000:]
    warning = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "1 unit(s) ended on an error" in warning[0] and "raises_on_a_task/softmax/0" in warning[0]
    assert "Traceback" not in proc.stderr
    summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
    assert summary["methods"]["raises_on_a_task"]["errored_units"] == 1
    assert summary["methods"]["direct"]["errored_units"] == 0
    log = next(tmp_path.glob("*/run.log")).read_text()
    assert "ZeroDivisionError" in log and "print(1 / 0)" in log  # the method's traceback, for its author
