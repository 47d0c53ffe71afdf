"""results/ on synthetic run folders whose expected values were computed by hand from the
fixture's SPEC (tests/fixtures/synthetic_run.py): readers, budget curves, runs and pass@k
over runs, tables, paired comparisons and verdicts, renderers, figures, combination and
refusal of runs, and the report/figures commands' bad-input paths."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from results.analysis import analyse
from results.curves import budget_curves, independent_runs, spend_at, unit_curves
from results.readers import RunError, load_run, load_runs
from results.tables import build_tables, to_csv, to_latex, to_markdown, write_tables
from results.verdicts import paired_comparisons, verdict_sentence
from stats import exact_ci, fixed_suite_ci, wilson_ci
from tests.fixtures.synthetic_run import SPEC, TASKS, Cand, UnitSpec, make_synthetic_run, write_run
from tests.helpers import run_cli

RES = 2000  # bootstrap resamples: enough for stable tests, fast


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_synthetic_run(tmp_path_factory.mktemp("syn") / "run-a")


@pytest.fixture(scope="module")
def analysis(run_dir: Path):
    return analyse(load_run(run_dir), n_resamples=RES, seed=0)


@pytest.fixture(scope="module")
def tables(analysis):
    return {t.name: t for t in build_tables(analysis)}


def _row(table, method: str) -> pd.Series:
    df = table.numeric
    return df[df["method"] == method].iloc[0]


# ---------------------------------------------------------------------------- readers
def test_readers_join_hidden_and_visible_verdicts(run_dir: Path) -> None:
    d = load_run(run_dir)
    assert len(d.units) == 12 and d.simulated and d.budget == 4 and d.has_timings
    u = d.units.set_index(["method", "task"])
    assert u.loc[("direct", "softmax"), "submitted_pass"] == False  # noqa: E712
    assert u.loc[("direct", "softmax"), "submitted_visible_pass"] == True  # noqa: E712 - the false positive
    assert u.loc[("geak", "vector_add"), "speedup"] == pytest.approx(3.0)
    assert math.isnan(u.loc[("geak", "flip"), "speedup"])
    c = d.candidates
    geak_flip = c[(c["method"] == "geak") & (c["task"] == "flip")].sort_values("candidate_index")
    assert geak_flip["hidden_verdict"].tolist() == ["wrong_result", "compile_error"]
    assert geak_flip["visible_verdict"].tolist() == ["correct", "compile_error"]
    assert len(d.timings) == 2 * 11  # 11 timed evaluations x 2 cases
    assert d.evaluations["timed"].sum() == d.evaluations["has_timing"].sum() == 11 and d.evaluations["flagged"].sum() == 1


# ---------------------------------------------------------------------------- curves
@pytest.mark.parametrize("method,submitted,oracle", [
    ("direct", [0, .25, .5, .5, .75], [0, .25, .5, .5, .75]),
    ("reflexion", [0, .25, .25, .5, .5], [0, .25, .25, .5, .5]),
    ("geak", [0, 0, .25, .25, .5], [0, .25, .25, .5, .5]),
])
def test_budget_curves_by_hand(run_dir: Path, method: str, submitted: list, oracle: list) -> None:
    d = load_run(run_dir)
    c = budget_curves(d, "calls", n_resamples=RES)[method]
    assert c.grid.tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(c.submitted.mean, submitted)
    np.testing.assert_allclose(c.oracle.mean, oracle)
    # 4 tasks, below the small-suite minimum (design invariant 12): the means without a band
    assert np.isnan(c.submitted.lo).all() and np.isnan(c.oracle.hi).all()
    # against tokens (100 per call): an event counts at x iff its tokens <= x
    t = budget_curves(d, "tokens", n_resamples=RES)[method]
    grid = t.grid.tolist()
    assert grid[-1] == 400
    for calls in (1, 2, 3, 4):
        assert t.submitted.mean[grid.index(100 * calls)] == pytest.approx(submitted[calls])
        assert t.oracle.mean[grid.index(100 * calls - 4)] == pytest.approx(oracle[calls - 1])


def test_spend_at_budgets(run_dir: Path) -> None:
    s = spend_at(load_run(run_dir), [1, 2, 4])
    g = s[(s["method"] == "geak") & (s["task"] == "vector_add")].set_index("budget")
    assert g["tokens"].tolist() == [100, 200, 400] and g["gpu_evals"].tolist() == [1, 1, 2]
    r = s[(s["method"] == "reflexion") & (s["task"] == "softmax")].set_index("budget")
    assert r["gpu_evals"].tolist() == [1, 1, 3]


def test_unit_curves_refuse_unsorted_submissions(run_dir: Path) -> None:
    d = load_run(run_dir)
    s = d.submissions
    first = s[(s["method"] == "direct") & (s["task"] == "vector_add") & (s["submission_index"] == 0)].index[0]
    s.loc[first, "calls_used"] = 3  # the first change now comes after the second (at 2 calls)
    with pytest.raises(ValueError, match="sorted"):
        unit_curves(d, "calls")


# ---------------------------------------------------------------------------- independent runs
def test_runs_and_pass_at_k_over_runs(run_dir: Path) -> None:
    d = load_run(run_dir)
    direct = independent_runs(d, "direct", n_resamples=RES)
    assert direct.calls_per_run == 1 and len(direct.runs) == 16
    np.testing.assert_allclose(direct.curve.mean, [0.4375, 7 / 12, 0.6875, 0.75])
    geak = independent_runs(d, "geak", n_resamples=RES)
    assert geak.calls_per_run == 2 and geak.runs["complete"].all()
    answers = geak.runs.set_index(["task", "run_index"])["answer_pass"]
    assert answers[("vector_add", 0)] and answers[("vector_add", 1)] and answers[("softmax", 1)]
    assert not answers[("softmax", 0)] and not answers[("flip", 0)]  # flip run 0: visible-correct, hidden wrong
    np.testing.assert_allclose(geak.curve.mean, [0.375, 0.5])
    refl = independent_runs(d, "reflexion", n_resamples=RES)
    assert refl.calls_per_run == 3
    runs = refl.runs.set_index(["task", "run_index"])
    assert runs.loc[("softmax", 1), "complete"]  # last trial ended on visible success
    assert not runs.loc[("flip", 1), "complete"] and not runs.loc[("rms_norm", 1), "complete"]
    assert runs.loc[("vector_add", 1), ["calls_start", "calls_end"]].tolist() == [1, 4]
    np.testing.assert_allclose(refl.curve.mean, [0.5])
    assert "2 run(s) cut off" in refl.note


def test_geak_without_a_complete_run_is_not_estimable(tmp_path: Path) -> None:
    spec = {("geak", "vector_add"): UnitSpec(("generator", "reflector", "generator"), (Cand(1, "correct", "correct"),
                                                                                        Cand(3, "wrong_result", "wrong_result")),
                                             ((2, 0),), speedup=1.0)}
    run = write_run(tmp_path / "r", spec, tasks=("vector_add",), budget=3,
                    method_options={"geak": {"iterations": 2}})
    r = independent_runs(load_run(run), "geak", n_resamples=RES)
    assert r.curve is None and "no complete run" in r.note and "vector_add" in r.note


# ---------------------------------------------------------------------------- tables
def test_accuracy_table_by_hand(tables) -> None:
    t = tables["accuracy"]
    d, g, r = (_row(t, m) for m in ("direct", "geak", "reflexion"))
    assert (d["submitted_pass"], g["submitted_pass"], r["submitted_pass"]) == (0.75, 0.5, 0.5)
    # correct-only geometric means; GEAK's 3.0x on vector_add was timed under a clock change: left out
    assert d["speedup_correct"] == pytest.approx(3 ** (1 / 3)) and d["speedup_tasks"] == 3
    assert g["speedup_correct"] == pytest.approx(1.2) and g["speedup_tasks"] == 1
    assert r["speedup_correct"] == pytest.approx(1.32 ** 0.5) and r["speedup_tasks"] == 2
    assert not any("speedup_all" in c for c in t.numeric.columns)  # no figure counts a failure as 1x
    text = t.text.set_index("method")
    assert text.loc["GEAK", "speedup (correct only)"] == "1.20x (1 task)"  # a value and its count, no interval
    assert d["visible_fp_rate"] == pytest.approx(0.25) and g["visible_fp_rate"] == pytest.approx(1 / 3)
    assert (d["calls"], d["tokens"], d["gpu_evals"], g["gpu_evals"]) == (4, 400, 4, 2)
    # 4 tasks, below the small-suite minimum (design invariant 12): 3 of 4 with no interval, and why
    assert text.loc["direct prompting", "submitted pass wilson (tasks as trials)"] == "0.75 (3/4 tasks)"
    assert math.isnan(d["submitted_pass_wilson_lo"]) and math.isnan(d["submitted_pass_exact_hi"])
    assert any("no interval is given over fewer than 7 tasks" in n for n in t.notes)
    # the Wilson score interval for 3 of 4 it would be, by its formula
    z = sps.norm.ppf(0.975)
    p, n = 0.75, 4
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert (wilson_ci(3, 4).lo, wilson_ci(3, 4).hi) == (pytest.approx(centre - half), pytest.approx(centre + half))
    assert exact_ci(3, 4).lo == pytest.approx(sps.beta.ppf(0.025, 3, 2))


def test_speedup_fast_p_false_positive_and_latency_tables(tables) -> None:
    f = tables["speedups"]
    assert set(f.numeric["against"]) == {"expert"}  # the fixture has no eager timings: no eager rows
    ps = (0, 1, 1.5, 2)
    assert [_row(f, "direct")[f"fast_{p:g}"] for p in ps] == [.75, .5, .25, .25]
    # GEAK's vector_add timing is flagged: that task's speed is unknown, so fast_p is over the other 3 tasks
    assert [_row(f, "geak")[f"fast_{p:g}"] for p in ps] == pytest.approx([1 / 3, 1 / 3, 0, 0])
    g = _row(f, "geak")
    assert (g["excluded_units"], g["flagged_units"], g["geomean_tasks"]) == (1, 1, 1)
    assert any("GEAK vs expert Triton kernel, including 1 flagged timing(s): geomean 1.90x, fast_1 0.50" in n
               for n in f.notes)
    assert [_row(f, "reflexion")[f"fast_{p:g}"] for p in ps] == [.5, .5, 0, 0]
    fp = tables["false_positives"]
    d = _row(fp, "direct")
    assert (d["submissions_visible_pass"], d["submissions_hidden_fail"], d["candidates_visible_pass"],
            d["candidates_hidden_fail"]) == (4, 1, 8, 1)
    assert d["candidate_fp_rate"] == pytest.approx(0.125)
    lat = tables["latency"].numeric.set_index(["task", "clock_state"])
    cv_a = np.std([1.0, 1.1, 0.9, 1.0], ddof=1) / 1.0
    cv_b = np.std([1.0, 1.0, 1.0, 1.2], ddof=1) / 1.05
    soft = lat.loc[("softmax", "lock not recorded")]  # GEAK's final and its timed visible candidate: 4 cases
    assert soft["cases"] == 4 and soft["cv_median"] == pytest.approx((cv_a + cv_b) / 2)
    assert soft["rel_iqr_median"] == pytest.approx(0.05)  # IQR/median 0.05 in both patterns
    assert soft["rel_mad_median"] == pytest.approx(0.025)  # MAD/median 0.05 and 0.0
    # vector_add: 5 timed evaluations x 2 cases; GEAK's final was flagged: its own row, out of the averages
    assert lat.loc[("vector_add", "lock not recorded"), "cases"] == 8
    assert lat.loc[("vector_add", "lock not recorded, flagged"), "cases"] == 2
    assert any("with the 2 flagged case(s) included" in n for n in tables["latency"].notes)
    cases = tables["latency_cases"]
    assert not cases.in_report and len(cases.numeric) == 22
    assert "1.500x [1.350, 1.650]" in set(cases.text["speedup [95% CI]"])  # the per-timing interval, reported
    med = cases.numeric.iloc[0]
    assert med["median_lo"] <= med["median_ms"] <= med["median_hi"]


def test_own_test_false_positives(run_dir: Path) -> None:
    """Candidates that passed a method's own tests but fail the hidden cases (Reflexion's
    internal feedback), counted once per unit and source."""
    from results.tables import false_positive_table

    d = load_run(run_dir)
    refl = d.candidates[d.candidates["method"] == "reflexion"]
    passing, failing = refl[refl["hidden_pass"]].iloc[0], refl[~refl["hidden_pass"]].iloc[0]
    rows = [(passing, "correct", 0), (failing, "correct", 1), (failing, "correct", 2), (passing, "wrong_result", 3)]
    d.test_runs = pd.DataFrame([{"method": c["method"], "task": c["task"], "repeat": c["repeat"],
                                 "test_run_index": i, "calls_used": 1, "source_hash": c["source_hash"],
                                 "tests_hash": "t", "verdict": v, "tests_passed": 0, "tests_total": 1}
                                for c, v, i in rows])
    fp = false_positive_table(analyse(d, n_resamples=200)).numeric.set_index("method")
    # the passing candidate's last run failed its tests; the failing one passed them (counted once)
    assert (fp.loc["reflexion", "candidates_own_tests_pass"], fp.loc["reflexion", "candidates_own_tests_hidden_fail"],
            fp.loc["reflexion", "own_tests_fp_rate"]) == (1, 1, 1.0)
    assert fp.loc["direct", "candidates_own_tests_pass"] == 0 and np.isnan(fp.loc["direct", "own_tests_fp_rate"])


def test_sequential_parallel_and_difficulty_tables(tables) -> None:
    seq = tables["sequential"].numeric
    g = seq[seq["method"] == "geak"].set_index("budget_calls")
    assert g.index.tolist() == [1, 2, 4]
    assert g["submitted"].tolist() == [0, .25, .5] and g["oracle"].tolist() == [.25, .25, .5]
    par = tables["parallel"].numeric
    gp = par[par["method"] == "geak"].set_index("k")
    assert gp["pass_at_k"].tolist() == [0.375, 0.5] and gp["calls"].tolist() == [2, 4]
    diff = tables["difficulty"].numeric
    dd = diff[diff["method"] == "direct"].set_index("difficulty")
    assert dd.loc[1, "submitted_pass"] == 1.0 and dd.loc[2, "submitted_pass"] == 0.5  # vector_add,flip | softmax,rms_norm


def test_renderers_carry_the_simulated_label(tables, tmp_path: Path) -> None:
    t = tables["accuracy"]
    md, tex, csv = to_markdown(t, heading=False), to_latex(t), to_csv(t)
    assert md.splitlines()[0].startswith("_SIMULATED MODEL")
    assert md.count("\n| ") >= 4 and "| direct prompting |" in md
    assert tex.startswith("% SIMULATED MODEL") and "\\caption{Accuracy and speedup per method at 4 calls (SIMULATED MODEL)}" in tex
    assert "\\begin{tabular}" in tex and tex.count("\\\\") == 4  # header + 3 methods
    assert r"fast\_1.5" in to_latex(tables["speedups"])  # underscores escaped
    back = pd.read_csv(io.StringIO(csv))  # plain CSV: no comment line to skip
    assert back["submitted_pass"].tolist() == [0.75, 0.5, 0.5] and back["simulated"].tolist() == [True] * 3
    paths = write_tables(list(tables.values()), tmp_path / "tables")  # every table as files, long ones too
    assert {p.suffix for p in paths} == {".md", ".tex", ".csv", ".json"} and len(paths) == 3 * len(tables) + 1
    sidecar = json.loads((tmp_path / "tables" / "tables.json").read_text())
    assert sidecar["accuracy"]["simulated"] is True and sidecar["accuracy"]["label"].startswith("SIMULATED MODEL")
    assert pd.read_csv(tmp_path / "tables" / "accuracy.csv").shape == (3, back.shape[1])


# ---------------------------------------------------------------------------- comparisons and verdicts
def test_paired_comparisons_by_hand(analysis) -> None:
    """4 tasks: below the small-suite minimum (7 tasks for one verdict at alpha 0.05), so every
    comparison is counts and a reason, never a p-value or an interval (design invariant 12;
    this test asserted a t interval and Holm p-values over 4 tasks before issue 43)."""
    comps = {(c.a, c.b, c.metric): c for c in analysis.comparisons}
    assert set(comps) == {("reflexion", "direct", "submitted pass"), ("reflexion", "direct", "speedup"),
                          ("geak", "direct", "submitted pass"), ("geak", "reflexion", "submitted pass")}
    c = comps[("geak", "direct", "submitted pass")]
    assert c.value == pytest.approx(-0.25) and (c.test.n10, c.test.n01) == (1, 2)
    assert not c.tested and c.min_tasks == 7 and math.isnan(c.t_interval.lo) and math.isnan(c.test.pvalue)
    r = comps[("reflexion", "direct", "submitted pass")]
    assert (r.test.n10, r.test.n01, r.n_tasks) == (0, 1, 4) and not r.tested
    s = comps[("reflexion", "direct", "speedup")]
    assert s.n_tasks == 2 and s.value == pytest.approx(math.exp((math.log(1.2 / 1.5) + math.log(1.1 / 0.8)) / 2))
    assert all(not x.tested and not x.significant and math.isnan(x.p_adjusted) for x in comps.values())
    assert any("Speedups of GEAK and direct prompting are not compared" in n for n in analysis.notes)
    text = verdict_sentence(c)
    assert text.startswith("At 4 calls, too few tasks to test: submitted pass of GEAK and direct prompting over "
                           "4 tasks (GEAK ahead on 1, direct prompting ahead on 2, tied on 1); no verdict and no "
                           "interval, because no exact test over 4 tasks can give a p-value below 0.125")
    assert "CI" not in text and "p =" not in text and "[" not in text
    assert "need at least 7 tasks each" in text
    assert any("Small suite (design invariant 12): 4 comparison(s) rest on fewer than 7 tasks" in n
               for n in analysis.notes)


def _twelve_tasks(tmp_path: Path, repeats: int = 1) -> Path:
    """12 tasks: GEAK passes all (2.0x), direct passes 2 (1.0x); every unit copied `repeats` times."""
    spec = {}
    tasks = tuple(f"t{i:02d}" for i in range(12))
    for i, t in enumerate(tasks):
        ok = i < 2
        spec[("direct", t)] = UnitSpec(("generator",), (Cand(1, "correct" if ok else "wrong_result",
                                                             "correct" if ok else "wrong_result"),), ((1, 0),),
                                       speedup=1.0 if ok else None)
        spec[("geak", t)] = UnitSpec(("generator", "reflector"), (Cand(1, "correct", "correct", 1.0),), ((2, 0),),
                                     speedup=2.0)
    return write_run(tmp_path / f"r{repeats}", spec, tasks=tasks, budget=2, simulated=False, model="m",
                     repeats=repeats)


def test_detectable_difference_sentence_and_holm(tmp_path: Path) -> None:
    """Paired t-test on the 12 per-task differences [1] * 10 + [0] * 2. The speedup comparison rests
    on 2 tasks: below the small-suite minimum, so it is counts only and outside the Holm family,
    which then holds one p-value (before issue 43 the 2-task speedup got p = 0.5 and doubled the
    pass verdict's adjusted p)."""
    d = load_run(_twelve_tasks(tmp_path))
    comps = paired_comparisons(d, n_resamples=RES)
    assert [(c.metric, c.n_tasks, c.tested) for c in comps] == [("submitted pass", 12, True), ("speedup", 2, False)]
    diffs = [1.0] * 10 + [0.0] * 2
    p_pass = sps.ttest_1samp(diffs, 0.0).pvalue
    assert comps[0].test.method == "paired t" and comps[0].test.pvalue == pytest.approx(p_pass)
    assert comps[0].decided_by == "paired t-test on per-task differences"
    # beside it, not in the family: the exact sign-flip test (2 / 2^10) and McNemar (one repeat: its p shown)
    assert comps[0].beside_test("sign-flip").pvalue == pytest.approx(2 * 0.5 ** 10)
    assert comps[0].beside_test("mcnemar").pvalue == pytest.approx(2 * 0.5 ** 10) and comps[0].one_repeat
    assert comps[0].p_adjusted == pytest.approx(p_pass)  # Holm over a family of one
    assert math.isnan(comps[1].p_adjusted) and (comps[1].test.n10, comps[1].test.n01) == (2, 0)
    half = sps.t.ppf(0.975, 11) * np.std(diffs, ddof=1) / math.sqrt(12)
    assert comps[0].t_interval.lo == pytest.approx(10 / 12 - half) and comps[0].t_interval.hi == 1.0
    s = verdict_sentence(comps[0])
    assert s.startswith("At 2 calls, GEAK's submitted pass exceeds direct prompting's by 83.3 points over 12 tasks")
    assert f"Holm-adjusted p = {p_pass:.1e}" in s and f"[{100 * (10 / 12 - half):+.1f}, +100.0]" in s
    assert "decided by the paired t-test on per-task differences (12 tasks)" in s and "smallest difference" not in s
    assert "bootstrap" not in s  # the interval beside the verdict is the decider's own (t), nothing else
    assert s.endswith("Errored units on these tasks: GEAK 0, direct prompting 0.")
    few = verdict_sentence(comps[1])
    assert few.startswith("At 2 calls, too few tasks to test: speedup of GEAK and direct prompting over 2 tasks "
                          "where both submissions are correct (GEAK ahead on 2, direct prompting ahead on 0, tied "
                          "on 0); no verdict and no interval, because no exact test over 2 tasks can give a "
                          "p-value below 0.500")
    assert "2.00" not in few and "faster" not in few
    from results.analysis import headline
    from results.tables import comparisons_table

    table = comparisons_table(headline(d, n_resamples=200))
    row = table.text.iloc[1]
    assert row["95% t CI"] == "-" and row["verdict"] == "too few tasks to test (< 7)"
    assert "95% paired bootstrap" not in table.text.columns and table.text.iloc[0]["decided by"] == "paired t"
    a = analyse(d, n_resamples=RES)
    assert not a.data.simulated
    diff = {t.name: t for t in build_tables(a)}["difficulty"].text
    assert diff["difficulty"].tolist() == ["unknown", "unknown"]  # tasks the bench registry does not know


def test_copies_of_repeats_leave_the_verdict_unchanged(tmp_path: Path) -> None:
    """The task is the unit: 8 identical copies of each unit give the same per-task means, so the
    same p-value and interval as 1 copy (McNemar over (task, repeat) pairs would shrink)."""
    one = {c.metric: c for c in paired_comparisons(load_run(_twelve_tasks(tmp_path, 1)), n_resamples=200)}
    eight = {c.metric: c for c in paired_comparisons(load_run(_twelve_tasks(tmp_path, 8)), n_resamples=200)}
    a, b = one["submitted pass"], eight["submitted pass"]
    assert b.test.pvalue == a.test.pvalue and b.p_adjusted == a.p_adjusted
    assert (b.t_interval.lo, b.t_interval.hi) == (a.t_interval.lo, a.t_interval.hi)
    assert b.mde.value == a.mde.value
    # the 2-task speedup comparison is untested either way, with the same counts (tasks, not units)
    sa, sb = one["speedup"], eight["speedup"]
    assert not sa.tested and not sb.tested and (sb.test.n10, sb.test.n01, sb.n_tasks) == (2, 0, 2)
    assert sb.value == pytest.approx(sa.value)
    assert eight["submitted pass"].beside_test("mcnemar").n10 == 8 * one["submitted pass"].beside_test("mcnemar").n10
    assert not eight["submitted pass"].one_repeat
    assert "McNemar discordant 80/0 (descriptive: repeats)" in comparisons_text(tmp_path)


def comparisons_text(tmp_path: Path) -> str:
    from results.analysis import headline
    from results.tables import comparisons_table

    return to_markdown(comparisons_table(headline(load_run(tmp_path / "r8"), n_resamples=200)))


# ---------------------------------------------------------------------------- combining runs
def test_combined_runs_add_repeats(run_dir: Path, tmp_path: Path) -> None:
    other = make_synthetic_run(tmp_path / "run-b", seed=7)
    d = load_runs([run_dir, other])
    assert len(d.units) == 24 and sorted(d.units["repeat"].unique()) == [0, 1]
    assert set(d.units["run"]) == {"run-a", "run-b"}
    c = budget_curves(d, "calls", n_resamples=RES)["direct"]
    np.testing.assert_allclose(c.submitted.mean, [0, .25, .5, .5, .75])  # same events twice: same means
    single = {(x.a, x.b, x.metric): x for x in paired_comparisons(load_run(run_dir), n_resamples=RES)}
    for x in paired_comparisons(d, n_resamples=RES):  # the same events twice: per-task means and verdicts unchanged
        y = single[(x.a, x.b, x.metric)]
        assert x.value == pytest.approx(y.value) and x.tested == y.tested and (x.test.n10, x.test.n01) == (
            y.test.n10, y.test.n01)
    comp = [x for x in paired_comparisons(d, n_resamples=RES) if (x.a, x.b, x.metric) == ("geak", "direct", "submitted pass")]
    assert (comp[0].test.n10, comp[0].test.n01) == (1, 2)  # tasks
    mc = comp[0].beside_test("mcnemar")
    assert mc is not None and (mc.n10, mc.n01) == (2, 4)  # (task, repeat) pairs, descriptive
    runs = independent_runs(d, "direct", n_resamples=RES)
    assert runs.runs.groupby("task").size().tolist() == [8, 8, 8, 8]


@pytest.mark.parametrize("change,message", [
    ({"budget": 5}, "budget differ"),
    ({"tasks": ("vector_add", "softmax", "flip")}, "tasks differ"),
    ({"model": "other-model", "simulated": False}, "model differ"),
])
def test_incompatible_runs_are_refused(run_dir: Path, tmp_path: Path, change: dict, message: str) -> None:
    other = make_synthetic_run(tmp_path / "other", **change)
    with pytest.raises(RunError, match=message):
        load_runs([run_dir, other])


def test_runs_with_the_same_seed_and_options_are_refused(run_dir: Path, tmp_path: Path) -> None:
    """Two runs of one command (same seed, same options) hold the same draws: combining them would
    double every discordant pair and shrink p-values for nothing."""
    twin = make_synthetic_run(tmp_path / "twin")
    with pytest.raises(RunError, match=r"cannot combine run-a and twin: 12 unit\(s\) share their seeds \(run seed 0; "
                                       r"unit direct/flip/repeat 0 has seed \d+ in both\)"):
        load_runs([run_dir, twin])
    assert len(load_runs([run_dir, make_synthetic_run(tmp_path / "seed-1", seed=1)]).units) == 24  # other seed: fine


def test_copies_are_refused_by_their_unit_seeds_whatever_else_differs(run_dir: Path, tmp_path: Path) -> None:
    """Issue 43: a second run with seed 0 and an option that does not bind (here an eval budget)
    has the same unit seeds, so the same draws; it was combined as independent repeats."""
    other = make_synthetic_run(tmp_path / "eval-cap")
    config = json.loads((other / "config.json").read_text())
    config["config"]["eval_budget"] = 50
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(RunError, match=r"share their seeds \(run seed 0;.*--allow-same-seed"):
        load_runs([run_dir, other])
    once = load_runs([run_dir, other], allow_same_seed=True)
    assert len(once.units) == 12 and set(once.units["run"]) == {"run-a"}  # each copy counted once
    assert once.notes == ["12 unit(s) of eval-cap share their seeds with units of an earlier run: copies, counted "
                          "once (--allow-same-seed)"]
    # a run with more repeats under the same seed shares only its first repeat's seeds: the rest are new draws
    more = write_run(tmp_path / "more", {k: v for k, v in SPEC.items()}, tasks=TASKS, budget=4, repeats=2)
    both = load_runs([run_dir, more], allow_same_seed=True)
    assert len(both.units) == 24 and (both.units["run"] == "more").sum() == 12


def test_bad_folders_are_refused(run_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(RunError, match="given twice"):
        load_runs([run_dir, run_dir])
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunError, match="not a run folder"):
        load_run(tmp_path / "empty")
    assert not (tmp_path / "empty" / "store.sqlite").exists()  # reading never creates a store


@pytest.mark.slow
def test_cli_refusals_are_one_line_exit_2(run_dir: Path, tmp_path: Path) -> None:
    other = make_synthetic_run(tmp_path / "b5", budget=5)
    twin = make_synthetic_run(tmp_path / "twin")
    cases = [("report", str(run_dir), str(other)), ("report", str(tmp_path / "missing")),
             ("figures", str(tmp_path)), ("report",), ("report", str(run_dir), str(twin)),
             ("figures", str(twin), str(run_dir))]
    for args in cases:
        proc = run_cli(*args, timeout=120)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, proc.stderr)
    assert "budget differ" in run_cli("report", str(run_dir), str(other)).stderr
    same = run_cli("report", str(run_dir), str(twin)).stderr
    assert f"{run_dir.name} and twin: 12 unit(s) share their seeds (run seed 0;" in same
    allowed = run_cli("report", str(run_dir), str(twin), "--allow-same-seed", "--out", str(tmp_path / "rep"),
                      "--resamples", "200", timeout=120)
    assert allowed.returncode == 0, allowed.stderr
    assert "share their seeds with units of an earlier run: copies, counted once" in (
        tmp_path / "rep" / "report.md").read_text()


