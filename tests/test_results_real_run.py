"""results/ on a real (small) simulated run made by `cli.py compare` on the CPU interpreter:
readers agree with summary.json, curves end where the summary says, runs are derived from
the store, and the report and figures commands write their files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from results.analysis import analyse
from results.curves import budget_curves, independent_runs
from results.phases import PHASE_COLUMNS
from results.readers import load_run
from results.report import write_report
from results.tables import build_tables
from tests.helpers import run_cli

pytestmark = pytest.mark.slow  # worker processes or whole runs: minutes on 2 cores

BUDGET = 3
RES = 2000


@pytest.fixture(scope="session")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("real")
    # --eval-budget: every call of the budget spent (the default's matched GPU cap, one evaluation
    # per two calls, would stop direct prompting after its first evaluation; issue 43)
    proc = run_cli("compare", "--budget", str(BUDGET), "--tasks", "vector_add,flip", "--methods", "direct,geak",
                   "--eval-budget", str(BUDGET), "--quiet", "--out", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


def test_readers_agree_with_the_summary(real_run: Path) -> None:
    d = load_run(real_run)
    summary = json.loads((real_run / "summary.json").read_text())
    assert d.simulated and d.budget == BUDGET and not d.has_timings
    assert len(d.units) == 4 and (d.units["calls_used"] == BUDGET).all()
    assert d.candidates["hidden_verdict"].notna().all()  # every candidate was judged on the hidden cases
    assert len(d.calls) == 4 * BUDGET and (d.calls.groupby(["method", "task"]).size() == BUDGET).all()
    curves = budget_curves(d, "calls", n_resamples=RES)
    for method, m in summary["methods"].items():
        c = curves[method]
        assert c.grid[-1] == BUDGET
        assert c.submitted.mean[-1] == pytest.approx(m["submitted_pass"])
        assert c.oracle.mean[-1] == pytest.approx(m["oracle_pass"])
        assert np.all(np.diff(c.oracle.mean) >= 0)  # once any candidate passed, it stays passed
        assert np.all(c.submitted.mean <= c.oracle.mean + 1e-12)
        assert d.units[d.units["method"] == method]["tokens_used"].sum() == sum(m["tokens_used"].values())


def test_runs_derived_from_the_store(real_run: Path) -> None:
    d = load_run(real_run)
    direct = independent_runs(d, "direct", n_resamples=RES)
    assert len(direct.runs) == 2 * BUDGET and direct.runs["complete"].all()
    correct = d.candidates[(d.candidates["method"] == "direct") & d.candidates["hidden_pass"]]
    assert direct.runs["answer_pass"].sum() == len(correct)
    assert direct.curve is not None and len(direct.curve.k) == BUDGET
    geak = independent_runs(d, "geak", n_resamples=RES)  # default 10 iterations = 20 calls per run > budget
    assert geak.curve is None and "no complete run" in geak.note


def test_tables_on_the_real_run(real_run: Path) -> None:
    a = analyse(load_run(real_run), n_resamples=RES)
    tables = {t.name: t for t in build_tables(a)}
    assert set(tables) == {"accuracy", "difficulty", "sequential", "parallel", "false_positives", "phases",
                           "job_kinds", "comparisons"}
    kinds = tables["job_kinds"].numeric.set_index("kind")
    assert set(kinds.index) <= {"visible", "hidden", "internal"} and "hidden" in kinds.index
    evaluations = load_run(real_run).evaluations
    measured = evaluations[list(PHASE_COLUMNS)].notna().any(axis=1)
    assert kinds["jobs"].sum() == measured.sum()  # every job this run judged has phases
    swept = [n for n in tables["job_kinds"].notes if n.startswith("Jobs over time: ")]  # results/occupancy.py
    assert len(swept) == 1 and f"{measured.sum()} jobs over " in swept[0] and "workers busy with jobs waiting" in swept[0]
    # what has none was decided without a job (runners/savings.py): hidden verdicts only
    assert set(evaluations.loc[~measured, "case_set"]) <= {"hidden"}
    summary = json.loads((real_run / "summary.json").read_text())
    acc = tables["accuracy"].numeric.set_index("method")
    for method, m in summary["methods"].items():
        assert acc.loc[method, "submitted_pass"] == pytest.approx(m["submitted_pass"])
        assert acc.loc[method, "calls"] == BUDGET
    seq = tables["sequential"].numeric
    assert sorted(seq["budget_calls"].unique()) == [1, 2, 3]
    assert len(a.comparisons) == 1 and a.comparisons[0].a == "geak" and a.comparisons[0].b == "direct"


def test_report_and_figures_commands(real_run: Path, tmp_path: Path) -> None:
    proc = run_cli("report", str(real_run), "--out", str(tmp_path / "md"), "--resamples", str(RES), timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "fast_p: not drawn (no timed evaluations" in proc.stdout
    report = (tmp_path / "md" / "report.md").read_text()
    assert report.startswith("# Kernel-method comparison report (SIMULATED MODEL)")
    assert "SIMULATED MODEL: these results come from the built-in simulated model" in report.splitlines()[2]
    assert f"At {BUDGET} calls," in report and "GEAK" in report and "direct prompting" in report
    for fig in ("budget_calls", "budget_tokens", "budget_evaluations", "parallel_scaling"):
        assert f"(figures/{fig}.png)" in report
        for ext in ("png", "pdf"):
            assert (tmp_path / "md" / "figures" / f"{fig}.{ext}").stat().st_size > 5_000
    tables = sorted(p.name for p in (tmp_path / "md" / "tables").iterdir())
    assert "accuracy.csv" in tables and "accuracy.tex" in tables and "comparisons.md" in tables
    accuracy = pd.read_csv(tmp_path / "md" / "tables" / "accuracy.csv")  # plain CSV, label in a column
    assert accuracy["simulated"].all() and "method" in accuracy.columns

    files = write_report([real_run], tmp_path / "html", "html", n_resamples=300)  # in-process: no second start-up
    assert files.report == tmp_path / "html" / "report.html"
    page = files.report.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<img src='figures/budget_calls.png'" in page
    assert "class='banner'>SIMULATED MODEL" in page and "<table>" in page

    proc = run_cli("figures", str(real_run), "--out", str(tmp_path / "figs"), "--resamples", "500", timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    drawn = sorted(p.name for p in (tmp_path / "figs").iterdir())
    # each figure with its data and its caption file (naming any method it leaves out)
    assert drawn == sorted(f"{n}.{e}" for n in ("budget_calls", "budget_tokens", "budget_evaluations",
                                                "parallel_scaling", "outcomes") for e in ("png", "pdf", "csv", "caption.txt"))


def test_runs_are_declared_by_the_methods(real_run: Path) -> None:
    """Runs come from `ctx.begin_run`, not from call positions: one per direct sample, all
    complete; one GEAK run per unit, cut by the budget (3 calls < 20 per run); no empty runs."""
    d = load_run(real_run)
    direct = d.runs[d.runs["method"] == "direct"]
    for _, g in direct.groupby(["task", "repeat"]):
        assert g["calls_start"].tolist() == list(range(BUDGET))
        assert g["calls_end"].tolist() == [float(i + 1) for i in range(BUDGET)]
    geak = d.runs[d.runs["method"] == "geak"]
    assert len(geak) == d.units["method"].eq("geak").sum()
    assert (geak["calls_start"] == 0).all() and geak["calls_end"].isna().all()
    cands = d.candidates
    assert (cands["run_index"] >= 0).all()
    direct_cands = cands[cands["method"] == "direct"]
    assert (direct_cands["run_index"] == direct_cands["calls_used"] - 1).all()
    assert independent_runs(d, "direct", n_resamples=RES).derivation == "each sample is one declared run"


def test_difficulty_comes_from_the_run_folder(real_run: Path, tmp_path: Path) -> None:
    """The run records each task's difficulty, so the table needs no bench registry (nor torch)."""
    import shutil

    from bench.registry import get_task

    recorded = json.loads((real_run / "config.json").read_text())["resolved"]["task_difficulty"]
    assert recorded == {t: get_task(t).difficulty for t in ("vector_add", "flip")}
    copy = tmp_path / real_run.name
    shutil.copytree(real_run, copy)
    cfg = json.loads((copy / "config.json").read_text())
    cfg["resolved"]["task_difficulty"] = {"vector_add": 4, "flip": 4}  # not what the registry says
    (copy / "config.json").write_text(json.dumps(cfg))
    diff = {t.name: t for t in build_tables(analyse(load_run(copy), n_resamples=RES))}["difficulty"].numeric
    assert set(diff["difficulty"]) == {4}


def test_report_refuses_two_runs_of_one_command(real_run: Path, tmp_path: Path) -> None:
    """A second run of the same command (here: a copy of the folder, as the same seed gives) is
    not an independent repeat: report and figures refuse to combine them, one line, exit 2."""
    import shutil

    again = tmp_path / "again"
    shutil.copytree(real_run, again)
    for command in ("report", "figures"):
        proc = run_cli(command, str(real_run), str(again), "--resamples", "200", timeout=180)
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith(f"error: cannot combine {real_run.name} and again: 4 unit(s) share their seeds "
                               "(run seed 0; unit direct/flip/repeat 0 has seed ")
        assert line.endswith("so those repeats are copies, not independent draws, whatever other options differ; "
                             "re-run one with another --seed, or pass --allow-same-seed to count each copy once")
