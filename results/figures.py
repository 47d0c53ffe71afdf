"""Paper figures from an Analysis: budget curves with interval bands against calls, tokens
and GPU evaluations, parallel scaling over independent runs, fast_p curves, speedup
distributions, latency noise per task and clock state, and the per-task outcome heatmap.

Why these: a reader must see success at every budget (not a single point), how sure we
are (bands over tasks), what a speedup claim rests on (every unit's speedup, failures
counted), how noisy the timings under it were, and which tasks each method won or lost. A
figure whose data do not exist (no timings on the CPU interpreter, no complete independent
runs) is not drawn, and the reason is returned instead of an empty plot.

How they look and are saved is results/figure_style.py's: camera-ready sizes, 300 dpi PNG,
TrueType PDF, optional SVG, titles only when the style has them, one look per method, the
SIMULATED (and PARTIAL RUN) watermark inside every axes (invariant 7), and the plotted
numbers as `<name>.csv` beside every figure (`finish` does all of it).

Each figure is a class registered by name (results/figure_registry.py, which opens with the
recipe); `write_figures` draws every registered one: these built-ins (FIGURE_NAMES) first, then
those of other modules and installed plugins. `pyplot_for`, `finish`, `not_drawn` and
`drawn_title` are what a plugin figure uses too.

Below the small-suite minimum (results/bands.py INTERVAL_MIN_TASKS; design invariant 12) a curve
over fewer tasks is drawn without its band (the means only; NaN ends in the CSV), and the
caption, in the figure's `.caption.txt` too, says so and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from results.analysis import Analysis
from results.bands import INTERVAL_MIN_TASKS, band_note, has_interval, too_few_words
from results.curves import MethodRuns
from results.figure_registry import figure_classes, register_figure
from results.figure_style import (
    FigureStyle,
    MethodLook,
    band,
    band_handle,
    log_axis,
    method_looks,
    pyplot,
    save,
    title,
    watermark,
)
from results.method_stats import REPORTED_FAST_PS
from results.plugins import PluginError
from results.verdicts import display
from stats import fast_p, flagged_share, mean_ci_columns


@dataclass
class FigureResult:
    """One figure: its files (one per format, then the CSV of plotted numbers), a caption saying
    what it shows, or why it was skipped."""

    name: str
    caption: str
    files: list[Path] = field(default_factory=list)
    skipped: str = ""
    title: str = ""  # the title the figure carries (drawn only when the style has titles)
    watermark: str | None = None  # the label drawn inside its axes (SIMULATED MODEL, PARTIAL RUN)
    left_out: dict[str, str] = field(default_factory=dict)  # method -> why the figure does not draw it
    caption_file: Path | None = None  # <name>.caption.txt beside the figure: the caption, left-out methods named


@dataclass(frozen=True)
class Look:
    """What every figure of one run shares: the style (with its watermark) and each method's look."""

    style: FigureStyle
    methods: dict[str, MethodLook]
    simulated: bool

    def of(self, method: str) -> MethodLook:
        return self.methods[method]


def make_look(a: Analysis, style: FigureStyle | None = None, partial: bool = False) -> Look:
    chosen = (style or FigureStyle.make()).with_watermark(a.data.simulated, partial)
    return Look(chosen, method_looks(a.data.methods), a.data.simulated)


def pyplot_for(look: Look) -> Any:
    """pyplot with the style's rcParams in force (set globally: drawing and saving both read them)."""
    plt = pyplot()
    plt.rcParams.update(look.style.rc())
    return plt


