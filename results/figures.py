"""Paper figures (PNG and PDF) from an Analysis: budget curves with interval bands against
calls and against tokens, parallel scaling over independent runs, fast_p curves, speedup
distributions and latency noise per task.

Why these: a reader must see success at every budget (not a single point), how sure we
are (bands over tasks), what a speedup claim rests on (every unit's speedup, failures
counted), and how noisy the timings under it were. Figures of a simulated run carry
"SIMULATED MODEL" in their title (invariant 7). A figure whose data do not exist (no
timings on the CPU interpreter, no complete independent runs) is not drawn, and the
reason is returned instead of an empty plot.

matplotlib is imported inside functions with the Agg backend, so importing this module
costs nothing and works without a display.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from results.analysis import Analysis
from results.method_stats import REPORTED_FAST_PS
from results.verdicts import display
from stats import fast_p, flagged_share, mean_ci_columns

_COLORS = {"direct": "#1f77b4", "reflexion": "#ff7f0e", "geak": "#2ca02c"}
_STYLES = {"direct": "-", "reflexion": "--", "geak": "-."}
_EXTRA = ["#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


@dataclass
class FigureResult:
    """One figure: its files (PNG and PDF), a caption saying what it shows, or why it was skipped."""

    name: str
    caption: str
    files: list[Path] = field(default_factory=list)
    skipped: str = ""
    title: str = ""  # the title drawn on the figure (tests read it: the simulated label must be there)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
                         "axes.spines.top": False, "axes.spines.right": False, "figure.dpi": 100})
    return plt


def color(method: str, methods: tuple[str, ...]) -> str:
    if method in _COLORS:
        return _COLORS[method]
    others = [m for m in methods if m not in _COLORS]
    return _EXTRA[others.index(method) % len(_EXTRA)] if method in others else _EXTRA[0]


def style(method: str) -> str:
    return _STYLES.get(method, ":")


def _title(a: Analysis, text: str) -> str:
    return (f"SIMULATED MODEL: {text}" if a.data.simulated else text)


def _done(fig: Any, out_dir: Path, name: str, caption: str) -> FigureResult:
    """Save as PNG (150 dpi) and PDF, close, and say what was drawn."""
    title = fig.get_suptitle() or " | ".join(ax.get_title() for ax in fig.axes if ax.get_title())
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.pdf"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    _plt().close(fig)
    return FigureResult(name, caption, paths, title=title)


def _subtitle(a: Analysis) -> str:
    d = a.data
    unit = "calls" if d.budget_unit == "calls" else "tokens"
    reps = d.units.groupby(["method", "task"]).size().max()
    return (f"{a.n_tasks} tasks x up to {reps} repeats, budget {d.budget} {unit} per unit; "
            f"bands: 95% bootstrap over tasks")


# ---------------------------------------------------------------------------- budget curves
SPENT_COLUMNS = {"calls": "calls_used", "tokens": "tokens_used", "evaluations": "feedback_evals"}
AXIS_LABELS = {"calls": "LLM calls spent", "tokens": "tokens spent (thousands, prompt + completion)",
               "evaluations": "GPU evaluations spent (visible feedback + own test runs)"}


def budget_figure(a: Analysis, axis: str, out_dir: Path) -> FigureResult:
    plt = _plt()
    curves = a.curves[axis]
    name = f"budget_{axis}"
    caption = (f"Submitted pass (left) and oracle pass (right) against {axis} spent, mean over tasks with 95% "
               "pointwise bootstrap bands over tasks; each curve ends (tick) at the most any unit of that method "
               "spent, and a unit that stopped earlier keeps its last submission.")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    scale = 1000.0 if axis == "tokens" else 1.0
    for ax, kind, label in ((axes[0], "submitted", "submitted pass"), (axes[1], "oracle", "oracle pass")):
        for m, c in curves.items():
            band = getattr(c, kind)
            # Stop each curve at the most any unit of the method spent: beyond it nothing was spent.
            spent = a.data.units.loc[a.data.units["method"] == m, SPENT_COLUMNS[axis]]
            n = min(len(c.grid), int(np.searchsorted(c.grid, float(spent.max()), side="left")) + 1)
            x = c.grid[:n] / scale
            col = color(m, a.data.methods)
            ax.step(x, band.mean[:n], where="post", color=col, lw=2, ls=style(m), label=display(m))
            ax.fill_between(x, band.lo[:n], band.hi[:n], step="post", color=col, alpha=0.14, lw=0)
            ax.plot(x[-1:], band.mean[n - 1:n], marker="|", ms=10, mew=2, color=col)
        ax.set_title(label)
        ax.set_xlabel(AXIS_LABELS[axis])
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlim(0, float(next(iter(curves.values())).grid[-1]) / scale)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("share of tasks passing hidden tests")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.suptitle(_title(a, f"Budget curves against {axis}") + "\n" + _subtitle(a), fontsize=11)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), frameon=False, handlelength=3)
    return _done(fig, out_dir, name, caption)


def parallel_figure(a: Analysis, out_dir: Path) -> FigureResult:
    name = "parallel_scaling"
    caption = ("pass@k over independent runs against the calls of k runs (k x calls per run), mean over tasks with "
               "95% bootstrap bands; markers at each k.")
    usable = {m: r for m, r in a.runs.items() if r.curve is not None and len(r.curve.k) >= 1}
    if not usable:
        return FigureResult(name, caption, skipped="no method has complete independent runs on every task")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for m, r in usable.items():
        c = r.curve
        assert c is not None
        col = color(m, a.data.methods)
        opts = a.data.method_options.get(m, {})
        temp0 = opts.get("impl_temperature", opts.get("temperature")) == 0
        label = f"{display(m)} ({r.calls_per_run:g} call{'s' if r.calls_per_run != 1 else ''}/run" + (
            "; temperature 0: runs not independent)" if temp0 else ")")
        ax.plot(c.cost, c.mean, marker="o", ms=4, color=col, lw=2, ls=style(m), label=label)
        ax.fill_between(c.cost, c.lo, c.hi, color=col, alpha=0.18, lw=0)
        if len(c.k) == 1:  # a band needs two points: show the lone interval as an error bar
            ax.errorbar(c.cost, c.mean, yerr=[c.mean - c.lo, c.hi - c.mean], color=col, capsize=4, lw=1.5)
    if a.data.budget_unit == "calls":
        ax.axvline(a.data.budget, color="grey", ls=":", lw=1.2, label=f"budget of one unit ({a.data.budget} calls)")
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("LLM calls of k runs, k x calls per run (log scale)")
    ax.set_ylabel("pass@k over runs")
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, frameon=False)
    missing = [display(m) for m in a.runs if m not in usable]
    sub = f"not estimable: {', '.join(missing)}" if missing else f"{a.n_tasks} tasks"
    ax.set_title(_title(a, "Parallel scaling over independent runs") + f"\n({sub})", fontsize=11)
    fig.tight_layout()
    return _done(fig, out_dir, name, caption)


# ---------------------------------------------------------------------------- speedups
def _correct_speedups(units: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Units whose speed is known (failures, and correct ones with an unflagged timing, as in
    results/method_stats.py): whether each is correct, and its speedup (NaN when not correct)."""
    usable = units["submitted_pass"] & units["speedup"].notna() & ~units["speedup_flagged"]
    known = units[~units["submitted_pass"] | usable]
    correct = known["submitted_pass"].to_numpy(bool)
    return correct, known["speedup"].where(known["submitted_pass"]).to_numpy(float)


