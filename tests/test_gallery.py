"""The README's gallery (issue 46): every figure in docs/gallery/ is redrawn here from a copy of
the shipped GPU run with the command the README gives, and passes the checks of
tests/test_figures_readable.py (at least three labelled ticks on every log axis, the watermark
above everything, legends naming each method once, no bands below the small-suite minimum, the
outcome heatmap's share legend). The gallery holds the same files, with the same captions, and
the README shows every one of its figures. PNG bytes are not compared: they follow matplotlib's
version."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest

from results.bands import INTERVAL_MIN_TASKS
from results.figures import FIGURE_NAMES
from results.readers import load_run
from tests.helpers import ROOT
from tests.test_cli_usability import invoke
from tests.test_figures_all import shipped_copy
from tests.test_figures_readable import (
    check_log_ticks,
    check_no_bands_and_legend,
    check_outcome_legend,
    check_watermarks,
    looking,
)

GALLERY = ROOT / "docs" / "gallery"
SHIPPED_ARG = "benchmarks/results/gpu_run_small"
GALLERY_ARG = "docs/gallery"
COMMAND = f"python cli.py figures {SHIPPED_ARG} --style paper --format png --out {GALLERY_ARG}"


def gallery_section() -> str:
    """The README's "## Gallery" section, up to the next section."""
    text = (ROOT / "README.md").read_text()
    match = re.search(r"^## Gallery\n(.*?)(?=^## )", text, flags=re.S | re.M)
    assert match, "README.md has no '## Gallery' section"
    return match.group(1)


@pytest.fixture(scope="module")
def redrawn(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The gallery's command, run in this process on a copy of the shipped run into a temporary
    folder, with every figure looked at as drawn."""
    folder = tmp_path_factory.mktemp("gallery")
    args = shlex.split(COMMAND)[2:]  # what follows `python cli.py`
    args[args.index(SHIPPED_ARG)] = str(shipped_copy(folder))
    args[args.index(GALLERY_ARG)] = str(folder / "out")
    seen: dict[str, Any] = {}
    with looking(seen):
        code, out, err = invoke(*args)
    assert code == 0, (out, err)
    return {"seen": seen, "out": folder / "out", "run": folder / "shipped"}


def test_the_readme_gives_the_command_and_shows_every_figure_of_the_gallery() -> None:
    section = gallery_section()
    assert COMMAND in section
    shown = re.findall(r"!\[[^\]]*\]\(docs/gallery/([^)\s]+)\)", section)
    assert len(shown) == len(set(shown))
    for name in shown:
        assert (GALLERY / name).is_file(), name
    assert set(shown) == {p.name for p in GALLERY.glob("*.png")} == {f"{n}.png" for n in FIGURE_NAMES}
    assert sum(p.stat().st_size for p in GALLERY.iterdir()) < 1.5e6  # small enough to live in the repository


@pytest.mark.slow  # draws every figure of a run first: seconds on 2 cores
def test_the_gallery_is_what_the_command_draws_from_the_shipped_run(redrawn: dict[str, Any]) -> None:
    drawn = {p.name for p in redrawn["out"].iterdir()}
    assert drawn == {p.name for p in GALLERY.iterdir()}
    assert drawn == {f"{n}{ext}" for n in FIGURE_NAMES for ext in (".png", ".caption.txt", ".csv")}
    for name in FIGURE_NAMES:  # the captions' words are the code's, not matplotlib's: a stale gallery shows here
        caption = f"{name}.caption.txt"
        assert (redrawn["out"] / caption).read_text() == (GALLERY / caption).read_text(), caption


@pytest.mark.slow  # draws every figure of a run first: seconds on 2 cores
def test_every_gallery_figure_passes_the_tick_legend_and_watermark_checks(redrawn: dict[str, Any]) -> None:
    seen = redrawn["seen"]
    assert set(seen) == {f"paper/{n}" for n in FIGURE_NAMES}
    logs = check_log_ticks(seen)
    assert {("paper/speedups", "y"), ("paper/parallel_scaling", "x")} <= set(logs)  # the check saw log axes
    check_watermarks(seen)
    data = load_run(redrawn["run"])
    assert data.tasks and len(data.tasks) < INTERVAL_MIN_TASKS  # 3 tasks: no bands, points only
    for name in FIGURE_NAMES:
        legend_lists_methods = name.startswith("budget_") or name == "fast_p"
        check_no_bands_and_legend(seen[f"paper/{name}"], data.methods if legend_lists_methods else None, name)
    check_outcome_legend(seen["paper/outcomes"])