def finish(fig: Any, out_dir: Path, name: str, caption: str, look: Look, plotted: pd.DataFrame,
           text: str, left_out: dict[str, str] | None = None) -> FigureResult:
    """Watermark every axes, save in the style's formats with the plotted numbers beside, close;
    write the caption beside them (`<name>.caption.txt`), naming every method the figure leaves
    out and why: a paper-style figure has no title to say it in."""
    for ax in fig.axes:
        if ax.get_label() != "<colorbar>":
            watermark(ax, look.style)
    files = save(fig, out_dir, name, look.style, plotted, look.simulated)
    left = dict(left_out or {})
    full = caption + (" Not drawn: " + "; ".join(f"{display(m)} ({why})" for m, why in left.items()) + "."
                      if left else "")
    caption_file = out_dir / f"{name}.caption.txt"
    caption_file.write_text(("SIMULATED MODEL. " if look.simulated else "") + full + "\n")
    return FigureResult(name, full, files, title=text, watermark=look.style.watermark, left_out=left,
                        caption_file=caption_file)


def not_drawn(a: Analysis, drawn: list[str] | set[str], why: str = "no finished units") -> dict[str, str]:
    """The run's methods a figure did not draw, each with `why`."""
    return {m: why for m in a.data.methods if m not in drawn}


def drawn_title(a: Analysis, text: str) -> str:
    """A drawn title of a simulated run starts with the label too (the watermark is the one that
    cannot be cropped away)."""
    return f"SIMULATED MODEL: {text}" if a.data.simulated else text


def _subtitle(a: Analysis) -> str:
    d = a.data
    unit = "calls" if d.budget_unit == "calls" else "tokens"
    reps = d.units.groupby(["method", "task"]).size().max()
    bands = ("bands: 95% Wilson (effective n) over tasks" if has_interval(a.n_tasks)
             else f"no bands: fewer than {INTERVAL_MIN_TASKS} tasks")
    return f"{a.n_tasks} tasks x up to {reps} repeats, budget {d.budget} {unit} per unit; {bands}"


def _no_band(unbanded: dict[str, int], a: Analysis) -> str:
    """The caption's sentence for curves drawn without a band (fewer than INTERVAL_MIN_TASKS tasks)
    in a figure whose other curves have one; "" when every curve has its band or none has (then
    band_note(a.n_tasks) says it)."""
    if not unbanded or not has_interval(a.n_tasks):
        return ""
    which = ", ".join(f"{display(m)} ({n} task{'s' if n != 1 else ''})" for m, n in unbanded.items())
    return f" Drawn without a band (points only): {which}; {too_few_words()}."


# ---------------------------------------------------------------------------- budget curves
SPENT_COLUMNS = {"calls": "calls_used", "tokens": "tokens_used", "evaluations": "feedback_evals"}
AXIS_LABELS = {"calls": "LLM calls spent", "tokens": "tokens spent (thousands, prompt + completion)",
               "evaluations": "GPU evaluations spent\n(visible feedback + own test runs)"}
CPU_EVALUATIONS_LABEL = "evaluations spent (CPU interpreter)\n(visible feedback + own test runs)"


