"""The run store: one SQLite file (WAL mode) per run, written as things happen.

Every row is keyed by what it is, never by position: calls by (method, task, repeat,
call_index), candidates and submissions by their index within a unit, evaluations by
(source hash, task, case set, device, timed). That is what makes resume exact (design
invariant 5): a resumed unit replays its recorded calls and evaluations by key, and primary
keys make a duplicate row impossible rather than merely unlikely. Each write commits at
once; WAL keeps committed rows through a SIGKILL of the writer.

All SQL of the project lives in record/: here, where the scheduler writes through the recording
methods and results/readers.py reads through the named reading methods below (plain dict rows, so
this module needs no pandas), and record/recorded.py, which reads a recorded run back for a replay. Stores written by older versions are brought up to date (`_migrate`)
when a writer opens them (`Store(path)`: `compare`, `--resume`), so old run folders resume.

Reading never changes a store (`Store.for_reading`: report, figures, verify, runs list, show,
export): the file is opened read-only (record/read_only.py: no `-wal`/`-shm` files appear
beside it either) and, when its schema is older than this code's, copied into memory and
migrated there, so a shipped or archived run folder keeps its bytes.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from record.read_only import read_only_uri
from record.run_folder import RunFolderError

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS calls (
    method TEXT NOT NULL, task TEXT NOT NULL, repeat INTEGER NOT NULL, call_index INTEGER NOT NULL,
    role TEXT NOT NULL, messages_hash TEXT NOT NULL, messages TEXT NOT NULL,
    temperature REAL, max_tokens INTEGER, seed INTEGER, sample_index INTEGER,
    response TEXT, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
    latency_s REAL, cached INTEGER NOT NULL, model TEXT, error TEXT, charged INTEGER NOT NULL,
    created REAL NOT NULL, retries INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (method, task, repeat, call_index));
CREATE TABLE IF NOT EXISTS sources (source_hash TEXT PRIMARY KEY, source TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS candidates (
    method TEXT NOT NULL, task TEXT NOT NULL, repeat INTEGER NOT NULL, candidate_index INTEGER NOT NULL,
    calls_used INTEGER NOT NULL, tokens_used INTEGER NOT NULL, source_hash TEXT NOT NULL,
    run_index INTEGER NOT NULL DEFAULT -1, evals_used INTEGER NOT NULL DEFAULT -1,
    PRIMARY KEY (method, task, repeat, candidate_index));
CREATE TABLE IF NOT EXISTS runs (
    method TEXT NOT NULL, task TEXT NOT NULL, repeat INTEGER NOT NULL, run_index INTEGER NOT NULL,
    calls_start INTEGER NOT NULL, calls_end INTEGER, independent INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (method, task, repeat, run_index));
CREATE TABLE IF NOT EXISTS examples (
    method TEXT NOT NULL, task TEXT NOT NULL, repeat INTEGER NOT NULL, call_index INTEGER NOT NULL,
    program TEXT NOT NULL, query_by TEXT NOT NULL, similarity REAL NOT NULL,
    PRIMARY KEY (method, task, repeat, call_index, program));
CREATE TABLE IF NOT EXISTS feedback (
    method TEXT NOT NULL, task TEXT NOT NULL, repeat INTEGER NOT NULL, feedback_index INTEGER NOT NULL,
    calls_used INTEGER NOT NULL, source_hash TEXT NOT NULL, verdict TEXT NOT NULL,
    PRIMARY KEY (method, task, repeat, feedback_index));
CREATE TABLE IF NOT EXISTS test_runs (
    method TEXT NOT NULL, task TEXT NOT NULL, repeat INTEGER NOT NULL, test_run_index INTEGER NOT NULL,
    calls_used INTEGER NOT NULL, source_hash TEXT NOT NULL, tests_hash TEXT NOT NULL, verdict TEXT NOT NULL,
    tests_passed INTEGER NOT NULL, tests_total INTEGER NOT NULL,
    PRIMARY KEY (method, task, repeat, test_run_index));
CREATE TABLE IF NOT EXISTS submissions (
    method TEXT NOT NULL, task TEXT NOT NULL, repeat INTEGER NOT NULL, submission_index INTEGER NOT NULL,
    calls_used INTEGER NOT NULL, tokens_used INTEGER NOT NULL, source_hash TEXT NOT NULL,
    evals_used INTEGER NOT NULL DEFAULT -1,
    PRIMARY KEY (method, task, repeat, submission_index));
CREATE TABLE IF NOT EXISTS evaluations (
    source_hash TEXT NOT NULL, task TEXT NOT NULL, case_set TEXT NOT NULL, device_key TEXT NOT NULL,
    timed INTEGER NOT NULL DEFAULT 0,
    verdict TEXT NOT NULL, evaluation TEXT NOT NULL, created REAL NOT NULL,
    queue_s REAL, compile_s REAL, correctness_s REAL, timing_s REAL, gate_s REAL, retry_s REAL, other_s REAL,
    start_s REAL,
    protocol TEXT, samples INTEGER, early_stopped INTEGER, baselines_reused INTEGER, drift_events INTEGER,
    PRIMARY KEY (source_hash, task, case_set, device_key, timed));
CREATE TABLE IF NOT EXISTS retried_calls (
    method TEXT NOT NULL, task TEXT NOT NULL, repeat INTEGER NOT NULL, call_index INTEGER NOT NULL,
    attempt INTEGER NOT NULL, role TEXT NOT NULL, error TEXT NOT NULL, charged INTEGER NOT NULL,
    retries INTEGER NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (method, task, repeat, call_index, attempt));
CREATE TABLE IF NOT EXISTS units (
    method TEXT NOT NULL, task TEXT NOT NULL, repeat INTEGER NOT NULL, status TEXT NOT NULL,
    calls_used INTEGER NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
    feedback_evals INTEGER NOT NULL, error TEXT,
    PRIMARY KEY (method, task, repeat));
"""


