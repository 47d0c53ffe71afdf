"""`runs list [DIR]`: one line per run folder under a folder, read from its files only.

Why: run folders are named by date and a hash; a user (or a reviewer handed a directory of
them) needs to see which run is which, which finished, and how long each took, without
opening any. Folders that are not runs are skipped; a run whose files cannot be read is
listed with the reason instead of stopping the listing.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from record.progress import run_progress
from record.run_folder import RunFolder, RunFolderError
from record.store import Store


@dataclass(frozen=True)
class RunRow:
    id: str
    path: str
    started: str | None  # local time, from env.json
    model: str
    simulated: bool
    budget: int | None
    budget_unit: str
    methods: tuple[str, ...]
    tasks: int
    repeats: int
    status: str  # complete | partial | not started | unreadable
    units_done: int
    units_planned: int
    wall_s: float | None  # first start to the last call or evaluation recorded
    problem: str | None = None  # why an unreadable folder could not be read

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["methods"] = list(self.methods)
        return d


def list_runs(root: Path) -> list[RunRow]:
    """Every run folder directly under `root` (or `root` itself when it is one), oldest first.
    RunFolderError when `root` is not a folder."""
    root = Path(root)
    if not root.is_dir():
        raise RunFolderError(f"{root} is not a folder")
    if RunFolder(root).has_config():
        return [read_row(root)]
    return [read_row(p) for p in sorted(root.iterdir()) if p.is_dir() and RunFolder(p).has_config()]


def read_row(path: Path) -> RunRow:
    folder = RunFolder(path)
    try:
        recorded = folder.read_config()
        env = folder.read_env()
        progress = run_progress(path)
    except RunFolderError as exc:
        return RunRow(path.name, str(path), None, "", False, None, "", (), 0, 0, "unreadable", 0, 0, None, str(exc))
    started = env.get("started")
    last = None
    if folder.has_store():
        store = Store.for_reading(folder.store_path)
        try:
            last = store.last_activity()
        finally:
            store.close()
    wall = last - float(started) if started is not None and last is not None else None
    return RunRow(
        id=path.name, path=str(path),
        started=_dt.datetime.fromtimestamp(float(started)).strftime("%Y-%m-%d %H:%M") if started else None,
        model=recorded.resolved.model, simulated=recorded.resolved.simulated, budget=int(recorded.config["budget"]),
        budget_unit=recorded.resolved.budget_unit, methods=tuple(recorded.config["methods"]),
        tasks=len(recorded.resolved.tasks), repeats=int(recorded.config["repeats"]), status=progress.status,
        units_done=progress.units_done, units_planned=progress.units_planned,
        wall_s=max(0.0, wall) if wall is not None else None)


def format_rows(rows: list[RunRow]) -> str:
    header = (f"{'id':<26} {'started':<16} {'model':<36} {'budget':>14} {'methods':<24} {'tasks':>5} {'rep':>3} "
              f"{'status':<20} {'wall':>8}")
    lines = [header, "-" * len(header)]
    for r in rows:
        if r.status == "unreadable":
            lines.append(f"{r.id:<26} unreadable: {r.problem}")
            continue
        model = ("SIMULATED " if r.simulated else "") + r.model
        status = f"{r.status} {r.units_done}/{r.units_planned}" if r.status != "complete" else "complete"
        wall = _duration(r.wall_s)
        lines.append(f"{r.id:<26} {r.started or '?':<16} {model[:36]:<36} {f'{r.budget} {r.budget_unit}':>14} "
                     f"{','.join(r.methods)[:24]:<24} {r.tasks:>5} {r.repeats:>3} {status:<20} {wall:>8}")
    if not rows:
        lines.append("(no run folders)")
    return "\n".join(lines)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