def budget_figure(a: Analysis, axis: str, out_dir: Path, look: Look | None = None) -> FigureResult:
    look = look or make_look(a)
    plt = pyplot_for(look)
    curves = a.curves[axis]
    name = f"budget_{axis}"
    banded = has_interval(a.n_tasks)
    caption = (f"Submitted pass (left) and oracle pass (right) against {axis} spent, mean over tasks"
               + (" with pointwise bands over tasks (hatched, outlined)" if banded else " (points only: no band)")
               + "; each curve ends (tick) at the most any unit of that method spent, and a unit that stopped "
               "earlier keeps its last submission. " + band_note(a.n_tasks))
    unbanded: dict[str, int] = {}
    fig, axes = plt.subplots(1, 2, figsize=look.style.size("double", 0.38), sharey=True)
    scale = 1000.0 if axis == "tokens" else 1.0
    rows = []
    legend: dict[str, Any] = {}
    for ax, kind, label in ((axes[0], "submitted", "submitted pass"), (axes[1], "oracle", "oracle pass")):
        for m, c in curves.items():
            curve = getattr(c, kind)
            # Stop each curve at the most any unit of the method spent: beyond it nothing was spent.
            spent = a.data.units.loc[a.data.units["method"] == m, SPENT_COLUMNS[axis]]
            n = min(len(c.grid), int(np.searchsorted(c.grid, float(spent.max()), side="left")) + 1)
            x = c.grid[:n] / scale
            lk = look.of(m)
            (line,) = ax.step(x, curve.mean[:n], where="post", color=lk.color, ls=lk.line, label=display(m))
            if np.isfinite(curve.lo[:n]).any():  # no band below the small-suite minimum (results.bands)
                legend.setdefault(display(m), band_handle(line, lk))
                band(ax, x, curve.lo[:n], curve.hi[:n], lk, step="post")
            else:
                legend.setdefault(display(m), line)
                unbanded[m] = curve.n_tasks
            ax.plot(x[-1:], curve.mean[n - 1:n], marker="|", ms=9, mew=2, color=lk.color)
            rows += [{"panel": kind, "method": m, axis: float(c.grid[i]), "mean": float(curve.mean[i]),
                      "lo": float(curve.lo[i]), "hi": float(curve.hi[i])} for i in range(n)]
        ax.text(0.02, 0.97, label, transform=ax.transAxes, ha="left", va="top")  # the panel's name, always
        cpu = axis == "evaluations" and a.data.first.interpreter
        ax.set_xlabel(CPU_EVALUATIONS_LABEL if cpu else AXIS_LABELS[axis])
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlim(0, float(next(iter(curves.values())).grid[-1]) / scale)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("share of tasks passing\nhidden tests")
    text = title(fig, drawn_title(a, f"Budget curves against {axis}") + f"\n{_subtitle(a)}", look.style, suptitle=True)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=max(1, len(legend)), handlelength=3)
    return finish(fig, out_dir, name, caption + _no_band(unbanded, a), look, pd.DataFrame(rows), text,
                  not_drawn(a, set(curves)))


# ---------------------------------------------------------------------------- parallel scaling
def spent_per_run(r: MethodRuns) -> float:
    """Mean calls a complete run actually spent (a Reflexion trial that passes stops early)."""
    complete = r.runs[r.runs["complete"]]
    return float((complete["calls_end"] - complete["calls_start"]).mean()) if len(complete) else float("nan")


def calls_limit(a: Analysis, method: str) -> float:
    """The most calls one unit of the method spent (never more than a calls budget): k runs
    drawn past it would claim spend that no unit had."""
    spent = a.data.units.loc[a.data.units["method"] == method, "calls_used"]
    most = float(spent.max()) if len(spent) else 0.0
    return min(most, float(a.data.budget)) if a.data.budget_unit == "calls" else most


