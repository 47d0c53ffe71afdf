"""Issue 46 item 2: figures a reader can read, checked on the figures as drawn (before saving).

Every log axis has at least three labelled ticks in view; every band is outlined in its
method's colour and every legend entry of a method shows its band; the SIMULATED MODEL
watermark is the topmost artist of every axes in both styles; the outcome heatmap is shaded
by the share of repeats passed and its colour bar says so; a figure that leaves a method out
names it, with the reason, in the caption file beside it.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import results.figures as figures_module
from results.analysis import analyse
from results.bands import INTERVAL_MIN_TASKS
from results.figure_outcomes import share_colour
from results.figure_style import FigureStyle, log_ticks
from results.readers import load_run
from results.verdicts import display
from tests.helpers import ROOT

SHIPPED = ROOT / "benchmarks" / "results" / "gpu_run_small"


def _labelled_ticks(axis: Any, lo: float, hi: float) -> list[str]:
    ticks = axis.get_majorticklocs()
    labels = [t.get_text() for t in axis.get_majorticklabels()]
    return [text for v, text in zip(ticks, labels, strict=True) if lo <= v <= hi and text]


@pytest.mark.parametrize(("lo", "hi", "expected"), [
    (0.7485, 1.0152, [0.5, 0.7, 1.0, 1.5]),  # the first shipped run's speedups: the axis showed 1x alone
    (1.0, 6.0, [1.0, 2.0, 5.0]), (0.01, 100.0, [0.01, 0.1, 1.0, 10.0, 100.0]), (1.0, 1.0, [0.7, 1.0, 1.5]),
])
def test_log_ticks_put_three_or_more_in_any_range(lo: float, hi: float, expected: list[float]) -> None:
    ticks = log_ticks(lo, hi)
    assert ticks == expected
    with pytest.raises(ValueError):
        log_ticks(0.0, 1.0)


def look_at(fig: Any) -> dict[str, Any]:
    """What a figure shows, as drawn: per axes its watermark, the highest z-order of the rest, the
    labelled ticks in view on each log axis, its band outlines, y label and patches; every legend's text."""
    fig.canvas.draw()
    axes = []
    for ax in fig.axes:
        mark = [t for t in ax.texts if t.get_gid() == "watermark"]
        others = [c for c in ax.get_children() if c is not ax.patch and c not in mark]
        log = {w: _labelled_ticks(getattr(ax, f"{w}axis"), *sorted(getattr(ax, f"get_{w}lim")()))
               for w in ("x", "y") if getattr(ax, f"get_{w}scale")() == "log"}
        outlines = [(c.get_edgecolor()[0].tolist(), float(c.get_linewidth()[0])) for c in ax.collections
                    if c.get_gid() == "band-outline"]
        axes.append({"label": ax.get_label(), "mark": mark, "top": max(c.get_zorder() for c in others),
                     "log": log, "outlines": outlines, "ylabel": ax.get_ylabel(),
                     "patches": [(p.get_gid(), p.get_facecolor()) for p in ax.patches]})
    legends = [[t.get_text() for t in lg.get_texts()] for lg in fig.legends + [ax.get_legend() for ax in fig.axes
                                                                               if ax.get_legend() is not None]]
    return {"axes": axes, "legends": legends}


