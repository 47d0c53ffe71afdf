"""Where the evaluation time goes (issue 15 item 3): phase seconds recorded beside each
evaluation (a column each, old stores migrated), split between the methods that share an
evaluation, and the report's table of time by phase and method."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pandas as pd
import pytest

from judge.candidate.verdict import Evaluation, Verdict
from judge.phases import PHASES, PhaseClock
from record import store as store_module
from record.store import Store
from results.phases import phase_seconds, phase_seconds_by_kind, steps_by_kind

EVALUATION = Evaluation(Verdict("correct")).to_json()


def test_a_phase_clock_adds_up_the_phases_it_was_in() -> None:
    clock = PhaseClock()
    with clock("compile"):
        time.sleep(0.01)
    with clock("compile"):
        pass
    with clock("correctness"):
        pass
    assert set(clock.seconds) == {"compile", "correctness"} and clock.seconds["compile"] >= 0.01
    with pytest.raises(AssertionError):
        with clock("lunch"):
            pass
    assert store_module.PHASES == PHASES  # the store's columns follow the judge's phases
    with clock("correctness"), clock.step("close"):
        time.sleep(0.01)
    assert clock.steps["close"] >= 0.01 and set(clock.seconds) == {"compile", "correctness"}  # steps apart


def test_step_lines_are_summarised_by_job_kind() -> None:
    lines = [{"kind": "evaluation", "case_set": "visible", "timing": True, "wall": 1.0,
              "phases": {"start": 0.2, "timing": 0.5}, "steps": {"close": 0.1, "spare:gate": 0.2}},
             {"kind": "evaluation", "case_set": "visible", "timing": True, "wall": 2.0,
              "phases": {"start": 0.4, "timing": 1.0}, "steps": {"close": 0.3}},
             {"kind": "internal_tests", "case_set": None, "timing": False, "wall": 0.5,
              "phases": {"correctness": 0.5}, "steps": {}},
             {"kind": "internal_tests", "case_set": None, "timing": False, "wall": 0.5,
              "phases": {"correctness": 0.5}, "steps": {},
              "compile_pass": {"launches": 3, "kernels": 2, "written": 5, "failures": 1}},
             {"kind": "internal_tests", "case_set": None, "timing": False, "wall": 0.5,
              "phases": {"correctness": 0.5}, "steps": {}, "compile_pass": {"lost": "CandidateDied: ..."}}]
    rows = {r["kind"]: r for r in steps_by_kind(lines)}
    assert set(rows) == {"visible timed", "internal"}
    timed = rows["visible timed"]
    assert timed["jobs"] == 2 and timed["wall_s"] == pytest.approx(1.5)
    assert timed["unnamed_s"] == pytest.approx((0.3 + 0.6) / 2)  # wall less the named phases
    assert timed["close"] == pytest.approx(0.2) and timed["spare:gate"] == pytest.approx(0.1)  # a missing step is 0
    assert rows["internal"]["unnamed_s"] == pytest.approx(0.0)
    # What the compile passes did: one ran (2 kernels), one lost its process; none recorded for the timed jobs.
    assert (rows["internal"]["pass:jobs"], rows["internal"]["pass:kernels"], rows["internal"]["pass:lost"]) == (1, 2, 1)
    assert (rows["internal"]["pass:written"], rows["internal"]["pass:failures"]) == (5, 1)
    assert "pass:jobs" not in timed


def test_a_memory_peak_is_summarised_by_its_largest_beside_its_mean() -> None:
    """The job that filled the GPU must show: a peak's mean over a kind's jobs hides it."""
    from judge.device_memory import PEAK_STEPS
    from results.phases import PEAK_STEP_PREFIX

    assert all(name.startswith(PEAK_STEP_PREFIX) for name in PEAK_STEPS)
    lines = [{"kind": "evaluation", "case_set": "hidden", "timing": True, "wall": 1.0, "phases": {},
              "steps": {PEAK_STEPS[1]: reserved, PEAK_STEPS[0]: 1.0, "memory:released_gib": 2.0}}
             for reserved in (2.0, 16.0, 3.0)]
    row = steps_by_kind(lines)[0]
    assert row[PEAK_STEPS[1]] == pytest.approx(7.0) and row[f"{PEAK_STEPS[1]}:max"] == 16.0
    assert row[f"{PEAK_STEPS[0]}:max"] == 1.0
    assert "memory:released_gib:max" not in row  # not a peak: its mean alone, as every other step


def test_a_workers_start_is_its_own_row_and_its_age_is_read_from_the_system() -> None:
    from judge.phases import process_age

    rows = {r["kind"]: r for r in steps_by_kind([{"kind": "worker_start", "wall": 4.0},
                                                  {"kind": "worker_start", "wall": 2.0}])}
    assert set(rows) == {"worker_start"} and rows["worker_start"]["wall_s"] == pytest.approx(3.0)
    age = process_age()  # this test process began before this line, and not days ago
    assert 0.0 < age < 86400.0


def test_phases_are_stored_beside_the_evaluation_and_an_old_store_gains_the_columns(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    db = sqlite3.connect(path)  # an evaluations table as stores wrote it before phases were kept
    db.execute("CREATE TABLE evaluations (source_hash TEXT NOT NULL, task TEXT NOT NULL, case_set TEXT NOT NULL, "
               "device_key TEXT NOT NULL, timed INTEGER NOT NULL DEFAULT 0, verdict TEXT NOT NULL, "
               "evaluation TEXT NOT NULL, created REAL NOT NULL, "
               "PRIMARY KEY (source_hash, task, case_set, device_key, timed))")
    db.execute("INSERT INTO evaluations VALUES ('old', 't', 'visible', 'cpu:x', 0, 'correct', '{}', 0)")
    db.commit()
    db.close()
    store = Store(path)
    store.record_evaluation("new", "t", "visible", "cpu:x", EVALUATION,
                            phases={"queue": 0.5, "compile": 1.0, "correctness": 2.0, "gate": 0.25, "other": 0.125})
    rows = {r["source_hash"]: r for r in store.evaluations()}
    assert (rows["old"]["queue_s"], rows["old"]["timing_s"]) == (None, None)
    assert (rows["new"]["queue_s"], rows["new"]["compile_s"], rows["new"]["correctness_s"],
            rows["new"]["timing_s"], rows["new"]["gate_s"], rows["new"]["retry_s"], rows["new"]["other_s"]) == \
        (0.5, 1.0, 2.0, None, 0.25, None, 0.125)
    assert "phases" not in rows["new"]["evaluation"]


def test_a_shared_evaluation_is_split_between_the_methods_that_proposed_the_code() -> None:
    ev = pd.DataFrame([
        {"source_hash": "a", "task": "t", "case_set": "visible", "device_key": "d", "timed": True,
         "queue_s": 1.0, "compile_s": 2.0, "correctness_s": 4.0, "timing_s": 8.0, "gate_s": 2.0, "retry_s": None,
         "other_s": 0.5, "start_s": 0.5},
        {"source_hash": "b", "task": "t", "case_set": "hidden", "device_key": "d", "timed": False,
         "queue_s": 0.0, "compile_s": 1.0, "correctness_s": 1.0, "timing_s": None, "gate_s": None, "retry_s": 3.0,
         "other_s": None, "start_s": None},
        {"source_hash": "a", "task": "t@geak-eval", "case_set": "hidden", "device_key": "d", "timed": False,
         "queue_s": None, "compile_s": None, "correctness_s": None, "timing_s": None, "gate_s": None,
         "retry_s": None, "other_s": None, "start_s": None},  # replayed: no time
    ])
    candidates = pd.DataFrame([{"method": "direct", "task": "t", "source_hash": "a"},
                               {"method": "geak", "task": "t", "source_hash": "a"},
                               {"method": "geak", "task": "t", "source_hash": "b"},
                               {"method": "geak", "task": "t", "source_hash": "b"}])
    out = phase_seconds(ev, candidates).set_index("method")
    assert out.loc["direct"].to_dict() == {"evaluations": 0.5, "queue_s": 0.5, "start_s": 0.25, "compile_s": 1.0,
                                           "correctness_s": 2.0, "timing_s": 4.0, "gate_s": 1.0, "retry_s": 0.0,
                                           "other_s": 0.25, "total_s": 9.0}
    assert out.loc["geak"].to_dict() == {"evaluations": 1.5, "queue_s": 0.5, "start_s": 0.25, "compile_s": 2.0,
                                         "correctness_s": 3.0, "timing_s": 4.0, "gate_s": 1.0, "retry_s": 3.0,
                                         "other_s": 0.25, "total_s": 14.0}
    assert phase_seconds(ev.iloc[2:], candidates).empty


def test_jobs_are_costed_by_kind_with_the_mean_of_each_phase() -> None:
    def row(case_set: str, timed: bool, correctness: float | None, timing: float | None = None) -> dict:
        return {"source_hash": "x", "task": "t", "case_set": case_set, "device_key": "d", "timed": timed,
                "queue_s": 0.0, "compile_s": None, "correctness_s": correctness, "timing_s": timing,
                "gate_s": None, "retry_s": None, "other_s": 0.25, "start_s": None}

    ev = pd.DataFrame([row("visible", True, 1.0, 3.0), row("visible", True, 2.0, 1.0), row("hidden", False, 4.0),
                       row("internal:ab12", False, 0.5), row("internal:cd34", False, 1.5),
                       {**row("hidden", False, None), "queue_s": None, "other_s": None}])  # replayed: no phase, left out
    out = phase_seconds_by_kind(ev).set_index("kind")
    assert list(out.index) == ["hidden", "internal", "visible timed"]
    assert out.loc["visible timed", "jobs"] == 2 and out.loc["visible timed", "timing_s"] == 2.0
    assert out.loc["visible timed", "total_s"] == 7.5
    assert out.loc["internal"].to_dict() == {"jobs": 2, "queue_s": 0.0, "start_s": 0.0, "compile_s": 0.0,
                                             "correctness_s": 1.0,
                                             "timing_s": 0.0, "gate_s": 0.0, "retry_s": 0.0, "other_s": 0.25,
                                             "total_s": 2.5}
    assert phase_seconds_by_kind(ev.iloc[5:]).empty


@pytest.mark.slow  # starts processes: a few seconds on 2 cores
def test_a_real_jobs_phases_add_up_to_its_wall_time() -> None:
    """Through a real worker: the candidate process's start, its import, the correctness run and
    `other` (the rest of the worker's time) cover the job, so none of its seconds go unnamed."""
    from bench.registry import get_task
    from judge.device import detect_target
    from runners.pool import LocalPool

    source = get_task("vector_add").baseline_source()
    with LocalPool(detect_target(force_cpu=True), workers=1, job_timeout=120.0) as pool:
        first = pool.evaluate("vector_add", source, "visible")
        # The worker's start-up (seconds: torch, the template) is queue time, not the job's:
        # its `other` stays messages and bookkeeping.
        assert first.phases is not None and first.phases["queue"] > 1.0 and first.phases["other"] < 0.5, first.phases
        started = time.perf_counter()
        evaluation = pool.evaluate("vector_add", source, "visible")
        wall = time.perf_counter() - started
    phases = evaluation.phases or {}
    assert evaluation.verdict.correct, evaluation.verdict.one_line()
    assert {"queue", "start", "compile", "correctness", "other"} <= set(phases) <= set(PHASES)
    assert 0.0 <= phases["other"] and phases["start"] >= 0.0
    assert 0.8 * wall <= sum(phases.values()) <= wall + 0.01
