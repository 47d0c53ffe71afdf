"""How `compare` shows its progress: a live bar on a terminal, one line per finished unit elsewhere.

Why: a bar redraws itself with carriage returns at every model call; on a terminal that is one
line that moves, but with stderr redirected to a file or a CI log it is one line that grows by
an update per call (213 KB for a small run). Where the stream is not a terminal the display
writes one complete line per finished unit instead (units done, the unit, budget spent,
evaluations run), which a log keeps readable.
"""

from __future__ import annotations

import threading
from typing import Any, TextIO

from runners.progress import Progress, RunStarted


def is_terminal(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):  # a closed or detached stream
        return False


class ProgressDisplay:
    """`start` when the run's units are known, `update` at every `Progress` change, `close` at the end.
    `live`: draw a bar (default: when `stream` is a terminal); otherwise a line per finished unit."""

    def __init__(self, stream: TextIO, live: bool | None = None):
        self.stream = stream
        self.live = is_terminal(stream) if live is None else live
        self._bar: Any = None
        self._printed = 0
        self._lock = threading.Lock()

    def start(self, started: RunStarted) -> None:
        if self.live:  # made only now, so the run-folder and model lines are not printed through a half-drawn bar
            from tqdm import tqdm

            self._bar = tqdm(total=1, unit=started.budget_unit, desc="budget", dynamic_ncols=True, file=self.stream)

    def update(self, p: Progress) -> None:
        if self._bar is not None:  # advances at every model call; finished units release what they left unspent
            self._bar.total = p.budget_total
            self._bar.n = p.work
            self._bar.set_postfix_str(f"units {p.units_done}/{p.total_units}, spent {p.spent} {p.unit}, "
                                      f"{p.evaluations} evaluations", refresh=True)
            return
        if self.live:
            return
        with self._lock:
            names = p.finished[self._printed:]
            for i, name in enumerate(names, start=self._printed + 1):
                self.stream.write(f"unit {i}/{p.total_units} finished: {name}; spent {p.spent} of "
                                  f"{p.budget_total} {p.unit}, {p.evaluations} evaluations\n")
            self._printed += len(names)
            if names:
                self.stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