# ---------------------------------------------------------------------------- figures
@pytest.mark.slow
def test_figures_with_timings(analysis, tmp_path: Path) -> None:
    from results.figures import FIGURE_NAMES, write_figures

    figs = {f.name: f for f in write_figures(analysis, tmp_path / "figs")}
    assert set(figs) == set(FIGURE_NAMES) and "budget_evaluations" in figs
    for f in figs.values():
        assert not f.skipped, f.name
        assert f.watermark == "SIMULATED MODEL", (f.name, f.watermark)  # inside the axes of every figure
        png, pdf, csv = f.files
        assert csv.suffix == ".csv" and len(pd.read_csv(csv))
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and pdf.read_bytes()[:5] == b"%PDF-"
        assert png.stat().st_size > 10_000


# ---------------------------------------------------------------------------- one pipeline: summary.json = report
@pytest.mark.slow
def test_summary_and_report_agree_on_a_run_with_repeats(tmp_path: Path) -> None:
    """summary.json (build_summary) and the report's table files give the same figures, on a
    random run with 3 repeats that differ, timings against the expert kernel and eager, and
    flagged timings; the speedup geomean is the per-task one, not pooled over repeats."""
    from results.report import write_report
    from results.summary import build_summary
    from tests.fixtures.synthetic_run import make_random_run

    run = make_random_run(tmp_path / "run", n_tasks=8, budget=6, repeats=3, seed=3)
    summary = build_summary(run)
    write_report([run], tmp_path / "report")
    tables = tmp_path / "report" / "tables"
    acc = pd.read_csv(tables / "accuracy.csv", comment="#").set_index("method")
    spd = pd.read_csv(tables / "speedups.csv", comment="#").set_index(["method", "against"])
    var = pd.read_csv(tables / "variance.csv", comment="#").set_index("method")
    comps = pd.read_csv(tables / "comparisons.csv", comment="#")
    units = load_run(run).units
    for method, m in summary["methods"].items():
        assert m["submitted_pass"] == pytest.approx(acc.loc[method, "submitted_pass"], abs=1e-12)
        assert m["submitted_pass_ci"] == pytest.approx([acc.loc[method, "submitted_pass_lo"],
                                                        acc.loc[method, "submitted_pass_hi"]], abs=1e-12)
        assert m["oracle_pass"] == pytest.approx(acc.loc[method, "oracle_pass"], abs=1e-12)
        assert m["speedup_geomean"] == pytest.approx(acc.loc[method, "speedup_correct"], abs=1e-12)
        assert m["speedup_tasks"] == acc.loc[method, "speedup_tasks"]
        assert m["icc"] == pytest.approx(var.loc[method, "icc"], abs=1e-12)
        assert m["submitted_pass_fixed_suite_ci"] == pytest.approx(
            [var.loc[method, "fixed_suite_lo"], var.loc[method, "fixed_suite_hi"]], abs=1e-12)
        for against in ("expert", "eager"):
            s = m["speedups"][against]
            assert s["geomean"] == pytest.approx(spd.loc[(method, against), "geomean"], abs=1e-12)
            for p in ("0", "1", "1.5", "2"):
                assert s["fast_p"][p] == pytest.approx(spd.loc[(method, against), f"fast_{p}"], abs=1e-12)
                assert s["fast_p_ci"][p] == pytest.approx([spd.loc[(method, against), f"fast_{p}_lo"],
                                                           spd.loc[(method, against), f"fast_{p}_hi"]], abs=1e-12)
        # by hand: per task, the geometric mean over correct repeats with an unflagged timing; then over tasks
        u = units[(units["method"] == method) & units["submitted_pass"] & ~units["speedup_flagged"]]
        per_task = np.log(u["speedup"]).groupby(u["task"]).mean()
        assert m["speedup_geomean"] == pytest.approx(math.exp(per_task.mean()))
        assert m["speedup_tasks"] == len(per_task) and len(u) > len(per_task)  # repeats were pooled per task
    for entry in summary["comparisons"]:
        row = comps[(comps["a"] == entry["a"]) & (comps["b"] == entry["b"]) & (comps["metric"] == entry["metric"])]
        assert entry["p"] == pytest.approx(row["p"].iloc[0], abs=1e-12)
        assert entry["p_adjusted"] == pytest.approx(row["p_adjusted"].iloc[0], abs=1e-12)