#: Phases an evaluation's seconds are kept for (judge/phases.py PHASES; a column `<phase>_s` each).
PHASES = ("queue", "start", "compile", "correctness", "timing", "gate", "retry", "other")
#: How each timing was taken (judge/policy.py PROTOCOLS), one column each, NULL for an evaluation
#: with no timing: the protocol, candidate samples over all cases, cases the sequential rule
#: stopped early, cases whose reference timings came from the worker's cache, drift events.
PROTOCOL_COLUMNS = ("protocol", "samples", "early_stopped", "baselines_reused", "drift_events")
#: The full interleaved protocol, also that of every timing recorded before the field existed
#: (judge/policy.py FINAL_FULL; results/ does not import judge/).
FULL_PROTOCOL = "final-full"
#: Stores written before the `timed` column marked a timed evaluation by this suffix on the device key.
LEGACY_TIMED_SUFFIX = "|timed"
UNIT_KEY = ("method", "task", "repeat")
EVENT_TABLES = {"candidates": "candidate_index", "feedback": "feedback_index", "test_runs": "test_run_index",
                "submissions": "submission_index", "examples": "call_index"}


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:32]


def protocol_columns(evaluation: dict[str, Any]) -> tuple[Any, ...]:
    """The PROTOCOL_COLUMNS of an evaluation, from its timing record (judge/candidate/verdict.py Timing):
    derived, so a replayed evaluation's columns are the recorded one's. A timing older than the
    protocol field was taken by the full protocol, with fresh, interleaved references."""
    timing = evaluation.get("timing")
    if not timing:
        return (None,) * len(PROTOCOL_COLUMNS)
    cases = timing.get("cases") or ()
    return (str(timing.get("protocol") or FULL_PROTOCOL), sum(len(c.get("candidate_ms") or ()) for c in cases),
            sum(bool(c.get("early_stopped")) for c in cases),
            sum(c.get("baseline_source") == "reused" for c in cases), len(timing.get("drift_events") or ()))


