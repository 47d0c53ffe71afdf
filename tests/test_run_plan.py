"""A run's setup is settled once (runners/plan.py): `plan_run` resolves the mode (new, resume,
replay, rejudge, dry run), validates the configuration, detects the device once and checks
every option before anything is written; every refusal is one ConfigError line and leaves no
run folder behind; the CLI and `run_compare` both go through it.

Runs here use the simulated model on the CPU interpreter with a scripted executor standing in
for the judge's workers (tests/test_methods_context.py ScriptedExecutor), so whole runs take
about a second and start no process."""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import judge.device
import runners.compare
from modelio.replay import ReplayClient
from record.run_folder import RunFolder
from runners.compare import RunResult, estimate_compare, recorded_options, run_compare
from runners.config import CompareConfig, ConfigError, EndpointConfig, compose_config
from runners.plan import CompareOptions, RunMode, plan_run
from tests.test_cli_usability import invoke
from tests.test_methods_context import ScriptedExecutor


def _config(**overrides: Any) -> CompareConfig:
    base: dict[str, Any] = {"budget": 2, "methods": ["direct"], "tasks": ["vector_add"], "device": "cpu",
                            "workers": 1, "task_sources": [], "method_modules": []}
    return CompareConfig(**{**base, **overrides})


class _Executor(ScriptedExecutor):
    def layout(self) -> dict[str, Any]:
        return {"kind": "scripted"}


