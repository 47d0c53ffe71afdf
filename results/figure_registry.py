"""Registered figures: every class registered here is drawn by `report` and `figures` (the
registry is results/plugins.py; the built-in figures register in results/figures.py).

Writing a figure (a plugin is one file; nothing else changes; tests/toy_figure.py is a whole
one, docs/EXTENDING.md walks through it):

    from pathlib import Path

    import pandas as pd

    from results.analysis import Analysis
    from results.figure_registry import register_figure
    from results.figure_style import title
    from results.figures import FigureResult, Look, drawn_title, finish, not_drawn, pyplot_for

    @register_figure("calls_per_unit")               # its files: calls_per_unit.png, .csv, .caption.txt
    class CallsPerUnit:
        name: str                                    # set by @register_figure

        def draw(self, a: Analysis, out_dir: Path, look: Look) -> FigureResult:
            caption = "Mean calls per unit of each method."
            if not len(a.data.units):                # nothing to draw: say why, draw nothing
                return FigureResult(self.name, caption, skipped="no finished units")
            plt = pyplot_for(look)                   # pyplot with the style's rcParams
            fig, ax = plt.subplots(figsize=look.style.size("single", 0.7))
            rows = []                                # the plotted numbers, written as the CSV
            for m, calls in a.data.units.groupby("method", sort=False)["calls_used"]:
                ax.bar(len(rows), calls.mean(), color=look.of(m).color, hatch=look.of(m).hatch)
                rows.append({"method": m, "calls": float(calls.mean())})
            text = title(ax, drawn_title(a, "Calls per unit"), look.style)
            return finish(fig, out_dir, self.name, caption, look, pd.DataFrame(rows), text,
                          not_drawn(a, [r["method"] for r in rows]))

Rules the report and the `figures` command rely on:
- `draw(a, out_dir, look)` gets the run's Analysis (results/analysis.py: the frames, the per-method
  figures, budget curves, registered statistics), the folder to write into and the run's Look (the
  style: sizes, formats, titles or none, the watermark; and one colour, line, marker and hatch per
  method, `look.of(method)`). It returns a `FigureResult` named as registered.
- `finish` does what every figure must: the SIMULATED (and PARTIAL RUN) watermark in every axes,
  every format of the style, `<name>.csv` of the plotted numbers, `<name>.caption.txt` naming the
  methods left out (`not_drawn`) and why. Draw with `pyplot_for(look)`, size with
  `look.style.size("single" | "double", aspect)`, and title with results.figure_style.title (none in
  paper style). Write nothing else, nowhere else.
- A figure whose data do not exist is `FigureResult(name, caption, skipped=why)`, never an empty plot.
- Below the small-suite minimum (design invariant 12; results/bands.py) draw no band: take
  intervals from the Analysis, which already withholds them (NaN ends), and say so in the
  caption (results.bands.band_note).
- The same run gives the same figure in every process (seed any jitter with `a.seed`).
- Every report draws every registered figure, so its class must be found in the process that
  draws: importing its module registers it there (as tests do); an installed package names its
  class in the entry-point group `kernel_method_compare.figures`:

      [project.entry-points."kernel_method_compare.figures"]
      calls_per_unit = "my_package.calls_figure:CallsPerUnit"
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from results.plugins import PluginError, Registry

if TYPE_CHECKING:
    from results.analysis import Analysis
    from results.figures import FigureResult, Look

__all__ = ["ENTRY_POINT_GROUP", "Figure", "PluginError", "figure_classes", "register_figure"]

ENTRY_POINT_GROUP = "kernel_method_compare.figures"
FIGURES = Registry("figure", ENTRY_POINT_GROUP, "draw", builtin_modules=("results.figures",))
register_figure = FIGURES.register


class Figure(Protocol):
    name: str  # set by @register_figure: its files' name

    def draw(self, a: Analysis, out_dir: Path, look: Look) -> FigureResult: ...


def figure_classes() -> dict[str, type]:
    """Every registered figure by name, the built-ins first in their order, installed plugins
    loaded (PluginError for a broken one)."""
    return FIGURES.classes()
