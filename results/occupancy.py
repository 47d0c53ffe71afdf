"""Whether a run was bound by its workers or by its units' chains: jobs running and waiting over time.

A run's wall time has two very different floors. Where jobs wait in the queue while every
worker is busy, the run is bound by the judge's capacity: its wall is about the workers'
seconds over the number of workers, and only cheaper jobs or more workers move it. Where
workers sit idle with nothing queued, the run waits on its units' own sequences (a method asks
for the next evaluation only after the last one's feedback): only shorter chains move it,
and more workers would not. The per-phase worker-seconds (results/phases.py) cannot tell the
two apart; this sweep over the stored jobs' intervals can.

Each judged evaluation row gives its end (`created`), its queue wait and its worker-side
seconds (every other phase column); a row no job judged (earlier results decided it) has no
phase seconds and is left out. Pure pandas and arithmetic over the readers' frames.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from record.run_folder import RunFolder, RunFolderError
from results.phases import PHASE_COLUMNS, judged_by_a_job

WORK_COLUMNS = tuple(c for c in PHASE_COLUMNS if c != "queue_s")


@dataclass(frozen=True)
class Occupancy:
    """The stored jobs' intervals swept from the first job asked to the last one ended."""

    jobs: int
    span_s: float
    mean_running: float  # jobs a worker was on, time-averaged over the span
    mean_queued: float  # jobs asked and not yet taken, likewise
    saturated_share: float | None  # of the span: every worker busy and a job waiting (capacity-bound)
    starved_share: float | None  # of the span: a worker free and nothing waiting (bound by the units' chains)
    workers: int | None

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    def line(self) -> str:
        text = (f"{self.jobs} jobs over {self.span_s:.1f} s: on average {self.mean_running:.2f} running "
                f"and {self.mean_queued:.2f} waiting")
        if self.saturated_share is not None and self.starved_share is not None:
            text += (f"; every one of the {self.workers} workers busy with jobs waiting "
                     f"{100 * self.saturated_share:.0f}% of it, a worker free with none waiting "
                     f"{100 * self.starved_share:.0f}%")
        return text


def job_intervals(evaluations: pd.DataFrame) -> pd.DataFrame:
    """One row per judged job: `asked`, `started` and `ended`, in the store's clock (seconds)."""
    if evaluations.empty or "created" not in evaluations.columns:
        return pd.DataFrame({"asked": [], "started": [], "ended": []}, dtype=float)
    judged = evaluations[judged_by_a_job(evaluations)]
    ended = judged["created"].astype(float)
    work = judged[list(WORK_COLUMNS)].fillna(0.0).sum(axis=1).astype(float)
    started = ended - work
    asked = started - judged["queue_s"].fillna(0.0).astype(float)
    return pd.DataFrame({"asked": asked.to_numpy(), "started": started.to_numpy(), "ended": ended.to_numpy()})


def occupancy(intervals: pd.DataFrame, workers: int | None = None) -> Occupancy | None:
    """The sweep: between consecutive interval boundaries the counts of jobs running (started,
    not ended) and waiting (asked, not started) are constant, so each share is exact. With no
    worker count the saturated and starved shares are not given. None when no job was judged."""
    if intervals.empty:
        return None
    events = sorted([*((t, 0, 1) for t in intervals["asked"]), *((t, 0, -1) for t in intervals["started"]),
                     *((t, 1, 1) for t in intervals["started"]), *((t, 1, -1) for t in intervals["ended"])])
    first, last = events[0][0], events[-1][0]
    span = last - first
    counts = [0, 0]  # waiting, running
    area = [0.0, 0.0]
    saturated = starved = 0.0
    previous = first
    for when, which, step in events:
        width = when - previous
        if width > 0:
            area[0] += counts[0] * width
            area[1] += counts[1] * width
            if workers is not None:
                if counts[1] >= workers and counts[0] > 0:
                    saturated += width
                elif counts[1] < workers and counts[0] == 0:
                    starved += width
            previous = when
        counts[which] += step
    per_s = 1.0 / span if span > 0 else 0.0
    return Occupancy(len(intervals), span, area[1] * per_s, area[0] * per_s,
                     saturated * per_s if workers is not None else None,
                     starved * per_s if workers is not None else None, workers)


def planned_workers(run_dir: Path) -> int | None:
    """The judging workers config.json's executor plan recorded (runners/sizing.py), or None
    where the run predates it or the folder cannot be read."""
    try:
        plan = RunFolder(run_dir).read_executor() or {}
        return int(plan["workers"]) if "workers" in plan else None
    except (RunFolderError, ValueError, TypeError):
        return None
