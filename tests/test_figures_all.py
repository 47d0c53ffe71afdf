"""Every figure drawn camera-ready from a recorded run on a CPU (issue 17, item 4): from the
GPU run shipped in benchmarks/results/gpu_run_small/ (recorded on an H200: `compare --budget
6 --tasks vector_add,softmax,layer_norm --repeats 2`) and from the synthetic run with timings
(tests/fixtures/synthetic_run.py): all drawn, TrueType fonts (pdf.fonttype 42) in every PDF,
300 dpi PNGs, the SIMULATED watermark in the SVG text, no titles in paper style, a CSV beside
every figure, and parallel scaling never drawn past the calls a method's units spent."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import results.figures as figures_module
from results.analysis import analyse
from results.figure_style import FigureStyle
from results.figures import FIGURE_NAMES, write_figures
from results.readers import load_run
from tests.fixtures.synthetic_run import make_random_run
from tests.helpers import ROOT
from tests.test_figure_style import pdf_font_subtypes

SHIPPED = ROOT / "benchmarks" / "results" / "gpu_run_small"
ALL = set(FIGURE_NAMES)
TRUETYPE = {"TrueType", "Type0", "CIDFontType2"}  # what pdf.fonttype 42 writes (Type0 wraps CIDFontType2)


@pytest.fixture(params=["shipped-gpu-run", "synthetic-run"])
def run(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "synthetic-run":
        return make_random_run(tmp_path / "run", n_tasks=6, budget=12, repeats=2)
    return shipped_copy(tmp_path)


def shipped_copy(tmp_path: Path) -> Path:
    """A copy of the shipped run: readers no longer change a store (record/store.py
    `Store.for_reading`), but a test must never be able to change a file the repository tracks."""
    copy = tmp_path / "shipped"
    shutil.copytree(SHIPPED, copy)
    return copy


def test_the_shipped_run_is_a_small_finished_gpu_run(tmp_path: Path) -> None:
    from record.progress import run_progress
    from record.run_folder import RunFolder

    assert sum(p.stat().st_size for p in SHIPPED.iterdir()) < 4e6  # small enough to live in the repository
    assert not list(SHIPPED.glob("*-wal")) and not list(SHIPPED.glob("*-shm"))
    shipped = shipped_copy(tmp_path)
    folder = RunFolder(shipped)
    resolved = folder.read_config().resolved
    assert resolved.target["interpreter"] is False and resolved.target["vendor"] == "nvidia"
    assert run_progress(shipped).complete and folder.read_summary() is not None


@pytest.mark.slow
def test_every_figure_is_drawn_camera_ready(run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn_x: dict[str, dict[str, float]] = {}
    original_save = figures_module.save

    def save_and_record(fig: Any, out_dir: Path, name: str, *args: Any, **kwargs: Any) -> list[Path]:
        """The x of every point each plotted line of a figure reaches, read from the figure itself."""
        for ax in fig.axes:
            for line in ax.get_lines():
                x = np.asarray(line.get_xdata(), dtype=float)
                label = str(line.get_label())
                if len(x) and not label.startswith("budget of one unit"):
                    drawn_x.setdefault(name, {})[label] = max(drawn_x.get(name, {}).get(label, -np.inf),
                                                              float(np.nanmax(x)))
        return original_save(fig, out_dir, name, *args, **kwargs)

    monkeypatch.setattr(figures_module, "save", save_and_record)
    data = load_run(run)
    style = FigureStyle.make("paper", ["png", "pdf", "svg"])
    figures = {f.name: f for f in write_figures(analyse(data, n_resamples=300), tmp_path / "figs", style)}
    assert set(figures) == ALL
    for name, f in figures.items():
        assert not f.skipped, (name, f.skipped)
        assert [p.suffix for p in f.files] == [".png", ".pdf", ".svg", ".csv"], name
        png, pdf, svg, csv = f.files
        fonts = pdf_font_subtypes(pdf)
        assert fonts and fonts <= TRUETYPE, (name, fonts)  # never Type 3
        with Image.open(png) as image:
            assert round(image.info["dpi"][0]) == 300, name
            assert image.size[0] <= 6.75 * 300 * 1.05, (name, image.size)  # at most a double column
        text = svg.read_text()
        assert (f.watermark == "SIMULATED MODEL") == data.simulated
        if data.simulated:
            assert "SIMULATED MODEL" in text, name  # inside the axes, as text
        assert f.title and f.title.splitlines()[0].split(": ")[-1] not in text, name  # paper style: no titles
        plotted = pd.read_csv(csv)
        assert len(plotted) and plotted["simulated"].eq(data.simulated).all(), name
    # Parallel scaling: no line of any method reaches past the most calls one of its units spent.
    spent = data.units.groupby("method")["calls_used"].max()
    lines = drawn_x["parallel_scaling"]
    assert lines and max(lines.values()) <= spent.max()  # bands' edges and error bars included
    from results.verdicts import display

    for method in data.methods:
        mine = {label: x for label, x in lines.items() if label.startswith(display(method))}
        assert all(x <= spent[method] <= data.budget for x in mine.values()), (method, mine, spent[method])
    scaling = pd.read_csv(figures["parallel_scaling"].files[-1])
    drawn = scaling[scaling["drawn"]]
    assert len(drawn) and (drawn["calls_spent"] <= drawn["method"].map(spent)).all()
    assert (drawn["calls_spent"] <= drawn["calls_cap"] + 1e-9).all()  # charged at what was spent, not the cap
    assert not scaling.loc[scaling["calls_spent"] > scaling["method"].map(spent), "drawn"].any()


@pytest.mark.slow
def test_parallel_scaling_charges_runs_at_the_calls_they_spent(tmp_path: Path) -> None:
    """The hand-made run's Reflexion trials (max_iters 2, visible feedback: cap 1 + 2 = 3 calls)
    spent 3, 3, 3, 1, 1 and 3 calls when complete (tests/fixtures/synthetic_run.py SPEC roles),
    so k = 1 is drawn at 14/6 calls, with the cap (3) as a hollow marker; runs pooled over
    repeats that would reach past the calls a unit spent are not drawn."""
    from results.figures import make_look, parallel_figure
    from tests.fixtures.synthetic_run import make_synthetic_run

    a = analyse(load_run(make_synthetic_run(tmp_path / "hand")), n_resamples=200)
    f = parallel_figure(a, tmp_path / "f1", make_look(a, FigureStyle.make("paper", ["pdf"])))
    rows = pd.read_csv(f.files[-1]).set_index(["method", "k"])
    assert rows.loc[("reflexion", 1), "calls_spent"] == pytest.approx(14 / 6)
    assert rows.loc[("reflexion", 1), "calls_cap"] == 3.0
    assert [rows.loc[("direct", k), "calls_spent"] for k in (1, 2, 3, 4)] == [1.0, 2.0, 3.0, 4.0]
    assert rows["drawn"].all() and (rows["calls_spent"] <= 4).all()
    pooled = analyse(load_run(make_random_run(tmp_path / "pooled", n_tasks=3, budget=6, repeats=2)), n_resamples=200)
    g = parallel_figure(pooled, tmp_path / "f2", make_look(pooled, FigureStyle.make("paper", ["pdf"])))
    direct = pd.read_csv(g.files[-1]).query("method == 'direct'")
    assert direct["k"].max() == 12  # 6 one-call samples x 2 repeats per task
    assert direct.loc[direct["drawn"], "calls_spent"].max() == 6.0
    assert not direct.loc[direct["calls_spent"] > 6, "drawn"].any()
