"""The columns of registered statistics (results/statistics.py): each goes into the per-method
table it names, after that table's own columns, one cell per method row."""

from __future__ import annotations

import math

from results.analysis import Headline
from results.labels import TOO_FEW
from results.plugins import PluginError
from results.statistics import StatisticValues
from results.tables.cells import Table, ci_text, fmt, say_withheld
from stats import Estimate


def statistic_columns(tables: list[Table], a: Headline) -> None:
    """Add every registered statistic's column to its table (a table this run does not have, such
    as variance without repeats, gets none: the figure is still in summary.json)."""
    by_name = {t.name: t for t in tables}
    for r in a.statistics:
        t = by_name.get(r.shows.table) if r.shows.table else None
        if t is not None:
            _add_column(t, r)


def _cell(r: StatisticValues, e: Estimate | None) -> str:
    if e is None:
        return "n/a"
    if r.shows.interval:
        return ci_text(e, r.shows.digits, r.shows.suffix, r.shows.rate)
    return fmt(e.value, r.shows.digits) + (r.shows.suffix if math.isfinite(e.value) else "")


def _add_column(t: Table, r: StatisticValues) -> None:
    keys = [r.name] + ([f"{r.name}_lo", f"{r.name}_hi"] if r.shows.interval else [])
    taken = [k for k in keys if k in t.numeric.columns] + ([r.shows.column] if r.shows.column in t.text.columns else [])
    if taken:
        raise PluginError(f"statistic {r.name!r} ({r.origin}): the {t.name} table already has the column {taken[0]!r}")
    values = [r.values.get(str(m)) for m in t.numeric["method"]]
    nan = float("nan")
    t.numeric[r.name] = [e.value if e else nan for e in values]
    if r.shows.interval:
        t.numeric[f"{r.name}_lo"] = [e.lo if e else nan for e in values]
        t.numeric[f"{r.name}_hi"] = [e.hi if e else nan for e in values]
    t.text[r.shows.column] = [_cell(r, e) for e in values]
    if r.shows.note:
        t.notes.append(r.shows.note)
    if any(e is not None and e.method.startswith(TOO_FEW) for e in values):
        say_withheld(t.notes)
