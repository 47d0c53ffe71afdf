"""A recorded run read back for `compare --replay`: its model calls and its evaluations.

Why here: a replay answers every model call (modelio/replay.py `ReplayClient`) and every
evaluation (runners, `RecordedEvaluations`) from what the recorded run's store holds, and
SQL lives in record/ only. Both read the whole store once, read-only (record/read_only.py:
nothing is added beside a shipped store), and hold it in memory; neither needs the store to be
of this code's schema: a store written before a column existed is read as it is.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from record.read_only import read_only_uri
from record.store import LEGACY_TIMED_SUFFIX

#: One recorded model call: a row of the store's `calls` table, every column by name (a store
#: written before `retries` was kept has no such key).
CallRow = dict[str, Any]


@dataclass(frozen=True)
class RecordedCalls:
    """What a replay of a recorded run's model calls needs, read once."""

    path: Path
    calls: list[CallRow]  # in (method, task, repeat, call_index) order
    # method, task, repeat, source_hash, calls_used of every submission, in unit and submission order
    submissions: list[dict[str, Any]]
    meta: dict[str, Any] = field(default_factory=dict)  # the store's meta table, values decoded


def _connect(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise FileNotFoundError(f"no recorded run store at {path}")
    return sqlite3.connect(read_only_uri(path), uri=True)


def recorded_calls(path: str | Path) -> RecordedCalls:
    """The calls, submissions and meta of the store at `path` (FileNotFoundError when there is
    none, ValueError when it is not a run store)."""
    path = Path(path)
    db = _connect(path)
    db.row_factory = sqlite3.Row
    try:
        calls = [dict(r) for r in db.execute("SELECT * FROM calls ORDER BY method, task, repeat, call_index")]
        submissions = [dict(r) for r in db.execute(
            "SELECT method, task, repeat, source_hash, calls_used FROM submissions "
            "ORDER BY method, task, repeat, submission_index")]
        meta = {str(r["key"]): json.loads(r["value"]) for r in db.execute("SELECT key, value FROM meta")}
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{path} is not a run store: {exc}") from None
    finally:
        db.close()
    return RecordedCalls(path, calls, submissions, meta)


class RecordedEvaluations:
    """A recorded run's evaluations, read once and held in memory, for `compare --replay`: the
    replay answers every evaluation from them instead of running a worker (exact replay,
    design invariant 8). Opened read-only; a store written before `timed` was a column (a
    `|timed` suffix on the device key) is read as if migrated."""

    def __init__(self, path: Path):
        self.path = Path(path)
        db = _connect(self.path)
        try:
            columns = {r[1] for r in db.execute("PRAGMA table_info(evaluations)")}
            timed = "timed" if "timed" in columns else "0"
            rows = db.execute(f"SELECT source_hash, task, case_set, device_key, {timed}, evaluation FROM evaluations")
            self._rows: dict[tuple[str, str, str, str, bool], str] = {}
            for h, task, case_set, device_key, is_timed, evaluation in rows:
                if device_key.endswith(LEGACY_TIMED_SUFFIX):
                    device_key, is_timed = device_key[:-len(LEGACY_TIMED_SUFFIX)], 1
                self._rows[(h, task, case_set, device_key, bool(is_timed))] = evaluation
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{self.path} is not a run store: {exc}") from None
        finally:
            db.close()

    def __len__(self) -> int:
        return len(self._rows)

    def evaluation(self, h: str, task: str, case_set: str, device_key: str, timed: bool = False) -> dict[str, Any] | None:
        text = self._rows.get((h, task, case_set, device_key, bool(timed)))
        return json.loads(text) if text is not None else None
