"""How much of a run is done: units finished out of units planned, per method.

Why: a report, a figure or an export made from an unfinished run must say so loudly. The
plan is what config.json recorded (every method x every task x every repeat); what is done
is what the store marked done. Units never started are in no table of the store, so the
plan cannot be read from the store alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from record.run_folder import RunFolder
from record.store import Store


@dataclass(frozen=True)
class RunProgress:
    """Units planned and done per method (in the run's method order), summed over runs when combined."""

    planned: dict[str, int]
    done: dict[str, int]
    unfinished: dict[str, int] = field(default_factory=dict)  # started (or errored) and not marked done

    @property
    def units_planned(self) -> int:
        return sum(self.planned.values())

    @property
    def units_done(self) -> int:
        return sum(self.done.get(m, 0) for m in self.planned)

    @property
    def complete(self) -> bool:
        return all(self.done.get(m, 0) >= n for m, n in self.planned.items())

    @property
    def status(self) -> str:
        if self.complete:
            return "complete"
        return "partial" if self.units_done else "not started"

    def per_method(self) -> str:
        return ", ".join(f"{m} {self.done.get(m, 0)}/{n}" for m, n in self.planned.items())

    def banner(self) -> str | None:
        """One line for the top of a report, a figure folder or an export; None when complete."""
        if self.complete:
            return None
        return (f"PARTIAL RUN: {self.units_done} of {self.units_planned} units done ({self.per_method()}); "
                "everything below shows only the finished units")

    def to_json(self) -> dict[str, object]:
        return {"status": self.status, "units_planned": self.units_planned, "units_done": self.units_done,
                "planned": dict(self.planned), "done": {m: self.done.get(m, 0) for m in self.planned},
                "unfinished": dict(self.unfinished)}

    def __add__(self, other: RunProgress) -> RunProgress:
        def merged(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
            return {m: a.get(m, 0) + b.get(m, 0) for m in dict.fromkeys([*a, *b])}

        return RunProgress(merged(self.planned, other.planned), merged(self.done, other.done),
                           merged(self.unfinished, other.unfinished))


def run_progress(path: Path) -> RunProgress:
    """The plan from config.json and the finished units from the store (RunFolderError when the
    folder is not a run)."""
    folder = RunFolder(path)
    recorded = folder.read_config()
    methods = [str(m) for m in recorded.config["methods"]]
    per_method = len(recorded.resolved.tasks) * int(recorded.config["repeats"])
    counts: dict[tuple[str, str], int] = {}
    if folder.has_store():
        store = Store.for_reading(folder.store_path)
        try:
            counts = store.unit_counts()
        finally:
            store.close()
    done = {m: counts.get((m, "done"), 0) for m in methods}
    unfinished = {m: sum(n for (mm, status), n in counts.items() if mm == m and status != "done") for m in methods}
    return RunProgress({m: per_method for m in methods}, done, {m: n for m, n in unfinished.items() if n})


def runs_progress(paths: list[Path] | tuple[Path, ...]) -> RunProgress:
    total = RunProgress({}, {})
    for p in paths:
        total = total + run_progress(Path(p))
    return total
