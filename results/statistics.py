"""Registered per-method statistics: a class registered by name adds a column to a report table
and a field to summary.json (the registry is results/plugins.py; the built-in figures are
results/method_stats.py's).

Writing a statistic (a plugin is one file; nothing else changes; tests/toy_statistic.py is a
whole one, docs/EXTENDING.md walks through it):

    from results.statistics import MethodRows, register_statistic
    from stats import Estimate

    @register_statistic("first_try_pass")           # its field in summary.json (lower-case, '_')
    class FirstTryPass:
        column = "first-try pass"                    # its column's header in the table below
        table = "accuracy"                           # accuracy, variance or false_positives; None: summary only
        interval = True                              # compute returns an Estimate; False: a float
        rate = True                                  # optional: a rate in [0, 1] (how cells say 0 and 1)
        digits = 2                                   # optional: as the table prints it; also `suffix = "x"`
        note = "first-try pass: ..."                 # optional: one sentence for the table's notes

        def compute(self, m: MethodRows) -> Estimate:
            first = ...                              # from m.units, m.candidates, ... (this method's rows)
            return m.band(m.per_task(first))         # a mean over tasks of per-task means over repeats

Rules the report, the tables and summary.json rely on:
- `compute(m)` gets one method's rows of the run's frames (results/readers.py RunData says what
  each column holds), its built-in figures (`m.stats`, a MethodStats), the report's bootstrap
  settings and the whole run (`m.run`). It only reads them, and returns the same value for the
  same run in every process (seed any resampling with `m.seed`).
- The task is the unit of inference (design invariant 11): a figure over tasks is a mean of
  per-task means over repeats (`m.per_task`), its interval is over tasks, and the Estimate's `n`
  is the tasks it rests on (at most `m.n_tasks`). A rate's band is `m.band` (stats.RATE_BAND,
  chosen by measured coverage), a mean's bootstrap interval `m.bootstrap`. Arithmetic that is
  more than a line goes into stats/ as a pure function stating its formula.
- Below the small-suite minimum (design invariant 12; results/bands.py INTERVAL_MIN_TASKS) a
  figure has no interval: `m.band` and `m.bootstrap` already withhold it, and the registry
  withholds any interval over fewer tasks, so the cell says "0.67 (2/3 tasks)", summary.json's
  `<name>_ci` is null and its `no_interval_reason` names the field.
- Left out, `column` is the name, `table` "accuracy" and `interval` False.
- summary.json gets, per method, `<name>` (null when undefined, never NaN) and, with
  `interval`, `<name>_ci`; top-level `statistics` names each statistic's class. The table gets
  the column (header `column`; CSV columns `<name>`, `<name>_lo`, `<name>_hi`) after its own.
  Neither may reuse a field or column the table or summary.json already has.
- Every report computes every registered statistic, so its class must be found in the process
  that writes the report and summary.json: importing its module registers it there (as tests
  do); an installed package names its class in the entry-point group
  `kernel_method_compare.statistics`:

      [project.entry-points."kernel_method_compare.statistics"]
      first_try_pass = "my_package.first_try:FirstTryPass"
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd

from results.bands import has_interval, point_only
from results.labels import TOO_FEW
from results.method_stats import MethodStats
from results.plugins import PluginError, Registry
from results.readers import RunData
from stats import RATE_BAND, Estimate, mean_band, mean_ci

__all__ = ["ENTRY_POINT_GROUP", "PER_METHOD_TABLES", "MethodRows", "Shows", "Statistic", "StatisticValues",
           "compute_statistics", "register_statistic", "statistic_classes", "PluginError"]

ENTRY_POINT_GROUP = "kernel_method_compare.statistics"
#: Tables with one row per method, where a statistic's column can go (results/tables/per_method.py).
PER_METHOD_TABLES = ("accuracy", "variance", "false_positives")
#: The frames of RunData that have a `method` column: MethodRows holds one method's rows of each.
FRAMES = ("units", "candidates", "submissions", "feedback", "calls", "runs", "examples", "test_runs")


class Statistic(Protocol):
    """What a registered statistic provides (Shows.of reads the attributes, with their defaults)."""

    name: str  # set by @register_statistic: its field in summary.json
    column: str
    table: str | None
    interval: bool

    def compute(self, m: MethodRows) -> Estimate | float | None: ...


@dataclass(frozen=True)
class Shows:
    """Where and how a statistic shows, read from its class (optional attributes defaulted)."""

    column: str
    table: str | None
    interval: bool
    rate: bool = False
    digits: int = 2
    suffix: str = ""
    note: str = ""

    @classmethod
    def of(cls, name: str, stat: type) -> Shows:
        table = getattr(stat, "table", "accuracy")
        column = getattr(stat, "column", name)
        interval = getattr(stat, "interval", False)
        if table is not None and table not in PER_METHOD_TABLES:
            raise ValueError(f"statistic {name!r}: table {table!r} is not one with a row per method "
                             f"({', '.join(PER_METHOD_TABLES)}), nor None (summary.json only)")
        if not isinstance(column, str) or not column.strip():
            raise ValueError(f"statistic {name!r}: column must be a non-empty header")
        if not isinstance(interval, bool):
            raise ValueError(f"statistic {name!r}: interval must be True or False")
        return cls(column, table, interval, bool(getattr(stat, "rate", False)), int(getattr(stat, "digits", 2)),
                   str(getattr(stat, "suffix", "")), str(getattr(stat, "note", "")))


def _check(name: str, stat: type) -> None:
    Shows.of(name, stat)


STATISTICS = Registry("statistic", ENTRY_POINT_GROUP, "compute", check=_check)
register_statistic = STATISTICS.register


def statistic_classes() -> dict[str, type]:
    """Every registered statistic by name, installed plugins loaded (PluginError for a broken one)."""
    return STATISTICS.classes()


@dataclass(frozen=True)
class MethodRows:
    """What a statistic computes from: one method's rows of each frame of the run (FRAMES; see
    results/readers.py RunData), its built-in figures, the report's bootstrap settings, the run."""

    method: str
    units: pd.DataFrame
    candidates: pd.DataFrame
    submissions: pd.DataFrame
    feedback: pd.DataFrame
    calls: pd.DataFrame
    runs: pd.DataFrame
    examples: pd.DataFrame
    test_runs: pd.DataFrame
    stats: MethodStats
    n_resamples: int
    seed: int
    run: RunData

    @property
    def n_tasks(self) -> int:
        return self.stats.n_tasks

    def per_task(self, values: str | npt.ArrayLike) -> np.ndarray:
        """Per task (in task order), the mean over its repeats of a units column, or of `values`
        given one per row of `units` in its order."""
        v = self.units[values].to_numpy(float) if isinstance(values, str) else np.asarray(values, float)
        if v.shape != (len(self.units),):
            raise ValueError(f"per_task needs one value per unit ({len(self.units)}), got shape {v.shape}")
        return pd.Series(v).groupby(self.units["task"].to_numpy()).mean().to_numpy(float)

    def band(self, per_task: npt.ArrayLike) -> Estimate:
        """A rate's mean over tasks with its band (stats.RATE_BAND), none below the small-suite minimum."""
        s = np.asarray(per_task, float)
        return point_only(mean_band(s, method=RATE_BAND, n_resamples=self.n_resamples, seed=self.seed), s)

    def bootstrap(self, per_task: npt.ArrayLike) -> Estimate:
        """A mean over tasks with its BCa bootstrap interval over tasks, none below the small-suite minimum."""
        s = np.asarray(per_task, float)
        return point_only(mean_ci(s, n_resamples=self.n_resamples, method="BCa", seed=self.seed), s)