def test_fixed_suite_interval_and_variance_with_repeats(tmp_path: Path) -> None:
    """Two tasks, two repeats each, one pass and one fail per task: the fixed-suite t interval
    (2 degrees of freedom) would reach past [0, 1] and is clipped; no between-task variance."""
    from results.method_stats import method_stats

    ok, bad = (UnitSpec(("generator",), (Cand(1, k, k),), ((1, 0),), speedup=1.0 if k == "correct" else None)
               for k in ("correct", "wrong_result"))
    spec = {("direct", t): (ok, bad) for t in ("vector_add", "flip")}
    units = load_run(write_run(tmp_path / "r", spec, tasks=("vector_add", "flip"), budget=1, repeats=2)).units
    m = method_stats(units, 500, 0, ())
    assert m.submitted.value == 0.5 and m.repeats == (2, 2) and not m.pooled  # repeats: no Wilson/exact
    assert m.variance is not None and m.variance.between == 0.0 and m.variance.within == pytest.approx(0.5)
    # two tasks are below the small-suite minimum (design invariant 12): the value, no interval
    assert m.submitted_fixed is not None and m.submitted_fixed.value == 0.5 and math.isnan(m.submitted_fixed.lo)
    from results.method_stats import _by_task, _clip_rate

    fixed = _clip_rate(fixed_suite_ci(_by_task(units, "submitted_pass")))
    assert (fixed.lo, fixed.hi) == (0.0, 1.0) and fixed.method.endswith("(clipped to [0, 1])")