def parallel_figure(a: Analysis, out_dir: Path, look: Look | None = None) -> FigureResult:
    look = look or make_look(a)
    name = "parallel_scaling"
    caption = ("pass@k over independent runs against the calls k runs actually spent (k x the mean calls of a "
               "complete run), mean over tasks" + (" with bands over tasks" if has_interval(a.n_tasks) else
                                                   " (points only: no band)")
               + "; hollow markers: the same k charged at the "
               "method's cap per run where it is higher (a Reflexion trial's call cap). No method is drawn past the "
               "most calls one of its units spent. " + band_note(a.n_tasks))
    unbanded: dict[str, int] = {}
    usable = {m: r for m, r in a.runs.items() if r.curve is not None and len(r.curve.k) >= 1}
    if not usable:
        return FigureResult(name, caption, skipped="no method has complete independent runs on every task")
    plt = pyplot_for(look)
    fig, ax = plt.subplots(figsize=look.style.size("single", 0.85))
    rows = []
    left_out = {m: r.note.removeprefix(f"{m}: ") or "pass@k over runs not estimable"
                for m, r in a.runs.items() if m not in usable}
    left_out.update(not_drawn(a, set(a.runs)))
    shown: list[float] = []
    for m, r in usable.items():
        c = r.curve
        assert c is not None
        lk = look.of(m)
        spent, limit = spent_per_run(r), calls_limit(a, m)
        x = c.k * spent
        keep = x <= limit + 1e-9
        cap = c.k * r.calls_per_run
        rows += [{"method": m, "k": int(k), "calls_spent": float(xs), "calls_cap": float(cp), "limit": limit,
                  "mean": float(v), "lo": float(lo), "hi": float(hi), "drawn": bool(kp)}
                 for k, xs, cp, v, lo, hi, kp in zip(c.k, x, cap, c.mean, c.lo, c.hi, keep, strict=True)]
        if not keep.any():
            left_out[m] = "one run spends more calls than any of its units did"
            continue
        shown += [float(v) for v in x[keep]] + [float(v) for v in cap[keep & (cap <= limit + 1e-9)]]
        opts = a.data.method_options.get(m, {})
        temp0 = opts.get("impl_temperature", opts.get("temperature")) == 0
        label = f"{display(m)} ({spent:.3g} call{'s' if spent != 1 else ''}/run" + (
            "; temperature 0: runs not independent)" if temp0 else ")")
        ax.plot(x[keep], c.mean[keep], marker=lk.marker, color=lk.color, ls=lk.line, label=label)
        if not np.isfinite(c.lo[keep]).any():  # no band below the small-suite minimum (results.bands)
            unbanded[m] = c.n_tasks
        elif keep.sum() >= 2:
            band(ax, x[keep], c.lo[keep], c.hi[keep], lk)
        else:  # a band needs two points: show the lone interval as an error bar
            ax.errorbar(x[keep], c.mean[keep], yerr=[c.mean[keep] - c.lo[keep], c.hi[keep] - c.mean[keep]],
                        color=lk.color, capsize=3, lw=1.2)
        charged = keep & (cap > x * 1.01) & (cap <= limit + 1e-9)
        if charged.any():
            ax.plot(cap[charged], c.mean[charged], ls="none", marker=lk.marker, mfc="none", color=lk.color,
                    alpha=0.8, label=f"{display(m)} charged at its cap ({r.calls_per_run:g} calls/run)")
    if a.data.budget_unit == "calls":
        ax.axvline(a.data.budget, color="grey", ls=":", lw=1.0, label=f"budget of one unit ({a.data.budget} calls)")
        shown.append(float(a.data.budget))
    if shown:
        log_axis(ax, "x", min(shown), max(shown))
    ax.set_xlabel("LLM calls spent by k runs (log scale)")
    ax.set_ylabel("pass@k over runs")
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=1)
    missing = [display(m) for m in left_out]
    sub = f"not drawn: {', '.join(missing)}" if missing else f"{a.n_tasks} tasks"
    text = title(ax, drawn_title(a, "Parallel scaling over independent runs") + f"\n({sub})", look.style)
    fig.tight_layout()
    return finish(fig, out_dir, name, caption + _no_band(unbanded, a), look, pd.DataFrame(rows), text, left_out)


