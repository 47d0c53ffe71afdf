"""The per-task outcome heatmap: method x task, what each method's final submission did.

Why: suite means hide which tasks a method wins and loses; a reviewer wants to see, per
task, whether the submission passed the hidden cases, failed them (ran and was wrong), or
did not run at all (syntax, compile, runtime error, timeout, crash, missing entry point),
and how fast a passing one is. A submission the CPU interpreter could not run (a feature it lacks,
`unsupported_on_interpreter`) is neither the method's failure nor a pass: counted apart. Each cell gives the count of passing repeats ("1/2"), and
is shaded by the share of repeats that passed (white: none, dark blue: all; the colour bar and
legend say so), so a task passed in 1 of 2 repeats never looks like one passed in both; the
passing repeats' speedup is the cell's text. How the other repeats mostly ended is the hatch
(failed, error, unsupported), so the figure reads in grayscale.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from results.figure_style import FigureStyle, title
from results.readers import RunData

PASSED, FAILED, ERROR, NONE = "passed", "failed", "error", "nothing submitted"
UNSUPPORTED = "unsupported on the interpreter"
RAN_WRONG = ("wrong_result", "no_kernel", "torch_fallback")  # it ran and computed the wrong thing
OUTCOMES = (PASSED, FAILED, ERROR, UNSUPPORTED, NONE)  # a tie between counts goes to the earlier
_CELL = {FAILED: ("#d9d9d9", "////"), ERROR: ("#969696", "xxxx"), UNSUPPORTED: ("#fff7bc", "...."),
         NONE: ("#ffffff", "")}
_PASS_UNTIMED = "#9ecae1"


def outcome(verdict: str | None) -> str:
    if verdict is None or (isinstance(verdict, float) and np.isnan(verdict)):
        return NONE
    if verdict == "correct":
        return PASSED
    if verdict == "unsupported_on_interpreter":
        return UNSUPPORTED
    return FAILED if verdict in RAN_WRONG else ERROR


def outcome_table(data: RunData) -> pd.DataFrame:
    """One row per (method, task): units, passed, failed, error, unsupported on the interpreter,
    nothing submitted, the cell's
    outcome (the most common; ties go to the better outcome), the geometric-mean speedup of
    the passing repeats whose timing is not flagged (NaN when none), and the verdicts seen."""
    finals = data.submissions.sort_values("submission_index").groupby(["method", "task", "repeat"]).tail(1)
    verdict = {(m, t, r): v for m, t, r, v in zip(finals["method"], finals["task"], finals["repeat"],
                                                  finals["hidden_verdict"], strict=True)}
    u = data.units.copy()
    u["verdict"] = [verdict.get((m, t, r)) for m, t, r in zip(u["method"], u["task"], u["repeat"], strict=True)]
    u["outcome"] = [outcome(v) for v in u["verdict"]]
    flagged = u["speedup_flagged"] if "speedup_flagged" in u.columns else pd.Series(False, index=u.index)
    rows = []
    for method in data.methods:
        for task in data.tasks:
            g = u[(u["method"] == method) & (u["task"] == task)]
            if g.empty:
                continue
            counts = {k: int((g["outcome"] == k).sum()) for k in OUTCOMES}
            cell = max(OUTCOMES, key=lambda k: counts[k])  # first wins a tie: the better one
            ok = g[(g["outcome"] == PASSED) & g["speedup"].notna() & ~flagged.loc[g.index].astype(bool)]
            speed = float(np.exp(np.mean(np.log(ok["speedup"].to_numpy(float))))) if len(ok) else float("nan")
            rows.append({"method": method, "task": task, "units": len(g), **{k.replace(" ", "_"): v
                         for k, v in counts.items()}, "outcome": cell, "speedup": speed,
                         "verdicts": ";".join(sorted(set(str(v) for v in g["verdict"] if v is not None)))})
    return pd.DataFrame(rows, columns=["method", "task", "units", "passed", "failed", "error",
                                       "unsupported_on_the_interpreter", "nothing_submitted", "outcome", "speedup",
                                       "verdicts"])


def draw_outcomes(data: RunData, style: FigureStyle, display: Any = str) -> tuple[Any, pd.DataFrame, str]:
    """(figure, the plotted table, the title it would carry). Each cell is shaded by the share of
    its repeats that passed (white: none, darkest: all), so 1 of 2 never looks like 2 of 2; the
    most common way the others ended is its hatch; the speedup of the passing repeats is its text.
    `display` names methods; the caller draws the watermark (results/figures.py does, for every
    figure alike)."""
    from matplotlib.colors import Normalize
    from matplotlib.patches import Patch, Rectangle

    from results.figure_style import pyplot

    plt = pyplot()
    table = outcome_table(data)
    table["pass_share"] = table["passed"] / table["units"]
    methods = [m for m in data.methods if (table["method"] == m).any()]
    tasks = [t for t in data.tasks if (table["task"] == t).any()]
    width = "double" if len(tasks) > 4 or style.name != "paper" else "single"
    w, _ = style.size(width)
    h = max(1.2, 0.32 * len(methods) + 1.2) * (style.font_size / 10)
    fig, ax = plt.subplots(figsize=(w, h + 0.4), layout="constrained")
    norm = Normalize(vmin=0.0, vmax=1.0)
    many = len(tasks) > 24
    for _, r in table.iterrows():
        x, y = tasks.index(r["task"]), methods.index(r["method"])
        share = float(r["pass_share"])
        rest = _most_common_other(r)
        hatch = _CELL[rest][1] if rest is not None else ""
        ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=share_colour(share), edgecolor="white", lw=1.0,
                               gid=f"cell:{r['method']}:{r['task']}"))
        if hatch:  # drawn in grey over the shade (a hatch takes its patch's edge colour)
            ax.add_patch(Rectangle((x - 0.45, y - 0.45), 0.9, 0.9, facecolor="none", edgecolor="#8c8c8c", lw=0,
                                   hatch=hatch))
        if not many:
            ax.text(x, y, _cell_text(r), ha="center", va="center", fontsize=style.font_size - 2.5,
                    color="white" if share > 0.6 else "black")
    ax.set_xlim(-0.5, len(tasks) - 0.5)
    ax.set_ylim(len(methods) - 0.5, -0.5)
    ax.set_yticks(range(len(methods)), [display(m) for m in methods])
    rotate = len(tasks) > 6
    ax.set_xticks(range(len(tasks)), [] if many else tasks, rotation=60 if rotate else 0,
                  ha="right" if rotate else "center")
    if many:
        ax.set_xlabel(f"{len(tasks)} tasks (in the run's order)")
    ax.tick_params(length=0)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    handles = [Patch(facecolor=share_colour(1.0), label="passed: shade = share of repeats passed"),
               Patch(facecolor="white", edgecolor="#999999", hatch=_CELL[FAILED][1], label="failed (ran, wrong)"),
               Patch(facecolor="white", edgecolor="#999999", hatch=_CELL[ERROR][1], label="error (did not run)")]
    if (table["unsupported_on_the_interpreter"] > 0).any():
        handles.append(Patch(facecolor="white", edgecolor="#999999", hatch=_CELL[UNSUPPORTED][1],
                             label="unsupported on the interpreter"))
    if (table["nothing_submitted"] > 0).any():
        handles.append(Patch(facecolor="white", edgecolor="#999999", label="nothing submitted"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 3), handlelength=1.5)
    bar = fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=_share_cmap()), ax=ax, fraction=0.04, pad=0.02)
    bar.set_label("share of repeats passed")
    bar.set_ticks([0.0, 0.5, 1.0], labels=["0", "1/2", "all"])
    text = title(ax, "Outcome of each method's final submission per task", style)
    return fig, table, text


def _share_cmap() -> Any:
    """White (no repeat passed) to a full blue (every repeat did), readable in grayscale."""
    from matplotlib.colors import LinearSegmentedColormap

    return LinearSegmentedColormap.from_list("pass_share", ["#ffffff", "#9ecae1", "#2171b5", "#08306b"])


def share_colour(share: float) -> tuple[float, float, float, float]:
    """The cell colour of a (method, task) whose repeats passed in this share (0 to 1)."""
    return tuple(float(v) for v in _share_cmap()(float(np.clip(share, 0.0, 1.0))))  # type: ignore[return-value]


def _most_common_other(r: pd.Series) -> str | None:
    """How the repeats that did not pass mostly ended (None when every repeat passed)."""
    others = {k: int(r[k.replace(" ", "_") if k != UNSUPPORTED else "unsupported_on_the_interpreter"])
              for k in OUTCOMES if k != PASSED}
    most = max(others, key=lambda k: others[k])
    return most if others[most] else None


def _cell_text(r: pd.Series) -> str:
    """'k/n' passed (with repeats), then the passing repeats' speedup, or how the cell mostly ended."""
    n = int(r["units"])
    count = f"{int(r['passed'])}/{n}\n" if n > 1 else ""
    if int(r["passed"]):
        return count + (f"{r['speedup']:.2f}x" if np.isfinite(r["speedup"]) else "pass")
    return count + {FAILED: "wrong", ERROR: "error", UNSUPPORTED: "n/a (CPU)", NONE: "none"}[r["outcome"]]
