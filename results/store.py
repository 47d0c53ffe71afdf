"""The run store: one SQLite file (WAL mode) per run, written as things happen.

Every row is keyed by what it is, never by position: calls by (method, task, repeat,
call_index), candidates and submissions by their index within a unit, evaluations by
(source hash, task, case set, device). That is what makes resume exact (design invariant
5): a resumed unit replays its recorded calls and evaluations by key, and primary keys make
a duplicate row impossible rather than merely unlikely. Each write commits at once; WAL
keeps committed rows through a SIGKILL of the writer.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

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
    run_index INTEGER NOT NULL DEFAULT -1,
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
    PRIMARY KEY (method, task, repeat, submission_index));
CREATE TABLE IF NOT EXISTS evaluations (
    source_hash TEXT NOT NULL, task TEXT NOT NULL, case_set TEXT NOT NULL, device_key TEXT NOT NULL,
    verdict TEXT NOT NULL, evaluation TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (source_hash, task, case_set, device_key));
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


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:32]


class Store:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=60)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        self._add_missing_columns()

    def _add_missing_columns(self) -> None:
        """Stores written before a column existed gain it (with its default) on open, so they resume."""
        for table, column, ddl in (("calls", "retries", "INTEGER NOT NULL DEFAULT 0"),
                                   ("candidates", "run_index", "INTEGER NOT NULL DEFAULT -1"),
                                   ("runs", "independent", "INTEGER NOT NULL DEFAULT 1")):
            have = {r[1] for r in self._db.execute(f"PRAGMA table_info({table})")}
            if column not in have:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------------ low level
    def _write(self, sql: str, params: tuple | dict) -> None:
        with self._lock:
            self._db.execute(sql, params)

    def query(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
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
        assert table in ("candidates", "feedback", "test_runs", "submissions", "examples")
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
    def evaluation(self, h: str, task: str, case_set: str, device_key: str) -> dict[str, Any] | None:
        rows = self.query("SELECT evaluation FROM evaluations WHERE source_hash=? AND task=? AND case_set=? AND device_key=?",
                          (h, task, case_set, device_key))
        return json.loads(rows[0][0]) if rows else None

    def record_evaluation(self, h: str, task: str, case_set: str, device_key: str, evaluation: dict[str, Any]) -> None:
        self._write(
            "INSERT OR IGNORE INTO evaluations(source_hash, task, case_set, device_key, verdict, evaluation, created) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (h, task, case_set, device_key, evaluation["verdict"]["kind"], json.dumps(evaluation), time.time()),
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

