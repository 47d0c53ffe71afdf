"""The per-task outcome heatmap: method x task, what each method's final submission did.

Why: suite means hide which tasks a method wins and loses; a reviewer wants to see, per
task, whether the submission passed the hidden cases, failed them (ran and was wrong), or
did not run at all (syntax, compile, runtime error, timeout, crash, missing entry point),
and how fast a passing one is. A submission the CPU interpreter could not run (a feature it lacks,
`unsupported_on_interpreter`) is neither the method's failure nor a pass: counted apart. Each cell gives the outcome over repeats ("2/3" when they
differ) and, when timed, the speedup as colour (log scale, centred on the expert baseline's
1x). Failed and error cells are hatched differently, so the figure reads in grayscale.
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
    """(figure, the plotted table, the title it would carry). `display` names methods; the caller
    draws the watermark (results/figures.py does, for every figure alike)."""
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Patch, Rectangle

    from results.figure_style import pyplot

    plt = pyplot()
    table = outcome_table(data)
    methods = [m for m in data.methods if (table["method"] == m).any()]
    tasks = [t for t in data.tasks if (table["task"] == t).any()]
    timed = bool(table["speedup"].notna().any())
    width = "double" if len(tasks) > 4 or style.name != "paper" else "single"
    w, _ = style.size(width)
    h = max(1.2, 0.32 * len(methods) + 1.2) * (style.font_size / 10)
    fig, ax = plt.subplots(figsize=(w, h + (0.4 if timed else 0.0)), layout="constrained")
    cmap = plt.get_cmap("PuOr")
    top = float(np.nanmax(np.abs(np.log2(table["speedup"])))) if timed else 1.0
    bound = 2.0 ** max(1.0, np.ceil(top))
    norm = LogNorm(vmin=1 / bound, vmax=bound)
    many = len(tasks) > 24
    for _, r in table.iterrows():
        x, y = tasks.index(r["task"]), methods.index(r["method"])
        if r["outcome"] == PASSED:
            face = cmap(norm(r["speedup"])) if np.isfinite(r["speedup"]) else _PASS_UNTIMED
            hatch = ""
        else:
            face, hatch = _CELL[r["outcome"]]
        ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=face, edgecolor="white", lw=1.0, hatch=hatch))
        if not many:
            ax.text(x, y, _cell_text(r), ha="center", va="center", fontsize=style.font_size - 2.5,
                    color="black")
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
    handles = [Patch(facecolor=_PASS_UNTIMED if not timed else cmap(norm(2.0)),
                     label="passed" + (" (colour: speedup)" if timed else "")),
               Patch(facecolor=_CELL[FAILED][0], hatch=_CELL[FAILED][1], label="failed (ran, wrong)"),
               Patch(facecolor=_CELL[ERROR][0], hatch=_CELL[ERROR][1], label="error (did not run)")]
    if (table["outcome"] == UNSUPPORTED).any():
        handles.append(Patch(facecolor=_CELL[UNSUPPORTED][0], hatch=_CELL[UNSUPPORTED][1],
                             label="unsupported on the interpreter"))
    if (table["outcome"] == NONE).any():
        handles.append(Patch(facecolor="white", edgecolor="#999999", label="nothing submitted"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), handlelength=1.5)
    if timed:
        sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
        bar = fig.colorbar(sm, ax=ax, fraction=0.04, pad=0.02)
        bar.set_label("speedup vs expert (passed)")
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        bar.ax.yaxis.set_major_locator(LogLocator(base=2))
        bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        bar.ax.yaxis.set_minor_formatter(NullFormatter())
    text = title(ax, "Outcome of each method's final submission per task", style)
    return fig, table, text


def _cell_text(r: pd.Series) -> str:
    n = int(r["units"])
    count = f"{int(r['passed'])}/{n}\n" if n > 1 else ""
    if r["outcome"] == PASSED:
        return count + (f"{r['speedup']:.2f}x" if np.isfinite(r["speedup"]) else "pass")
    return count + {FAILED: "wrong", ERROR: "error", UNSUPPORTED: "n/a (CPU)", NONE: "none"}[r["outcome"]]
