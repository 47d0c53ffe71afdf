"""Opening a run's SQLite store without changing it or its folder.

`mode=ro` alone is not enough for a store in WAL mode: SQLite creates `-wal` and `-shm` files
beside a read-only connection when none exist, and leaves them, so reading a shipped or
archived run folder would add files to it. The URI here asks for `mode=ro` only while a `-wal`
file exists (a writer has the store open, or ended without a checkpoint: what it committed is
read), and `immutable=1` otherwise (nothing is created, no lock is taken). A writer that starts
on the store while such a reader still holds it may change pages under that reader, which then
fails with a database error rather than reading a mix: run the reader again.

Used by every reader of a store: record/store.py (`Store.for_reading`) and record/recorded.py
(a recorded run's calls and evaluations, read for a replay).
"""

from __future__ import annotations

from pathlib import Path


def read_only_uri(path: Path | str) -> str:
    """The SQLite URI (for `sqlite3.connect(..., uri=True)`) that reads `path` unchanged."""
    path = Path(path).resolve()
    wal = path.with_name(path.name + "-wal")
    return f"{path.as_uri()}?mode=ro" + ("" if wal.exists() else "&immutable=1")
