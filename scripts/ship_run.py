#!/usr/bin/env python
"""Copy a finished run folder into the repository as a compact, read-only example.

Why: reviewers and the figure tests need a recorded GPU run to draw every figure on a CPU
(benchmarks/results/gpu_run_small/). A run folder as written holds a WAL-mode SQLite store and
outputs (report/, figures/, export/) that do not belong in the repository; this copies only the run's
own files (RunFolder's config.json, env.json, summary.json, run.log and store.sqlite), the
store through SQLite's backup API and VACUUM (one compact file, no -wal/-shm), and refuses
the result when it is larger than --max-mb.

    python scripts/ship_run.py RUN_DIR benchmarks/results/gpu_run_small [--max-mb 4]
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from record.progress import run_progress  # noqa: E402
from record.run_folder import RunFolder  # noqa: E402


def ship(src: Path, dest: Path, max_mb: float) -> int:
    folder, out = RunFolder(src), RunFolder(dest)
    progress = run_progress(src)
    if not progress.complete or folder.read_summary() is None:
        print(f"refused: {src} is not a finished run ({progress.per_method()})", file=sys.stderr)
        return 2
    dest.mkdir(parents=True, exist_ok=True)
    for a, b in ((folder.config_path, out.config_path), (folder.env_path, out.env_path),
                 (folder.summary_path, out.summary_path), (folder.log_path, out.log_path)):
        if a.is_file():
            shutil.copyfile(a, b)
    out.store_path.unlink(missing_ok=True)
    with sqlite3.connect(folder.store_path) as source, sqlite3.connect(out.store_path) as target:
        source.backup(target)
        target.execute("PRAGMA journal_mode=DELETE")
    with sqlite3.connect(out.store_path) as target:
        target.execute("VACUUM")
    size = sum(p.stat().st_size for p in dest.iterdir() if p.is_file())
    print(f"{dest}: {size / 1e6:.2f} MB ({', '.join(p.name for p in sorted(dest.iterdir()))})")
    if size > max_mb * 1e6:
        print(f"refused: larger than {max_mb} MB", file=sys.stderr)
        return 1
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--max-mb", type=float, default=4.0)
    args = parser.parse_args()
    sys.exit(ship(args.run_dir, args.dest, args.max_mb))


if __name__ == "__main__":
    main()
