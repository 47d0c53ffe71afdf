"""Reproducible runs (design invariant 8, issue 15 item 5): two runs with the same seed on the
CPU make the same calls, candidates and submissions; `--replay` answers model calls and
evaluations from the recorded run (no worker, no network) and reproduces summary.json byte
for byte; `--replay --rejudge` judges anew; a replay that asks for something the record
lacks stops with a one-line ReplayMiss."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import runners.compare
import runners.plan
from modelio.replay import ReplayMiss
from record.run_folder import RunFolder
from results.analysis import analyse
from results.readers import load_run
from results.tables import phase_table
from runners.compare import CompareOptions, RunResult, recorded_options, run_compare
from runners.config import CompareConfig, compose_config

pytestmark = pytest.mark.slow

# flip's simulated bugs include reads out of bounds, whose garbage feedback describes instead
# of quoting (judge/candidate/reruns.py); vector_add's include output left unwritten (poisoned: NaN).
TASKS = ["vector_add", "softmax", "flip"]
TABLES = {
    "calls": "SELECT method, task, repeat, call_index, role, messages_hash, response, prompt_tokens, "
             "completion_tokens, seed, sample_index FROM calls ORDER BY 1, 2, 3, 4",
    "candidates": "SELECT * FROM candidates ORDER BY 1, 2, 3, 4",
    "submissions": "SELECT * FROM submissions ORDER BY 1, 2, 3, 4",
    "feedback": "SELECT * FROM feedback ORDER BY 1, 2, 3, 4",
    "test_runs": "SELECT * FROM test_runs ORDER BY 1, 2, 3, 4",
    "units": "SELECT * FROM units ORDER BY 1, 2, 3",
    "evaluations": "SELECT source_hash, task, case_set, device_key, timed, evaluation FROM evaluations "
                   "ORDER BY 1, 2, 3, 4, 5",
}


def rows(run_dir: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(RunFolder(run_dir).store_path)
    try:
        return [tuple(r) for r in con.execute(sql).fetchall()]
    finally:
        con.close()


def config() -> CompareConfig:
    return CompareConfig(budget=6, tasks=list(TASKS), device="cpu", workers=2, task_sources=[], method_modules=[])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    return run_compare(config(), CompareOptions(out=tmp_path_factory.mktemp("recorded")))


def replay(source: Path, out: Path, **options: Any) -> RunResult:
    return run_compare(compose_config({}, None, recorded_options(source)), CompareOptions(replay=source, out=out,
                                                                                           **options))


def test_two_runs_with_the_same_seed_make_the_same_calls_candidates_and_submissions(recorded: RunResult,
                                                                                   tmp_path: Path) -> None:
    again = run_compare(config(), CompareOptions(out=tmp_path))
    for table in ("calls", "candidates", "submissions", "feedback", "test_runs", "units"):
        assert rows(again.run_dir, TABLES[table]) == rows(recorded.run_dir, TABLES[table]), table
    assert again.summary_path.read_bytes() == recorded.summary_path.read_bytes()
    assert len(rows(recorded.run_dir, TABLES["calls"])) == 3 * len(TASKS) * 6


def test_an_exact_replay_reproduces_every_decision_and_the_summary_and_runs_nothing(
        recorded: RunResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_workers(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an exact replay started an evaluation worker")

    monkeypatch.setattr(runners.compare, "local_executor", no_workers)
    result = replay(recorded.run_dir, tmp_path)
    assert result.summary_path.read_bytes() == recorded.summary_path.read_bytes()
    for table, sql in TABLES.items():
        assert rows(result.run_dir, sql) == rows(recorded.run_dir, sql), table
    assert rows(result.run_dir, "SELECT value FROM meta WHERE key='replay_mode'") == [(json.dumps("exact"),)]
    assert RunFolder(result.run_dir).read_config().resolved == RunFolder(recorded.run_dir).read_config().resolved
    # The recorded run measured the phases of every evaluation it judged (a hidden verdict that
    # earlier results decided had no job: runners/savings.py); the replay spent no time on any.
    unmeasured = "SELECT COUNT(*) FROM evaluations WHERE (queue_s IS NULL OR compile_s IS NULL) AND case_set != 'hidden'"
    assert rows(recorded.run_dir, unmeasured) == [(0,)]
    assert rows(result.run_dir, "SELECT COUNT(*) FROM evaluations WHERE COALESCE(queue_s, compile_s, correctness_s, "
                                "timing_s) IS NOT NULL") == [(0,)]


def test_the_report_shows_evaluation_time_by_phase_and_method(recorded: RunResult) -> None:
    table = phase_table(analyse(load_run(recorded.run_dir), n_resamples=200))
    assert table is not None
    assert list(table.numeric["method"]) == ["direct", "geak", "reflexion", "all"]
    numeric = table.numeric.set_index("method")
    assert numeric.loc["all", "total_s"] == pytest.approx(numeric.drop("all")["total_s"].sum())
    assert (numeric["correctness_s"] > 0).all() and (numeric["timing_s"] == 0).all()  # nothing is timed on a CPU


def test_replay_with_rejudge_judges_every_candidate_anew(recorded: RunResult, tmp_path: Path) -> None:
    result = replay(recorded.run_dir, tmp_path, rejudge=True)
    assert rows(result.run_dir, "SELECT value FROM meta WHERE key='replay_mode'") == [(json.dumps("rejudge"),)]
    assert result.summary_path.read_bytes() == recorded.summary_path.read_bytes()  # the interpreter agrees with itself
    verdicts = "SELECT source_hash, task, case_set, verdict FROM evaluations ORDER BY 1, 2, 3"
    assert rows(result.run_dir, verdicts) == rows(recorded.run_dir, verdicts)


def _copy_run(run_dir: Path, to: Path) -> Path:
    shutil.copytree(run_dir, to)
    for leftover in ("store.sqlite-wal", "store.sqlite-shm"):
        (to / leftover).unlink(missing_ok=True)
    return to


def test_an_exact_replay_judges_as_the_recorded_device_did(recorded: RunResult, tmp_path: Path) -> None:
    """The evaluations are found under the recorded run's device (config.json resolved.target),
    not this machine's: a run recorded on another device replays here."""
    copy = _copy_run(recorded.run_dir, tmp_path / "elsewhere")
    folder = RunFolder(copy)
    data = json.loads(folder.config_path.read_text())
    data["resolved"]["target"]["device_name"] = "Another interpreter"
    folder.config_path.write_text(json.dumps(data))
    con = sqlite3.connect(folder.store_path)
    con.execute("UPDATE evaluations SET device_key = 'cpu:Another interpreter'")
    con.commit()
    con.close()
    result = replay(copy, tmp_path / "replays")
    assert result.summary_path.read_bytes() == recorded.summary_path.read_bytes()
    assert {r[0] for r in rows(result.run_dir, "SELECT device_key FROM evaluations")} == {"cpu:Another interpreter"}


