"""The statistics registry (results/statistics.py) through a toy plugin (tests/toy_statistic.py):
registering it adds its column to the accuracy table and its field to summary.json of a synthetic
run and changes nothing else there; its interval obeys the small-suite rule (design invariant 12)
whatever a statistic returns; an installed package's entry point is found with nothing importing
it; a broken or contract-breaking statistic is one line, and `compare` refuses a broken plugin
before its first unit."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import pytest

from results import statistics
from results.analysis import analyse, headline
from results.bands import INTERVAL_MIN_TASKS, too_few_words
from results.plugins import PluginError
from results.readers import load_run
from results.report import write_report
from results.statistics import (
    ENTRY_POINT_GROUP,
    STATISTICS,
    MethodRows,
    register_statistic,
    statistic_classes,
)
from results.summary import build_summary, summarize
from results.tables import build_tables, to_markdown
from runners.config import CompareConfig, ConfigError
from runners.plan import CompareOptions, plan_run
from stats import RATE_BAND, Estimate, mean_band
from tests.fixtures.synthetic_run import make_random_run, make_synthetic_run
from tests.helpers import cli_env, import_afresh, install_entry_points, run_cli
from tests.test_cli_usability import invoke

TOY_MODULE = "tests.toy_statistic"
TOY_FIELDS = ("first_try_pass", "first_try_pass_ci")


@pytest.fixture(autouse=True)
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test registers into a copy of the registry, so no other test's report changes."""
    monkeypatch.setattr(STATISTICS, "_classes", dict(STATISTICS._classes))


