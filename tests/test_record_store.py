"""The run store: the timed flag is a column (stores that glued `|timed` onto the device key
are migrated when a writer opens them, and read as if migrated by readers, which never change
the file), and SQL lives in record/ only (the store, and record/recorded.py, which reads a
recorded run back for a replay)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from record.store import Store
from results.readers import load_run
from tests.fixtures.synthetic_run import DEVICE, make_synthetic_run

ROOT = Path(__file__).resolve().parents[1]

LEGACY_EVALUATIONS = """CREATE TABLE evaluations (
    source_hash TEXT NOT NULL, task TEXT NOT NULL, case_set TEXT NOT NULL, device_key TEXT NOT NULL,
    verdict TEXT NOT NULL, evaluation TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (source_hash, task, case_set, device_key));"""


def _make_legacy(store_path: Path) -> int:
    """Rewrite a store's evaluations the way stores were written before the `timed` column:
    timed rows carry `|timed` on the device key. Returns how many rows were timed."""
    db = sqlite3.connect(store_path)
    rows = db.execute("SELECT source_hash, task, case_set, device_key, timed, verdict, evaluation, created "
                      "FROM evaluations").fetchall()
    db.execute("DROP TABLE evaluations")
    db.execute(LEGACY_EVALUATIONS)
    db.executemany("INSERT INTO evaluations VALUES (?, ?, ?, ?, ?, ?, ?)",
                   [(h, t, cs, dk + ("|timed" if timed else ""), v, ev, c) for h, t, cs, dk, timed, v, ev, c in rows])
    db.commit()
    db.close()
    return sum(r[4] for r in rows)


def test_legacy_store_reads_the_same_and_is_migrated_when_a_writer_opens_it(tmp_path: Path) -> None:
    new = make_synthetic_run(tmp_path / "new")
    old = make_synthetic_run(tmp_path / "old")
    n_timed = _make_legacy(old / "store.sqlite")
    assert n_timed == 11  # the fixture's timed evaluations (hidden finals and GEAK's timed visible runs)

    before = load_run(new)
    after = load_run(old)  # read as if migrated, migrated in memory only
    for name in ("units", "candidates", "submissions", "evaluations"):
        a = getattr(before, name).drop(columns=["run"])
        b = getattr(after, name).drop(columns=["run"])
        pd.testing.assert_frame_equal(a, b, check_like=True)
    with sqlite3.connect(old / "store.sqlite") as db:
        assert "timed" not in [r[1] for r in db.execute("PRAGMA table_info(evaluations)")]

    Store(old / "store.sqlite").close()  # a writer (compare --resume) migrates on disk
    db = sqlite3.connect(old / "store.sqlite")
    cols = [r[1] for r in db.execute("PRAGMA table_info(evaluations)")]
    keys = {r[0] for r in db.execute("SELECT DISTINCT device_key FROM evaluations")}
    timed = db.execute("SELECT COUNT(*) FROM evaluations WHERE timed = 1").fetchone()[0]
    db.close()
    assert "timed" in cols and keys == {DEVICE} and timed == n_timed


def test_migrated_store_answers_the_evaluator_cache(tmp_path: Path) -> None:
    """A resumed legacy run finds its timed evaluations under the new key (nothing is re-judged)."""
    run = make_synthetic_run(tmp_path / "r")
    store = Store(run / "store.sqlite")
    h, task = store.query("SELECT source_hash, task FROM evaluations WHERE timed = 1 AND case_set = 'hidden'")[0]
    store.close()
    _make_legacy(run / "store.sqlite")
    store = Store(run / "store.sqlite")
    try:
        timed = store.evaluation(h, task, "hidden", DEVICE, timed=True)
        untimed = store.evaluation(h, task, "hidden", DEVICE)
        assert timed is not None and timed["timing"]["speedup_vs_baseline"] > 0
        assert untimed is not None and untimed["timing"] is None
        assert store.evaluation(h, task, "hidden", DEVICE + "|timed", timed=True) is None
    finally:
        store.close()


def test_reopening_a_migrated_store_changes_nothing(tmp_path: Path) -> None:
    run = make_synthetic_run(tmp_path / "r")
    _make_legacy(run / "store.sqlite")
    Store(run / "store.sqlite").close()
    first = sqlite3.connect(run / "store.sqlite").execute("SELECT * FROM evaluations ORDER BY 1, 2, 3, 4, 5").fetchall()
    Store(run / "store.sqlite").close()
    again = sqlite3.connect(run / "store.sqlite").execute("SELECT * FROM evaluations ORDER BY 1, 2, 3, 4, 5").fetchall()
    assert first == again and len(first) > 0


def _folder_bytes(folder: Path) -> dict[str, str]:
    import hashlib

    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _legacy_run(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A run folder whose store has an old schema (the legacy evaluations table, no phase
    columns), and the bytes of each of its files."""
    run = make_synthetic_run(tmp_path / "runs" / "20250101-000000-aaaaaa")
    _make_legacy(run / "store.sqlite")
    before = _folder_bytes(run)
    assert {"config.json", "store.sqlite"} <= set(before)
    return run, before


