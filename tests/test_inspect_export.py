"""Inspecting and exporting a run (issue 17, item 2): `runs list`, `show`, `export`, on the
hand-made synthetic run (tests/fixtures/synthetic_run.py), whose values are known."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from record.progress import run_progress
from record.run_folder import RunFolder
from results.export import ExportError, export_run
from results.readers import RunError
from results.run_list import format_rows, list_runs
from results.unit_view import show_unit
from tests.fixtures.synthetic_run import SPEC, make_synthetic_run
from tests.test_cli_usability import invoke


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return make_synthetic_run(tmp_path / "runs" / "20250101-000000-aaaaaa")


def make_partial(run: Path) -> Path:
    """Two GEAK units never finished: the store has no done row for them."""
    with sqlite3.connect(run / "store.sqlite") as db:
        db.execute("DELETE FROM units WHERE method = 'geak' AND task IN ('flip', 'rms_norm')")
    return run


# ---------------------------------------------------------------------------- export
def test_export_csv_is_plain_with_one_row_per_unit(run: Path, tmp_path: Path) -> None:
    files = export_run(run, "csv", tmp_path / "out")
    units = pd.read_csv(files.units)  # as it is: no comment line, no options
    assert len(units) == 12 and not units.duplicated(["method", "task", "repeat"]).any()
    assert units["simulated"].all() and files.banner is None
    by = units.set_index(["method", "task"])
    # direct/vector_add: final submission is candidate 1 (hidden correct), timed 1.5x, CI [1.35, 1.65]
    dv = by.loc[("direct", "vector_add")]
    assert (dv["submitted_pass"], dv["oracle_pass"], dv["final_verdict"], dv["calls_used"]) == (True, True, "correct", 4)
    assert (dv["speedup"], dv["speedup_lo"], dv["speedup_hi"]) == (1.5, pytest.approx(1.35), pytest.approx(1.65))
    assert (dv["candidates"], dv["submissions"], dv["tokens_used"], dv["evaluations"]) == (4, 2, 4 * 100, 4)
    gf = by.loc[("geak", "flip")]  # submitted candidate 0 (hidden wrong), candidate 1 compile error
    assert (gf["submitted_pass"], gf["oracle_pass"], gf["final_verdict"]) == (False, False, "wrong_result")
    assert pd.isna(gf["speedup"]) and pd.isna(gf["speedup_lo"])
    assert bool(by.loc[("geak", "vector_add"), "timing_flagged"]) is True
    cands = pd.read_csv(files.candidates)
    assert len(cands) == sum(len(u.cands) for u in SPEC.values()) == files.candidate_rows
    assert cands.groupby(["method", "task", "repeat"])["final"].sum().eq(1).all()
    rs = cands[(cands["method"] == "reflexion") & (cands["task"] == "softmax")]
    assert rs["submitted"].tolist() == [True, True, True] and rs["calls_used"].tolist() == [1, 3, 4]
    sidecar = json.loads(files.sidecar.read_text())
    assert sidecar["simulated"] is True and sidecar["label"].startswith("SIMULATED MODEL")
    assert sidecar["progress"]["status"] == "complete" and sidecar["partial"] is None
    assert set(sidecar["columns"]["units"]) == set(units.columns)


def test_export_jsonl_and_sources_and_parquet_or_its_hint(run: Path, tmp_path: Path) -> None:
    files = export_run(run, "jsonl", tmp_path / "j", with_sources=True)
    units = pd.read_json(files.units, lines=True)
    cands = pd.read_json(files.candidates, lines=True)
    assert len(units) == 12 and cands["source"].str.startswith("# ").all()
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(ExportError, match="parquet needs pyarrow: pip install pyarrow"):
            export_run(run, "parquet", tmp_path / "p")
        assert not (tmp_path / "p").exists()  # refused before anything is written
    else:
        back = pd.read_parquet(export_run(run, "parquet", tmp_path / "p").units)
        assert len(back) == 12 and back["simulated"].all()


def test_export_of_a_partial_run_says_so(run: Path, tmp_path: Path) -> None:
    files = export_run(make_partial(run), "csv", tmp_path / "out")
    assert len(pd.read_csv(files.units)) == 10
    assert files.banner == ("PARTIAL RUN: 10 of 12 units done (direct 4/4, reflexion 4/4, geak 2/4); everything "
                            "below shows only the finished units")
    sidecar = json.loads(files.sidecar.read_text())
    assert sidecar["progress"]["done"] == {"direct": 4, "reflexion": 4, "geak": 2}
    code, out, err = invoke("export", str(run), "--out", str(tmp_path / "cli"))
    assert code == 0 and "units:" in out and "(10 rows)" in out and err.startswith("PARTIAL RUN: 10 of 12")


# ---------------------------------------------------------------------------- runs list
def test_runs_list_names_each_run_and_its_status(run: Path, tmp_path: Path) -> None:
    root = run.parent
    partial = make_partial(make_synthetic_run(root / "20250102-000000-bbbbbb", budget=6))
    RunFolder(partial).write_env({"device": "test"}, ["cli.py", "compare"])
    (root / "not-a-run").mkdir()
    broken = root / "20250103-000000-cccccc"
    broken.mkdir()
    (broken / "config.json").write_text("{")
    rows = list_runs(root)
    assert [r.id for r in rows] == [run.name, partial.name, broken.name]
    assert (rows[0].status, rows[0].units_done, rows[0].units_planned, rows[0].budget) == ("complete", 12, 12, 4)
    assert (rows[1].status, rows[1].units_done, rows[1].budget, rows[1].tasks) == ("partial", 10, 6, 4)
    assert rows[1].started is not None and rows[0].started is None  # the fixture writes no env.json
    assert rows[0].simulated and rows[0].methods == ("direct", "reflexion", "geak")
    assert rows[2].status == "unreadable" and "config.json" in (rows[2].problem or "")
    text = format_rows(rows)
    assert "partial 10/12" in text and "unreadable:" in text and "SIMULATED" in text
    code, out, _ = invoke("runs", "list", str(root), "--json")
    assert code == 0 and [r["status"] for r in json.loads(out)] == ["complete", "partial", "unreadable"]
    assert list_runs(run)[0].id == run.name  # a run folder itself lists itself
    assert run_progress(run).complete


# ---------------------------------------------------------------------------- show
def test_show_prints_the_submission_its_verdicts_and_the_trail(run: Path) -> None:
    view = show_unit(run, "geak", "vector_add")
    assert view.final is not None and view.final.index == 1 and view.final.hidden_verdict == "correct"
    assert view.speedup == 3.0 and view.final.source == "# geak vector_add candidate 1\n"
    assert [c.source is None for c in view.candidates] == [True, False]  # only the submitted code without --all
    kinds = [(e.calls_used, e.kind) for e in view.trail]
    assert kinds == [(1, "call"), (1, "candidate"), (1, "feedback"), (2, "call"), (2, "submission"), (3, "call"),
                     (3, "candidate"), (3, "feedback"), (4, "call"), (4, "submission")]
    text = view.format()
    assert "submitted: candidate 1 (at 3 calls): hidden correct; speedup vs expert 3.000x" in text
    assert "[SIMULATED MODEL]" in text
    every = show_unit(run, "geak", "vector_add", all_candidates=True)
    assert all(c.source is not None for c in every.candidates)
    code, out, _ = invoke("show", str(run), "--method", "geak", "--task", "vector_add", "--json")
    assert code == 0 and json.loads(out)["final"]["index"] == 1


def test_show_refuses_unknown_names_and_unfinished_units(run: Path) -> None:
    with pytest.raises(RunError, match="the run has no method 'gaek'; did you mean geak"):
        show_unit(run, "gaek", "vector_add")
    with pytest.raises(RunError, match="the run has no task 'nosuch'"):
        show_unit(run, "geak", "nosuch")
    with pytest.raises(RunError, match="geak on flip has no finished repeat 0 \\(none finished\\)"):
        show_unit(make_partial(run), "geak", "flip")
    code, _, err = invoke("show", str(run), "--method", "geak", "--task", "vector_add", "--repeat", "3")
    assert code == 2 and err.strip() == "error: geak on vector_add has no finished repeat 3 (finished: 0)"


# ---------------------------------------------------------------------------- partial runs said loudly
@pytest.mark.slow
def test_report_and_figures_of_a_partial_run_say_so(run: Path, tmp_path: Path) -> None:
    from results.report import write_report

    with sqlite3.connect(make_partial(run) / "store.sqlite") as db:
        db.execute("DELETE FROM units WHERE method = 'geak'")  # GEAK: nothing finished at all
    banner = ("PARTIAL RUN: 8 of 12 units done (direct 4/4, reflexion 4/4, geak 0/4); everything below shows only "
              "the finished units")
    files = write_report([run], tmp_path / "report", "md", n_resamples=200)
    text = files.report.read_text()
    assert files.banner == banner and f"> **{banner}**" in text.split("## Verdicts")[0]  # in the header
    assert "GEAK (0/4 units: none finished, absent from every table)" in text
    assert "finished units: 8 of 12 planned" in text
    sidecar = json.loads((tmp_path / "report" / "tables" / "tables.json").read_text())
    note = "Partial run: only the 8 finished units of 12 planned (direct 4/4, reflexion 4/4, geak 0/4); absent: GEAK."
    assert all(note in t["notes"] for t in sidecar.values())
    assert note in text
    code, _, err = invoke("figures", str(run), "--out", str(tmp_path / "figs"), "--resamples", "200")
    assert code == 0 and err.strip() == banner
    code, _, err = invoke("report", str(run), "--out", str(tmp_path / "r2"), "--resamples", "200")
    assert code == 0 and err.strip() == banner
    complete = make_synthetic_run(tmp_path / "complete")
    assert write_report([complete], tmp_path / "r3", "md", n_resamples=200).banner is None