# ---------------------------------------------------------------------------- issue 13: resources, independence, failures
def test_budget_curves_against_gpu_evaluations(run_dir: Path) -> None:
    """Direct asks for one visible evaluation per sample, so against evaluations its curve is
    its curve against calls; the fixture's events carry no evals_used (an older store), so
    they are counted from the evaluation events at or before each event's call."""
    d = load_run(run_dir)
    calls = budget_curves(d, "calls", n_resamples=RES)["direct"]
    evals = budget_curves(d, "evaluations", n_resamples=RES)["direct"]
    assert evals.grid.tolist() == list(range(int(d.units["feedback_evals"].max()) + 1))
    np.testing.assert_allclose(evals.submitted.mean[:5], calls.submitted.mean)
    np.testing.assert_allclose(evals.oracle.mean[:5], calls.oracle.mean)
    assert (d.candidates["evals_used"] >= 0).all() and (d.submissions["evals_used"] >= 0).all()


def test_runs_declared_not_independent_get_no_pass_at_k(tmp_path: Path) -> None:
    from record.store import Store

    run = make_synthetic_run(tmp_path / "run")
    store = Store(run / "store.sqlite")
    try:
        for task in ("vector_add", "softmax", "flip", "rms_norm"):
            for i, (start, end) in enumerate(((0, 2), (2, 4))):
                store.begin_run("geak", task, 0, i, start, independent=False)
                store.end_run("geak", task, 0, i, end)
    finally:
        store.close()
    a = analyse(load_run(run), n_resamples=RES, seed=0)
    geak = a.runs["geak"]
    assert geak.curve is None and "declared not independent" in geak.note
    assert a.methods["geak"].runs_independent is False and a.methods["direct"].runs_independent is None
    assert any("declared not independent" in n for n in a.notes)


