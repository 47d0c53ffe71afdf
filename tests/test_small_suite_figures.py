"""Issue 43 item 1, per-method figures (design invariant 12): below the small-suite minimum
(results.bands.INTERVAL_MIN_TASKS, 7 tasks at alpha 0.05) pass rates, pass@k, budget-curve bands
and speedup summaries are not printed as intervals but as the value with its count of tasks
("0.67 (2/3 tasks)"), with one sentence saying why, in the report, summary.json, the tables and
the figures (no band drawn, the caption file says so). At or above it nothing changes. Each test
of a 3-task run fails on the code before, which printed "0.67 [0.21, 0.94]" over 3 tasks."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from results.analysis import analyse
from results.bands import (
    INTERVAL_MIN_TASKS,
    count_words,
    coverage_words,
    curve_points_only,
    point_only,
    too_few_words,
)
from results.figure_style import FigureStyle
from results.figures import write_figures
from results.labels import interval_text
from results.method_stats import method_stats
from results.readers import load_run
from results.report import write_report
from results.summary import build_summary, format_table
from results.tables import build_tables
from stats import aggregate_curves, mean_band, min_tasks_to_reject
from tests.fixtures.synthetic_run import Cand, UnitSpec, write_run

RES = 200
#: "x [lo, hi]" as every output prints an interval (a rate, a speedup "1.20x [", a signed difference).
INTERVAL = re.compile(r"\d(x)? \[[-+]?\d")
WHY = "no interval is given over fewer than 7 tasks"


def _unit(ok: bool, speedup: float) -> UnitSpec:
    kind = "correct" if ok else "wrong_result"
    return UnitSpec(("generator",), (Cand(1, kind, kind),), ((1, 0),), speedup=speedup if ok else None)


def _run(path: Path, geak: list[bool], direct: list[bool], repeats: int = 1) -> Path:
    """GEAK and direct prompting on len(geak) tasks; geak[i] / direct[i]: whether task i passes
    (every repeat alike); speedups differ by task so that their spread is not zero."""
    tasks = tuple(f"t{i:02d}" for i in range(len(geak)))
    spec: dict[tuple[str, str], UnitSpec | tuple[UnitSpec, ...]] = {}
    for i, t in enumerate(tasks):
        spec[("geak", t)] = tuple(_unit(geak[i], 2.0 * (1 + 0.05 * i)) for _ in range(repeats))
        spec[("direct", t)] = tuple(_unit(direct[i], 1.0 + 0.03 * i) for _ in range(repeats))
    return write_run(path, spec, tasks=tasks, budget=1, simulated=False, model="m", repeats=repeats)


def test_the_minimum_is_the_exact_tests_at_the_reports_alpha() -> None:
    assert INTERVAL_MIN_TASKS == min_tasks_to_reject(0.05) == 7
    assert WHY in too_few_words() and "at 3 tasks covering 0.90-1.00" in too_few_words()  # the measured coverage


def test_a_point_value_names_its_count_of_tasks() -> None:
    e = point_only(mean_band(np.array([1.0, 1.0, 0.0])), [1.0, 1.0, 0.0])
    assert e.value == pytest.approx(2 / 3) and math.isnan(e.lo) and math.isnan(e.hi)
    assert interval_text(e.value, e.lo, e.hi, e.n, rate=True, reason=e.method) == "0.67 (2/3 tasks)"
    assert count_words([0.5, 1.0, 0.0], 3) == "3 tasks" and count_words(None, 1) == "1 task"
    seven = mean_band(np.r_[np.ones(5), 0.0, 0.0])
    assert point_only(seven, np.r_[np.ones(5), 0.0, 0.0]) == seven  # at the minimum nothing changes
    band = aggregate_curves(np.arange(3), np.array([[0.0, 1.0], [0.0, 0.0], [0.0, 1.0]]), n_resamples=RES)
    points = curve_points_only(band)
    assert np.isnan(points.lo).all() and np.isnan(points.hi).all() and np.array_equal(points.mean, band.mean)


def test_three_tasks_summary_and_end_of_run_table_give_no_interval(tmp_path: Path) -> None:
    run = _run(tmp_path / "r", [True, True, False], [True, False, False])
    summary = build_summary(run)
    for name, count in (("geak", "2/3 tasks"), ("direct", "1/3 tasks")):
        m = summary["methods"][name]
        assert m["submitted_pass_ci"] is None and m["oracle_pass_ci"] is None, name
        assert m["speedup_geomean_ci"] is None and m["ci_method"] is None and m["ci_coverage"] is None
        assert m["submitted_pass_count"] == count and m["interval_min_tasks"] == 7
        assert m["no_interval_reason"].startswith("null interval fields (submitted_pass_ci over 3 tasks; "
                                                  "oracle_pass_ci over 3 tasks; speedup_geomean_ci over ")
        assert WHY in m["no_interval_reason"]
        s = m["speedups"]["expert"]
        assert s["geomean_ci"] is None and all(ci is None for ci in s["fast_p_ci"].values())
        assert "fast_p_ci over 3 tasks" in s["no_interval_reason"]
    table = format_table(summary, interpreter=False)
    assert "0.667 (2/3 tasks)" in table and "0.333 (1/3 tasks)" in table and WHY in table
    assert not INTERVAL.search(table)


@pytest.mark.slow  # seconds: whole reports and figures (the full suite runs it)
def test_three_tasks_report_tables_and_figures_give_no_interval(tmp_path: Path) -> None:
    run = _run(tmp_path / "r", [True, True, False], [True, False, False])
    files = write_report([run], tmp_path / "report", n_resamples=RES)
    report = files.report.read_text()
    assert not INTERVAL.search(report), INTERVAL.search(report)
    assert "0.67 (2/3 tasks)" in report and "0.33 (1/3 tasks)" in report
    assert "Small suite, per method (design invariant 12): GEAK's pass rates, pass@k and budget curves (3 tasks)" \
        in report
    a = analyse(load_run(run), n_resamples=RES)
    tables = {t.name: t for t in build_tables(a)}
    acc = tables["accuracy"].text.set_index("method")
    assert acc.loc["GEAK", "submitted pass"] == "0.67 (2/3 tasks)"
    assert acc.loc["GEAK", "speedup (correct only)"] == f"{2.0 * 1.05 ** 0.5:.2f}x (2 tasks)"
    assert acc.loc["direct prompting", "submitted pass exact (tasks as trials)"] == "0.33 (1/3 tasks)"
    assert tables["accuracy"].numeric[["submitted_pass_lo", "oracle_pass_hi"]].isna().all().all()
    par = tables["parallel"].text.set_index("method")  # direct prompting: pass@k over its samples
    assert par.loc["direct prompting", "pass@k over runs"] == "0.33 (1/3 tasks)"
    for name in ("accuracy", "sequential", "parallel", "speedups"):
        assert any(WHY in n for n in tables[name].notes), name
        assert not any(INTERVAL.search(str(v)) for v in tables[name].text.to_numpy().ravel()), name
    # figures: no band (the plotted numbers have no ends) and the caption file says so and why
    figs = write_figures(a, tmp_path / "figs", FigureStyle.make("default", ["svg"]))
    by_name = {f.name: f for f in figs}
    for name in ("budget_calls", "budget_tokens", "fast_p", "parallel_scaling"):
        f = by_name[name]
        svg, csv = f.files
        assert "band-outline" not in svg.read_text(), name
        plotted = pd.read_csv(csv)
        assert len(plotted) and plotted["lo"].isna().all() and plotted["hi"].isna().all(), name
        assert f.caption_file is not None
        caption = f.caption_file.read_text()
        assert "points only: no band" in caption and WHY in caption, name


@pytest.mark.slow  # seconds: whole reports and figures (the full suite runs it)
def test_ten_tasks_keep_every_interval(tmp_path: Path) -> None:
    run = _run(tmp_path / "r", [i < 8 for i in range(10)], [i < 7 for i in range(10)])
    summary = build_summary(run)
    for name, value in (("geak", 0.8), ("direct", 0.7)):
        m = summary["methods"][name]
        lo, hi = m["submitted_pass_ci"]
        assert m["submitted_pass"] == pytest.approx(value) and lo < value < hi and m["oracle_pass_ci"] is not None
        assert m["no_interval_reason"] is None and m["submitted_pass_count"] is None
        assert m["ci_coverage"] == coverage_words(10) and m["speedup_geomean_ci"] is not None
        assert m["speedups"]["expert"]["no_interval_reason"] is None
    table = format_table(summary, interpreter=False)
    assert INTERVAL.search(table) and WHY not in table
    report = write_report([run], tmp_path / "report", n_resamples=RES).report.read_text()
    assert "0.80 [" in report and "Small suite, per method" not in report and WHY not in report
    a = analyse(load_run(run), n_resamples=RES)
    tables = {t.name: t for t in build_tables(a)}
    assert tables["accuracy"].text.set_index("method").loc["GEAK", "submitted pass"].startswith("0.80 [")
    figs = {f.name: f for f in write_figures(a, tmp_path / "figs", FigureStyle.make("default", ["svg"]))}
    for name in ("budget_calls", "fast_p"):
        svg, csv = figs[name].files
        assert "band-outline" in svg.read_text() and pd.read_csv(csv)["lo"].notna().any(), name
        caption_file = figs[name].caption_file
        assert caption_file is not None and "no band" not in caption_file.read_text()


def test_a_speedup_over_two_correct_tasks_of_ten_is_not_an_interval(tmp_path: Path) -> None:
    """The audit's "0.93x [0.87, 1.00], 2 tasks": a geometric mean over the 2 tasks a method solved
    is a point value with its count, though the suite has 10 tasks (its pass rate keeps its interval)."""
    run = _run(tmp_path / "r", [True] * 10, [i < 2 for i in range(10)])
    m = build_summary(run)["methods"]["direct"]
    assert m["submitted_pass_ci"] is not None and m["speedup_geomean_ci"] is None and m["speedup_tasks"] == 2
    assert m["no_interval_reason"].startswith("null interval fields (speedup_geomean_ci over 2 tasks): ")
    assert m["speedups"]["expert"]["fast_p_ci"]["1"] is not None  # fast_p rests on all 10 tasks
    a = analyse(load_run(run), n_resamples=RES)
    acc = {t.name: t for t in build_tables(a)}["accuracy"]
    assert acc.text.set_index("method").loc["direct prompting", "speedup (correct only)"] == "1.01x (2 tasks)"
    assert any(WHY in n for n in acc.notes)
    assert any("direct prompting's speedup geometric mean against the expert Triton kernel (2 tasks)" in n
               for n in a.notes)


def test_repeats_below_the_minimum_give_the_mean_and_its_tasks(tmp_path: Path) -> None:
    """With repeats a per-task score is a share of repeats: the count is the tasks, and the
    fixed-suite interval (within-task noise only) is withheld too."""
    ok, bad = _unit(True, 1.5), _unit(False, 1.0)
    spec: dict[tuple[str, str], UnitSpec | tuple[UnitSpec, ...]] = {("direct", t): (ok, bad) for t in ("t0", "t1", "t2")}
    units = load_run(write_run(tmp_path / "r", spec, tasks=("t0", "t1", "t2"), budget=1, repeats=2)).units
    m = method_stats(units, RES, 0, ())
    assert m.submitted.value == 0.5 and m.submitted.method == "too few tasks for an interval (3 tasks)"
    assert m.submitted_fixed is not None and math.isnan(m.submitted_fixed.lo) and m.submitted_fixed.value == 0.5
    assert interval_text(m.submitted.value, m.submitted.lo, m.submitted.hi, 3, rate=True,
                         reason=m.submitted.method) == "0.50 (3 tasks)"


def test_ten_task_bands_are_outlined_in_their_methods_colour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where there are bands (at or above the minimum) each is outlined in its method's colour and the
    legend shows each method once (what tests/test_figures_readable.py checked on the 3-task shipped run)."""
    from matplotlib.colors import to_rgba

    import results.figures as figures_module
    from results.figure_style import method_looks
    from results.verdicts import display

    seen: dict[str, tuple[list[list[tuple[float, ...]]], list[list[str]]]] = {}
    original = figures_module.save

    def inspect(fig: Any, out_dir: Path, name: str, style: FigureStyle, *args: Any, **kwargs: Any) -> list[Path]:
        outlines = [[tuple(c.get_edgecolor()[0].tolist()) for c in ax.collections
                     if c.get_gid() == "band-outline" and float(c.get_linewidth()[0]) >= 1.0] for ax in fig.axes]
        seen[name] = (outlines, [[t.get_text() for t in lg.get_texts()] for lg in fig.legends])
        return original(fig, out_dir, name, style, *args, **kwargs)

    monkeypatch.setattr(figures_module, "save", inspect)
    run = _run(tmp_path / "r", [i < 8 for i in range(10)], [i % 2 == 0 for i in range(10)])
    a = analyse(load_run(run), n_resamples=RES)
    figures_module.write_figures(a, tmp_path / "figs", FigureStyle.make("paper", ["png"]))
    colours = {m: tuple(to_rgba(lk.color)) for m, lk in method_looks(a.data.methods).items()}
    for name in ("budget_calls", "budget_tokens", "budget_evaluations"):
        outlines, legends = seen[name]
        for ax in outlines:
            assert sorted(ax) == sorted(colours[m] for m in a.curves["calls"]), name
        assert legends == [[display(m) for m in a.data.methods]], name
    (fast,) = seen["fast_p"][0]
    assert sorted(fast) == sorted(colours.values())