def _schema_columns(db: sqlite3.Connection) -> dict[str, set[str]]:
    tables = [str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {t: {str(r[1]) for r in db.execute(f"PRAGMA table_info({t})")} for t in tables}


_CURRENT: dict[str, set[str]] = {}


def _current_schema() -> dict[str, set[str]]:
    """Tables and columns of a store this code writes (SCHEMA, built once in memory)."""
    if not _CURRENT:
        db = sqlite3.connect(":memory:")
        db.executescript(SCHEMA)
        _CURRENT.update(_schema_columns(db))
        db.close()
    return _CURRENT


class Store:
    def __init__(self, path: Path, *, _db: sqlite3.Connection | None = None):
        """Open (or create) `path` for writing, migrated on disk; readers use `for_reading`."""
        self.path = Path(path)
        self._lock = threading.RLock()
        if _db is not None:
            self._db = _db
            return
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=60)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        self._migrate()

    @classmethod
    def for_reading(cls, path: Path) -> Store:
        """`path` opened without changing it: read-only, and migrated in memory when its schema
        is older (a copy of the whole store, made only then). Every write raises."""
        path = Path(path)
        if not path.is_file():
            raise RunFolderError(f"no run store at {path}")
        db = sqlite3.connect(read_only_uri(path), uri=True, check_same_thread=False, isolation_level=None,
                             timeout=60)
        try:
            have = _schema_columns(db)
            outdated = any(not columns <= have.get(table, set()) for table, columns in _current_schema().items())
            if outdated:
                memory = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
                db.backup(memory)
                db.close()
                db = memory
        except sqlite3.DatabaseError as exc:
            db.close()
            raise RunFolderError(f"{path} is not a run store: {exc}") from None
        db.row_factory = sqlite3.Row
        store = cls(path, _db=db)
        if outdated:
            db.executescript(SCHEMA)
            store._migrate()
        db.execute("PRAGMA query_only=ON")
        return store

    def _columns(self, table: str) -> set[str]:
        return {r[1] for r in self.query(f"PRAGMA table_info({table})")}

    def _migrate(self) -> None:
        """Stores written before a column existed gain it (with its default) on open, so they resume.

        The `timed` flag of an evaluation was once a `|timed` suffix on its device key; since it
        is part of the primary key, the table is rebuilt with the suffix moved into the column
        (in one transaction: a failure leaves the old table as it was)."""
        for table, column, ddl in (("calls", "retries", "INTEGER NOT NULL DEFAULT 0"),
                                   ("candidates", "run_index", "INTEGER NOT NULL DEFAULT -1"),
                                   ("runs", "independent", "INTEGER NOT NULL DEFAULT 1"),
                                   ("candidates", "evals_used", "INTEGER NOT NULL DEFAULT -1"),
                                   ("submissions", "evals_used", "INTEGER NOT NULL DEFAULT -1"),
                                   *(("evaluations", f"{p}_s", "REAL") for p in PHASES),
                                   *(("evaluations", c, "TEXT" if c == "protocol" else "INTEGER")
                                     for c in PROTOCOL_COLUMNS)):
            if column not in self._columns(table):
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}")
        if "timed" not in self._columns("evaluations"):
            self._move_timed_suffix()
        self._backfill_protocols()

    def _move_timed_suffix(self) -> None:
        n = len(LEGACY_TIMED_SUFFIX)
        legacy = f"device_key LIKE '%{LEGACY_TIMED_SUFFIX}'"
        create = SCHEMA[SCHEMA.index("CREATE TABLE IF NOT EXISTS evaluations"):]
        create = create[:create.index(";") + 1].replace("IF NOT EXISTS evaluations", "evaluations_migrated")
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(create)
                self._db.execute(
                    "INSERT INTO evaluations_migrated(source_hash, task, case_set, device_key, timed, verdict, "
                    f"evaluation, created) SELECT source_hash, task, case_set, CASE WHEN {legacy} THEN "
                    f"substr(device_key, 1, length(device_key) - {n}) ELSE device_key END, CASE WHEN {legacy} THEN 1 "
                    "ELSE 0 END, verdict, evaluation, created FROM evaluations")
                self._db.execute("DROP TABLE evaluations")
                self._db.execute("ALTER TABLE evaluations_migrated RENAME TO evaluations")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def _backfill_protocols(self) -> None:
        """Timed evaluations recorded before the protocol columns existed (all of them timings of
        the full protocol) get them filled from their record; cheap when there are none. (Selected by
        text, not SQLite's JSON functions: the records are Python's JSON, which writes NaN.)"""
        rows = self.query("SELECT rowid, evaluation FROM evaluations WHERE timed = 1 AND protocol IS NULL "
                          "AND evaluation NOT LIKE '%\"timing\": null%'")
        marks = ", ".join(f"{c}=?" for c in PROTOCOL_COLUMNS)
        for rowid, text in rows:
            self._write(f"UPDATE evaluations SET {marks} WHERE rowid=?", (*protocol_columns(json.loads(text)), rowid))

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------------ low level
    def _write(self, sql: str, params: tuple | dict) -> None:
        with self._lock:
            self._db.execute(sql, params)

    def query(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
        """Raw SQL, for tests and ad-hoc inspection; library code uses the named methods."""
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    # ------------------------------------------------------------------ meta
    def set_meta(self, key: str, value: Any) -> None:
        self._write("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))

    def get_meta(self, key: str, default: Any = None) -> Any:
        rows = self.query("SELECT value FROM meta WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else default

    # ------------------------------------------------------------------ calls
    def recorded_call(self, method: str, task: str, repeat: int, call_index: int) -> sqlite3.Row | None:
        rows = self.query("SELECT * FROM calls WHERE method=? AND task=? AND repeat=? AND call_index=?",
                          (method, task, repeat, call_index))
        return rows[0] if rows else None

    def record_call(self, row: dict[str, Any]) -> None:
        row = {**row, "created": time.time()}
        cols = ", ".join(row)
        marks = ", ".join(f":{k}" for k in row)
        self._write(f"INSERT INTO calls({cols}) VALUES ({marks})", row)

    # ------------------------------------------------------------------ sources and unit events
    def put_source(self, source: str) -> str:
        h = source_hash(source)
        self._write("INSERT OR IGNORE INTO sources(source_hash, source) VALUES (?, ?)", (h, source))
        return h

    def source(self, h: str) -> str:
        return str(self.query("SELECT source FROM sources WHERE source_hash=?", (h,))[0][0])

    def record_event(self, table: str, row: dict[str, Any]) -> None:
        """Candidates, feedback, a method's own test runs, submissions and the one-shot examples
        each call showed (with their similarity to the task's answer). A resumed unit
        replays the same events with the same keys; OR IGNORE keeps the first copy and makes
        the replay a no-op."""
        assert table in EVENT_TABLES
        cols = ", ".join(row)
        marks = ", ".join(f":{k}" for k in row)
        self._write(f"INSERT OR IGNORE INTO {table}({cols}) VALUES ({marks})", row)

    # ------------------------------------------------------------------ independent runs
    def begin_run(self, method: str, task: str, repeat: int, run_index: int, calls_start: int,
                  independent: bool = True) -> None:
        """A method's run (GEAK run, Reflexion trial, direct sample) starts; its `calls_end`
        stays NULL until it is known to have finished (a budget cut leaves it NULL).
        `independent` is the method's declaration that its runs are independent draws."""
        self._write("INSERT OR IGNORE INTO runs(method, task, repeat, run_index, calls_start, independent) "
                    "VALUES (?, ?, ?, ?, ?, ?)", (method, task, repeat, run_index, calls_start, int(independent)))

    def end_run(self, method: str, task: str, repeat: int, run_index: int, calls_end: int) -> None:
        self._write("UPDATE runs SET calls_end=? WHERE method=? AND task=? AND repeat=? AND run_index=?",
                    (calls_end, method, task, repeat, run_index))

    # ------------------------------------------------------------------ evaluations
    def evaluation(self, h: str, task: str, case_set: str, device_key: str, timed: bool = False) -> dict[str, Any] | None:
        rows = self.query("SELECT evaluation FROM evaluations WHERE source_hash=? AND task=? AND case_set=? "
                          "AND device_key=? AND timed=?", (h, task, case_set, device_key, int(timed)))
        return json.loads(rows[0][0]) if rows else None

    def record_evaluation(self, h: str, task: str, case_set: str, device_key: str, evaluation: dict[str, Any],
                          timed: bool = False, phases: dict[str, float] | None = None) -> None:
        """One evaluation; `timed` when it also timed the candidate (a GPU's hidden or visible
        run with timing). A timed evaluation judges the same case set and then re-checks the
        output after timing, so its verdict can differ from the untimed one's
        (results/readers.py `hidden_verdicts` counts a candidate correct only when both say so).
        `phases`: seconds per phase (judge/phases.py), one column each; NULL when not measured
        (a replayed evaluation, or a store written before they were kept). The protocol columns
        are read off the evaluation's timing (`protocol_columns`)."""
        seconds = [None if phases is None or p not in phases else float(phases[p]) for p in PHASES]
        self._write(
            "INSERT OR IGNORE INTO evaluations(source_hash, task, case_set, device_key, timed, verdict, evaluation, "
            f"created, {', '.join(f'{p}_s' for p in PHASES)}, {', '.join(PROTOCOL_COLUMNS)}) "
            f"VALUES ({', '.join('?' * (8 + len(PHASES) + len(PROTOCOL_COLUMNS)))})",
            (h, task, case_set, device_key, int(timed), evaluation["verdict"]["kind"], json.dumps(evaluation),
             time.time(), *seconds, *protocol_columns(evaluation)),
        )

    # ------------------------------------------------------------------ units
    def unit_status(self, method: str, task: str, repeat: int) -> str | None:
        rows = self.query("SELECT status FROM units WHERE method=? AND task=? AND repeat=?", (method, task, repeat))
        return str(rows[0][0]) if rows else None

    def errored_units(self) -> list[tuple[str, str, int]]:
        """Finished units that ended on an error (a model call that failed for good)."""
        return [(r[0], r[1], int(r[2])) for r in self.query(
            "SELECT method, task, repeat FROM units WHERE error IS NOT NULL ORDER BY method, task, repeat")]

    def reopen_errored_unit(self, method: str, task: str, repeat: int) -> None:
        """Make an errored unit run again (`--resume --retry-errors`): its failed calls move to
        `retried_calls` (kept, and still counted as failed calls), so the resumed unit replays
        its good calls from the record and sends the failed ones again; its unit row goes, so
        it is no longer done. Candidates and evaluations stay: the replay meets them again."""
        key = (method, task, repeat)
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.execute(
                    "INSERT INTO retried_calls(method, task, repeat, call_index, attempt, role, error, charged, retries, "
                    "created) SELECT c.method, c.task, c.repeat, c.call_index, "
                    "(SELECT COUNT(*) FROM retried_calls r WHERE r.method=c.method AND r.task=c.task AND "
                    "r.repeat=c.repeat AND r.call_index=c.call_index), c.role, c.error, c.charged, c.retries, c.created "
                    "FROM calls c WHERE c.method=? AND c.task=? AND c.repeat=? AND c.error IS NOT NULL", key)
                self._db.execute("DELETE FROM calls WHERE method=? AND task=? AND repeat=? AND error IS NOT NULL", key)
                self._db.execute("DELETE FROM units WHERE method=? AND task=? AND repeat=?", key)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def finish_unit(self, method: str, task: str, repeat: int, status: str, calls: int, prompt_tokens: int,
                    completion_tokens: int, feedback_evals: int, error: str | None = None) -> None:
        self._write(
            "INSERT OR REPLACE INTO units(method, task, repeat, status, calls_used, prompt_tokens, completion_tokens, "
            "feedback_evals, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (method, task, repeat, status, calls, prompt_tokens, completion_tokens, feedback_evals, error),
        )

    def unit_spend(self, method: str, task: str, repeat: int) -> dict[str, int] | None:
        """A recorded unit's calls and tokens (None when the unit has no row)."""
        rows = self.query("SELECT calls_used, prompt_tokens, completion_tokens FROM units "
                          "WHERE method=? AND task=? AND repeat=?", (method, task, repeat))
        return dict(rows[0]) if rows else None

    def unit_candidate_hashes(self, method: str, task: str, repeat: int) -> list[str]:
        """The distinct sources a unit proposed, in the order it first proposed them."""
        rows = self.query("SELECT source_hash, MIN(candidate_index) AS first FROM candidates "
                          "WHERE method=? AND task=? AND repeat=? GROUP BY source_hash ORDER BY first",
                          (method, task, repeat))
        return [str(r[0]) for r in rows]

    def unit_submissions(self, method: str, task: str, repeat: int) -> list[tuple[str, int]]:
        """A unit's submissions in order: (source hash, calls used when it was submitted)."""
        rows = self.query("SELECT source_hash, calls_used FROM submissions WHERE method=? AND task=? AND repeat=? "
                          "ORDER BY submission_index", (method, task, repeat))
        return [(str(r[0]), int(r[1])) for r in rows]

    def final_submission(self, method: str, task: str, repeat: int) -> str | None:
        """The source hash a unit submitted last (None when it submitted nothing)."""
        rows = self.query("SELECT source_hash FROM submissions WHERE method=? AND task=? AND repeat=? "
                          "ORDER BY submission_index DESC LIMIT 1", (method, task, repeat))
        return str(rows[0][0]) if rows else None

    # ------------------------------------------------------------------ reading a whole run (results/readers.py)
    def _rows(self, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
        return [dict(r) for r in self.query(sql, params)]

    def units(self, done: bool = True) -> list[dict[str, Any]]:
        """Unit rows, finished ones (`done`) or the others, in unit-key order."""
        op = "=" if done else "!="
        return self._rows(f"SELECT * FROM units WHERE status {op} 'done' ORDER BY method, task, repeat")

    def events(self, table: str) -> list[dict[str, Any]]:
        """Every row of an event table (candidates, feedback, test_runs, submissions, examples), in unit
        and index order."""
        index = EVENT_TABLES[table]
        return self._rows(f"SELECT * FROM {table} ORDER BY method, task, repeat, {index}")

    def retried_calls(self) -> list[dict[str, Any]]:
        """Failed calls that `--retry-errors` sent again (their failures, kept)."""
        return self._rows("SELECT * FROM retried_calls ORDER BY method, task, repeat, call_index, attempt")

    def runs(self) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM runs ORDER BY method, task, repeat, run_index")

    def calls(self, columns: tuple[str, ...]) -> list[dict[str, Any]]:
        """Chosen columns of every call (the messages and responses are large: ask only for what is needed)."""
        have = self._columns("calls")
        unknown = [c for c in columns if c not in have]
        if unknown:
            raise ValueError(f"calls has no column(s) {unknown}")
        return self._rows(f"SELECT {', '.join(columns)} FROM calls ORDER BY method, task, repeat, call_index")

    def evaluations(self) -> list[dict[str, Any]]:
        """Every evaluation: key (with `timed` as 0/1), verdict kind, the evaluation's JSON text and
        the seconds of each phase (`queue_s`, `compile_s`, `correctness_s`, `timing_s`, `gate_s`,
        `retry_s`, `other_s`, `start_s`; None when not measured), how it was timed (PROTOCOL_COLUMNS; None when not
        timed) and when it was stored (`created`)."""
        return self._rows("SELECT source_hash, task, case_set, device_key, timed, verdict, evaluation, "
                          f"{', '.join(f'{p}_s' for p in PHASES)}, {', '.join(PROTOCOL_COLUMNS)}, created FROM evaluations "
                          "ORDER BY source_hash, task, case_set, device_key, timed")

    # ------------------------------------------------------------------ reading for inspection (runs list, show)
    def unit_counts(self) -> dict[tuple[str, str], int]:
        """(method, status) -> number of units: what finished and what did not."""
        return {(str(r[0]), str(r[1])): int(r[2])
                for r in self.query("SELECT method, status, COUNT(*) FROM units GROUP BY method, status")}

    def unit_calls(self, method: str, task: str, repeat: int) -> list[dict[str, Any]]:
        """Every model call of one unit, prompts and replies included, in call order."""
        return self._rows(
            "SELECT call_index, role, messages, response, prompt_tokens, completion_tokens, latency_s, cached, error, "
            "charged, retries FROM calls WHERE method=? AND task=? AND repeat=? ORDER BY call_index",
            (method, task, repeat))

    def last_activity(self) -> float | None:
        """When the store was last written by a run (its latest call or evaluation), as a Unix time."""
        row = self.query("SELECT MAX(t) FROM (SELECT MAX(created) AS t FROM calls "
                         "UNION ALL SELECT MAX(created) FROM evaluations)")
        return float(row[0][0]) if row and row[0][0] is not None else None