def test_a_failing_hidden_evaluation_wins_over_a_correct_one() -> None:
    from results.readers import EVALUATION_COLS, hidden_verdicts

    rows = [{c: None for c in EVALUATION_COLS} | {"source_hash": h, "task": "t", "case_set": "hidden", "timed": timed,
                                                  "verdict": v}
            for h, timed, v in (("a", False, "correct"), ("a", True, "wrong_result"),
                                ("b", False, "correct"), ("b", True, "correct"), ("c", True, "runtime_error"))]
    out = hidden_verdicts(pd.DataFrame(rows, columns=EVALUATION_COLS))
    assert out == {("a", "t"): "wrong_result", ("b", "t"): "correct", ("c", "t"): "runtime_error"}


@pytest.mark.slow
def test_errored_units_and_failed_calls_reach_summary_table_and_report(tmp_path: Path) -> None:
    from record.store import Store
    from results.report import write_report
    from results.summary import build_summary, format_table

    run = make_synthetic_run(tmp_path / "run")
    store = Store(run / "store.sqlite")
    try:
        store.record_call({"method": "geak", "task": "flip", "repeat": 0, "call_index": 99, "role": "generator",
                           "messages_hash": "x", "messages": "[]", "response": None, "prompt_tokens": 0,
                           "completion_tokens": 0, "cached": 0, "error": "EndpointCallFailed: HTTP 400: too long",
                           "charged": 0})
        store._write("UPDATE units SET error=? WHERE method='geak' AND task='flip'",
                     ("model call failed: HTTP 400: too long",))
        store._write("INSERT INTO retried_calls(method, task, repeat, call_index, attempt, role, error, charged, "
                     "retries, created) VALUES ('direct', 'softmax', 0, 3, 0, 'generator', 'HTTP 400', 0, 0, 0)", ())
        store.record_event("examples", {"method": "geak", "task": "flip", "repeat": 0, "call_index": 0,
                                        "program": "task:vector_add", "query_by": "description", "similarity": 0.31})
        store.record_event("examples", {"method": "geak", "task": "flip", "repeat": 0, "call_index": 2,
                                        "program": "task:softmax", "query_by": "code", "similarity": 0.11})
    finally:
        store.close()
    summary = build_summary(run)
    geak, direct = summary["methods"]["geak"], summary["methods"]["direct"]
    assert (geak["errored_units"], geak["failed_calls"]) == (1, 1)
    assert (direct["errored_units"], direct["failed_calls"]) == (0, 1)  # a retried failure still counts
    assert geak["oneshot_examples"] == {"shown": 2, "similarity_max": 0.31, "similarity_mean": pytest.approx(0.21)}
    assert direct["oneshot_examples"]["shown"] == 0 and direct["oneshot_examples"]["similarity_max"] is None
    table = format_table(summary, interpreter=False)
    assert "errored/failed" in table
    import re

    assert re.search(r"^geak .* 1/1  ", table, re.M) and re.search(r"^direct .* 0/1  ", table, re.M)
    files = write_report([run], tmp_path / "report", n_resamples=200)
    text = files.report.read_text()
    assert "## Failed model calls" in text and "GEAK / flip / repeat 0: model call failed: HTTP 400: too long" in text
    assert "## One-shot examples" in text and "max 0.310, mean 0.210" in text


