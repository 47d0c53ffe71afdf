"""`verify RUN_DIR` (issue 17, item 1): a fresh run's recorded verdicts hold when re-judged;
a tampered verdict is found and named; on the CPU the audit says what it could not check;
the speedup comparison is a geometric mean over tasks with an interval."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from judge.candidate.verdict import CaseTiming, Evaluation, Timing, Verdict
from runners.compare import CompareOptions, run_compare
from runners.config import CompareConfig
from runners.verify import VerifyOptions, _decided_elsewhere, _Item, _rejudged, _speedup_check, verify_run
from tests.test_cli_usability import invoke

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def fresh_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A quick CPU run: two methods on two tasks, budget 2 (seed 1: the simulated model's draws
    give correct submissions, which the cross-target test needs)."""
    config = CompareConfig(budget=2, methods=["direct", "geak"], tasks=["vector_add", "softmax"], device="cpu",
                           workers=2, task_sources=[], method_modules=[], seed=1)
    return run_compare(config, CompareOptions(out=tmp_path_factory.mktemp("runs"))).run_dir


@pytest.mark.slow
def test_a_fresh_cpu_run_verifies_with_full_agreement(fresh_run: Path) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in fresh_run.iterdir()}
    code, out, err = invoke("verify", str(fresh_run), "--json", "--quiet", "--candidates", "--workers", "2")
    assert code == 0, err
    report = json.loads(out)
    assert report["ok"] is True and report["candidates"] is True
    for method in ("direct", "geak"):
        m = report["methods"][method]
        assert m["judged"] >= 2 and m["agreed"] == m["judged"] and m["disagreements"] == [], (method, m)
        assert m["speedup"] is None  # the CPU interpreter times nothing
    assert report["not_checked"] == []  # a CPU run has no timings to miss, and the case sets are the same
    assert {p.name: p.stat().st_mtime_ns for p in fresh_run.iterdir()} == before  # the audit only reads