@dataclass(frozen=True)
class StatisticValues:
    """One registered statistic over a run: its name, where it shows, its class, a value per method
    (an Estimate; a statistic without `interval` has NaN ends)."""

    name: str
    shows: Shows
    origin: str  # "module:Class"
    values: dict[str, Estimate]


def method_rows(data: RunData, stats: MethodStats, n_resamples: int, seed: int) -> MethodRows:
    frames: dict[str, Any] = {}
    for f in FRAMES:
        frame = getattr(data, f)
        frames[f] = frame[frame["method"] == stats.method]
    return MethodRows(stats.method, **frames, stats=stats, n_resamples=n_resamples, seed=seed, run=data)


def compute_statistics(data: RunData, methods: dict[str, MethodStats], n_resamples: int,
                       seed: int) -> list[StatisticValues]:
    """Every registered statistic of every method with finished units, in registry order."""
    classes = statistic_classes()
    if not classes:
        return []
    rows = {m: method_rows(data, s, n_resamples, seed) for m, s in methods.items()}
    out = []
    for name, cls in classes.items():
        shows = Shows.of(name, cls)
        stat = cls()
        values = {m: _value(name, shows, stat.compute(r), r) for m, r in rows.items()}
        out.append(StatisticValues(name, shows, f"{cls.__module__}:{cls.__qualname__}", values))
    return out


def _a(value: object) -> str:
    kind = type(value).__name__
    return f"{'an' if kind[0].lower() in 'aeiou' else 'a'} {kind}"


def _value(name: str, shows: Shows, got: object, m: MethodRows) -> Estimate:
    """What `compute` returned, checked against the statistic's declaration, as an Estimate with the
    small-suite rule applied."""
    nan = float("nan")
    if not shows.interval:
        if got is None:
            return Estimate(nan, nan, nan, "no value", m.n_tasks)
        if isinstance(got, bool) or not isinstance(got, (int, float, np.integer, np.floating)):
            raise PluginError(f"statistic {name!r} returned {_a(got)} for {m.method}; without "
                              "`interval` it returns a number or None")
        return Estimate(float(got), nan, nan, "no interval", m.n_tasks)
    if not isinstance(got, Estimate):
        raise PluginError(f"statistic {name!r} returned {_a(got)} for {m.method}; with `interval` "
                          "it returns a stats.Estimate")
    if not 0 <= got.n <= m.n_tasks:
        raise PluginError(f"statistic {name!r} for {m.method}: its Estimate's n ({got.n}) must be the tasks it "
                          f"rests on (at most {m.n_tasks})")
    ends_given = math.isfinite(got.lo) or math.isfinite(got.hi)
    if not has_interval(got.n) and ends_given and not got.method.startswith(TOO_FEW):
        return point_only(got)  # design invariant 12, whatever the statistic did
    return got