def fast_p_figure(a: Analysis, out_dir: Path) -> FigureResult:
    name = "fast_p"
    caption = ("fast_p: share of ALL tasks whose submission is correct and more than p times as fast as the expert "
               "baseline, against p (failures are never fast; flagged timings left out); 95% bootstrap bands over "
               "tasks; dotted lines at the tabulated p.")
    if not a.data.has_timings:
        return FigureResult(name, caption, skipped="no timed evaluations (CPU interpreter)")
    plt = _plt()
    u = a.data.units
    top = float(np.nanmax(u["speedup"])) if u["speedup"].notna().any() else 2.0
    ps = np.linspace(0, max(2.5, 1.1 * top), 241)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for m in a.data.methods:
        units = u[u["method"] == m]
        if not len(units):
            continue
        per_task = []
        for _, g in units.groupby("task"):
            c, s = _correct_speedups(g)
            if len(c):
                per_task.append([fast_p(c, s, p) for p in ps])
        if not per_task:
            continue
        cols = mean_ci_columns(np.asarray(per_task), n_resamples=min(a.n_resamples, 2000), method="percentile",
                               seed=a.seed)
        col = color(m, a.data.methods)
        ax.plot(ps, cols.value, color=col, lw=2, ls=style(m), label=display(m), drawstyle="steps-post")
        ax.fill_between(ps, cols.lo, cols.hi, step="post", color=col, alpha=0.15, lw=0)
    for p in REPORTED_FAST_PS:
        ax.axvline(p, color="grey", ls=":", lw=0.8)
    ax.set_xlabel("speedup threshold p (vs expert Triton baseline)")
    ax.set_ylabel("fast_p (share of all tasks)")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlim(0, ps[-1])
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", handlelength=3)
    ax.set_title(_title(a, "fast_p against the speedup threshold"), fontsize=11)
    fig.tight_layout()
    return _done(fig, out_dir, name, caption)