@pytest.mark.slow
def test_a_tampered_verdict_is_a_named_disagreement_and_exit_1(fresh_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(fresh_run, run)
    with sqlite3.connect(run / "store.sqlite") as db:
        h, task, verdict = db.execute(
            "SELECT s.source_hash, s.task, e.verdict FROM submissions s JOIN evaluations e ON e.source_hash = "
            "s.source_hash AND e.task = s.task AND e.case_set = 'hidden' WHERE s.method = 'direct' LIMIT 1").fetchone()
        forged = "wrong_result" if verdict == "correct" else "correct"
        db.execute("UPDATE evaluations SET verdict = ? WHERE source_hash = ? AND task = ? AND case_set = 'hidden'",
                   (forged, h, task))
    report = verify_run(run, VerifyOptions(workers=2))
    direct = next(m for m in report.methods if m.method == "direct")
    assert not report.ok and len(direct.disagreements) >= 1
    d = direct.disagreements[0]
    assert (d.task, d.source_hash, d.recorded, d.rejudged) == (task, h, forged, verdict)
    assert all(m.ok for m in report.methods if m.method != "direct")
    assert f"recorded {forged}, re-judged {verdict}" in report.format()
    code, _, _ = invoke("verify", str(run), "--quiet", "--workers", "2")
    assert code == 1


@pytest.mark.slow
def test_on_the_cpu_a_gpu_run_is_audited_and_what_cannot_be_checked_is_said(fresh_run: Path, tmp_path: Path) -> None:
    """The same run dressed as a GPU run: the final submission of direct/vector_add carries a
    recorded timing, and one recorded failure was decided by a case only the GPU set has."""
    run = tmp_path / "run"
    shutil.copytree(fresh_run, run)
    config = json.loads((run / "config.json").read_text())
    config["resolved"]["target"] = {"vendor": "nvidia", "interpreter": False, "device_name": "NVIDIA H200",
                                    "device_count": 1}
    (run / "config.json").write_text(json.dumps(config))
    with sqlite3.connect(run / "store.sqlite") as db:
        rows = db.execute("SELECT s.method, s.task, s.source_hash, e.verdict, e.evaluation FROM submissions s JOIN "
                          "evaluations e ON e.source_hash = s.source_hash AND e.task = s.task AND e.case_set = "
                          "'hidden'").fetchall()
        correct = [r for r in rows if r[3] == "correct"]
        assert correct, "the simulated run has a correct submission"
        _, task, h, _, _ = correct[0]
        timing = Timing((CaseTiming("perf", (1.0,), (1.2,)),), speedup_vs_baseline=1.2, speedup_ci=(1.1, 1.3))
        timed = Evaluation(Verdict("correct", cases_run=3), timing).to_json()
        db.execute("INSERT INTO evaluations(source_hash, task, case_set, device_key, timed, verdict, evaluation, "
                   "created) VALUES (?, ?, 'hidden', 'nvidia:NVIDIA H200', 1, 'correct', ?, 0)",
                   (h, task, json.dumps(timed)))
        # another submission's recorded verdict says it failed on a GPU-only size (a kind other than
        # the one it really gets, so re-judging differs); the CPU set never runs that size
        other = next(r for r in rows if r[2] != h)
        from bench.registry import get_task

        cases = get_task(other[1]).cases
        only_gpu = sorted({c.name for c in cases("hidden", False)} - {c.name for c in cases("hidden", True)})
        kind = "runtime_error" if other[3] == "wrong_result" else "wrong_result"
        gpu_only = Evaluation(Verdict(kind, "failed at a GPU-only size", only_gpu[0])).to_json()
        db.execute("UPDATE evaluations SET verdict = ?, evaluation = ? WHERE source_hash = ? AND task = ? "
                   "AND case_set = 'hidden' AND timed = 0", (kind, json.dumps(gpu_only), other[2], other[1]))
    report = verify_run(run, VerifyOptions(workers=2))
    assert report.ok, report.format()
    audited = next(m for m in report.methods if m.method == other[0])
    assert audited.not_comparable >= 1 and all(m.speedup is None for m in report.methods)
    notes = " | ".join(report.not_checked)
    assert "speedups of 1 final submission(s): the CPU interpreter times nothing" in notes
    assert "decided by a case that the GPU's hidden set has and this machine's lacks" in notes
    assert "recorded on nvidia NVIDIA H200; re-judged here on the CPU interpreter" in report.format()


def _timed(speedup: float, ci: tuple[float, float] | None = None) -> Evaluation:
    t = Timing((CaseTiming("perf", (1.0,), (speedup,)),), speedup_vs_baseline=speedup, speedup_ci=ci)
    return Evaluation(Verdict("correct", cases_run=1), t)


def test_speedup_ratios_are_a_geomean_over_tasks_with_a_t_interval() -> None:
    units = pd.DataFrame({"task": ["a", "a", "b", "c"], "run_repeat": [0, 1, 0, 0], "final_hash": ["h1", "h2", "h3", "h4"],
                          "speedup": [2.0, 2.0, 1.0, 4.0]})
    # re-measured: a's repeats 1.0x and 4.0x of 2.0 -> ratios 0.5 and 2 (task mean log 0); b 1.1x; c 0.9x
    results = {("h1", "a", True): _timed(1.0), ("h2", "a", True): _timed(4.0), ("h3", "b", True): _timed(1.1),
               ("h4", "c", True): _timed(3.6)}
    check = _speedup_check(units, results, tolerance=0.05)
    assert check is not None and check.timed == 4 and check.tasks == 3
    import numpy as np
    from scipy import stats

    logs = np.array([0.0, np.log(1.1), np.log(0.9)])
    lo, hi = stats.t.interval(0.95, 2, loc=logs.mean(), scale=stats.sem(logs))
    assert check.ratio == pytest.approx(np.exp(logs.mean()))
    assert (check.lo, check.hi) == (pytest.approx(np.exp(lo)), pytest.approx(np.exp(hi)))
    assert check.within_noise
    slower = {k: _timed(v.timing.speedup_vs_baseline * 0.5) for k, v in results.items()}  # type: ignore[union-attr]
    halved = _speedup_check(units, slower, tolerance=0.05)
    assert halved is not None and not halved.within_noise and halved.hi < 1 / 1.05


def test_one_timed_unit_uses_its_own_bootstrap_interval_and_an_untimed_one_is_said() -> None:
    units = pd.DataFrame({"task": ["a", "b"], "run_repeat": [0, 0], "final_hash": ["h1", "h2"], "speedup": [2.0, 3.0]})
    results = {("h1", "a", True): _timed(1.9, (1.8, 2.2)),
               ("h2", "b", True): Evaluation(Verdict("timeout", "no verdict within 180 s"))}
    check = _speedup_check(units, results, tolerance=0.0)
    assert check is not None and check.timed == 1 and check.interval == "the re-measured speedup's bootstrap interval"
    assert (check.lo, check.hi) == (pytest.approx(0.9), pytest.approx(1.1)) and check.within_noise
    assert check.not_timed == ("b repeat 0: timeout: no verdict within 180 s",)


def test_a_rejudged_verdict_is_read_as_the_run_reads_its_own_a_failing_timed_check_wins() -> None:
    correct, racy = _timed(1.5), Evaluation(Verdict("wrong_result", "changed after timing", "perf-0"))
    assert _rejudged({("h", "t", False): correct}, "h", "t") is correct  # not timed: the untimed verdict
    assert _rejudged({("h", "t", False): correct, ("h", "t", True): racy}, "h", "t") is racy
    failed = Evaluation(Verdict("compile_error", "syntax"))
    assert _rejudged({("h", "t", False): failed, ("h", "t", True): racy}, "h", "t") is failed  # then the untimed one


def test_verdicts_decided_by_a_case_the_other_target_lacks_are_not_comparable() -> None:
    from bench.registry import load_sources

    load_sources([], "cpu")
    item = _Item("direct", "vector_add", 0, "submission", 0, "h", "wrong_result")
    gpu_only = {"verdict": {"failing_case": "hidden-n4000037-float32-s0"}}
    shared = {"verdict": {"failing_case": "hidden-n97-float32-s0"}}
    correct_here = Evaluation(Verdict("correct", cases_run=5))
    assert _decided_elsewhere(item, correct_here, gpu_only, recorded_interpreter=False, here_interpreter=True)
    assert not _decided_elsewhere(item, correct_here, shared, recorded_interpreter=False, here_interpreter=True)
    # a CPU run audited on a GPU: the GPU verdict failed on a size the CPU set never ran
    failed_here = Evaluation(Verdict("wrong_result", "x", "hidden-n131071-bfloat16-s0"))
    assert _decided_elsewhere(item, failed_here, {"verdict": {"failing_case": None}}, recorded_interpreter=True,
                              here_interpreter=False)


@pytest.mark.gpu
@pytest.mark.slow
def test_a_fresh_gpu_run_verifies_with_speedups_within_noise(tmp_path: Path) -> None:
    config = CompareConfig(budget=3, methods=["direct"], tasks=["vector_add", "softmax", "layer_norm"],
                           task_sources=[], method_modules=[])
    run = run_compare(config, CompareOptions(out=tmp_path)).run_dir
    report = verify_run(run, VerifyOptions(speedup_tolerance=0.10))
    assert all(m.agreed == m.judged for m in report.methods), report.format()
    direct = report.methods[0]
    if direct.speedup is not None:  # at least one final submission was correct and timed
        assert direct.speedup.timed >= 1 and direct.speedup.within_noise, report.format()
