"""Every command as a library call, in-process, as a user's script would make it: compare
(new, resumed, replayed, interrupted, dry run, refused), eval, bench list, bench check and
serve-sim. cli.py only parses and prints what these return."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from bench.listing import list_tasks
from record.run_folder import RunFolder
from runners.compare import (
    CompareInterrupted,
    CompareOptions,
    Progress,
    RunStarted,
    estimate_compare,
    recorded_options,
    run_compare,
)
from runners.config import CompareConfig, ConfigError, compose_config
from tests.helpers import ROOT

GEAK = ROOT / "tests" / "fixtures" / "geak_eval"
CANDIDATE = ROOT / "bench" / "kernels" / "vector_add.py"


def _config(**overrides: Any) -> CompareConfig:
    base: dict[str, Any] = {"budget": 2, "methods": ["direct"], "tasks": ["vector_add"], "device": "cpu",
                            "workers": 1, "task_sources": [], "method_modules": []}
    return CompareConfig(**{**base, **overrides})


def result_layout(folder: RunFolder) -> dict[str, Any]:
    """config.json's executor record, checked for the fields every record has."""
    executor = folder.read_executor()
    assert executor is not None and executor["kind"] == "local" and executor["timing_lanes"] == 0
    assert "usable core" in executor["why"]
    return executor