def speedup_figure(a: Analysis, out_dir: Path) -> FigureResult:

    name = "speedups"
    caption = ("Speedup of each correct, timed final submission over the expert baseline (one dot per unit, log "
               "scale; box = quartiles when there are at least 5; dashed = geometric mean over these units; flagged "
               "timings left out); the label under each method gives correct submissions out of all units.")
    if not a.data.has_timings:
        return FigureResult(name, caption, skipped="no timed evaluations (CPU interpreter)")
    plt = _plt()
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    u = a.data.units
    methods = [m for m in a.data.methods if (u["method"] == m).any()]
    fig, ax = plt.subplots(figsize=(max(5.5, 1.8 * len(methods) + 2), 4.2))
    rng = np.random.default_rng(0)
    labels = []
    for i, m in enumerate(methods):
        units = u[u["method"] == m]
        _, s = _correct_speedups(units)
        vals = s[np.isfinite(s)]
        labels.append(f"{display(m)}\n{len(vals)}/{len(units)} correct")
        col = color(m, a.data.methods)
        if len(vals) >= 5:  # quartiles of fewer points say nothing the dots do not
            ax.boxplot([vals], positions=[i], widths=0.5, showfliers=False, medianprops={"color": "black"},
                       boxprops={"color": col}, whiskerprops={"color": col}, capprops={"color": col})
        if len(vals):
            ax.scatter(i + rng.uniform(-0.15, 0.15, len(vals)), vals, s=18, color=col, alpha=0.8, zorder=3)
            gm = float(np.exp(np.mean(np.log(vals))))
            ax.plot([i - 0.3, i + 0.3], [gm, gm], color=col, lw=2.5, ls="--")
        else:
            ax.text(i, 1.0, "no correct\ntimed kernels", ha="center", va="center", fontsize=9)
    ax.axhline(1.0, color="grey", lw=1)
    ax.set_yscale("log")
    shown = u["speedup"][u["submitted_pass"] & u["speedup"].notna()]
    lo, hi = (float(shown.min()), float(shown.max())) if len(shown) else (1.0, 1.0)
    nice = [t for t in (0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0, 7.0, 10.0, 20.0, 50.0, 100.0)
            if lo / 1.6 <= t <= hi * 1.6]
    ax.yaxis.set_major_locator(FixedLocator(nice))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(range(len(methods)), labels)
    ax.set_xlim(-0.6, len(methods) - 0.4)
    ax.set_ylabel("speedup vs expert baseline (x, log scale)")
    ax.grid(alpha=0.3, axis="y", which="both")
    ax.set_title(_title(a, "Speedups of correct submissions") + "\n(dashed: geometric mean over correct units)",
                 fontsize=11)
    fig.tight_layout()
    return _done(fig, out_dir, name, caption)