def register_toy(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """Import the toy afresh: its decorator registers it (into this test's registry only)."""
    return import_afresh(monkeypatch, TOY_MODULE)


def install(folder: Path, **entry_points: str) -> Path:
    return install_entry_points(folder, ENTRY_POINT_GROUP, "kmc-toy-statistic", **entry_points)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 4-task synthetic run (tests/fixtures/synthetic_run.py SPEC): fewer tasks than INTERVAL_MIN_TASKS."""
    return make_synthetic_run(tmp_path_factory.mktemp("synthetic") / "run")


def without_toy(summary: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(summary))
    out.pop("statistics")
    for entry in out["methods"].values():
        for f in TOY_FIELDS:
            entry.pop(f)
        entry["no_interval_reason"] = entry["no_interval_reason"].replace("; first_try_pass_ci over 4 tasks", "")
    return out


def test_no_statistic_is_registered_by_default() -> None:
    assert statistic_classes() == {}


def test_registering_the_toy_adds_its_field_and_column_and_changes_nothing_else(
        synthetic: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = load_run(synthetic)
    before_summary = build_summary(synthetic)
    before_tables = {t.name: t for t in build_tables(analyse(data, n_resamples=200))}
    toy = register_toy(monkeypatch)
    assert statistic_classes() == {"first_try_pass": toy.FirstTryPass} and toy.FirstTryPass.name == "first_try_pass"

    summary = build_summary(synthetic)
    # By hand from SPEC: each method's first candidate passes on one task of four (direct: flip;
    # reflexion and geak: vector_add), with one repeat: 1/4, and no interval over 4 tasks.
    for method, entry in summary["methods"].items():
        assert (entry["first_try_pass"], entry["first_try_pass_ci"]) == (0.25, None), method
        assert list(entry)[-3:] == ["first_try_pass", "first_try_pass_ci", "unsupported_on_interpreter"]
        assert "; first_try_pass_ci over 4 tasks): " in entry["no_interval_reason"]
    assert summary["statistics"] == {"first_try_pass": "tests.toy_statistic:FirstTryPass"}
    assert without_toy(summary) == before_summary

    after = {t.name: t for t in build_tables(analyse(data, n_resamples=200))}
    assert list(after) == list(before_tables)
    for name, t in after.items():
        if name != "accuracy":
            assert to_markdown(t) == to_markdown(before_tables[name]), name
    acc, old = after["accuracy"], before_tables["accuracy"]
    assert list(acc.text.columns) == list(old.text.columns) + ["first-try pass"]
    assert list(acc.text["first-try pass"]) == ["0.25 (1/4 tasks)"] * 3
    pd.testing.assert_frame_equal(acc.text.drop(columns="first-try pass"), old.text)
    assert list(acc.numeric.columns) == list(old.numeric.columns) + ["first_try_pass", "first_try_pass_lo",
                                                                       "first_try_pass_hi"]
    assert acc.numeric["first_try_pass"].tolist() == [0.25] * 3 and acc.numeric["first_try_pass_lo"].isna().all()
    assert acc.notes == old.notes + [toy.FirstTryPass.note]  # the small-suite note was there already, once


@pytest.mark.slow  # seconds: whole reports and figures (the full suite runs it)
def test_the_report_shows_the_toy_column_and_note(synthetic: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    register_toy(monkeypatch)
    text = write_report([synthetic], tmp_path / "report", n_resamples=200).report.read_text()
    header = next(line for line in text.splitlines() if line.startswith("| method | tasks | units |"))
    assert header.endswith("| GPU evals/unit | first-try pass |")
    assert "_First-try pass: mean over tasks of the share of repeats whose first candidate passes" in text
    csv = pd.read_csv(tmp_path / "report" / "tables" / "accuracy.csv")
    assert csv["first_try_pass"].tolist() == [0.25] * 3


def test_over_enough_tasks_the_toy_has_the_band_of_a_rate_over_tasks(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_random_run(tmp_path / "run", n_tasks=INTERVAL_MIN_TASKS + 1, budget=8, repeats=2)
    register_toy(monkeypatch)
    summary = build_summary(run)
    data = load_run(run)
    for method, entry in summary["methods"].items():
        c = data.candidates
        first = c[(c["method"] == method) & (c["candidate_index"] == 0)].set_index(["task", "repeat"])["hidden_pass"]
        units = data.units[data.units["method"] == method]
        passed = [bool(first.get((t, r), False)) for t, r in zip(units["task"], units["repeat"], strict=True)]
        per_task = pd.Series(passed, dtype=float).groupby(units["task"].to_numpy()).mean().to_numpy(float)
        expected = mean_band(per_task, method=RATE_BAND, n_resamples=10_000, seed=0)
        assert expected.n == INTERVAL_MIN_TASKS + 1
        assert entry["first_try_pass"] == pytest.approx(per_task.mean())
        assert entry["first_try_pass_ci"] == pytest.approx([expected.lo, expected.hi])
        assert entry["no_interval_reason"] is None


def test_the_registry_withholds_any_interval_below_the_small_suite_minimum(synthetic: Path) -> None:
    @register_statistic("overconfident")
    class Overconfident:
        column = "overconfident"
        interval = True

        def compute(self, m: MethodRows) -> Estimate:
            return Estimate(0.5, 0.1, 0.9, "t", m.n_tasks)  # an interval over 4 tasks: not allowed

    h = headline(load_run(synthetic), n_resamples=200)
    assert [e.method for e in h.statistics[0].values.values()] == ["too few tasks for an interval (4 tasks)"] * 3
    entry = summarize(h)["methods"]["direct"]
    assert entry["overconfident"] == 0.5 and entry["overconfident_ci"] is None
    assert entry["no_interval_reason"].endswith(f"; overconfident_ci over 4 tasks): {too_few_words()}")
    acc = next(t for t in build_tables(analyse(load_run(synthetic), n_resamples=200)) if t.name == "accuracy")
    assert list(acc.text["overconfident"]) == ["0.50 (4 tasks)"] * 3


def _summary_with(run: Path, cls: type, name: str) -> dict[str, Any]:
    register_statistic(name)(cls)
    return summarize(headline(load_run(run), n_resamples=200))


def test_a_statistic_that_breaks_its_contract_is_one_line(synthetic: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Number:
        table = None

        def compute(self, m: MethodRows) -> float:
            return 1.0

    class TooMany:
        interval = True

        def compute(self, m: MethodRows) -> Estimate:
            return Estimate(0.5, 0.4, 0.6, "t", m.n_tasks + 1)

    class Interval:
        def compute(self, m: MethodRows) -> Estimate:
            return Estimate(0.5, 0.4, 0.6, "t", m.n_tasks)

    cases = ((type("WithInterval", (Number,), {"interval": True}), "number_with_interval",
              r"^statistic 'number_with_interval' returned a float for direct; with `interval` it returns a stats.Estimate$"),
             (TooMany, "too_many", r"its Estimate's n \(5\) must be the tasks it rests on \(at most 4\)$"),
             (Interval, "no_interval", r"returned an Estimate for direct; without `interval` it returns a number or None$"),
             (Number, "icc", r"^statistic 'icc' \([\w.]*test_toy_statistic:.*Number\): summary.json already has the "
                             r"field 'icc'$"))
    for cls, name, message in cases:
        with monkeypatch.context() as mp:
            mp.setattr(STATISTICS, "_classes", {})
            with pytest.raises(PluginError, match=message):
                _summary_with(synthetic, cls, name)

    monkeypatch.setattr(STATISTICS, "_classes", {})
    register_statistic("column_taken")(type("Taken", (Number,), {"table": "accuracy", "column": "visible FP rate"}))
    with pytest.raises(PluginError, match="the accuracy table already has the column 'visible FP rate'$"):
        build_tables(analyse(load_run(synthetic), n_resamples=200))
    with pytest.raises(ValueError, match="table 'speedups' is not one with a row per method"):
        register_statistic("per_baseline")(type("PerBaseline", (Number,), {"table": "speedups"}))
    for bad in ("First", "a-b", "", "1st", "a b"):
        with pytest.raises(ValueError, match="must be lower-case letters, digits and '_'"):
            register_statistic(bad)
    with pytest.raises(TypeError, match="statistic 'nothing' has no compute"):
        register_statistic("nothing")(type("Nothing", (), {}))
    register_statistic("twice")(Number)
    with pytest.raises(ValueError, match="statistic 'twice' registered twice"):
        register_statistic("twice")(TooMany)


def test_an_installed_plugin_is_found_through_its_entry_point(synthetic: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a process that never imported tests/toy_statistic.py: the entry point alone names it."""
    monkeypatch.delitem(sys.modules, TOY_MODULE, raising=False)
    monkeypatch.syspath_prepend(str(install(tmp_path / "site", first_try_pass=f"{TOY_MODULE}:FirstTryPass")))
    assert TOY_MODULE not in sys.modules
    (name,) = statistic_classes()
    assert name == "first_try_pass" and TOY_MODULE in sys.modules
    assert build_summary(synthetic)["methods"]["geak"]["first_try_pass"] == 0.25


@pytest.mark.parametrize("declared, message", [
    ({"broken": "tests.no_such_plugin:Statistic"},
     r"^statistic 'broken': cannot load entry point broken = 'tests.no_such_plugin:Statistic' "
     rf"\({ENTRY_POINT_GROUP}\): ModuleNotFoundError: No module named 'tests.no_such_plugin'$"),
    ({"first_try_pass": f"{TOY_MODULE}:FirstTryPass", "renamed": f"{TOY_MODULE}:FirstTryPass"},
     r"^statistic 'renamed': entry point renamed = .* names the class registered as 'first_try_pass'$"),
    ({"not_a_class": "results.statistics:ENTRY_POINT_GROUP"}, r"names a str, not a class$"),
])
def test_a_broken_plugin_is_one_line_and_compare_refuses_it_before_it_starts(
        declared: dict[str, str], message: str, synthetic: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, TOY_MODULE, raising=False)
    monkeypatch.syspath_prepend(str(install(tmp_path / "site", **declared)))
    with pytest.raises(PluginError, match=message):
        statistic_classes()
    code, out, err = invoke("report", str(synthetic), "--out", str(tmp_path / "report"), "--resamples", "100")
    assert code == 2 and err.startswith("error: statistic ") and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "report" / "report.md").exists()
    out_dir = tmp_path / "runs"
    with pytest.raises(ConfigError, match=message):
        plan_run(CompareConfig(budget=2, methods=["direct"], tasks=["vector_add"], device="cpu", workers=1,
                               task_sources=[], method_modules=[]), CompareOptions(out=out_dir))
    assert not out_dir.exists()


@pytest.mark.slow
def test_a_plugin_installed_by_entry_point_reaches_cli_report_in_a_fresh_process(synthetic: Path,
                                                                                 tmp_path: Path) -> None:
    env = cli_env()
    env["PYTHONPATH"] += os.pathsep + str(install(tmp_path / "site", first_try_pass=f"{TOY_MODULE}:FirstTryPass"))
    r = run_cli("report", str(synthetic), "--out", str(tmp_path / "report"), "--resamples", "100", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    table = (tmp_path / "report" / "tables" / "accuracy.md").read_text()
    header = next(line for line in table.splitlines() if line.startswith("| method |"))
    assert header.endswith("| first-try pass |") and "0.25 (1/4 tasks)" in table
    assert np.isfinite(pd.read_csv(tmp_path / "report" / "tables" / "accuracy.csv")["first_try_pass"]).all()


def test_the_module_docstring_recipe_names_what_the_registry_reads() -> None:
    doc = statistics.__doc__ or ""
    for word in ("@register_statistic(", "column =", "table =", "interval =", "def compute(self, m: MethodRows)",
                 "m.band(m.per_task(", ENTRY_POINT_GROUP, "INTERVAL_MIN_TASKS"):
        assert word in doc, word
