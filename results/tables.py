"""Paper tables (Markdown, LaTeX, CSV) mirroring the GEAK paper's, each with intervals and
budget columns (calls, tokens, GPU evaluations per unit).

Tables: accuracy and speedup per method; by task difficulty; sequential scaling by
budget; parallel scaling by independent runs; fast_p; visible-test false positives;
latency noise per task; paired comparisons. Each is a `Table` holding a numeric frame
(written as CSV: one column per value and interval end, machine-readable) and a text
frame ("0.62 [0.41, 0.80]" cells, written as Markdown and LaTeX). Every file of a
simulated run carries the simulated-model label (invariant 7): a `#` comment line first in
CSV (read it with `pandas.read_csv(path, comment="#")`), a line above Markdown tables, a
`%` comment and the caption in LaTeX.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from results.analysis import Analysis, Headline
from results.bands import band_note, point_only, too_few_words
from results.curves import checkpoints, spend_at, unit_curves
from results.labels import SIMULATED_BANNER, TOO_FEW, interval_text, range_text
from results.latency import summarise
from results.method_stats import MethodStats, method_stats, timed_baselines
from results.phases import PHASE_COLUMNS, phase_seconds, phase_seconds_by_kind
from results.protocols import PROTOCOL_SUMMARY_COLS, protocol_summary
from results.readers import UNIT_KEY, RunData, task_difficulty
from results.verdicts import display
from stats import (
    RATE_BAND,
    Estimate,
    mean_band,
    visible_false_positive_rate,
)


@dataclass
class Table:
    name: str
    title: str
    numeric: pd.DataFrame
    text: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    simulated: bool = False
    in_report: bool = True  # False: written as files only (long per-case tables), the report names them


# ---------------------------------------------------------------------------- cells
def fmt(x: float, digits: int = 2) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def ci_text(e: Estimate | None, digits: int = 2, suffix: str = "", rate: bool = False) -> str:
    """"0.62 [0.41, 0.80]", or a zero-width interval said plainly (results.labels.interval_text)."""
    if e is None:
        return "n/a"
    return interval_text(e.value, e.lo, e.hi, e.n, digits, suffix, rate, reason=e.method)


def _put(num: dict, txt: dict, label: str, key: str, e: Estimate | None, digits: int = 2, suffix: str = "",
         rate: bool = False) -> None:
    nan = float("nan")
    num[key] = e.value if e else nan
    num[f"{key}_lo"] = e.lo if e else nan
    num[f"{key}_hi"] = e.hi if e else nan
    txt[label] = ci_text(e, digits, suffix, rate)


def _band(scores: np.ndarray, a: Analysis) -> Estimate:
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


def _table(name: str, title: str, rows: list[tuple[dict, dict]], a: Headline, notes: list[str] | None = None) -> Table:
    notes = list(notes or [])
    why = too_few_words()
    if _withheld(rows) and not any(why in n for n in notes):  # design invariant 12: the reason, where the cell is
        notes.append(f"A figure given as its value with a count of tasks, e.g. 0.67 (2/3 tasks), has no interval: "
                     f"{why}.")
    return Table(name, title, pd.DataFrame([r[0] for r in rows]), pd.DataFrame([r[1] for r in rows]),
                 notes, a.data.simulated)


def _budget_cols(num: dict, txt: dict, m: MethodStats) -> None:
    per_unit = m.per_unit
    for key, label, digits in (("calls", "calls/unit", 1), ("tokens", "tokens/unit", 0),
                               ("gpu_evals", "GPU evals/unit", 1)):
        num[key] = per_unit[key]
        txt[label] = fmt(num[key], digits)


def _pass_cells(num: dict, txt: dict, m: MethodStats) -> None:
    _put(num, txt, "submitted pass", "submitted_pass", m.submitted, rate=True)
    for kind, e in m.pooled.items():
        _put(num, txt, f"submitted pass {kind} (tasks as trials)", f"submitted_pass_{kind}", e, rate=True)
    _put(num, txt, "oracle pass", "oracle_pass", m.oracle, rate=True)


def _speedup_cells(num: dict, txt: dict, m: MethodStats, timed: bool) -> None:
    """The correct-only geometric mean against the expert kernel, with the tasks it rests on."""
    s = m.speedups.get("expert")
    if not timed or s is None:
        return
    _put(num, txt, "speedup (correct only)", "speedup_correct", s.geomean if s.n_tasks else None, suffix="x")
    num["speedup_tasks"] = s.n_tasks
    if not s.geomean.method.startswith(TOO_FEW):  # a withheld interval's cell already names its tasks
        txt["speedup (correct only)"] += f", {s.n_tasks} task" + ("s" if s.n_tasks != 1 else "")


def _method_units(a: Headline) -> list[tuple[str, pd.DataFrame]]:
    u = a.data.units
    return [(m, u[u["method"] == m]) for m in a.data.methods if (u["method"] == m).any()]


# ---------------------------------------------------------------------------- tables
def accuracy_table(a: Analysis) -> Table:
    rows = []
    for name, m in a.methods.items():
        num: dict = {"method": name, "tasks": m.n_tasks, "units": m.n_units}
        txt: dict = {"method": display(name), "tasks": str(m.n_tasks), "units": str(m.n_units)}
        _pass_cells(num, txt, m)
        num["visible_fp_rate"] = m.visible_fp_rate
        txt["visible FP rate"] = fmt(m.visible_fp_rate)
        _speedup_cells(num, txt, m, a.data.has_timings)
        _budget_cols(num, txt, m)
        rows.append((num, txt))
    return _table("accuracy", f"Accuracy and speedup per method at {a.data.budget} {_unit(a.data)}", rows, a,
                  ["Submitted and oracle pass: mean over tasks of the per-task pass rate over repeats (tasks like "
                   "these). " + band_note(a.n_tasks, "Their intervals") + " Speedup: geometric mean over correct submissions only, "
                   "against the expert Triton kernel, with the number of tasks it rests on; see the speedup table "
                   "for fast_p, which counts failures."])


def _unit(data: RunData) -> str:
    return "calls" if data.budget_unit == "calls" else "tokens"


def difficulty_table(a: Analysis) -> Table:
    diff = task_difficulty(a.data, sorted(a.data.units["task"].unique()))
    rows = []
    for name, units in _method_units(a):
        levels = units["task"].map(lambda t: diff.get(t))
        known = sorted({int(v) for v in levels if not pd.isna(v)})
        for level in known + ([None] if levels.isna().any() else []):
            sub = units[levels.isna()] if level is None else units[levels == level]
            m = method_stats(sub, a.n_resamples, a.seed, timed_baselines(a.data.units))
            num: dict = {"method": name, "difficulty": level, "tasks": m.n_tasks}
            txt: dict = {"method": display(name), "difficulty": "unknown" if level is None else str(level),
                         "tasks": str(m.n_tasks)}
            _pass_cells(num, txt, m)
            _speedup_cells(num, txt, m, a.data.has_timings)
            _budget_cols(num, txt, m)
            rows.append((num, txt))
    return _table("difficulty", "Accuracy and speedup by task difficulty (bench registry levels)", rows, a,
                  ["Few tasks per level give wide intervals; levels are the bench registry's (1 easiest)."])


def sequential_table(a: Analysis) -> Table:
    data = a.data
    grid = a.curves["calls"][next(iter(a.curves["calls"]))].grid
    budgets = checkpoints(int(grid[-1]))
    curves = unit_curves(data, "calls", grid)
    spend = spend_at(data, budgets)
    rows = []
    for m, _ in _method_units(a):
        cm = curves[curves["method"] == m]
        for b in budgets:
            num: dict = {"method": m, "budget_calls": b}
            txt: dict = {"method": display(m), "calls": str(b)}
            for kind, label in (("submitted", "submitted pass"), ("oracle", "oracle pass")):
                vals = pd.Series([c[b] for c in cm[kind]], index=cm["task"].to_numpy()).groupby(level=0).mean()
                _put(num, txt, label, kind, _band(vals.to_numpy(float), a), rate=True)
            sp = spend[(spend["method"] == m) & (spend["budget"] == b)]
            num["tokens"], num["gpu_evals"] = float(sp["tokens"].mean()), float(sp["gpu_evals"].mean())
            txt["tokens/unit"], txt["GPU evals/unit"] = fmt(num["tokens"], 0), fmt(num["gpu_evals"], 1)
            rows.append((num, txt))
    return _table("sequential", "Sequential scaling: success after b calls of one run (anytime submissions)", rows, a,
                  ["GEAK spends 2 calls per iteration, so b calls = b/2 iterations; tokens and GPU evaluations are "
                   "those spent by the b-th call (mean per unit).", band_note(a.n_tasks, "Intervals")])


def _ks(k_max: int) -> list[int]:
    return checkpoints(k_max)


def parallel_table(a: Analysis) -> Table:
    rows = []
    for m, r in a.runs.items():
        if r.curve is None:
            num: dict[str, Any] = {"method": m, "k": np.nan, "runs_derived_as": r.derivation}
            txt = {"method": display(m), "k": "-", "pass@k over runs": "not estimable", "runs": r.derivation,
                   "calls": "-", "tokens": "-", "GPU evals": "-"}
            rows.append((num, txt))
            continue
        c = r.curve
        complete = r.runs[r.runs["complete"]]
        min_runs = int(complete.groupby("task").size().min())
        for k in _ks(int(c.k[-1])):
            j = k - 1
            est = point_only(Estimate(float(c.mean[j]), float(c.lo[j]), float(c.hi[j]), c.method, c.n_tasks),
                             c.per_task[:, j])
            num = {"method": m, "k": k, "runs_derived_as": r.derivation, "min_runs_per_task": min_runs,
                   "calls": float(c.cost[j]), "tokens": k * r.tokens_per_run, "gpu_evals": k * r.evals_per_run}
            txt = {"method": display(m), "k": str(k)}
            _put(num, txt, "pass@k over runs", "pass_at_k", est, rate=True)
            txt.update({"runs": f"{r.derivation}; >= {min_runs} per task", "calls": fmt(num["calls"], 0),
                        "tokens": fmt(num["tokens"], 0), "GPU evals": fmt(num["gpu_evals"], 1)})
            rows.append((num, txt))
    return _table("parallel", "Parallel scaling: pass@k over independent runs at k x the cost of one run", rows, a,
                  ["A run succeeds when its own answer passes the hidden cases (the GEAK paper's best-of-N over "
                   "runs' final answers); unbiased estimator over the complete runs of each task, pooled over "
                   "repeats; tokens and GPU evaluations are k x the mean per run.", band_note(a.n_tasks, "Intervals")])


def speedup_table(a: Analysis) -> Table | None:
    """Per method and baseline: correct rate, geometric mean over correct submissions (with its
    n), fast_p at p = 0, 1, 1.5, 2 with intervals over tasks."""
    if not a.data.has_timings:
        return None
    rows = []
    sensitivity = []
    for name, m in a.methods.items():
        for against, s in m.speedups.items():
            num: dict[str, Any] = {"method": name, "against": against}
            txt: dict[str, str] = {"method": display(name), "against": s.label}
            _put(num, txt, "correct rate", "correct_rate", m.submitted, rate=True)
            _put(num, txt, "geomean over correct", "geomean", s.geomean if s.n_tasks else None, suffix="x")
            num.update({"geomean_tasks": s.n_tasks, "geomean_units": s.n_units})
            txt["geomean rests on"] = f"{s.n_tasks} tasks, {s.n_units} units"
            for p, e in s.fast_p.items():
                _put(num, txt, f"fast_{p:g}", f"fast_{p:g}", e)
            num.update({"fast_p_tasks": s.fast_p_tasks, "excluded_units": s.excluded_units,
                        "flagged_units": s.flagged_units})
            txt["left out (flagged or untimed)"] = str(s.excluded_units)
            _budget_cols(num, txt, m)
            rows.append((num, txt))
            if s.with_flagged is not None:
                sensitivity.append(f"{display(name)} vs {s.label}, including {s.flagged_units} flagged timing(s): "
                                   f"geomean {fmt(s.with_flagged[0])}x, fast_1 {fmt(s.with_flagged[1])}.")
    notes = ["fast_p: share of tasks (per task: of its repeats) whose submission is correct and more than p x as "
             "fast as the baseline; a failure is never fast; fast_0 is the correct share among units whose speed "
             "is known. Against PyTorch eager this is KernelBench's fast_p. Correct submissions whose timing was "
             "flagged (moving clocks, throttling) or missing are left out of both figures."]
    notes += sensitivity or ["No timing was flagged."]
    return _table("speedups", "Speedups without a reward for failing: geometric mean over correct submissions and "
                  "fast_p, against the expert Triton kernel and PyTorch eager", rows, a, notes)


def variance_table(a: Analysis) -> Table | None:
    """Between-task and between-repeat variance of submitted pass, the ICC, the fixed-suite
    interval beside the population one, and what more repeats or more tasks would buy."""
    rows = []
    for name, m in a.methods.items():
        if m.variance is None:
            continue
        v = m.variance
        num: dict[str, Any] = {"method": name, "tasks": m.n_tasks, "repeats_mean": v.mean_repeats,
                               "between_task_var": v.between, "within_task_var": v.within, "icc": v.icc}
        txt: dict[str, str] = {"method": display(name), "tasks": str(m.n_tasks), "repeats/task": fmt(v.mean_repeats, 1),
                               "between tasks (var)": fmt(v.between, 3), "between repeats (var)": fmt(v.within, 3),
                               "ICC": fmt(v.icc)}
        _put(num, txt, "tasks like these (bootstrap)", "population", m.submitted, rate=True)
        _put(num, txt, "these tasks only (fixed suite)", "fixed_suite", m.submitted_fixed, rate=True)
        share = v.within_share_of_mean_variance()
        now = v.mean_variance(m.n_tasks, v.mean_repeats)
        num["within_share"] = share
        num["se_change_double_repeats"] = _se_change(now, v.mean_variance(m.n_tasks, 2 * v.mean_repeats))
        num["se_change_double_tasks"] = _se_change(now, v.mean_variance(2 * m.n_tasks, v.mean_repeats))
        txt["repeat noise share"] = _pct(share)
        txt["SE with 2x repeats"] = _pct(num["se_change_double_repeats"], signed=True)
        txt["SE with 2x tasks"] = _pct(num["se_change_double_tasks"], signed=True)
        _budget_cols(num, txt, m)
        rows.append((num, txt))
    if not rows:
        return None
    return _table("variance", "Where the uncertainty of submitted pass comes from: tasks or repeats", rows, a,
                  ["Variance components of one unit's pass/fail outcome (one-way random-effects ANOVA): between "
                   "tasks (how much tasks differ) and between repeats of a task (luck); ICC = between / (between + "
                   "within). The suite mean's variance is between/T + within/(T R): repeats shrink only the second "
                   "part, so with a high ICC buy tasks, with a low one repeats help. 'tasks like these' is the "
                   "report's estimand (task bootstrap); 'these tasks only' covers within-task sampling alone and is "
                   "narrower: it says how sure we are about this suite, not about tasks in general."])


def _se_change(now: float, then: float) -> float:
    return float("nan") if now <= 0 else float(np.sqrt(then / now) - 1)


def _own_test_outcomes(data: RunData, method: str) -> tuple[np.ndarray, np.ndarray]:
    """Candidates a method ran its own tests on (once per unit and source): whether the tests
    passed, and whether the hidden cases did."""
    runs = data.test_runs[data.test_runs["method"] == method].drop_duplicates(UNIT_KEY + ["source_hash"], keep="last")
    hidden = data.candidates[["task", "source_hash", "hidden_pass"]].drop_duplicates(["task", "source_hash"])
    runs = runs.merge(hidden, on=["task", "source_hash"], how="left")  # every tested source is a candidate
    return (runs["verdict"] == "correct").to_numpy(bool), runs["hidden_pass"].eq(True).to_numpy(bool)


def false_positive_table(a: Analysis) -> Table:
    rows = []
    cands = a.data.candidates
    for m, units in _method_units(a):
        vis = units["submitted_visible_pass"]
        known = vis.notna()
        sv = vis[known].astype(bool).to_numpy()
        sh = units.loc[known, "submitted_pass"].to_numpy(bool)
        c = cands[(cands["method"] == m) & cands["visible_verdict"].notna()]
        cv = (c["visible_verdict"] == "correct").to_numpy()
        ch = c["hidden_pass"].to_numpy(bool)
        num: dict[str, Any] = {"method": m, "submissions_visible_pass": int(sv.sum()), "submissions_hidden_fail": int((sv & ~sh).sum()),
               "submission_fp_rate": visible_false_positive_rate(sv, sh) if len(sv) else float("nan"),
               "candidates_visible_pass": int(cv.sum()), "candidates_hidden_fail": int((cv & ~ch).sum()),
               "candidate_fp_rate": visible_false_positive_rate(cv, ch) if len(cv) else float("nan")}
        ov, oh = _own_test_outcomes(a.data, m)
        num.update({"candidates_own_tests_pass": int(ov.sum()), "candidates_own_tests_hidden_fail": int((ov & ~oh).sum()),
                    "own_tests_fp_rate": visible_false_positive_rate(ov, oh) if len(ov) else float("nan")})
        txt = {"method": display(m), "submissions passing visible": str(num["submissions_visible_pass"]),
               "submissions failing hidden": str(num["submissions_hidden_fail"]),
               "submission FP rate": fmt(num["submission_fp_rate"]),
               "candidates passing visible": str(num["candidates_visible_pass"]),
               "candidates failing hidden": str(num["candidates_hidden_fail"]),
               "candidate FP rate": fmt(num["candidate_fp_rate"]),
               "candidates passing own tests": str(num["candidates_own_tests_pass"]),
               "own-test passes failing hidden": str(num["candidates_own_tests_hidden_fail"]),
               "own-test FP rate": fmt(num["own_tests_fp_rate"])}
        _budget_cols(num, txt, a.methods[m])
        rows.append((num, txt))
    return _table("false_positives", "False positives of the feedback a method saw: passes it, fails hidden", rows, a,
                  ["Rate = P(hidden fail | pass); final submissions (one per unit) and every candidate that got "
                   "visible feedback; own tests: every candidate a method ran its own tests on (Reflexion's internal "
                   "feedback); n/a when nothing passed."])


def latency_table(a: Analysis) -> Table | None:
    """Spread of the timings per task and clock state (lock, flagged), flagged ones apart."""
    lat = a.latency
    if not len(lat):
        return None
    rows = []
    for (task, state), g in lat.groupby(["task", "clock_state"], sort=True):
        summ = summarise(g, include_flagged=True)  # a flagged group is its own row: nothing mixed in
        num = {"task": task, "clock_state": state, "cases": len(g), "samples_median": float(g["n"].median()),
               "median_ci_width": summ["median_ci_width"], "rel_iqr_median": summ["rel_iqr"],
               "rel_mad_median": summ["rel_mad"], "cv_median": summ["cv"],
               "baseline_rel_iqr_median": float(g["baseline_rel_iqr"].median()),
               "sm_mhz": ", ".join(sorted(set(g["sm_mhz"]))), "mem_mhz": ", ".join(sorted(set(g["mem_mhz"]))),
               "throttle": ", ".join(sorted({t for x in g["throttle"] if x for t in x.split(", ")}))}
        txt = {"task": task, "clock state": state, "cases timed": str(len(g)),
               "samples/case": fmt(num["samples_median"], 0), "median's 95% CI (rel. width)": _pct(num["median_ci_width"]),
               "IQR/median": _pct(num["rel_iqr_median"]), "MAD/median": _pct(num["rel_mad_median"]),
               "CV (beside)": _pct(num["cv_median"]), "baseline IQR/median": _pct(num["baseline_rel_iqr_median"]),
               "SM MHz": num["sm_mhz"], "memory MHz": num["mem_mhz"], "throttle": num["throttle"] or "-"}
        rows.append((num, txt))
    clean, everything = summarise(lat), summarise(lat, include_flagged=True)
    flagged = int(lat["flagged"].sum())
    notes = ["Per task and clock state (locked by --lock-clocks or not, and whether the timing was flagged for "
             "moving clocks or throttling): medians over timed cases of the median's bootstrap interval width, "
             "IQR/median and MAD/median of a case's raw samples (robust spreads); the CV is beside them only, "
             "since one outlier can inflate it. SM/memory MHz: the readings before->after a case's samples. Every "
             "case, with its median and interval, is in latency_cases.csv."]
    if flagged:
        notes.append(f"Over all tasks, flagged timings left out ({int(clean['cases'])} cases): IQR/median "
                     f"{_pct(clean['rel_iqr'])}, MAD/median {_pct(clean['rel_mad'])}; with the {flagged} flagged case(s) "
                     f"included: {_pct(everything['rel_iqr'])}, {_pct(everything['rel_mad'])}.")
    else:
        notes.append(f"No timing was flagged; over all {int(clean['cases'])} cases IQR/median {_pct(clean['rel_iqr'])}, "
                     f"MAD/median {_pct(clean['rel_mad'])}.")
    return _table("latency", "Latency noise per task and clock state (candidate samples per timed case)", rows, a,
                  notes)


def latency_cases_table(a: Analysis) -> Table | None:
    """Every timed (evaluation, case): median with its interval, spreads, clock state, and the
    evaluation's speedup with its interval (written as files; long)."""
    lat = a.latency
    if not len(lat):
        return None
    rows = []
    for r in lat.itertuples(index=False):
        num = r._asdict()
        txt = {"task": r.task, "case": r.case, "case set": r.case_set, "source": r.source_hash[:10],
               "clock state": r.clock_state, "SM MHz": r.sm_mhz, "memory MHz": r.mem_mhz, "samples": str(r.n),
               "median ms [95% CI]": f"{r.median_ms:.4g} [{r.median_lo:.4g}, {r.median_hi:.4g}]",
               "IQR/median": _pct(r.rel_iqr), "MAD/median": _pct(r.rel_mad), "CV": _pct(r.cv),
               "speedup [95% CI]": (f"{r.speedup:.3f}x [{r.speedup_lo:.3f}, {r.speedup_hi:.3f}]"
                                    if np.isfinite(r.speedup) else "n/a"),
               "flags": r.flag_reasons or "-"}
        rows.append((num, txt))
    t = _table("latency_cases", "Every timed case: median latency with its bootstrap interval, spread, clock state, "
               "and the timing's speedup with its interval", rows, a,
               ["Speedup: the evaluation's geometric mean over its perf cases of median ratios, with the interval "
                "from resampling interleaved rounds (judge/timing.py)."])
    t.in_report = False
    return t


