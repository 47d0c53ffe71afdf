"""Per-method tables: accuracy and speedup, by task difficulty, sequential scaling by budget,
parallel scaling by independent runs, speedups with fast_p, where the variance comes from
(tasks or repeats), and the false positives of the feedback a method saw."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from results.analysis import Analysis
from results.bands import band_note, point_only
from results.curves import checkpoints, spend_at, unit_curves
from results.method_stats import method_stats, timed_baselines
from results.readers import UNIT_KEY, RunData, task_difficulty
from results.tables.cells import (
    Table,
    band,
    budget_cols,
    budget_word,
    fmt,
    make_table,
    method_units,
    pass_cells,
    pct,
    put,
    speedup_cells,
)
from results.verdicts import display
from stats import Estimate, visible_false_positive_rate


def accuracy_table(a: Analysis) -> Table:
    rows = []
    for name, m in a.methods.items():
        num: dict = {"method": name, "tasks": m.n_tasks, "units": m.n_units}
        txt: dict = {"method": display(name), "tasks": str(m.n_tasks), "units": str(m.n_units)}
        pass_cells(num, txt, m)
        num["visible_fp_rate"] = m.visible_fp_rate
        txt["visible FP rate"] = fmt(m.visible_fp_rate)
        speedup_cells(num, txt, m, a.data.has_timings)
        budget_cols(num, txt, m)
        rows.append((num, txt))
    return make_table("accuracy", f"Accuracy and speedup per method at {a.data.budget} {budget_word(a.data)}", rows, a,
                  ["Submitted and oracle pass: mean over tasks of the per-task pass rate over repeats (tasks like "
                   "these). " + band_note(a.n_tasks, "Their intervals") + " Speedup: geometric mean over correct submissions only, "
                   "against the expert Triton kernel, with the number of tasks it rests on; see the speedup table "
                   "for fast_p, which counts failures."])


def difficulty_table(a: Analysis) -> Table:
    diff = task_difficulty(a.data, sorted(a.data.units["task"].unique()))
    rows = []
    for name, units in method_units(a):
        levels = units["task"].map(lambda t: diff.get(t))
        known = sorted({int(v) for v in levels if not pd.isna(v)})
        for level in known + ([None] if levels.isna().any() else []):
            sub = units[levels.isna()] if level is None else units[levels == level]
            m = method_stats(sub, a.n_resamples, a.seed, timed_baselines(a.data.units))
            num: dict = {"method": name, "difficulty": level, "tasks": m.n_tasks}
            txt: dict = {"method": display(name), "difficulty": "unknown" if level is None else str(level),
                         "tasks": str(m.n_tasks)}
            pass_cells(num, txt, m)
            speedup_cells(num, txt, m, a.data.has_timings)
            budget_cols(num, txt, m)
            rows.append((num, txt))
    return make_table("difficulty", "Accuracy and speedup by task difficulty (bench registry levels)", rows, a,
                  ["Few tasks per level give wide intervals; levels are the bench registry's (1 easiest)."])


def sequential_table(a: Analysis) -> Table:
    data = a.data
    grid = a.curves["calls"][next(iter(a.curves["calls"]))].grid
    budgets = checkpoints(int(grid[-1]))
    curves = unit_curves(data, "calls", grid)
    spend = spend_at(data, budgets)
    rows = []
    for m, _ in method_units(a):
        cm = curves[curves["method"] == m]
        for b in budgets:
            num: dict = {"method": m, "budget_calls": b}
            txt: dict = {"method": display(m), "calls": str(b)}
            for kind, label in (("submitted", "submitted pass"), ("oracle", "oracle pass")):
                vals = pd.Series([c[b] for c in cm[kind]], index=cm["task"].to_numpy()).groupby(level=0).mean()
                put(num, txt, label, kind, band(vals.to_numpy(float), a), rate=True)
            sp = spend[(spend["method"] == m) & (spend["budget"] == b)]
            num["tokens"], num["gpu_evals"] = float(sp["tokens"].mean()), float(sp["gpu_evals"].mean())
            txt["tokens/unit"], txt["GPU evals/unit"] = fmt(num["tokens"], 0), fmt(num["gpu_evals"], 1)
            rows.append((num, txt))
    return make_table("sequential", "Sequential scaling: success after b calls of one run (anytime submissions)", rows, a,
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
            put(num, txt, "pass@k over runs", "pass_at_k", est, rate=True)
            txt.update({"runs": f"{r.derivation}; >= {min_runs} per task", "calls": fmt(num["calls"], 0),
                        "tokens": fmt(num["tokens"], 0), "GPU evals": fmt(num["gpu_evals"], 1)})
            rows.append((num, txt))
    return make_table("parallel", "Parallel scaling: pass@k over independent runs at k x the cost of one run", rows, a,
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
            put(num, txt, "correct rate", "correct_rate", m.submitted, rate=True)
            put(num, txt, "geomean over correct", "geomean", s.geomean if s.n_tasks else None, suffix="x")
            num.update({"geomean_tasks": s.n_tasks, "geomean_units": s.n_units})
            txt["geomean rests on"] = f"{s.n_tasks} tasks, {s.n_units} units"
            for p, e in s.fast_p.items():
                put(num, txt, f"fast_{p:g}", f"fast_{p:g}", e)
            num.update({"fast_p_tasks": s.fast_p_tasks, "excluded_units": s.excluded_units,
                        "flagged_units": s.flagged_units})
            txt["left out (flagged or untimed)"] = str(s.excluded_units)
            budget_cols(num, txt, m)
            rows.append((num, txt))
            if s.with_flagged is not None:
                sensitivity.append(f"{display(name)} vs {s.label}, including {s.flagged_units} flagged timing(s): "
                                   f"geomean {fmt(s.with_flagged[0])}x, fast_1 {fmt(s.with_flagged[1])}.")
    notes = ["fast_p: share of tasks (per task: of its repeats) whose submission is correct and more than p x as "
             "fast as the baseline; a failure is never fast; fast_0 is the correct share among units whose speed "
             "is known. Against PyTorch eager this is KernelBench's fast_p. Correct submissions whose timing was "
             "flagged (moving clocks, throttling) or missing are left out of both figures."]
    notes += sensitivity or ["No timing was flagged."]
    return make_table("speedups", "Speedups without a reward for failing: geometric mean over correct submissions and "
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
        put(num, txt, "tasks like these (bootstrap)", "population", m.submitted, rate=True)
        put(num, txt, "these tasks only (fixed suite)", "fixed_suite", m.submitted_fixed, rate=True)
        share = v.within_share_of_mean_variance()
        now = v.mean_variance(m.n_tasks, v.mean_repeats)
        num["within_share"] = share
        num["se_change_double_repeats"] = _se_change(now, v.mean_variance(m.n_tasks, 2 * v.mean_repeats))
        num["se_change_double_tasks"] = _se_change(now, v.mean_variance(2 * m.n_tasks, v.mean_repeats))
        txt["repeat noise share"] = pct(share)
        txt["SE with 2x repeats"] = pct(num["se_change_double_repeats"], signed=True)
        txt["SE with 2x tasks"] = pct(num["se_change_double_tasks"], signed=True)
        budget_cols(num, txt, m)
        rows.append((num, txt))
    if not rows:
        return None
    return make_table("variance", "Where the uncertainty of submitted pass comes from: tasks or repeats", rows, a,
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
    for m, units in method_units(a):
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
        budget_cols(num, txt, a.methods[m])
        rows.append((num, txt))
    return make_table("false_positives", "False positives of the feedback a method saw: passes it, fails hidden", rows, a,
                  ["Rate = P(hidden fail | pass); final submissions (one per unit) and every candidate that got "
                   "visible feedback; own tests: every candidate a method ran its own tests on (Reflexion's internal "
                   "feedback); n/a when nothing passed."])