_STATE_MARKERS = {"locked": ("o", "#2ca02c"), "not locked": ("o", "#1f77b4"), "lock not recorded": ("o", "#7f7f7f")}


def _state_style(state: str) -> tuple[str, str, bool]:
    base, _, flag = state.partition(", ")
    marker, col = _STATE_MARKERS.get(base, ("o", "#7f7f7f"))
    return ("x" if flag else marker), ("#d62728" if flag else col), bool(flag)


def latency_figure(a: Analysis, out_dir: Path) -> FigureResult:
    name = "latency_noise"
    caption = ("Latency noise per task and clock state: IQR/median of the raw candidate samples of every timed case "
               "(one point per case; colour = clock lock state; red crosses = timings flagged for moving clocks or "
               "throttling, left out of every average); the title gives the share of timed cases flagged.")
    lat = a.latency
    if not len(lat):
        return FigureResult(name, caption, skipped="no timed evaluations (CPU interpreter)")
    plt = _plt()
    tasks = sorted(lat["task"].unique())
    states = sorted(lat["clock_state"].unique())
    many = len(tasks) > 40
    if many:  # one summary per task and state, sorted, unlabelled: hundreds of names cannot be read
        fig, ax = plt.subplots(figsize=(10, 4.2))
        order = lat[~lat["flagged"]].groupby("task")["rel_iqr"].median().sort_values().index.tolist()
        order += [t for t in tasks if t not in order]
        pos = {t: i for i, t in enumerate(order)}
        for state in states:
            g = lat[lat["clock_state"] == state].groupby("task")["rel_iqr"].median()
            marker, col, _ = _state_style(state)
            ax.scatter([pos[t] for t in g.index], 100 * g.to_numpy(float), s=10, marker=marker, color=col,
                       label=f"{state} (median over cases)")
        ax.set_xlabel(f"{len(tasks)} tasks, sorted by the median IQR/median of unflagged cases")
        ax.set_xticks([])
    else:
        fig, ax = plt.subplots(figsize=(min(12.0, max(6.0, 0.45 * len(tasks) + 3)), 4.2))
        rng = np.random.default_rng(0)
        width = 0.6 / max(1, len(states))
        for j, state in enumerate(states):
            marker, col, _ = _state_style(state)
            g = lat[lat["clock_state"] == state]
            x = np.array([tasks.index(t) for t in g["task"]], dtype=float) - 0.3 + (j + 0.5) * width
            ax.scatter(x + rng.uniform(-width / 4, width / 4, len(g)), 100 * g["rel_iqr"].to_numpy(float), s=16,
                       marker=marker, color=col, alpha=0.7, label=state)
        rotate = len(tasks) > 6
        ax.set_xticks(range(len(tasks)), tasks, rotation=60 if rotate else 0, ha="right" if rotate else "center",
                      fontsize=8 if rotate else 9)
        ax.set_xlim(-0.6, len(tasks) - 0.4)
    ax.set_ylabel("IQR / median of latency samples per case (%)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, title="clock state")
    share = flagged_share(lat["flagged"].to_numpy(bool))
    ax.set_title(_title(a, "Latency noise per task and clock state")
                 + f"\n({len(lat)} timed cases, {100 * share:.0f}% flagged)", fontsize=11)
    fig.tight_layout()
    return _done(fig, out_dir, name, caption)


def write_figures(a: Analysis, out_dir: Path) -> list[FigureResult]:
    """Draw every figure into out_dir (PNG and PDF); skipped ones say why."""
    return [budget_figure(a, "calls", out_dir), budget_figure(a, "tokens", out_dir),
            budget_figure(a, "evaluations", out_dir), parallel_figure(a, out_dir),
            fast_p_figure(a, out_dir), speedup_figure(a, out_dir), latency_figure(a, out_dir)]