def test_every_per_method_table_shows_calls_tokens_and_gpu_evaluations(tables) -> None:
    for name in ("accuracy", "difficulty", "speedups", "false_positives"):
        cols = set(tables[name].text.columns)
        assert {"calls/unit", "tokens/unit", "GPU evals/unit"} <= cols, (name, cols)
    assert {"tokens/unit", "GPU evals/unit"} <= set(tables["sequential"].text.columns)
    assert {"calls", "tokens", "GPU evals"} <= set(tables["parallel"].text.columns)


def test_intervals_print_apart_or_say_they_are_none() -> None:
    """A band too narrow for two digits is printed with the digits that tell its ends apart (it
    used to read "1.00 [1.00, 1.00]", like a zero-width interval); a zero-width one is no interval."""
    from results.labels import interval_text, range_text

    assert interval_text(0.99986, 0.9996, 1.0, 10) == "0.9999 [0.9996, 1.0000]"
    assert interval_text(1.0, 1.0, 1.0, 10, rate=True) == "1.00 (all 10 tasks pass; no interval)"
    assert interval_text(0.62, 0.41, 0.8, 10) == "0.62 [0.41, 0.80]"
    assert interval_text(0.5, 0.5, 0.5 + 1e-9, 10) == "0.50 (interval narrower than 1e-05)"
    assert range_text(0.5, 0.5, 1, 100, True, "every task ") == "no interval: every task +50.0"
    assert range_text(-0.209, 0.143, 1, 100, True) == "[-20.9, +14.3]"
    assert range_text(0.9995, 0.9999, 2) == "[0.9995, 0.9999]"