def _pct(x: float, signed: bool = False) -> str:
    return "n/a" if not np.isfinite(x) else (f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%")


def comparisons_table(a: Headline) -> Table:
    rows = []
    nan = float("nan")
    for c in a.comparisons:
        is_pass = c.metric == "submitted pass"
        scale = 100.0 if is_pass else 1.0
        suffix = " pts" if is_pass else "x"
        flip, mc, wil = c.beside_test("sign-flip"), c.beside_test("mcnemar"), c.beside_test("wilcoxon")
        w = c.without_errors
        num = {"a": c.a, "b": c.b, "metric": c.metric, "tasks": c.n_tasks, "tested": c.tested,
               "min_tasks": c.min_tasks, "decided_by": c.decided_by, "value": c.value * scale,
               "t_lo": c.t_interval.lo * scale, "t_hi": c.t_interval.hi * scale,
               "boot_lo": c.boot_interval.lo * scale, "boot_hi": c.boot_interval.hi * scale,
               "test": c.test.method, "statistic": c.test.statistic, "tasks_a_better": c.test.n10,
               "tasks_b_better": c.test.n01, "p": c.test.pvalue, "p_adjusted": c.p_adjusted,
               "adjust_method": c.adjust_method, "p_sign_flip": flip.pvalue if flip else nan,
               "p_wilcoxon": wil.pvalue if wil else nan,
               "discordant_a": mc.n10 if mc else np.nan, "discordant_b": mc.n01 if mc else np.nan,
               "p_mcnemar_one_repeat": mc.pvalue if mc and c.one_repeat else nan,
               "mde": c.mde.value * scale if is_pass else c.mde.value,
               "errored_a": c.errored[0], "errored_b": c.errored[1],
               "without_errors_tasks": w.n_tasks if w else np.nan,
               "without_errors_value": w.value * scale if w else nan,
               "without_errors_p": w.p if w else nan}
        d = 1 if is_pass else 2
        estimate = f"{num['value']:+.{d}f}{suffix}" if is_pass else f"{num['value']:.{d}f}{suffix}"
        mde = c.mde.value
        if not c.tested:
            txt = {"comparison": f"{display(c.a)} vs {display(c.b)}", "metric": c.metric, "tasks": str(c.n_tasks),
                   "estimate (a - b; a/b for speedup)": "-", "95% t CI": "-",
                   "tasks better a/b": f"{c.test.n10}/{c.test.n01}", "decided by": "-", "paired t p": "-",
                   f"p ({c.adjust_method})": "-", "sign-flip p": "-", "beside": "-",
                   "verdict": f"too few tasks to test (< {c.min_tasks})", "detectable from": "-",
                   "errored a/b": f"{c.errored[0]}/{c.errored[1]}"}
            rows.append((num, txt))
            continue
        txt = {"comparison": f"{display(c.a)} vs {display(c.b)}", "metric": c.metric, "tasks": str(c.n_tasks),
               "estimate (a - b; a/b for speedup)": estimate,
               "95% t CI": range_text(c.t_interval.lo, c.t_interval.hi, d, scale, what="every task "),
               "tasks better a/b": f"{c.test.n10}/{c.test.n01}", "decided by": "paired t",
               "paired t p": _pv(c.test.pvalue), f"p ({c.adjust_method})": _pv(c.p_adjusted),
               "sign-flip p": _pv(flip.pvalue) if flip else "-",
               "beside": (f"McNemar discordant {mc.n10}/{mc.n01}" + (f", p {_pv(mc.pvalue)}" if c.one_repeat else
                                                                    " (descriptive: repeats)") if mc else
                          f"Wilcoxon p {_pv(wil.pvalue)} (n {wil.n})" if wil else "-"),
               "verdict": "detectable" if c.significant else "no detectable difference",
               "detectable from": ("n/a" if not np.isfinite(mde) else
                                   f"{100 * mde:.0f} pts" if is_pass else f"{mde:.2f}x"),
               "errored a/b": f"{c.errored[0]}/{c.errored[1]}"}
        rows.append((num, txt))
    minimum = next((c.min_tasks for c in a.comparisons), 0)
    return _table("comparisons", f"Paired comparisons at {a.data.budget} {_unit(a.data)} (every method pair)", rows, a,
                  ["Tasks are the unit: pass differences in percentage points are means of per-task differences "
                   "(each method's per-task pass averaged over repeats). The verdict is decided by the paired t-test "
                   "on those differences, and the t interval on the same differences is the one printed beside it "
                   "(they agree before adjustment); p-values adjusted together (Holm). The paired BCa bootstrap is "
                   "in the CSV only (boot_lo, boot_hi), as a description: it rejects a true null more often than "
                   "5% (the coverage simulation). The sign-flip permutation test on the same differences is shown "
                   f"for small suites. A comparison over fewer than {minimum} tasks gets no test and no interval: no "
                   "exact test over so few tasks could reach the report's alpha over its family of verdicts "
                   "(counts only). McNemar over (task, repeat) pairs treats repeats as independent: its counts are "
                   "descriptive, its p-value shown only with one repeat. Speedups as geometric-mean ratios on tasks "
                   "where both are correct (unflagged timings). 'detectable from': the smallest difference the test "
                   "detects with power 0.8 at alpha 0.05 (before adjustment). 'errored a/b': units that ended on an "
                   "error; the CSV has the comparison with them left out."])


def _pv(p: float) -> str:
    return "n/a" if not math.isfinite(p) else (f"{p:.3f}" if p >= 0.001 else f"{p:.1e}")


SUITE_PROFILE_SUFFIX = "@geak-eval"
RAN_VERDICTS = ("correct", "wrong_result", "no_kernel")


def suite_check_units(data: RunData) -> pd.DataFrame:
    """Units whose final submission was also judged by the suite's own check (the `geak-eval`
    profile of an adapted task), with `suite_call` (it imported and its entry point ran) and
    `suite_exec` (correct on the suite's own calls at GEAK-eval's tolerance)."""
    ev = data.evaluations
    prof = ev[(ev["case_set"] == "hidden") & ev["task"].astype(str).str.endswith(SUITE_PROFILE_SUFFIX)]
    if prof.empty or data.submissions.empty:
        return pd.DataFrame()
    verdict = {(h, t[: -len(SUITE_PROFILE_SUFFIX)]): v for h, t, v in zip(prof["source_hash"], prof["task"],
                                                                         prof["verdict"], strict=True)}
    last = data.submissions.sort_values("submission_index").groupby(UNIT_KEY).tail(1)
    final = {tuple(k): h for k, h in zip(last[UNIT_KEY].itertuples(index=False), last["source_hash"], strict=True)}
    units = data.units.copy()
    units["suite_verdict"] = [verdict.get((final.get((m, t, r)), t)) for m, t, r in
                              zip(units["method"], units["task"], units["repeat"], strict=True)]
    units = units[units["suite_verdict"].notna()].copy()
    units["suite_call"] = units["suite_verdict"].isin(RAN_VERDICTS)
    units["suite_exec"] = units["suite_verdict"] == "correct"
    return units


def suite_check_table(a: Analysis) -> Table | None:
    """GEAK-eval's call and execution accuracy beside the strict hidden pass, per method, on
    the adapted tasks, so a reader sees how much the stricter oracle changes a claim."""
    units = suite_check_units(a.data)
    if units.empty:
        return None
    rows = []
    for m in a.data.methods:
        mu = units[units["method"] == m]
        if mu.empty:
            continue
        num: dict = {"method": m, "tasks": mu["task"].nunique(), "units": len(mu)}
        txt: dict = {"method": display(m), "tasks": str(num["tasks"]), "units": str(num["units"])}
        for col, label in (("suite_call", "call accuracy"), ("suite_exec", "GEAK-eval exec accuracy"),
                           ("submitted_pass", "strict pass")):
            per_task = mu.groupby("task")[col].mean().to_numpy(float)  # tasks are the unit, as everywhere
            _put(num, txt, label, col, _band(per_task, a), rate=True)
        rows.append((num, txt))
    notes = ["Of the final submission on adapted GEAK-eval tasks. Call accuracy: the code imports and its entry "
             "point runs on the suite's own calls. GEAK-eval exec accuracy: correct on the suite's own calls at "
             "atol 1e-2 / rtol 1e-1 (GEAK-eval's tolerance), with the toolkit's other checks (poisoned outputs, "
             "unchanged inputs, a Triton kernel must run). Strict pass: the hidden cases (value permutations, new "
             "shapes, per-dtype tolerances)."]
    return _table("suite_check", "GEAK-eval's metrics beside the strict pass", rows, a, notes)


def new_shapes_table(a: Analysis) -> Table | None:
    """How many of each adapted task's hidden cases are shapes the suite never records: the
    slots declared, and those kept (the reference runs on a perturbation for them), read from
    a correct hidden verdict's skipped cases."""
    declared: dict[str, int] = {}
    for info in a.data.infos:
        declared.update(info.new_shape_slots)
    if not declared:
        return None
    ev = a.data.evaluations
    ok = ev[(ev["case_set"] == "hidden") & (ev["verdict"] == "correct") & ev["task"].isin(list(declared))]
    rows = []
    for task in sorted(declared):
        judged = ok[ok["task"] == task]
        num: dict = {"task": task, "declared": declared[task]}
        if judged.empty:
            num["kept"] = float("nan")
        else:
            unused = sum(1 for r in judged["skip_reasons"].iloc[0] if str(r).startswith("hidden-shape"))
            num["kept"] = declared[task] - unused
        txt = {"task": task, "new-shape cases declared": str(declared[task]),
               "kept (the reference runs there)": "n/a (no correct verdict)" if judged.empty else str(num["kept"])}
        rows.append((num, txt))
    notes = ["Each recorded size grown just above itself and to a large odd size (at least 3001), one size at a "
             "time; a slot is kept where the suite's reference runs on such a shape. Known once some candidate "
             "(or the reference) has passed the task's hidden cases."]
    return _table("new_shapes", "Hidden cases that are new shapes, per adapted task", rows, a, notes)


PHASE_LABELS = {c: c.removesuffix("_s") + " s" for c in PHASE_COLUMNS}
"""Column titles of the phase tables (results/phases.py PHASE_COLUMNS)."""


def phase_table(a: Analysis) -> Table | None:
    """Seconds of evaluation per method and phase (queue wait, compile, correctness, timing),
    with the run's total: where a slow run spends its time (results/phases.py)."""
    per_method = phase_seconds(a.data.evaluations, a.data.candidates)
    if per_method.empty:
        return None
    labels = {**PHASE_LABELS, "total_s": "total s"}
    rows = []
    total = per_method.drop(columns="method").sum()
    for method, r in [*((m, r) for m, r in zip(per_method["method"], per_method.to_dict("records"), strict=True)),
                      ("all", total.to_dict())]:
        num: dict = {"method": method, **{k: float(r[k]) for k in ("evaluations", *labels)}}
        txt: dict = {"method": display(method) if method != "all" else "all methods",
                     "evaluations": fmt(num["evaluations"], 1),
                     **{label: fmt(num[k], 1) for k, label in labels.items()}}
        rows.append((num, txt))
    notes = ["Seconds summed over the evaluations a method's candidates needed (visible feedback, its own tests, "
             "hidden judging, final timing), by phase: waiting for an idle worker (queue), importing the candidate "
             "(compile), the oracle or the method's tests (correctness), the perf-case check and the timing protocol "
             "(timing, GPU only), waiting at the GPU's fair gate (gate: judging behind a timer, or a timer behind the "
             "judging jobs already on the GPU) and attempts lost to a GPU out-of-memory error beside other workers, "
             "judged again alone (retry). An evaluation shared by methods that proposed the same code is split between them. "
             "Replayed evaluations (compare --replay) took no time and are not counted. Workers run in parallel, so "
             "the total exceeds the run's wall time."]
    return _table("phases", "Evaluation time by phase and method", rows, a, notes)


def job_kind_table(a: Analysis) -> Table | None:
    """Judge jobs by kind, with the mean seconds of each phase per job: what a run of another
    budget or suite will cost, from its job counts (results/phases.py `phase_seconds_by_kind`)."""
    per_kind = phase_seconds_by_kind(a.data.evaluations)
    if per_kind.empty:
        return None
    labels = PHASE_LABELS
    rows = []
    for r in per_kind.to_dict("records"):
        num: dict = {"kind": r["kind"], "jobs": int(r["jobs"]), **{k: float(r[k]) for k in labels},
                     "total_s": float(r["total_s"])}
        txt: dict = {"kind": r["kind"], "jobs": str(num["jobs"]), **{label: fmt(num[k], 2) for k, label in labels.items()},
                     "all jobs s": fmt(num["total_s"], 1)}
        rows.append((num, txt))
    notes = ["Jobs the workers ran, by kind: visible feedback (timed on a GPU when correct), hidden judging, a "
             "method's own tests (internal), final submissions' timing (hidden timed); phase columns are means per "
             "job, the last column the seconds of all jobs of the kind. Replayed evaluations are not counted."]
    return _table("job_kinds", "Evaluation time per job, by kind", rows, a, notes)


def protocol_table(a: Analysis) -> Table | None:
    """Which timing protocol produced the run's timings, per method: the short feedback protocol
    and the full final one, with samples, early stops, reused references, drift events and
    timing seconds per timing (results/protocols.py). None when nothing was timed."""
    per = protocol_summary(a.data.evaluations, a.data.candidates)
    if per.empty:
        return None
    rows = []
    for r in per.to_dict("records"):
        num = {k: (r[k] if k in ("method", "protocol") else float(r[k])) for k in PROTOCOL_SUMMARY_COLS}
        txt = {"method": display(str(r["method"])), "protocol": str(r["protocol"]), "timings": fmt(r["timings"], 1),
               "samples per timing": fmt(r["samples_per_timing"], 1), "cases stopped early": fmt(r["early_stopped"], 1),
               "cases on reused baselines": fmt(r["baselines_reused"], 1), "drift events": fmt(r["drift_events"], 1),
               "timing s per timing": fmt(r["timing_s_per_timing"], 2)}
        rows.append((num, txt))
    notes = ["final-full: the full interleaved protocol (warm-up, L2 flush, candidate, expert baseline and eager "
             "PyTorch round by round until every median is precise): final submissions. feedback-short: visible "
             "feedback, a few candidate samples against expert-baseline and eager timings the judge worker "
             "measured once per (task, case, device, clock state) and re-uses, re-checked for drift; sampling "
             "stops once the speedup's interval lies above 1.0x, below it, or within the equivalence margin "
             "around it (timing_policy feedback_equivalence, 5% by default; Bonferroni over looks). "
             "Samples are the candidate's, over all perf cases. Speedups of final submissions, and every figure "
             "of timing noise, come from final-full timings only."]
    return _table("timing_protocols", "Timings by protocol and method", rows, a, notes)


def build_tables(a: Analysis) -> list[Table]:
    tables = [accuracy_table(a), variance_table(a), suite_check_table(a), new_shapes_table(a), difficulty_table(a),
              sequential_table(a), parallel_table(a), speedup_table(a), false_positive_table(a), latency_table(a),
              latency_cases_table(a), phase_table(a), job_kind_table(a), protocol_table(a),
              comparisons_table(a) if a.comparisons else None]
    built = [t for t in tables if t is not None]
    if any(i.interpreter for i in a.data.infos):
        for t in built:
            on_cpu(t)
    return built


_GPU_WORDS = (("GPU evals", "evaluations"), ("GPU evaluations", "evaluations"))


def on_cpu(t: Table) -> None:
    """A run judged on the CPU interpreter ran no GPU: its tables say "evaluations" where a GPU
    run's say "GPU evals" (the count is the same: visible feedback plus the method's own test runs)."""
    def plain(text: str) -> str:
        for gpu, cpu in _GPU_WORDS:
            text = text.replace(gpu, cpu)
        return text

    t.text = t.text.rename(columns={c: plain(str(c)) for c in t.text.columns})
    t.title = plain(t.title)
    t.notes[:] = [plain(n) for n in t.notes]
    t.notes.append("Evaluations ran on the Triton CPU interpreter (no GPU).")


# ---------------------------------------------------------------------------- rendering
def _md_cell(s: object) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def to_markdown(t: Table, heading: bool = True) -> str:
    lines = []
    if heading:
        lines.append(f"**{t.title}**" + (" (SIMULATED MODEL)" if t.simulated else ""))
        lines.append("")
    if t.simulated and not heading:
        lines.append(f"_{SIMULATED_BANNER}_")
        lines.append("")
    cols = list(t.text.columns)
    lines.append("| " + " | ".join(_md_cell(c) for c in cols) + " |")
    lines.append("|" + "|".join("---" for _ in cols) + "|")
    for _, row in t.text.iterrows():
        lines.append("| " + " | ".join(_md_cell(row[c]) for c in cols) + " |")
    for n in t.notes:
        lines.append("")
        lines.append(f"_{n}_")
    return "\n".join(lines) + "\n"


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
        "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def tex_escape(s: object) -> str:
    return "".join(_TEX.get(ch, ch) for ch in str(s))


def to_latex(t: Table) -> str:
    cols = list(t.text.columns)
    out = []
    if t.simulated:
        out.append(f"% {SIMULATED_BANNER}")
    caption = t.title + (" (SIMULATED MODEL)" if t.simulated else "")
    out += [r"\begin{table}[t]", r"\centering", r"\small", f"\\caption{{{tex_escape(caption)}}}",
            f"\\label{{tab:{t.name}}}", r"\begin{tabular}{" + "l" * min(2, len(cols)) + "r" * max(0, len(cols) - 2) + "}",
            r"\toprule", " & ".join(tex_escape(c) for c in cols) + r" \\", r"\midrule"]
    for _, row in t.text.iterrows():
        out.append(" & ".join(tex_escape(row[c]) for c in cols) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    for n in t.notes:
        out.append(f"\\par\\footnotesize {tex_escape(n)}")
    out.append(r"\end{table}")
    return "\n".join(out) + "\n"


def to_csv(t: Table) -> str:
    """Plain CSV that `pandas.read_csv` reads as it is: the numbers, plus a `simulated` column
    (the label travels with every row; a comment line would break readers). Title, notes and
    the label are also in the folder's tables.json (write_tables)."""
    return t.numeric.assign(simulated=t.simulated).to_csv(index=False)


TABLES_SIDECAR = "tables.json"


def write_tables(tables: list[Table], out_dir: Path) -> list[Path]:
    """Markdown, LaTeX and CSV per table, and tables.json: per table its title, notes and whether
    it comes from the simulated model (SIMULATED_BANNER then), for whoever reads the CSVs."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for t in tables:
        for ext, text in (("md", to_markdown(t, heading=False)), ("tex", to_latex(t)), ("csv", to_csv(t))):
            p = out_dir / f"{t.name}.{ext}"
            p.write_text(text)
            paths.append(p)
    sidecar = out_dir / TABLES_SIDECAR
    sidecar.write_text(json.dumps({t.name: {"title": t.title, "notes": list(t.notes), "simulated": t.simulated,
                                            "label": SIMULATED_BANNER if t.simulated else None,
                                            "csv": f"{t.name}.csv"} for t in tables}, indent=2) + "\n")
    return paths + [sidecar]