def test_a_run_judged_on_a_gpu_replays_without_one(recorded: RunResult, tmp_path: Path) -> None:
    """A record whose device timed its feedback and final submissions (interpreter false: every
    visible feedback and each final submission has a timed evaluation) replays on this
    CPU-only machine from those timed rows, starting no worker."""
    copy = _copy_run(recorded.run_dir, tmp_path / "gpu")
    folder = RunFolder(copy)
    data = json.loads(folder.config_path.read_text())
    data["resolved"]["target"].update(interpreter=False, device_name="Recorded GPU", device_count=1)
    folder.config_path.write_text(json.dumps(data))
    con = sqlite3.connect(folder.store_path)
    con.execute("UPDATE evaluations SET device_key = 'cpu:Recorded GPU'")
    con.execute("INSERT INTO evaluations(source_hash, task, case_set, device_key, timed, verdict, evaluation, created) "
                "SELECT source_hash, task, case_set, device_key, 1, verdict, evaluation, created FROM evaluations "
                "WHERE case_set IN ('visible', 'hidden')")
    con.commit()
    con.close()
    result = replay(copy, tmp_path / "replays")
    for table in ("calls", "candidates", "submissions", "feedback", "units"):
        assert rows(result.run_dir, TABLES[table]) == rows(recorded.run_dir, TABLES[table]), table
    timed = rows(result.run_dir, "SELECT case_set, COUNT(*) FROM evaluations WHERE timed = 1 GROUP BY case_set")
    assert dict(timed)["visible"] >= 1 and dict(timed)["hidden"] >= 1  # feedback and final submissions, timed
    assert not RunFolder(result.run_dir).read_config().resolved.target["interpreter"]


def test_an_exact_replay_stops_on_an_evaluation_the_record_lacks(recorded: RunResult, tmp_path: Path) -> None:
    copy = _copy_run(recorded.run_dir, tmp_path / "partial")
    con = sqlite3.connect(RunFolder(copy).store_path)
    con.execute("DELETE FROM evaluations WHERE case_set = 'hidden'")
    con.commit()
    con.close()
    with pytest.raises(ReplayMiss, match=r"no evaluation of candidate .* \(hidden, cpu:.*--rejudge evaluates anew"):
        replay(copy, tmp_path / "replays")


class _StopAfterUnits:
    """A test hook (CompareOptions.on_progress): Ctrl-C once `n` units have finished."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self, progress: Any) -> None:
        if progress.units_done >= self.n:
            raise KeyboardInterrupt


@pytest.mark.parametrize("rejudge", [False, True], ids=["exact", "rejudge"])
def test_an_interrupted_replay_resumes_as_the_replay_it_was(recorded: RunResult, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch, rejudge: bool) -> None:
    """Stopped after 3 of 9 units, then resumed: the resumed run asks neither the simulated model
    nor an endpoint (every call is answered from the record), keeps the replay's mode, and ends
    with the recorded calls and summary."""
    with pytest.raises(runners.compare.CompareInterrupted):
        replay(recorded.run_dir, tmp_path, rejudge=rejudge, on_progress=_StopAfterUnits(3))
    (stopped,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    done = rows(stopped, "SELECT COUNT(*) FROM units")[0][0]
    assert 3 <= done < 3 * len(TASKS)

    def no_model(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the resumed replay asked the model instead of the record")

    monkeypatch.setattr(runners.plan, "make_run_client", no_model)
    if not rejudge:
        monkeypatch.setattr(runners.compare, "local_executor", no_model)  # an exact replay runs nothing
    messages: list[str] = []
    result = run_compare(CompareConfig(), CompareOptions(resume=stopped, on_message=messages.append))
    assert any(m.startswith(f"model: REPLAY of {recorded.run_dir}") for m in messages), messages
    for table in ("calls", "candidates", "submissions", "units"):
        assert rows(result.run_dir, TABLES[table]) == rows(recorded.run_dir, TABLES[table]), table
    mode = "rejudge" if rejudge else "exact"
    assert rows(result.run_dir, "SELECT value FROM meta WHERE key='replay_mode'") == [(json.dumps(mode),)]
    assert result.summary_path.read_bytes() == recorded.summary_path.read_bytes()
