"""results/occupancy.py: a run's jobs swept over time, capacity-bound against chain-bound."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from results.occupancy import job_intervals, occupancy
from results.phases import PHASE_COLUMNS


def _evaluations(jobs: list[tuple[float, float, float]]) -> pd.DataFrame:
    """Stored rows from (ended, queue seconds, compile seconds); other phases measured as 0."""
    rows = []
    for ended, queued, compiled in jobs:
        row = {c: 0.0 for c in PHASE_COLUMNS} | {"queue_s": queued, "compile_s": compiled, "created": ended}
        rows.append(row)
    return pd.DataFrame(rows)


def test_each_job_is_placed_from_its_end_back_through_its_phases() -> None:
    frame = _evaluations([(10.0, 2.0, 3.0)])
    frame.loc[0, "gate_s"] = 1.0  # a worker held at the gate is a busy worker
    intervals = job_intervals(frame)
    assert intervals.to_dict("records") == [{"asked": 4.0, "started": 6.0, "ended": 10.0}]


def test_a_row_no_job_judged_is_left_out() -> None:
    frame = _evaluations([(10.0, 0.0, 1.0), (11.0, 0.0, 1.0)])
    frame.loc[1, list(PHASE_COLUMNS)] = math.nan  # decided by earlier results: no job, no phases
    assert len(job_intervals(frame)) == 1


def test_a_queue_behind_every_worker_is_capacity_bound() -> None:
    # two workers, four jobs of 2 s asked at 0: two run 0-2 while two wait, then those run 2-4
    swept = occupancy(job_intervals(_evaluations([(2.0, 0.0, 2.0), (2.0, 0.0, 2.0), (4.0, 2.0, 2.0),
                                                  (4.0, 2.0, 2.0)])), workers=2)
    assert swept is not None
    assert swept.span_s == 4.0 and swept.mean_running == 2.0 and swept.mean_queued == 1.0
    assert swept.saturated_share == 0.5 and swept.starved_share == 0.0
    assert "busy with jobs waiting 50% of it, a worker free with none waiting 0%" in swept.line()


def test_jobs_one_after_another_on_idle_workers_are_chain_bound() -> None:
    # a unit's chain: each job asked when the last ended, four workers, never a queue
    swept = occupancy(job_intervals(_evaluations([(1.0, 0.0, 1.0), (2.0, 0.0, 1.0), (3.0, 0.0, 1.0)])), workers=4)
    assert swept is not None
    assert swept.span_s == 3.0 and swept.mean_running == 1.0 and swept.mean_queued == 0.0
    assert swept.saturated_share == 0.0 and swept.starved_share == 1.0


def test_without_a_worker_count_only_the_means_are_given() -> None:
    swept = occupancy(job_intervals(_evaluations([(3.0, 1.0, 2.0)])))
    assert swept is not None and swept.saturated_share is None and swept.starved_share is None
    assert swept.mean_running == pytest.approx(2 / 3) and "workers" not in swept.line()
    assert occupancy(job_intervals(_evaluations([]).reindex(columns=[*PHASE_COLUMNS, "created"]))) is None
