"""What a run tells its caller while it runs: `RunStarted` once the units are known, and
`Progress`, the counts behind the progress bar, at every model call, evaluation and finished
unit (`CompareOptions.on_start`, `on_progress`; runners/progress_display.py draws them)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from modelio.ledger import Charge


@dataclass(frozen=True)
class RunStarted:
    """Told to `CompareOptions.on_start` once the run folder is ready, before any unit runs."""

    run_dir: Path
    resumed: bool
    total_units: int
    budget_unit: str


class Progress:
    """Counts for the progress bar, updated at every model call, evaluation and finished unit.

    `spent` is what the ledger charged (in the budget's unit, replayed calls of a resumed unit
    included); `work` is `spent` plus the unspent budget of finished units (a method may stop
    early), so it reaches `budget_total` exactly when the last unit ends: a bar drawn from it
    advances with every call and ends full."""

    def __init__(self, total_units: int, budget_total: int, on_change: Callable[[Progress], None] | None = None,
                 unit: str = "calls"):
        self.total_units = total_units
        self.budget_total = budget_total
        self.unit = unit
        self.units_done = 0
        self.spent = 0
        self.evaluations = 0
        self.released = 0  # budget that finished units left unspent
        self.finished: list[str] = []  # "method/task/repeat N" of each finished unit, in finishing order
        self._lock = threading.Lock()
        self._on_change = on_change

    @property
    def work(self) -> int:
        return self.spent + self.released

    def _changed(self) -> None:
        if self._on_change:
            self._on_change(self)

    def charged(self, charge: Charge) -> None:
        """The ledger charged a call (live or replayed)."""
        amount = {"calls": charge.calls, "output_tokens": charge.completion_tokens,
                  "total_tokens": charge.prompt_tokens + charge.completion_tokens}[self.unit]
        with self._lock:
            self.spent += amount
        self._changed()

    def evaluated(self) -> None:
        with self._lock:
            self.evaluations += 1
        self._changed()

    def unit_finished(self, unspent: int, spent: int = 0, unit: str = "") -> None:
        """A unit ended with `unspent` budget left; `spent` is its spend when the ledger never saw
        it charged (a unit finished before a resume); `unit` names it for a line per unit."""
        with self._lock:
            self.units_done += 1
            self.finished.append(unit or f"unit {self.units_done}")
            self.released += max(0, unspent)
            self.spent += spent
        self._changed()
