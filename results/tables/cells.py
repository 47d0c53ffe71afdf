"""The cells every table is made of: `Table` (a numeric frame written as CSV, a text frame
written as Markdown and LaTeX, notes, the simulated label), number and interval formatting,
and the columns several tables share (pass rates, the expert speedup, budget per unit)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from results.analysis import Analysis, Headline
from results.bands import point_only, too_few_words
from results.labels import TOO_FEW, interval_text
from results.method_stats import MethodStats
from results.readers import RunData
from stats import RATE_BAND, Estimate, mean_band


@dataclass
class Table:
    name: str
    title: str
    numeric: pd.DataFrame
    text: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    simulated: bool = False
    in_report: bool = True  # False: written as files only (long per-case tables), the report names them


def fmt(x: float, digits: int = 2) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def ci_text(e: Estimate | None, digits: int = 2, suffix: str = "", rate: bool = False) -> str:
    """"0.62 [0.41, 0.80]", or a zero-width interval said plainly (results.labels.interval_text)."""
    if e is None:
        return "n/a"
    return interval_text(e.value, e.lo, e.hi, e.n, digits, suffix, rate, reason=e.method)


def put(num: dict, txt: dict, label: str, key: str, e: Estimate | None, digits: int = 2, suffix: str = "",
         rate: bool = False) -> None:
    nan = float("nan")
    num[key] = e.value if e else nan
    num[f"{key}_lo"] = e.lo if e else nan
    num[f"{key}_hi"] = e.hi if e else nan
    txt[label] = ci_text(e, digits, suffix, rate)


def band(scores: np.ndarray, a: Analysis) -> Estimate:
    """A rate's band over tasks (stats.RATE_BAND, chosen by measured coverage; results/bands.py), or
    below the small-suite minimum its value and count only (results.bands.point_only)."""
    return point_only(mean_band(scores, method=RATE_BAND, n_resamples=a.n_resamples, seed=a.seed), scores)


def _withheld(rows: list[tuple[dict, dict]]) -> bool:
    """Whether a row holds a figure whose interval was withheld (a value with NaN ends: point_only)."""
    for num, _ in rows:
        for key, v in num.items():
            lo = num.get(f"{key}_lo")
            if lo is not None and isinstance(v, (int, float)) and math.isfinite(v) and not math.isfinite(lo):
                return True
    return False


def say_withheld(notes: list[str]) -> None:
    """Design invariant 12: the reason a cell has no interval, in the notes of its table (once)."""
    why = too_few_words()
    if not any(why in n for n in notes):
        notes.append(f"A figure given as its value with a count of tasks, e.g. 0.67 (2/3 tasks), has no interval: "
                     f"{why}.")


def make_table(name: str, title: str, rows: list[tuple[dict, dict]], a: Headline, notes: list[str] | None = None) -> Table:
    notes = list(notes or [])
    if _withheld(rows):  # design invariant 12: the reason, where the cell is
        say_withheld(notes)
    return Table(name, title, pd.DataFrame([r[0] for r in rows]), pd.DataFrame([r[1] for r in rows]),
                 notes, a.data.simulated)


def budget_cols(num: dict, txt: dict, m: MethodStats) -> None:
    per_unit = m.per_unit
    for key, label, digits in (("calls", "calls/unit", 1), ("tokens", "tokens/unit", 0),
                               ("gpu_evals", "GPU evals/unit", 1)):
        num[key] = per_unit[key]
        txt[label] = fmt(num[key], digits)


def pass_cells(num: dict, txt: dict, m: MethodStats) -> None:
    put(num, txt, "submitted pass", "submitted_pass", m.submitted, rate=True)
    for kind, e in m.pooled.items():
        put(num, txt, f"submitted pass {kind} (tasks as trials)", f"submitted_pass_{kind}", e, rate=True)
    put(num, txt, "oracle pass", "oracle_pass", m.oracle, rate=True)


def speedup_cells(num: dict, txt: dict, m: MethodStats, timed: bool) -> None:
    """The correct-only geometric mean against the expert kernel, with the tasks it rests on."""
    s = m.speedups.get("expert")
    if not timed or s is None:
        return
    put(num, txt, "speedup (correct only)", "speedup_correct", s.geomean if s.n_tasks else None, suffix="x")
    num["speedup_tasks"] = s.n_tasks
    if not s.geomean.method.startswith(TOO_FEW):  # a withheld interval's cell already names its tasks
        txt["speedup (correct only)"] += f", {s.n_tasks} task" + ("s" if s.n_tasks != 1 else "")


def method_units(a: Headline) -> list[tuple[str, pd.DataFrame]]:
    u = a.data.units
    return [(m, u[u["method"] == m]) for m in a.data.methods if (u["method"] == m).any()]


def budget_word(data: RunData) -> str:
    return "calls" if data.budget_unit == "calls" else "tokens"


def pct(x: float, signed: bool = False) -> str:
    return "n/a" if not np.isfinite(x) else (f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%")