# ---------------------------------------------------------------------------- speedups
def _correct_speedups(units: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Units whose speed is known (failures, and correct ones with an unflagged timing, as in
    results/method_stats.py): whether each is correct, and its speedup (NaN when not correct)."""
    usable = units["submitted_pass"] & units["speedup"].notna() & ~units["speedup_flagged"]
    known = units[~units["submitted_pass"] | usable]
    correct = known["submitted_pass"].to_numpy(bool)
    return correct, known["speedup"].where(known["submitted_pass"]).to_numpy(float)


def fast_p_figure(a: Analysis, out_dir: Path, look: Look | None = None) -> FigureResult:
    look = look or make_look(a)
    name = "fast_p"
    caption = ("fast_p: share of ALL tasks whose submission is correct and more than p times as fast as the expert "
               "baseline, against p (failures are never fast; flagged timings left out); "
               + ("95% bootstrap bands over tasks" if has_interval(a.n_tasks) else "points only: no band")
               + "; dotted lines at the tabulated p."
               + ("" if has_interval(a.n_tasks) else f" With {a.n_tasks} tasks, {too_few_words()}."))
    unbanded: dict[str, int] = {}
    if not a.data.has_timings:
        return FigureResult(name, caption, skipped="no timed evaluations (CPU interpreter)")
    plt = pyplot_for(look)
    u = a.data.units
    top = float(np.nanmax(u["speedup"])) if u["speedup"].notna().any() else 2.0
    ps = np.linspace(0, max(2.5, 1.1 * top), 241)
    fig, ax = plt.subplots(figsize=look.style.size("single", 0.7))
    rows = []
    handles, drawn = [], []
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
        lk = look.of(m)
        (line,) = ax.plot(ps, cols.value, color=lk.color, ls=lk.line, label=display(m), drawstyle="steps-post")
        ends = (cols.lo, cols.hi)
        if has_interval(len(per_task)):
            band(ax, ps, cols.lo, cols.hi, lk, step="post")
            handles.append(band_handle(line, lk))
        else:  # no band below the small-suite minimum (results.bands): the means only
            ends = (np.full_like(cols.lo, np.nan), np.full_like(cols.hi, np.nan))
            handles.append(line)
            unbanded[m] = len(per_task)
        drawn.append(m)
        rows += [{"method": m, "p": float(p), "fast_p": float(v), "lo": float(lo), "hi": float(hi)}
                 for p, v, lo, hi in zip(ps, cols.value, *ends, strict=True)]
    for p in REPORTED_FAST_PS:
        ax.axvline(p, color="grey", ls=":", lw=0.8)
    ax.set_xlabel("speedup threshold p (vs expert Triton baseline)")
    ax.set_ylabel("fast_p (share of all tasks)")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlim(0, ps[-1])
    ax.grid(alpha=0.3)
    ax.legend(handles, [display(m) for m in drawn], loc="upper right", handlelength=3)
    text = title(ax, drawn_title(a, "fast_p against the speedup threshold"), look.style)
    fig.tight_layout()
    return finish(fig, out_dir, name, caption + _no_band(unbanded, a), look, pd.DataFrame(rows), text,
                  not_drawn(a, drawn, "no unit whose speed is known"))


def speedup_figure(a: Analysis, out_dir: Path, look: Look | None = None) -> FigureResult:
    look = look or make_look(a)
    name = "speedups"
    caption = ("Speedup of each correct, timed final submission over the expert baseline (one dot per unit, log "
               "scale; box = quartiles when there are at least 5; dashed = geometric mean over these units; flagged "
               "timings left out); the label under each method gives correct submissions out of all units.")
    if not a.data.has_timings:
        return FigureResult(name, caption, skipped="no timed evaluations (CPU interpreter)")
    plt = pyplot_for(look)
    u = a.data.units
    methods = [m for m in a.data.methods if (u["method"] == m).any()]
    fig, ax = plt.subplots(figsize=look.style.size("single", 0.75))
    rng = np.random.default_rng(0)
    labels, rows = [], []
    for i, m in enumerate(methods):
        units = u[u["method"] == m]
        usable = units[units["submitted_pass"] & units["speedup"].notna() & ~units["speedup_flagged"]]
        vals = usable["speedup"].to_numpy(float)
        labels.append(f"{display(m)}\n{len(vals)}/{len(units)} correct")
        lk = look.of(m)
        if len(vals) >= 5:  # quartiles of fewer points say nothing the dots do not
            ax.boxplot([vals], positions=[i], widths=0.5, showfliers=False, medianprops={"color": "black"},
                       boxprops={"color": lk.color}, whiskerprops={"color": lk.color}, capprops={"color": lk.color})
        if len(vals):
            ax.scatter(i + rng.uniform(-0.15, 0.15, len(vals)), vals, s=14, color=lk.color, marker=lk.marker,
                       alpha=0.8, zorder=3)
            gm = float(np.exp(np.mean(np.log(vals))))
            ax.plot([i - 0.3, i + 0.3], [gm, gm], color=lk.color, lw=2.2, ls="--")
        else:
            ax.text(i, 1.0, "no correct\ntimed kernels", ha="center", va="center")
        rows += [{"method": m, "task": t, "repeat": int(r), "speedup": float(v)}
                 for t, r, v in zip(usable["task"], usable["repeat"], vals, strict=True)]
    ax.axhline(1.0, color="grey", lw=1)
    shown = u["speedup"][u["submitted_pass"] & u["speedup"].notna()]
    lo, hi = (float(shown.min()), float(shown.max())) if len(shown) else (1.0, 1.0)
    log_axis(ax, "y", min(lo, 1.0), max(hi, 1.0), suffix="x")  # 1x (the baseline) always in view
    ax.set_xticks(range(len(methods)), labels)
    ax.set_xlim(-0.6, len(methods) - 0.4)
    ax.set_ylabel("speedup vs expert baseline\n(x, log scale)")
    ax.grid(alpha=0.3, axis="y", which="both")
    text = title(ax, drawn_title(a, "Speedups of correct submissions") + "\n(dashed: geometric mean over correct units)",
                 look.style)
    fig.tight_layout()
    return finish(fig, out_dir, name, caption, look, pd.DataFrame(rows), text, not_drawn(a, methods))


# ---------------------------------------------------------------------------- latency noise
_STATE_COLORS = {"locked": "#009E73", "not locked": "#0072B2", "lock not recorded": "#7f7f7f"}
_FLAGGED_COLOR = "#D55E00"


def _state_style(state: str) -> tuple[str, str, bool]:
    """(marker, colour, flagged) of a clock state such as 'not locked, flagged'."""
    base, _, flag = state.partition(", ")
    return ("x" if flag else "o"), (_FLAGGED_COLOR if flag else _STATE_COLORS.get(base, "#7f7f7f")), bool(flag)


def latency_figure(a: Analysis, out_dir: Path, look: Look | None = None) -> FigureResult:
    look = look or make_look(a)
    name = "latency_noise"
    caption = ("Latency noise per task and clock state: IQR/median of the raw candidate samples of every timed case "
               "(one point per case; colour = clock lock state; crosses = timings flagged for moving clocks or "
               "throttling, left out of every average); the title gives the share of timed cases flagged.")
    lat = a.latency
    if not len(lat):
        return FigureResult(name, caption, skipped="no timed evaluations (CPU interpreter)")
    plt = pyplot_for(look)
    tasks = sorted(lat["task"].unique())
    states = sorted(lat["clock_state"].unique())
    fig, ax = plt.subplots(figsize=look.style.size("double", 0.38))
    if len(tasks) > 40:  # one summary per task and state, sorted, unlabelled: hundreds of names cannot be read
        order = lat[~lat["flagged"]].groupby("task")["rel_iqr"].median().sort_values().index.tolist()
        order += [t for t in tasks if t not in order]
        pos = {t: i for i, t in enumerate(order)}
        for state in states:
            g = lat[lat["clock_state"] == state].groupby("task")["rel_iqr"].median()
            marker, col, _ = _state_style(state)
            ax.scatter([pos[t] for t in g.index], 100 * g.to_numpy(float), s=8, marker=marker, color=col,
                       label=f"{state} (median over cases)")
        ax.set_xlabel(f"{len(tasks)} tasks, sorted by the median IQR/median of unflagged cases")
        ax.set_xticks([])
    else:
        rng = np.random.default_rng(0)
        width = 0.6 / max(1, len(states))
        for j, state in enumerate(states):
            marker, col, _ = _state_style(state)
            g = lat[lat["clock_state"] == state]
            x = np.array([tasks.index(t) for t in g["task"]], dtype=float) - 0.3 + (j + 0.5) * width
            ax.scatter(x + rng.uniform(-width / 4, width / 4, len(g)), 100 * g["rel_iqr"].to_numpy(float), s=12,
                       marker=marker, color=col, alpha=0.7, label=state)
        rotate = len(tasks) > 6
        ax.set_xticks(range(len(tasks)), tasks, rotation=60 if rotate else 0, ha="right" if rotate else "center")
        ax.set_xlim(-0.6, len(tasks) - 0.4)
    ax.set_ylabel("IQR / median of latency\nsamples per case (%)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), title="clock state")
    share = flagged_share(lat["flagged"].to_numpy(bool))
    text = title(ax, drawn_title(a, "Latency noise per task and clock state")
                 + f"\n({len(lat)} timed cases, {100 * share:.0f}% flagged)", look.style)
    fig.tight_layout()
    plotted = lat[["task", "source_hash", "case", "clock_state", "flagged", "median_ms", "rel_iqr"]]
    return finish(fig, out_dir, name, caption, look, plotted, text)


# ---------------------------------------------------------------------------- outcomes per task
def outcome_figure(a: Analysis, out_dir: Path, look: Look | None = None) -> FigureResult:
    from results.figure_outcomes import draw_outcomes

    look = look or make_look(a)
    name = "outcomes"
    caption = ("Outcome of each method's final submission on each task: passed the hidden cases (colour: speedup vs "
               "the expert baseline, geometric mean over passing repeats with unflagged timings, when timed), failed "
               "(it ran and was wrong; hatched) or error (it did not run: syntax, compile or runtime error, timeout, "
               "crash, missing entry point; cross-hatched); 'k/n' counts passing repeats.")
    pyplot_for(look)
    fig, plotted, text = draw_outcomes(a.data, look.style, display)
    return finish(fig, out_dir, name, caption, look, plotted, drawn_title(a, text) if look.style.titles else text)


# ---------------------------------------------------------------------------- the registered built-ins
@register_figure("budget_calls")
class BudgetCalls:
    def draw(self, a: Analysis, out_dir: Path, look: Look) -> FigureResult:
        return budget_figure(a, "calls", out_dir, look)


@register_figure("budget_tokens")
class BudgetTokens:
    def draw(self, a: Analysis, out_dir: Path, look: Look) -> FigureResult:
        return budget_figure(a, "tokens", out_dir, look)


@register_figure("budget_evaluations")
class BudgetEvaluations:
    def draw(self, a: Analysis, out_dir: Path, look: Look) -> FigureResult:
        return budget_figure(a, "evaluations", out_dir, look)


@register_figure("parallel_scaling")
class ParallelScaling:
    def draw(self, a: Analysis, out_dir: Path, look: Look) -> FigureResult:
        return parallel_figure(a, out_dir, look)


@register_figure("fast_p")
class FastP:
    def draw(self, a: Analysis, out_dir: Path, look: Look) -> FigureResult:
        return fast_p_figure(a, out_dir, look)


@register_figure("speedups")
class Speedups:
    def draw(self, a: Analysis, out_dir: Path, look: Look) -> FigureResult:
        return speedup_figure(a, out_dir, look)


@register_figure("latency_noise")
class LatencyNoise:
    def draw(self, a: Analysis, out_dir: Path, look: Look) -> FigureResult:
        return latency_figure(a, out_dir, look)


@register_figure("outcomes")
class Outcomes:
    def draw(self, a: Analysis, out_dir: Path, look: Look) -> FigureResult:
        return outcome_figure(a, out_dir, look)


#: The built-in figures, in the order the report shows them (registered figures follow, by name).
FIGURE_NAMES = ("budget_calls", "budget_tokens", "budget_evaluations", "parallel_scaling", "fast_p", "speedups",
                "latency_noise", "outcomes")


def write_figures(a: Analysis, out_dir: Path, style: FigureStyle | None = None,
                  partial: bool = False) -> list[FigureResult]:
    """Draw every registered figure (results/figure_registry.py) into out_dir in the style's formats,
    each with its CSV; skipped ones say why. `partial`: the run is unfinished, and every figure's
    watermark says so."""
    look = make_look(a, style, partial)
    drawn = []
    for name, cls in figure_classes().items():
        f = cls().draw(a, out_dir, look)
        if not isinstance(f, FigureResult) or f.name != name:
            got = f"FigureResult {f.name!r}" if isinstance(f, FigureResult) else f"a {type(f).__name__}"
            raise PluginError(f"figure {name!r} ({cls.__module__}) returned {got}, not a FigureResult named {name!r}")
        drawn.append(f)
    return drawn