class Recorder:
    """Collects what run_compare tells its caller."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.started: list[RunStarted] = []
        self.progress: list[tuple[int, int, int, int]] = []

    def options(self, **kw: Any) -> CompareOptions:
        return CompareOptions(on_message=self.messages.append, on_start=self.started.append,
                              on_progress=lambda p: self.progress.append((p.units_done, p.spent, p.evaluations, p.work)),
                              **kw)


# ---------------------------------------------------------------------------- compare
@pytest.mark.slow
def test_run_compare_in_process_then_resume_and_replay(tmp_path: Path) -> None:
    seen = Recorder()
    result = run_compare(_config(), seen.options(out=tmp_path / "runs", command_line=["my_script.py", "--x"]))
    folder = RunFolder(result.run_dir)
    assert result.run_dir.parent == tmp_path / "runs" and not result.resumed
    assert folder.read_summary() == json.loads(json.dumps(result.summary))
    assert result.summary["methods"]["direct"]["calls_used"] == {"vector_add": 2}
    assert result.target.interpreter and result.endpoint_stats is None and result.wall_s > 0
    assert result.summary_path == result.run_dir / "summary.json"
    assert seen.messages == [f"run folder: {result.run_dir}", "model: built-in SIMULATED model (no endpoint configured)"]
    assert seen.started == [RunStarted(result.run_dir, False, 1, "calls")]
    assert folder.read_executor() == {**result_layout(folder), "workers": 1, "chosen": "given"}
    # The bar moves at every model call and every evaluation, not only when a unit ends.
    import sqlite3

    with sqlite3.connect(result.run_dir / "store.sqlite") as db:
        evaluations = db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]
    assert evaluations >= 2 and len(seen.progress) == 2 + evaluations + 1
    assert seen.progress[0] == (0, 1, 0, 1) and seen.progress[-1] == (1, 2, evaluations, 2)
    assert [p[1] for p in seen.progress] == sorted(p[1] for p in seen.progress)
    assert "unit direct/vector_add/repeat 0: done; 2 calls" in folder.log_path.read_text()
    assert folder.read_env()["command_line"] == ["my_script.py", "--x"]

    again = Recorder()
    resumed = run_compare(_config(budget=99), again.options(resume=result.run_dir))  # the recorded config wins
    assert resumed.resumed and resumed.summary == result.summary
    # A finished run resumed says so and runs nothing (issue 46).
    assert again.messages == [f"{result.run_dir} is complete: all 1 units finished; nothing to resume"]

    replayed = Recorder()
    config = compose_config({}, None, recorded_options(result.run_dir))
    replay = run_compare(config, replayed.options(replay=result.run_dir, out=tmp_path / "replays"))
    assert replay.summary == result.summary
    assert (replay.run_dir / "summary.json").read_bytes() == (result.run_dir / "summary.json").read_bytes()
    assert replayed.messages[1] == (f"model: REPLAY of {result.run_dir} (recorded responses and evaluations, no "
                                    "network, no GPU)")


@pytest.mark.slow
def test_an_interrupted_run_raises_compare_interrupted_and_resumes(tmp_path: Path) -> None:
    """A KeyboardInterrupt in the caller's progress hook stands in for Ctrl-C: every unit stops,
    nothing half-done is recorded, no summary is written, and --resume finishes the run."""

    def interrupt(p: Progress) -> None:
        if p.units_done == 1:
            raise KeyboardInterrupt

    config = _config(tasks=["vector_add", "flip"], concurrency=1)
    with pytest.raises(CompareInterrupted) as stop:
        run_compare(config, CompareOptions(out=tmp_path, on_progress=interrupt))
    run_dir = stop.value.run_dir
    assert (stop.value.units_done, stop.value.units_total) == (1, 2)
    assert isinstance(stop.value, KeyboardInterrupt)  # uncaught, a script stops as on Ctrl-C
    assert RunFolder(run_dir).read_summary() is None
    finished = run_compare(_config(), CompareOptions(resume=run_dir))
    assert finished.resumed and set(finished.summary["methods"]["direct"]["calls_used"]) == {"vector_add", "flip"}


def test_bad_input_is_refused_before_a_run_folder_exists(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    with pytest.raises(ConfigError, match="budget must be a positive integer"):
        run_compare(_config(budget=0), CompareOptions(out=out))
    with pytest.raises(ConfigError, match="--lock-clocks needs a GPU"):
        run_compare(_config(), CompareOptions(out=out, lock_clocks=(None, None)))
    with pytest.raises(ConfigError, match="cannot be combined"):
        run_compare(_config(), CompareOptions(out=out, resume=tmp_path, replay=tmp_path))
    with pytest.raises(ConfigError, match="not a recorded run folder"):
        recorded_options(tmp_path)
    with pytest.raises(ConfigError, match=r"is not a run folder \(no config.json\)"):
        run_compare(_config(), CompareOptions(resume=tmp_path))
    with pytest.raises(ConfigError, match="unknown adapter"):  # the registry's refusal, as the plan's one type
        run_compare(_config(task_sources=["nosuch:/tmp"]), CompareOptions(out=out))
    assert not out.exists()


def test_a_worker_count_below_one_is_refused_before_a_run_folder_exists(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    for workers in (0, -1):
        with pytest.raises(ConfigError, match=f"workers must be at least 1 .*got {workers}"):
            run_compare(_config(workers=workers), CompareOptions(out=out))
    with pytest.raises(ConfigError, match="concurrency must be at least 1"):
        run_compare(_config(concurrency=0), CompareOptions(out=out))
    with pytest.raises(ConfigError, match="goes with resume"):
        run_compare(_config(), CompareOptions(out=out, resume_with={"workers": 2}))
    assert not out.exists()


@pytest.mark.slow
def test_resume_takes_a_new_worker_count_and_records_it(tmp_path: Path) -> None:
    """A run folder recorded with a worker count that cannot run (as `--workers 0` once made)
    is refused on resume with a hint; `--resume --workers N` replaces it, and config.json and
    env.json record the change. What is compared cannot change on resume."""
    config = _config()
    config.validate()
    folder = RunFolder.create(tmp_path / "runs", {})
    from record.run_folder import ResolvedRun

    folder.write_config({**config.to_json(), "workers": 0}, ResolvedRun(
        tasks=("vector_add",), method_options={"direct": {}}, budget_unit="calls", model="m", simulated=True,
        target={"vendor": "cpu", "interpreter": True}))
    folder.write_env({})
    with pytest.raises(ConfigError, match="recorded workers must be at least 1.*pass --workers N with --resume"):
        run_compare(_config(), CompareOptions(resume=folder.path))
    with pytest.raises(ConfigError, match=r"^workers must be at least 1 .*got -2"):
        run_compare(_config(), CompareOptions(resume=folder.path, resume_with={"workers": -2}))
    with pytest.raises(ConfigError, match="--resume cannot change budget"):
        run_compare(_config(), CompareOptions(resume=folder.path, resume_with={"budget": 5}))
    result = run_compare(_config(), CompareOptions(resume=folder.path, resume_with={"workers": 1}))
    assert result.resumed and result.summary["methods"]["direct"]["calls_used"] == {"vector_add": 2}
    assert folder.read_config().config["workers"] == 1
    assert folder.read_env()["resumed"][-1]["changed"] == {"workers": {"from": 0, "to": 1}}
    executor = folder.read_executor()  # how the resumed run ran, and why, replaces the record
    assert executor is not None and (executor["kind"], executor["workers"], executor["chosen"]) == ("local", 1, "given")
    assert "the machine would choose" in executor["why"]


def test_dry_run_estimate_in_process(tmp_path: Path) -> None:
    est = estimate_compare(_config(budget=10, methods=["direct", "geak"], tasks=["vector_add", "softmax"]))
    assert est.calls == 2 * 2 * 10 and est.simulated
    assert est.format().startswith("DRY RUN (nothing sent, no run folder): 2 method(s) x 2 task(s)")


def test_config_layers_recorded_then_file_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("budget: 7\nseed: 3\nendpoint: {model: from-file, base_url: 'http://h/v1'}\n")
    config = compose_config({"seed": 5, "budget": None, "model": "from-flag", "task_sources": None}, path,
                            {"budget": 2, "seed": 1, "repeats": 4, "tasks": ["flip"]})
    assert (config.budget, config.seed, config.repeats, config.tasks) == (7, 5, 4, ["flip"])
    assert config.endpoint.model == "from-flag" and config.endpoint.base_url == "http://h/v1"
    path.write_text("endpoint: [1]\n")
    with pytest.raises(ConfigError, match="endpoint must be a mapping"):
        compose_config({}, path)


# ---------------------------------------------------------------------------- eval
@pytest.mark.slow
def test_judge_file_in_process(tmp_path: Path) -> None:
    from runners.judge_file import judge_file

    good = judge_file("vector_add", CANDIDATE, device="cpu", sources=[])
    assert good.correct and good.target.interpreter
    assert good.to_json()["verdict"] == "correct" and good.to_json()["timing"] is None
    wrong = tmp_path / "wrong.py"
    wrong.write_text(CANDIDATE.read_text().replace("x + y", "x - y"))
    assert wrong.read_text() != CANDIDATE.read_text()
    bad = judge_file("vector_add", wrong, "visible", device="cpu", sources=[])
    assert not bad.correct and bad.to_json()["verdict"] == "wrong_result"


# ---------------------------------------------------------------------------- bench
def test_list_tasks_in_process_with_a_source() -> None:
    listing = list_tasks(sources=[f"geak-eval:{GEAK}"], vendor="cpu")
    ids = {r["id"] for r in listing.rows}
    assert {"tb-add_vectors", "vector_add"} <= ids
    assert [(r.adapter, r.counts()["loaded"]) for r in listing.reports] == [("geak-eval", 21)]
    quick = list_tasks("quick", sources=[])
    assert quick.reports == [] and all("quick" in r["suites"] for r in quick.rows)
    row = next(r for r in quick.rows if r["id"] == "vector_add")
    assert set(row) == {"id", "suites", "category", "difficulty", "dtypes", "visible_cases", "hidden_cases_gpu",
                        "hidden_cases_cpu", "entry_point", "signature", "source"}


@pytest.mark.slow
def test_check_suite_in_process() -> None:
    from runners.check import check_suite

    rows: list[Any] = []
    report = check_suite(task_ids=["vector_add", "tb-add_vectors"], sources=[f"geak-eval:{GEAK}"], workers=1,
                         device="cpu", on_result=rows.append)
    assert [r.task for r in report.rows] == ["vector_add", "tb-add_vectors"]  # the tasks' order
    assert sorted(r.task for r in rows) == sorted(r.task for r in report.rows)  # each told as it finished
    assert all(r.verdict == "correct" for r in report.rows) and not report.failed and report.interpreter
    with pytest.raises(ConfigError, match="--workers must be at least 1"):
        check_suite(task_ids=["vector_add"], workers=0)


# ---------------------------------------------------------------------------- serve-sim
def test_serve_in_process_until_shut_down() -> None:
    from modelio.server import serve

    ready = threading.Event()
    servers: list[Any] = []

    def on_ready(server: Any) -> None:
        servers.append(server)
        ready.set()

    thread = threading.Thread(target=serve, args=("127.0.0.1", 0), kwargs={"on_ready": on_ready}, daemon=True)
    thread.start()
    assert ready.wait(30)
    with urllib.request.urlopen(f"{servers[0].url}/models", timeout=10) as resp:
        models = json.load(resp)
    assert models["data"][0]["owned_by"] == "kmc-simulated"
    servers[0].httpd.shutdown()
    thread.join(10)
    assert not thread.is_alive()
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(ValueError, match="cannot listen on 127.0.0.1"):
            serve("127.0.0.1", int(busy.getsockname()[1]))
