"""Methods through the real scheduler (runners.compare.CompareRun, real worker, real store) on
the CPU interpreter: a plugin written in its own file, and Reflexion's internal tests running in
the sandboxed worker. About half a minute on two cores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import runners.compare
from modelio.simulated import SimulatedModel
from record.store import Store
from runners.config import CompareConfig


def _cpu_target(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("KMC_FORCE_CPU", "1")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from judge.device import detect_target

    return detect_target()


def _run(config: CompareConfig, run_dir: Path, target: Any) -> tuple[Store, dict[str, Any]]:
    """Run to the end; return the reopened store and the resolved method options (what
    config.json records)."""
    config.validate()
    run_dir.mkdir(parents=True)
    run = runners.compare.CompareRun(config, run_dir, SimulatedModel(), target)
    try:
        run.run()
    finally:
        run.close()
    return Store(run_dir / "store.sqlite"), run.method_opts


@pytest.mark.slow
def test_toy_plugin_runs_through_the_real_scheduler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tests.toy_best_of_n_repair  # noqa: F401 - registering is all a plugin needs

    target = _cpu_target(monkeypatch)
    # Evaluations uncapped (the matched default caps them at one per two calls, and this toy asks
    # for feedback after every call): the plugin's plumbing is the subject here.
    config = CompareConfig(budget=5, methods=["toy_best_of_n_repair"], tasks=["vector_add"], workers=1, device="cpu",
                           match_evals=False,
                           method_options={"toy_best_of_n_repair": {"n": 2}})
    store, opts = _run(config, tmp_path / "run", target)
    try:
        assert opts == {
            "toy_best_of_n_repair": {"n": 2, "repairs": 1, "temperature": 1.0, "knowledge": True}}
        unit = dict(store.query("SELECT * FROM units")[0])
        assert unit["status"] == "done" and unit["error"] is None and unit["calls_used"] == 5
        roles = [r[0] for r in store.query("SELECT role FROM calls ORDER BY call_index")]
        assert roles[:2] == ["sample", "sample"] and set(roles) <= {"sample", "repair"}
        n_candidates = len(store.query("SELECT 1 FROM candidates"))
        assert n_candidates >= 1 and len(store.query("SELECT 1 FROM submissions")) >= 1
        assert unit["feedback_evals"] == n_candidates  # every candidate judged on the visible cases
        hidden = store.query("SELECT COUNT(DISTINCT source_hash) FROM evaluations WHERE case_set='hidden'")[0][0]
        distinct = store.query("SELECT COUNT(DISTINCT source_hash) FROM candidates")[0][0]
        assert hidden == distinct  # the scheduler judged every candidate on the hidden cases
    finally:
        store.close()


@pytest.mark.slow
def test_reflexion_internal_tests_run_in_the_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = _cpu_target(monkeypatch)
    config = CompareConfig(budget=8, methods=["reflexion"], tasks=["vector_add"], workers=1, device="cpu", seed=3,
                           method_options={"reflexion": {"max_iters": 3}})
    store, _ = _run(config, tmp_path / "run", target)
    try:
        unit = dict(store.query("SELECT * FROM units")[0])
        assert unit["status"] == "done" and unit["error"] is None and unit["calls_used"] == 8
        roles = [r[0] for r in store.query("SELECT role FROM calls ORDER BY call_index")]
        assert roles[:2] == ["tests", "implement"]
        reports = [json.loads(r[0]) for r in store.query(
            "SELECT evaluation FROM evaluations WHERE case_set LIKE 'internal:%'")]
        assert reports, "no internal test run reached the worker"
        for report in reports:
            kind = report["verdict"]["kind"]
            assert kind in ("correct", "wrong_result", "syntax_error", "compile_error", "runtime_error")
            if kind in ("correct", "wrong_result"):
                assert report["tests"] and all(set(t) == {"name", "passed", "message"} for t in report["tests"])
                assert (kind == "correct") == all(t["passed"] for t in report["tests"])
        assert len(store.query("SELECT 1 FROM submissions")) >= 1
        assert len(store.query("SELECT 1 FROM feedback")) == 0  # internal mode never looks at the visible cases
        assert unit["feedback_evals"] >= len(reports)  # but its test runs are evaluations, counted
        # Every test run is on record: which candidate, which tests (their source), what came back.
        test_runs = [dict(r) for r in store.query("SELECT * FROM test_runs ORDER BY test_run_index")]
        assert len(test_runs) == unit["feedback_evals"] and [r["test_run_index"] for r in test_runs] == \
            list(range(len(test_runs)))
        for r in test_runs:
            assert "def test" in store.source(r["tests_hash"]) and store.source(r["source_hash"])
            assert 0 <= r["tests_passed"] <= r["tests_total"] and 0 < r["calls_used"] <= 8
            assert (r["verdict"] == "correct") == (r["tests_total"] > 0 and r["tests_passed"] == r["tests_total"])
    finally:
        store.close()


@pytest.mark.slow
def test_plugin_module_named_in_the_environment_runs_from_the_cli(tmp_path: Path) -> None:
    """$KMC_METHOD_MODULES is how a plugin in its own file reaches `cli.py compare`."""
    from tests.helpers import cli_env, run_cli

    env = cli_env(KMC_METHOD_MODULES="tests.toy_best_of_n_repair")
    proc = run_cli("compare", "--budget", "3", "--tasks", "vector_add", "--methods", "toy_best_of_n_repair",
                   "--eval-budget", "3", "--quiet", "--out", str(tmp_path), env=env)  # feedback after every call
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
    assert summary["methods"]["toy_best_of_n_repair"]["calls_used"] == {"vector_add": 3}

    bad = run_cli("compare", "--budget", "3", "--methods", "direct", "--out", str(tmp_path / "bad"),
                  env=cli_env(KMC_METHOD_MODULES="no_such_plugin_module"))
    assert bad.returncode == 2 and "no_such_plugin_module" in bad.stderr and "Traceback" not in bad.stderr


# ---------------------------------------------------------------- a hostile plugin (issue 13, item 8)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Store]:
    import tests.hostile_plugin as plugin

    mp = pytest.MonkeyPatch()
    try:
        target = _cpu_target(mp)  # type: ignore[arg-type]
        config = CompareConfig(budget=20, methods=["hostile_reach"], tasks=["vector_add"], workers=1, device="cpu")
        store, _ = _run(config, tmp_path_factory.mktemp("hostile") / "run", target)
    finally:
        mp.undo()
    return plugin.FINDINGS["vector_add"], store


@pytest.mark.slow
def test_a_hostile_plugin_reaches_nothing_through_the_context_and_cannot_overdraw(
        hostile_run: tuple[dict[str, Any], Store]) -> None:
    found, store = hostile_run
    assert found["attributes"] == [] and found["through_methods"] == [] and found["replaced"] == []
    assert sum(found["calls_by_thread"]) == 20  # twelve threads, one budget, not one call over
    assert [r[0] for r in store.query("SELECT call_index FROM calls ORDER BY call_index")] == list(range(20))
    unit = dict(store.query("SELECT * FROM units")[0])
    assert unit["calls_used"] == 20 and unit["error"] is None


@pytest.mark.slow
def test_a_hostile_plugins_own_tests_cannot_read_hidden_cases_or_the_reference(
        hostile_run: tuple[dict[str, Any], Store]) -> None:
    from bench.registry import get_task

    found, _ = hostile_run
    task = get_task("vector_add")
    probe = found["probe"]
    assert probe, "the probe test reported nothing"
    leaked = [c.name for c in task.hidden_cpu + task.hidden_gpu if c.name in probe]
    assert not leaked, f"hidden cases readable from a method's tests: {leaked[:3]}"
    assert task.baseline_source()[:120] not in probe


@pytest.mark.slow
def test_a_run_reports_examples_independence_and_curves_against_evaluations(tmp_path: Path) -> None:
    """Through the library call and the report: every example shown is below the guard's
    threshold, Reflexion at the paper's temperature 0 (set here: the default is 1.0) declares its
    trials not independent (no pass@k over them), and budget curves are drawn against GPU
    evaluations too."""
    from results.report import write_report
    from runners.compare import CompareOptions, run_compare

    config = CompareConfig(budget=6, methods=["direct", "reflexion", "geak"], tasks=["vector_add", "add_relu"], workers=1,
                           device="cpu",
                           method_options={"geak": {"iterations": 2}, "reflexion": {"impl_temperature": 0.0}})
    result = run_compare(config, CompareOptions(out=tmp_path / "runs"))
    methods = result.summary["methods"]
    for name in ("direct", "reflexion", "geak"):
        shown = methods[name]["oneshot_examples"]
        assert shown["shown"] > 0 and shown["similarity_max"] < 0.8, (name, shown)
    assert methods["reflexion"]["runs_independent"] is False and methods["geak"]["runs_independent"] is True
    recorded = json.loads((result.run_dir / "config.json").read_text())["resolved"]["oneshot"]
    assert recorded["corpus"] == "builtin" and recorded["threshold"] == 0.8 and recorded["programs"] >= 31
    files = write_report([result.run_dir], tmp_path / "report", n_resamples=200)
    text = files.report.read_text()
    assert "## One-shot examples" in text and "## Failed model calls" in text
    assert "reflexion: its runs are declared not independent" in text
    assert any(f.name == "budget_evaluations" and not f.skipped for f in files.figures)