def test_end_of_run_table_stays_aligned_with_a_long_pass_entry() -> None:
    """"0.000 (none of 12 tasks passes; no interval)" is longer than an interval: the columns after
    it (oracle, calls, ..., errored/failed) still line up under their headers."""
    from results.summary import format_table

    def entry(p: float, ci: list[float] | None) -> dict:
        return {"submitted_pass": p, "submitted_pass_ci": ci, "oracle_pass": 0.5, "calls_used": {f"t{i}": 4
                for i in range(12)}, "tokens_used": {"t0": 1000}, "gpu_evals": {"t0": 3}, "speedup_geomean": None,
                "errored_units": 2, "failed_calls": 3}

    summary = {"simulated": False, "budget_unit": "calls", "budget": 4, "repeats": 1,
               "methods": {"direct": entry(0.0, [0.0, 0.0]), "geak": entry(0.25, [0.1, 0.4])}}
    lines = format_table(summary, interpreter=True).splitlines()
    header = next(line for line in lines if line.startswith("method"))
    rows = [line for line in lines if line.startswith(("direct ", "geak "))]
    assert "none of 12 tasks passes; no interval" in rows[0]
    for column in ("oracle", "errored/failed"):
        end = header.index(column) + len(column)  # right-aligned columns end under their header's end
        assert all(row[end - 1] != " " and row[end] == " " for row in rows), (column, header, rows)
