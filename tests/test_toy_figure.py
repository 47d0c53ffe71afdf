"""The figure registry (results/figure_registry.py) through a toy plugin (tests/toy_figure.py): the
built-ins are registered in their order; registering the toy makes `report` and `figures` draw it
after them, watermarked, with its CSV and caption, and leaves every built-in figure as it was; an
installed package's entry point is found with nothing importing it; a figure that breaks its
contract, or a broken plugin, is one line."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from results.analysis import analyse
from results.figure_registry import ENTRY_POINT_GROUP, FIGURES, figure_classes, register_figure
from results.figure_style import FigureStyle
from results.figures import FIGURE_NAMES, FigureResult, Look, write_figures
from results.plugins import PluginError
from results.readers import load_run
from results.report import write_report
from tests.fixtures.synthetic_run import make_synthetic_run
from tests.helpers import import_afresh, install_entry_points
from tests.test_cli_usability import invoke

TOY_MODULE = "tests.toy_figure"


@pytest.fixture(autouse=True)
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test registers into a copy of the registry, so no other test's figures change."""
    figure_classes()  # the built-ins first
    monkeypatch.setattr(FIGURES, "_classes", dict(FIGURES._classes))


def register_toy(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """Import the toy afresh: its decorator registers it (into this test's registry only)."""
    return import_afresh(monkeypatch, TOY_MODULE)


def install(folder: Path, **entry_points: str) -> Path:
    return install_entry_points(folder, ENTRY_POINT_GROUP, "kmc-toy-figure", **entry_points)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_synthetic_run(tmp_path_factory.mktemp("synthetic") / "run")


def _beside(folder: Path) -> dict[str, str]:
    """The CSVs and captions a figure writes beside its images (PNG bytes follow matplotlib's version)."""
    return {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.suffix in (".csv", ".txt")}


def test_the_built_in_figures_are_registered_in_their_order() -> None:
    classes = figure_classes()
    assert tuple(classes) == FIGURE_NAMES
    assert all(c.__module__ == "results.figures" and c.name == n for n, c in classes.items())  # type: ignore[attr-defined]


@pytest.mark.slow  # seconds: whole reports and figures (the full suite runs it)
def test_registering_the_toy_draws_it_after_the_built_ins_and_changes_none_of_them(
        synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = analyse(load_run(synthetic), n_resamples=200)
    style = FigureStyle.make("paper", ["png"])
    before = write_figures(a, tmp_path / "before", style)
    toy = register_toy(monkeypatch)
    assert list(figure_classes()) == [*FIGURE_NAMES, "calls_per_unit"] and toy.CallsPerUnit.name == "calls_per_unit"
    after = write_figures(a, tmp_path / "after", style)
    assert [f.name for f in after] == [*FIGURE_NAMES, "calls_per_unit"]
    assert [(f.name, f.caption, f.skipped) for f in after[:-1]] == [(f.name, f.caption, f.skipped) for f in before]
    toy_files = {"calls_per_unit.png", "calls_per_unit.csv", "calls_per_unit.caption.txt"}
    beside = _beside(tmp_path / "after")
    assert {n: t for n, t in beside.items() if not n.startswith("calls_per_unit")} == _beside(tmp_path / "before")
    assert toy_files <= {p.name for p in (tmp_path / "after").iterdir()}
    drawn = after[-1]
    assert drawn.watermark == "SIMULATED MODEL" and not drawn.skipped and not drawn.left_out
    assert beside["calls_per_unit.caption.txt"] == "SIMULATED MODEL. Mean model calls per finished unit of each " \
                                                   "method (bars).\n"
    # Every unit of the synthetic run spends its whole budget of 4 calls (tests/fixtures/synthetic_run.py SPEC).
    csv = pd.read_csv(tmp_path / "after" / "calls_per_unit.csv")
    assert csv.to_dict("list") == {"method": ["direct", "reflexion", "geak"], "units": [4, 4, 4],
                                   "mean_calls": [4.0, 4.0, 4.0], "simulated": [True, True, True]}


@pytest.mark.slow  # seconds: whole reports and figures (the full suite runs it)
def test_the_report_and_the_figures_command_draw_the_toy(synthetic: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    register_toy(monkeypatch)
    text = write_report([synthetic], tmp_path / "report", n_resamples=200).report.read_text()
    assert "![calls_per_unit](figures/calls_per_unit.png)\n\n_Mean model calls per finished unit" in text
    code, out, err = invoke("figures", str(synthetic), "--out", str(tmp_path / "figs"), "--format", "png",
                            "--resamples", "100")
    assert code == 0, err
    assert out.splitlines()[-1] == (f"calls_per_unit: {tmp_path / 'figs' / 'calls_per_unit.png'}, "
                                    f"{tmp_path / 'figs' / 'calls_per_unit.csv'}")


def test_an_installed_plugin_is_found_through_its_entry_point(synthetic: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a process that never imported tests/toy_figure.py: the entry point alone names it."""
    monkeypatch.delitem(sys.modules, TOY_MODULE, raising=False)
    monkeypatch.syspath_prepend(str(install(tmp_path / "site", calls_per_unit=f"{TOY_MODULE}:CallsPerUnit")))
    assert TOY_MODULE not in sys.modules
    assert list(figure_classes()) == [*FIGURE_NAMES, "calls_per_unit"] and TOY_MODULE in sys.modules


def test_a_built_in_name_is_never_looked_up_and_a_broken_plugin_is_one_line(synthetic: Path, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(install(tmp_path / "site", outcomes="tests.no_such_plugin:Figure")))
    assert tuple(figure_classes()) == FIGURE_NAMES  # the built-in outcomes: the entry point is never loaded
    monkeypatch.syspath_prepend(str(install(tmp_path / "other_site", broken="tests.no_such_plugin:Figure")))
    with pytest.raises(PluginError, match=r"^figure 'broken': cannot load entry point broken = "
                                          r"'tests.no_such_plugin:Figure' .*ModuleNotFoundError"):
        figure_classes()
    code, out, err = invoke("figures", str(synthetic), "--out", str(tmp_path / "figs"), "--resamples", "100")
    assert code == 2 and err.startswith("error: figure 'broken': cannot load") and len(err.splitlines()) == 1, err


@pytest.mark.slow  # seconds: the fast subset stays under two minutes
def test_a_figure_that_breaks_its_contract_is_one_line(synthetic: Path, tmp_path: Path) -> None:
    @register_figure("misnamed")
    class Misnamed:
        def draw(self, a: object, out_dir: Path, look: Look) -> FigureResult:
            return FigureResult("other", "a caption", skipped="nothing to draw")

    a = analyse(load_run(synthetic), n_resamples=200)
    with pytest.raises(PluginError, match=r"^figure 'misnamed' \([\w.]*test_toy_figure\) returned FigureResult "
                                          r"'other', not a FigureResult named 'misnamed'$"):
        write_figures(a, tmp_path, FigureStyle.make("paper", ["png"]))
    with pytest.raises(ValueError, match="figure 'outcomes' registered twice"):
        register_figure("outcomes")(Misnamed)
    with pytest.raises(ValueError, match="must be lower-case letters"):
        register_figure("Budget calls")
    with pytest.raises(TypeError, match="figure 'no_draw' has no draw"):
        register_figure("no_draw")(type("NoDraw", (), {}))