def test_show_export_and_runs_list_never_change_an_old_store(tmp_path: Path) -> None:
    """Every file of the folder keeps its bytes and no -wal/-shm file appears; what they read
    is the migrated view."""
    from results.export import export_run
    from results.run_list import list_runs
    from results.unit_view import show_unit

    run, before = _legacy_run(tmp_path)
    view = show_unit(run, "geak", "softmax")
    export_run(run, "csv", tmp_path / "export")
    rows = list_runs(tmp_path / "runs")
    assert _folder_bytes(run) == before
    assert view.final is not None and len(rows) == 1 and rows[0].status == "complete"


def test_replays_read_a_recorded_store_without_adding_files_beside_it(tmp_path: Path) -> None:
    """The store is in WAL mode: a plain `mode=ro` connection would leave -wal and -shm files
    in the recorded folder (record/read_only.py)."""
    from modelio.replay import ReplayClient
    from record.recorded import RecordedEvaluations

    run, before = _legacy_run(tmp_path)
    assert len(ReplayClient(run / "store.sqlite")._rows) > 0 and len(RecordedEvaluations(run / "store.sqlite")) > 0
    assert _folder_bytes(run) == before


@pytest.mark.slow
def test_report_figures_and_verify_never_change_an_old_store(tmp_path: Path) -> None:
    from results.report import write_figures_only, write_report
    from runners.verify import VerifyOptions, verify_run

    run, before = _legacy_run(tmp_path)
    write_report([run], tmp_path / "report", n_resamples=200)
    write_figures_only([run], tmp_path / "figures", n_resamples=200)
    report = verify_run(run, VerifyOptions(device="cpu", workers=1))
    assert _folder_bytes(run) == before
    assert report.methods  # it judged something


def test_a_store_opened_for_reading_refuses_writes_and_missing_files(tmp_path: Path) -> None:
    from record.run_folder import RunFolderError

    run = make_synthetic_run(tmp_path / "r")
    store = Store.for_reading(run / "store.sqlite")
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly|read-only|query_only"):
            store.set_meta("x", 1)
    finally:
        store.close()
    with pytest.raises(RunFolderError, match="no run store"):
        Store.for_reading(tmp_path / "nowhere.sqlite")
    (tmp_path / "junk.sqlite").write_text("not a database at all " * 100)
    with pytest.raises(RunFolderError, match="is not a run store"):
        Store.for_reading(tmp_path / "junk.sqlite")


SQL = re.compile(r"""["'f](SELECT|INSERT|UPDATE|DELETE|CREATE TABLE|ALTER TABLE|DROP TABLE)\b""")
# The replay client (modelio/replay.py) reads recorded calls through record/recorded.py.
SQL_ALLOWED = {"record/store.py", "record/recorded.py"}


def test_sql_lives_in_record() -> None:
    offenders = []
    packages = [d for d in sorted(ROOT.iterdir()) if (d / "__init__.py").is_file() and d.name != "tests"]
    files = sorted(ROOT.glob("*.py")) + [f for d in packages for f in sorted(d.rglob("*.py"))]
    assert {"record", "results", "runners", "modelio", "stats"} <= {d.name for d in packages}
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if rel in SQL_ALLOWED:
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if SQL.search(line):
                offenders.append(f"{rel}:{i}: {line.strip()}")
    assert not offenders, "SQL outside record/:\n" + "\n".join(offenders)


def test_the_sql_check_finds_sql() -> None:
    assert SQL.search('rows = store.query("SELECT method FROM units")')
    assert SQL.search("db.execute(f'UPDATE runs SET x=1')")
    assert not SQL.search("SELECTIONS = ('visible-best', 'first')")


@pytest.mark.parametrize("table", ["candidates", "feedback", "test_runs", "submissions"])
def test_event_reader_refuses_other_tables(tmp_path: Path, table: str) -> None:
    store = Store(tmp_path / "s.sqlite")
    try:
        assert store.events(table) == []
        with pytest.raises(KeyError):
            store.events("units; DROP TABLE units")
    finally:
        store.close()
