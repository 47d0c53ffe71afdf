"""A toy figure, written from results/figure_registry.py's docstring alone.

Calls per unit: one bar per method, the mean model calls its finished units spent (the budget
matches them; a method that stops early spends fewer).

It lives in tests/ on purpose: tests/test_toy_figure.py registers it, and installs it as a
plugin through an entry point, and finds it drawn by `report` and `figures` beside the
built-ins, which shows that a figure needs no change outside its own file.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from results.analysis import Analysis
from results.figure_registry import register_figure
from results.figure_style import title
from results.figures import FigureResult, Look, drawn_title, finish, not_drawn, pyplot_for
from results.verdicts import display


@register_figure("calls_per_unit")
class CallsPerUnit:
    name: str  # set by @register_figure

    def draw(self, a: Analysis, out_dir: Path, look: Look) -> FigureResult:
        name = self.name
        caption = "Mean model calls per finished unit of each method (bars)."
        units = a.data.units
        if not len(units):
            return FigureResult(name, caption, skipped="no finished units")
        plt = pyplot_for(look)
        fig, ax = plt.subplots(figsize=look.style.size("single", 0.7))
        rows = []
        for m in a.data.methods:
            calls = units.loc[units["method"] == m, "calls_used"]
            if len(calls):
                lk = look.of(m)
                ax.bar(len(rows), float(calls.mean()), color=lk.color, hatch=lk.hatch, edgecolor="black")
                rows.append({"method": m, "units": len(calls), "mean_calls": float(calls.mean())})
        ax.set_xticks(range(len(rows)), [display(r["method"]) for r in rows])
        ax.set_ylabel("calls per unit (mean)")
        text = title(ax, drawn_title(a, "Calls per unit"), look.style)
        fig.tight_layout()
        return finish(fig, out_dir, name, caption, look, pd.DataFrame(rows), text,
                      not_drawn(a, [r["method"] for r in rows]))