def _scripted(*_args: Any, **_kwargs: Any) -> _Executor:
    return _Executor()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunResult]:
    """A finished run of one unit, judged by the scripted executor."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runners.compare, "run_executor", _scripted)
        yield run_compare(_config(), CompareOptions(out=tmp_path_factory.mktemp("recorded")))


@pytest.fixture()
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runners.compare, "run_executor", _scripted)


def _unfinished(run_dir: Path, to: Path) -> Path:
    """A copy of `run_dir` as a kill before its units were recorded leaves it."""
    shutil.copytree(run_dir, to)
    for leftover in ("store.sqlite-wal", "store.sqlite-shm", "summary.json"):
        (to / leftover).unlink(missing_ok=True)
    # Closed here, not when collected: sqlite3's `with` commits but leaves the connection open, and its
    # close (a checkpoint that folds the WAL into the store) then landed inside whichever step ran next.
    with contextlib.closing(sqlite3.connect(to / "store.sqlite")) as db, db:
        db.execute("DELETE FROM units")
    return to


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its content: what 'nothing written' means (SQLite's shared-memory
    index, which readers update, aside)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.endswith("-shm")}


def _replay_config(run_dir: Path) -> CompareConfig:
    return compose_config({}, None, recorded_options(run_dir))


# ---------------------------------------------------------------------------- the modes
def test_a_new_run_is_planned_with_its_device_tasks_methods_and_client_and_nothing_made(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    given = _config(budget=3)
    plan = plan_run(given, CompareOptions(out=out))
    assert plan.mode is RunMode.NEW and not plan.resumed and not plan.exact_replay
    assert plan.run_dir is None and plan.out == out and plan.replay_of is None and plan.finished is None
    assert plan.config.budget == 3 and plan.config is not given  # the plan's own validated copy
    assert plan.target == plan.machine and plan.target.interpreter
    assert [t.id for t in plan.tasks] == ["vector_add"] and set(plan.method_options) == {"direct"}
    assert plan.client is not None and plan.client.simulated and plan.recorded_evaluations is None
    assert plan.oneshot is not None
    with pytest.raises(AttributeError):
        plan.mode = RunMode.RESUME  # type: ignore[misc]  # frozen
    assert not out.exists()


def test_a_dry_run_is_planned_without_client_sandbox_or_endpoint(tmp_path: Path) -> None:
    config = _config(endpoint=EndpointConfig(base_url="http://127.0.0.1:9/v1", model="gpt-4o-mini"))
    plan = plan_run(config, CompareOptions(out=tmp_path / "runs"), dry_run=True)
    assert plan.mode is RunMode.DRY_RUN and plan.client is None and [t.id for t in plan.tasks] == ["vector_add"]
    assert estimate_compare(config).calls == 2  # the unreachable endpoint is never asked
    with pytest.raises(ValueError, match="never run"):
        runners.compare.run_plan(plan)
    assert not (tmp_path / "runs").exists()


def test_replay_and_rejudge_are_planned_from_the_recorded_run(recorded: RunResult, tmp_path: Path) -> None:
    before = _files(recorded.run_dir)
    exact = plan_run(_replay_config(recorded.run_dir), CompareOptions(replay=recorded.run_dir, out=tmp_path))
    assert exact.mode is RunMode.REPLAY and exact.exact_replay and exact.replay_of == recorded.run_dir
    assert isinstance(exact.client, ReplayClient) and exact.recorded_evaluations is not None
    assert exact.target.to_json() == RunFolder(recorded.run_dir).read_config().resolved.target
    rejudge = plan_run(_replay_config(recorded.run_dir),
                       CompareOptions(replay=recorded.run_dir, rejudge=True, out=tmp_path))
    assert rejudge.mode is RunMode.REJUDGE and not rejudge.exact_replay and rejudge.rejudge
    assert isinstance(rejudge.client, ReplayClient) and rejudge.recorded_evaluations is None
    assert _files(recorded.run_dir) == before and list(tmp_path.iterdir()) == []


def test_a_resume_is_planned_from_the_recorded_config(recorded: RunResult, tmp_path: Path) -> None:
    stopped = _unfinished(recorded.run_dir, tmp_path / "stopped")
    before = _files(stopped)
    plan = plan_run(_config(budget=99, tasks=["softmax"]), CompareOptions(resume=stopped, resume_with={"workers": 2}))
    assert plan.mode is RunMode.RESUME and plan.resumed and plan.run_dir == stopped and plan.finished is None
    assert plan.config.budget == 2 and [t.id for t in plan.tasks] == ["vector_add"]  # the recorded run's
    assert plan.config.workers == 2 and plan.changed == {"workers": {"from": 1, "to": 2}}
    assert plan.client is not None and plan.client.simulated and plan.replay_of is None
    assert _files(stopped) == before  # the changed worker count is written when the run starts, not before


def test_a_finished_run_is_planned_to_run_nothing(recorded: RunResult) -> None:
    before = _files(recorded.run_dir)
    for retry_errors in (False, True):  # no unit ended on an error: nothing to retry either
        plan = plan_run(CompareConfig(), CompareOptions(resume=recorded.run_dir, retry_errors=retry_errors))
        assert plan.mode is RunMode.RESUME and plan.finished is not None and plan.finished.units_done == 1
        assert plan.client is None and plan.tasks == ()
    assert _files(recorded.run_dir) == before


@pytest.mark.parametrize("rejudge", [False, True], ids=["exact", "rejudge"])
def test_an_interrupted_replay_is_planned_as_the_replay_it_was(recorded: RunResult, tmp_path: Path, scripted: None,
                                                               rejudge: bool) -> None:
    replay = run_compare(_replay_config(recorded.run_dir),
                         CompareOptions(replay=recorded.run_dir, rejudge=rejudge, out=tmp_path / "replays"))
    stopped = _unfinished(replay.run_dir, tmp_path / "stopped")
    plan = plan_run(CompareConfig(), CompareOptions(resume=stopped))
    assert plan.mode is RunMode.RESUME and plan.replay_of == recorded.run_dir and plan.rejudge is rejudge
    assert isinstance(plan.client, ReplayClient) and plan.exact_replay is not rejudge


# ---------------------------------------------------------------------------- refusals leave nothing
NEW_RUN_REFUSALS: list[tuple[dict[str, Any], dict[str, Any], str]] = [
    ({}, {"retry_errors": True}, "--retry-errors goes with --resume RUN_DIR"),
    ({}, {"rejudge": True}, "--rejudge goes with --replay RUN_DIR"),
    ({}, {"resume_with": {"workers": 2}}, "resume_with changes a resumed run's options; it goes with resume"),
    ({"tasks": ["vector_ad"]}, {}, "unknown task 'vector_ad'"),
    ({"tasks": None, "suite": "nosuch"}, {}, "unknown suite 'nosuch'"),
    ({"methods": ["telepathy"]}, {}, "unknown method 'telepathy'"),
    ({"method_options": {"direct": {"no_such_option": 1}}}, {}, "method direct: "),
    ({"method_options": {"geak": {}}}, {}, "options given for method(s) not being run: geak"),
    ({"budget": 0}, {}, "budget must be a positive integer, got 0"),
    ({"budget": "many"}, {}, "budget must be a positive integer, got 'many'"),
    ({"repeats": 0}, {}, "repeats must be an integer of at least 1"),
    ({"task_sources": ["nosuch:/tmp"]}, {}, "unknown adapter"),
    ({}, {"lock_clocks": (None, None)}, "--lock-clocks needs a GPU"),
    ({}, {"replay": Path("/nonexistent/run")}, "/nonexistent/run is not a folder"),
]


@pytest.mark.parametrize("config, options, message", NEW_RUN_REFUSALS, ids=[m for *_, m in NEW_RUN_REFUSALS])
def test_a_refused_run_is_one_line_and_leaves_no_run_folder(tmp_path: Path, scripted: None, config: dict[str, Any],
                                                            options: dict[str, Any], message: str) -> None:
    out = tmp_path / "runs"
    with pytest.raises(ConfigError) as refused:
        run_compare(_config(**config), CompareOptions(out=out, **options))
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert not out.exists() or not any(out.iterdir())


def test_an_exact_replay_refuses_to_lock_clocks_before_making_a_folder(recorded: RunResult, tmp_path: Path) -> None:
    out = tmp_path / "replays"
    with pytest.raises(ConfigError, match="an exact replay times nothing, so --lock-clocks has nothing to lock"):
        run_compare(_replay_config(recorded.run_dir),
                    CompareOptions(replay=recorded.run_dir, out=out, lock_clocks=(None, None)))
    with pytest.raises(ConfigError, match="--replay and --resume cannot be combined"):
        run_compare(_config(), CompareOptions(replay=recorded.run_dir, resume=recorded.run_dir, out=out))
    with pytest.raises(ConfigError, match="--dry-run estimates a new run; it cannot be combined with --resume"):
        estimate_compare(_config(), CompareOptions(resume=recorded.run_dir))
    assert not out.exists()


def _recorded_elsewhere(run_dir: Path, to: Path, vendor: str) -> Path:
    """An unfinished copy of `run_dir` whose config.json says it ran on `vendor`."""
    copy = _unfinished(run_dir, to)
    folder = RunFolder(copy)
    recorded = folder.read_config()
    target = {**recorded.resolved.target, "vendor": vendor, "interpreter": vendor == "cpu"}
    folder.write_config(recorded.config, dataclasses.replace(recorded.resolved, target=target),
                        executor=folder.read_executor())
    return copy


def test_a_refused_resume_changes_nothing_in_its_folder(recorded: RunResult, tmp_path: Path, scripted: None) -> None:
    stopped = _unfinished(recorded.run_dir, tmp_path / "stopped")
    elsewhere = _recorded_elsewhere(recorded.run_dir, tmp_path / "elsewhere", "nvidia")
    refusals = [
        (stopped, {"resume_with": {"budget": 5}}, "--resume cannot change budget (it may change only workers)"),
        (stopped, {"resume_with": {"workers": 0}}, "workers must be at least 1"),
        (elsewhere, {}, f"{elsewhere} ran on nvidia; this machine is cpu"),
        (tmp_path / "missing", {}, "is not a folder"),
    ]
    for folder, options, message in refusals:
        before = _files(folder) if folder.exists() else None
        with pytest.raises(ConfigError) as refused:
            run_compare(_config(), CompareOptions(resume=folder, **options))
        assert message in str(refused.value) and "\n" not in str(refused.value)
        assert (_files(folder) if folder.exists() else None) == before
    resumed = run_compare(_config(), CompareOptions(resume=stopped, resume_with={"workers": 2}))
    assert resumed.resumed and RunFolder(stopped).read_config().config["workers"] == 2  # written once it runs


def test_the_cli_refuses_through_the_plan_in_one_line_leaving_no_run_folder(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    for args, message in [(("--retry-errors",), "--retry-errors goes with --resume RUN_DIR"),
                          (("--rejudge",), "--rejudge goes with --replay RUN_DIR"),
                          (("--tasks", "vector_ad"), "unknown task 'vector_ad'"),
                          (("--resume", str(tmp_path), "--dry-run"), "--dry-run estimates a new run")]:
        code, _, err = invoke("compare", "--device", "cpu", "--budget", "1", "--out", str(out), "--quiet", *args)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert not out.exists() or not any(out.iterdir())


# ---------------------------------------------------------------------------- the device, once
@pytest.fixture()
def detections(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every detect_target call in this process (each module that imported it by name included)."""
    calls: list[bool] = []
    original = judge.device.detect_target

    def counted(force_cpu: bool = False) -> Any:
        calls.append(force_cpu)
        return original(force_cpu)

    for module in list(sys.modules.values()):
        if getattr(module, "detect_target", None) is original:
            monkeypatch.setattr(module, "detect_target", counted)
    return calls


def test_the_device_is_detected_once_per_run_in_every_mode(recorded: RunResult, tmp_path: Path, scripted: None,
                                                           detections: list[bool]) -> None:
    def once(what: str) -> None:
        assert detections == [True], (what, detections)  # --device cpu, asked once
        detections.clear()

    new = run_compare(_config(), CompareOptions(out=tmp_path / "new"))
    once("new")
    run_compare(_replay_config(recorded.run_dir), CompareOptions(replay=recorded.run_dir, out=tmp_path / "replay"))
    once("replay")
    run_compare(_replay_config(recorded.run_dir),
                CompareOptions(replay=recorded.run_dir, rejudge=True, out=tmp_path / "rejudge"))
    once("rejudge")
    stopped = _unfinished(new.run_dir, tmp_path / "stopped")
    assert run_compare(CompareConfig(), CompareOptions(resume=stopped)).resumed
    once("resume")
    assert run_compare(CompareConfig(), CompareOptions(resume=stopped)).resumed
    once("finished resume")
    estimate_compare(_config())
    once("dry run")