@contextlib.contextmanager
def looking(seen: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """While in force, every figure saved (results/figures.py `save`) is looked at as drawn
    (`look_at`) and put in `seen` under "<style>/<name>"; then saved as ever."""
    original = figures_module.save

    def inspect(fig: Any, out_dir: Path, name: str, style: FigureStyle, *args: Any, **kwargs: Any) -> list[Path]:
        seen[f"{style.name}/{name}"] = look_at(fig)
        return original(fig, out_dir, name, style, *args, **kwargs)

    patch = pytest.MonkeyPatch()
    patch.setattr(figures_module, "save", inspect)
    try:
        yield seen
    finally:
        patch.undo()


def check_log_ticks(seen: dict[str, Any]) -> dict[tuple[str, str], list[str]]:
    """Every log axis of every figure in `seen` has at least three labelled ticks in view; returns
    them by (figure, axis)."""
    logs = {(key, w): ticks for key, fig in seen.items() for ax in fig["axes"] for w, ticks in ax["log"].items()}
    for where, ticks in logs.items():
        assert len(ticks) >= 3, (where, ticks)
    return logs


def check_watermarks(seen: dict[str, Any], text: str = "SIMULATED MODEL") -> None:
    """Every axes of every figure in `seen` but a colour bar has the watermark, above all else."""
    for key, fig in seen.items():
        for ax in fig["axes"]:
            if ax["label"] == "<colorbar>":
                continue
            (mark,) = ax["mark"]
            assert mark.get_text() == text, key
            assert mark.get_zorder() > ax["top"], (key, mark.get_zorder(), ax["top"])


def check_no_bands_and_legend(fig: Any, methods: Sequence[str] | None, key: str) -> None:
    """A figure of a run below the small-suite minimum: no band outline in any axes; with `methods`,
    its one legend names each method once, in order."""
    assert all(not ax["outlines"] for ax in fig["axes"]), key
    if methods is not None:
        assert fig["legends"] == [[display(m) for m in methods]], key


def check_outcome_legend(fig: Any) -> None:
    """The outcome heatmap's colour bar and legend say the shade is the share of repeats passed."""
    bar = next(ax for ax in fig["axes"] if ax["label"] == "<colorbar>")
    assert bar["ylabel"] == "share of repeats passed"
    (legend,) = fig["legends"]
    assert legend[0] == "passed: shade = share of repeats passed"
    assert {"failed (ran, wrong)", "error (did not run)"} <= set(legend)


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every figure of (a copy of) the shipped GPU run in both styles, inspected as drawn."""
    folder = tmp_path_factory.mktemp("figs")
    copy = folder / "shipped"
    shutil.copytree(SHIPPED, copy)
    a = analyse(load_run(copy), n_resamples=200)
    seen: dict[str, Any] = {}
    with looking(seen):
        results = {f"paper/{f.name}": f
                   for f in figures_module.write_figures(a, folder / "paper", FigureStyle.make("paper", ["png"]))}
        look = figures_module.make_look(a, FigureStyle.make("default", ["png"]))  # a few in the other style
        for f in (figures_module.budget_figure(a, "tokens", folder / "default", look),
                  figures_module.speedup_figure(a, folder / "default", look),
                  figures_module.outcome_figure(a, folder / "default", look)):
            results[f"default/{f.name}"] = f
    return {"seen": seen, "results": results, "analysis": a}


@pytest.mark.slow  # draws every figure of a run first: seconds on 2 cores
def test_every_log_axis_has_three_labelled_ticks(drawn: dict[str, Any]) -> None:
    logs = check_log_ticks(drawn["seen"])
    assert {("paper/speedups", "y"), ("paper/parallel_scaling", "x")} <= set(logs)
    assert logs[("paper/speedups", "y")] == ["0.7x", "1x", "1.5x"]  # the shipped run's speedups lie in 0.85-1.01x


@pytest.mark.slow  # draws every figure of a run first: seconds on 2 cores
def test_the_watermark_is_above_everything_in_every_axes_of_every_style(drawn: dict[str, Any]) -> None:
    check_watermarks(drawn["seen"])


@pytest.mark.slow  # draws every figure of a run first: seconds on 2 cores
def test_bands_are_outlined_in_their_methods_colour_and_legends_show_them(drawn: dict[str, Any]) -> None:
    """The shipped run has 3 tasks, below the small-suite minimum (design invariant 12): its curves
    are drawn without bands, and each method is in the legend once. Outlines in each method's colour
    where there are bands: tests/test_small_suite_figures.py, on 10 tasks."""
    a = drawn["analysis"]
    assert a.n_tasks < INTERVAL_MIN_TASKS
    for key in ("paper/budget_calls", "default/budget_tokens", "paper/budget_evaluations", "paper/fast_p"):
        # each method once in the legend
        check_no_bands_and_legend(drawn["seen"][key], None if key == "paper/fast_p" else a.data.methods, key)


@pytest.mark.slow  # draws every figure of a run first: seconds on 2 cores
def test_the_outcome_heatmap_is_shaded_by_the_share_of_repeats_passed(drawn: dict[str, Any]) -> None:
    """GEAK passed layer_norm in 1 of 2 repeats, softmax in 2 of 2: they used to share a colour."""
    fig = drawn["seen"]["paper/outcomes"]
    cells = {gid: tuple(face) for ax in fig["axes"] for gid, face in ax["patches"] if gid and gid.startswith("cell:")}
    assert cells["cell:geak:layer_norm"] == pytest.approx(share_colour(0.5))
    assert cells["cell:geak:softmax"] == pytest.approx(share_colour(1.0))
    assert cells["cell:direct:vector_add"] == pytest.approx(share_colour(0.5))
    assert len({cells["cell:geak:layer_norm"], cells["cell:geak:softmax"], share_colour(0.0)}) == 3
    check_outcome_legend(fig)
    assert np.mean(share_colour(0.5)[:3]) < np.mean(share_colour(0.0)[:3])  # darker with more passes


@pytest.mark.slow  # draws every figure of a run first: seconds on 2 cores
def test_a_figure_that_leaves_a_method_out_names_it_in_its_caption_file(drawn: dict[str, Any]) -> None:
    """Paper style has no title: parallel scaling left methods out without a word (GEAK here: its
    declared 20-call runs do not fit a budget of 6)."""
    f = drawn["results"]["paper/parallel_scaling"]
    assert set(f.left_out) == {"geak"}
    text = f.caption_file.read_text()
    assert f.caption_file == f.files[0].parent / "parallel_scaling.caption.txt"
    assert text.startswith("SIMULATED MODEL. pass@k over independent runs")
    assert "Not drawn: GEAK (no complete run" in text and "Reflexion" not in text.split("Not drawn:")[1]
    for key, other in drawn["results"].items():
        if not other.skipped:
            assert other.caption_file is not None and other.caption_file.is_file(), key
            assert other.left_out or "Not drawn" not in other.caption_file.read_text(), key
