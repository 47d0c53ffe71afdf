"""Budget curves and independent-run scaling, computed from a run's anytime events.

Why: the design's invariant 3 records every change of a method's submission with the
calls and tokens spent so far, so one run yields success at every budget b <= B. Two
curves per method (invariant 4): *submitted* pass (the submission in force after b
passes the hidden cases) and *oracle* pass (any candidate generated within b does).

Parallel scaling ("pass@k over independent runs at k x the cost of a run") needs the
runs themselves, which the store does not mark; they are derived here, per method, from
what is recorded:

* direct: every call is one independent sample (1 call per run); the run's answer is
  the candidate that call produced (a reply without code is a failed sample).
* geak: `iterations` (config.json's resolved method_options) iterations of exactly two
  calls each, so run r is the calls (2T r, 2T (r+1)]; a run is complete when the unit
  spent at least 2T (r+1) calls. Its answer follows GEAK-v1's rule restricted to the run,
  from visible feedback only: fastest visible-correct candidate (latency from its timed
  visible evaluation), else the latest visible-correct, else the latest that ran, else the
  last generated.
* reflexion: a trial starts with a "tests" call (the test-writing call of the default
  internal-feedback mode), or with an "implement" call that is the unit's first call or
  follows another "implement" call (inside a trial every re-implementation follows a
  "reflect" call, and the first implementation follows the "tests" call); a trial is
  complete when another trial follows it, when it holds `max_iters` implementations, or when
  its last candidate's recorded feedback was "correct". Its answer is its last
  implementation. Cost per run: the cap 1 + 2 (max_iters - 1), plus 1 in internal mode.

The trial or run cut off by the budget is left out (its outcome is unknown; counting it as
a failure would bias pass@k down). Because Reflexion trials that succeed are shorter,
the number of complete trials depends on their outcomes; the estimate over complete trials
is then a ratio estimator, slightly optimistic for small numbers of trials.
Other method names have no known run structure: they get no parallel-scaling curve.
pass@k over runs is computed only from runs their method declared independent
(`ctx.begin_run(independent=...)`); a method that declares its runs not independent (code
at temperature 0) gets no curve and a note that says why.

Below the small-suite minimum (results/bands.py INTERVAL_MIN_TASKS; design invariant 12) a curve
over fewer tasks has no band: its lo and hi are NaN (results.bands.curve_points_only), so tables,
figures and their CSVs give the means alone.

Budget curves are drawn against three axes: calls, tokens (prompt + completion) and GPU
evaluations (visible feedback plus runs of a method's own tests), each event placed at the
spend recorded with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from results.bands import curve_points_only
from results.readers import UNIT_KEY, RunData
from stats import (
    RATE_BAND,
    CurveBand,
    PassAtKCurve,
    aggregate_curves,
    oracle_curve,
    runs_pass_at_k,
    submitted_curve,
)

AXES = ("calls", "tokens", "evaluations")
AXIS_COLUMNS = {"calls": "calls_used", "tokens": "tokens_used", "evaluations": "evals_used"}
RAN_VERDICTS = ("correct", "wrong_result", "no_kernel")


@dataclass(frozen=True, eq=False)
class MethodCurves:
    """Submitted and oracle budget curves of one method on one axis (x = grid)."""

    method: str
    axis: str
    grid: np.ndarray
    submitted: CurveBand
    oracle: CurveBand
    n_units: int


@dataclass(frozen=True, eq=False)
class MethodRuns:
    """Independent runs of one method, as derived in the module docstring.

    runs: one row per run: unit key, run_index, calls_start, calls_end, tokens, complete,
        answer_pass (the run's own answer passes the hidden cases), oracle_pass (any of its
        candidates does). curve: pass@k of answers over complete runs (None when not
        estimable, with the reason in `note`).
    """

    method: str
    calls_per_run: float
    derivation: str
    runs: pd.DataFrame
    curve: PassAtKCurve | None
    note: str
    tokens_per_run: float
    evals_per_run: float


# ---------------------------------------------------------------------------- grids and curves
def axis_grid(data: RunData, axis: str, points: int = 101) -> np.ndarray:
    """x values at which curves are evaluated.

    Calls: every integer 0..B (B = the budget for a calls budget, else the most calls any
    unit spent). Evaluations: every integer up to the most GPU evaluations any unit asked
    for. Tokens: `points` evenly spaced integer values from 0 to the token budget (token
    budgets) or to the most tokens any unit spent (calls budgets).
    """
    if axis not in AXES:
        raise ValueError(f"axis must be one of {AXES}")
    units = data.units
    if axis == "calls":
        top = data.budget if data.budget_unit == "calls" else int(units["calls_used"].max())
        return np.arange(int(top) + 1)
    if axis == "evaluations":
        return np.arange(int(units["feedback_evals"].max()) + 1)
    top = data.budget if data.budget_unit != "calls" else int(units["tokens_used"].max())
    return np.unique(np.round(np.linspace(0, int(top), points)).astype(np.int64))


def _grid_index(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Smallest grid index j with grid[j] >= value: an event counts at x = grid[j] iff value <= grid[j]."""
    return np.searchsorted(grid, np.asarray(values, dtype=np.int64), side="left")


def unit_curves(data: RunData, axis: str = "calls", grid: np.ndarray | None = None) -> pd.DataFrame:
    """One row per finished unit: method, task, repeat, submitted (array), oracle (array)."""
    grid = axis_grid(data, axis) if grid is None else np.asarray(grid)
    col = AXIS_COLUMNS[axis]
    last = len(grid) - 1
    subs = {k: g for k, g in data.submissions.groupby(UNIT_KEY, sort=False)}
    cands = {k: g for k, g in data.candidates.groupby(UNIT_KEY, sort=False)}
    empty = pd.DataFrame({col: np.array([], dtype=np.int64), "hidden_pass": np.array([], dtype=bool)})
    rows = []
    for key in data.units[UNIT_KEY].itertuples(index=False, name=None):
        s = subs.get(key, empty)
        c = cands.get(key, empty)
        # Submissions come in submission order (non-decreasing spend); on ties the later one wins.
        rows.append({
            "method": key[0], "task": key[1], "repeat": key[2],
            "submitted": submitted_curve(_grid_index(s[col].to_numpy(), grid), s["hidden_pass"].to_numpy(bool), last),
            "oracle": oracle_curve(_grid_index(c[col].to_numpy(), grid), c["hidden_pass"].to_numpy(bool), last),
        })
    return pd.DataFrame(rows, columns=["method", "task", "repeat", "submitted", "oracle"])


def budget_curves(data: RunData, axis: str = "calls", n_resamples: int = 10_000, seed: int = 0,
                  points: int = 101) -> dict[str, MethodCurves]:
    """Per method: mean over tasks of repeat-averaged unit curves, with pointwise bands over tasks
    (stats.aggregate_curves with stats.RATE_BAND, the band chosen by measured coverage;
    results/bands.py says its coverage)."""
    grid = axis_grid(data, axis, points)
    curves = unit_curves(data, axis, grid)
    out: dict[str, MethodCurves] = {}
    for method in data.methods:
        rows = curves[curves["method"] == method]
        if not len(rows):
            continue
        bands = {}
        for kind in ("submitted", "oracle"):
            bands[kind] = curve_points_only(aggregate_curves(rows["task"].to_numpy(), np.stack(rows[kind].to_list()),
                                                             n_resamples=n_resamples, method=RATE_BAND, seed=seed))
        out[method] = MethodCurves(method, axis, grid, bands["submitted"], bands["oracle"], len(rows))
    return out


def checkpoints(top: int) -> list[int]:
    """Budgets for the sequential-scaling table: powers of two below `top`, and `top`."""
    out = [b for b in (2 ** i for i in range(0, 40)) if b < top]
    return out + [int(top)]


def gpu_eval_positions(data: RunData) -> dict[tuple, np.ndarray]:
    """Per unit, the calls spent at each GPU evaluation a method asked for, sorted: visible
    feedback and runs of its own tests (Reflexion's internal feedback runs on the GPU too)."""
    events = pd.concat([data.feedback[UNIT_KEY + ["calls_used"]], data.test_runs[UNIT_KEY + ["calls_used"]]])
    return {k: np.sort(g["calls_used"].to_numpy(np.int64)) for k, g in events.groupby(UNIT_KEY, sort=False)}


def spend_at(data: RunData, budgets: list[int]) -> pd.DataFrame:
    """Per unit and calls budget b: tokens spent by the b-th charged call and GPU evaluations
    asked for by then (a unit that stopped earlier keeps its totals)."""
    calls = data.calls[data.calls["charged"] == 1].copy()
    calls["tokens"] = calls["prompt_tokens"] + calls["completion_tokens"]
    cum = {k: np.cumsum(g.sort_values("call_index")["tokens"].to_numpy())
           for k, g in calls.groupby(UNIT_KEY, sort=False)}
    fb = gpu_eval_positions(data)
    rows = []
    for key in data.units[UNIT_KEY].itertuples(index=False, name=None):
        c = cum.get(key, np.zeros(0))
        f = fb.get(key, np.zeros(0))
        for b in budgets:
            tokens = float(c[min(b, len(c)) - 1]) if len(c) and b > 0 else 0.0
            rows.append({"method": key[0], "task": key[1], "repeat": key[2], "budget": b, "tokens": tokens,
                         "gpu_evals": int(np.searchsorted(f, b, side="right"))})
    return pd.DataFrame(rows, columns=UNIT_KEY + ["budget", "tokens", "gpu_evals"])


# ---------------------------------------------------------------------------- independent runs
def _latency(data: RunData) -> dict[tuple[str, str], float]:
    ev = data.evaluations
    vis = ev[(ev["case_set"] == "visible") & ev["has_timing"] & ev["candidate_ms"].notna()]
    return {(h, t): float(ms) for h, t, ms in zip(vis["source_hash"], vis["task"], vis["candidate_ms"], strict=True)}


def _geak_answer(run: pd.DataFrame, latency: dict[tuple[str, str], float]) -> bool:
    """GEAK-v1's answer rule on one run's candidates (in order), from visible feedback only."""
    if not len(run):
        return False
    correct = run[run["visible_verdict"] == "correct"]
    if len(correct):
        lat = [latency.get((h, t), np.inf) for h, t in zip(correct["source_hash"], correct["task"], strict=True)]
        pick = correct.iloc[int(np.argmin(lat))] if np.isfinite(min(lat)) else correct.iloc[-1]
        return bool(pick["hidden_pass"])
    ran = run[run["visible_verdict"].isin(RAN_VERDICTS)]
    return bool((ran.iloc[-1] if len(ran) else run.iloc[-1])["hidden_pass"])


def _unit_tokens(data: RunData) -> dict[tuple, np.ndarray]:
    calls = data.calls[data.calls["charged"] == 1]
    return {k: np.cumsum((g["prompt_tokens"] + g["completion_tokens"]).to_numpy())
            for k, g in calls.sort_values("call_index").groupby(UNIT_KEY, sort=False)}


def _by_unit(df: pd.DataFrame) -> dict[tuple, pd.DataFrame]:
    return {k: g for k, g in df.groupby(UNIT_KEY, sort=False)}


def _mine(groups: dict[tuple, pd.DataFrame], u: Any, like: pd.DataFrame) -> pd.DataFrame:
    return groups.get((u.method, u.task, u.repeat), like.iloc[0:0])


def _runs_direct(data: RunData, units: pd.DataFrame) -> pd.DataFrame:
    rows = []
    groups = _by_unit(data.candidates)
    for u in units.itertuples(index=False):
        mine = _mine(groups, u, data.candidates)
        by_call = dict(zip(mine["calls_used"], mine["hidden_pass"], strict=True))
        for i in range(int(u.calls_used)):
            ok = bool(by_call.get(i + 1, False))
            rows.append((u.method, u.task, u.repeat, i, i, i + 1, True, ok, ok))
    return pd.DataFrame(rows, columns=RUN_COLS)


def _runs_geak(data: RunData, units: pd.DataFrame, iterations: int) -> pd.DataFrame:
    length = 2 * iterations
    latency = _latency(data)
    groups = _by_unit(data.candidates)
    rows = []
    for u in units.itertuples(index=False):
        mine = _mine(groups, u, data.candidates)
        run_of = (mine["calls_used"].to_numpy() - 1) // length
        n_runs = -(-int(u.calls_used) // length)
        for r in range(n_runs):
            run = mine[run_of == r].sort_values("candidate_index")
            complete = int(u.calls_used) >= (r + 1) * length
            rows.append((u.method, u.task, u.repeat, r, r * length, (r + 1) * length, complete,
                         _geak_answer(run, latency), bool(run["hidden_pass"].any())))
    return pd.DataFrame(rows, columns=RUN_COLS)


def _runs_reflexion(data: RunData, units: pd.DataFrame, max_iters: int) -> pd.DataFrame:
    calls = data.calls[data.calls["charged"] == 1].sort_values("call_index")
    roles = {k: g["role"].to_list() for k, g in calls.groupby(UNIT_KEY, sort=False)}
    groups = _by_unit(data.candidates)
    rows = []
    for u in units.itertuples(index=False):
        key = (u.method, u.task, u.repeat)
        r = roles.get(key, [])
        starts = [p for p, role in enumerate(r)
                  if role == "tests" or (role == "implement" and (p == 0 or r[p - 1] == "implement"))]
        mine = _mine(groups, u, data.candidates).sort_values("candidate_index")
        bounds = starts + [len(r)]
        for j in range(len(starts)):
            lo, hi = bounds[j], bounds[j + 1]  # positions of this trial's calls: lo .. hi-1
            run = mine[(mine["calls_used"] > lo) & (mine["calls_used"] <= hi)]
            implements = sum(1 for role in r[lo:hi] if role == "implement")
            complete = (j + 1 < len(starts) or implements >= max_iters
                        or (len(run) > 0 and run.iloc[-1]["visible_verdict"] == "correct"))
            answer = bool(run.iloc[-1]["hidden_pass"]) if len(run) else False
            rows.append((u.method, u.task, u.repeat, j, lo, hi, complete, answer, bool(run["hidden_pass"].any())))
    return pd.DataFrame(rows, columns=RUN_COLS)


RUN_COLS = UNIT_KEY + ["run_index", "calls_start", "calls_end", "complete", "answer_pass", "oracle_pass"]


def _last_pass(run: pd.DataFrame) -> bool:
    """A run whose answer is its final implementation (a direct sample, a Reflexion trial)."""
    return bool(run.iloc[-1]["hidden_pass"]) if len(run) else False


def _runs_declared(data: RunData, units: pd.DataFrame, answer: Callable[[pd.DataFrame], bool]) -> pd.DataFrame:
    """Runs as the method declared them (`ctx.begin_run`), with candidates matched by run_index:
    no inference from call positions. A run whose end was never recorded was cut by the budget."""
    groups = _by_unit(data.candidates)
    declared = _by_unit(data.runs)
    rows = []
    for u in units.itertuples(index=False):
        mine = _mine(groups, u, data.candidates)
        for r in _mine(declared, u, data.runs).itertuples(index=False):
            run = mine[mine["run_index"] == r.run_index].sort_values("candidate_index")
            complete = not np.isnan(r.calls_end)
            end = int(r.calls_end) if complete else int(u.calls_used)
            rows.append((u.method, u.task, u.repeat, int(r.run_index), int(r.calls_start), end, complete,
                         answer(run), bool(run["hidden_pass"].any())))
    return pd.DataFrame(rows, columns=RUN_COLS)


def _has_declared_runs(data: RunData, units: pd.DataFrame) -> bool:
    if not len(data.runs):
        return False
    keys = set(map(tuple, data.runs[UNIT_KEY].drop_duplicates().to_numpy().tolist()))
    return all((u.method, u.task, u.repeat) in keys for u in units.itertuples(index=False))


def independent_runs(data: RunData, method: str, n_resamples: int = 10_000, seed: int = 0) -> MethodRuns:
    """Derive one method's independent runs and its pass@k-over-runs curve (module docstring)."""
    units = data.units[data.units["method"] == method]
    opts = data.method_options.get(method, {})
    declared = _has_declared_runs(data, units)
    mine = data.runs[data.runs["method"] == method]
    if declared and not mine["independent"].all():
        return MethodRuns(method, float("nan"), "declared not independent", pd.DataFrame(columns=RUN_COLS), None,
                          f"{method}: its runs are declared not independent (e.g. code generated at temperature 0 "
                          "repeats itself), so pass@k over them is not computed", float("nan"), float("nan"))
    if declared and method == "direct":
        runs, per_run, how = _runs_declared(data, units, _last_pass), 1.0, "each sample is one declared run"
    elif declared and method == "geak" and "iterations" in opts:
        t = int(opts["iterations"])
        latency = _latency(data)
        runs, per_run = _runs_declared(data, units, lambda run: _geak_answer(run, latency)), float(2 * t)
        how = f"declared runs of {t} iterations x 2 calls = {2 * t} calls"
    elif declared and method == "reflexion" and "max_iters" in opts:
        m = int(opts["max_iters"])
        internal = opts.get("feedback", "visible") == "internal"
        runs, per_run = _runs_declared(data, units, _last_pass), float(int(internal) + 1 + 2 * (m - 1))
        how = (f"declared trials; cost per trial capped at {'1 + ' if internal else ''}1 + 2 x ({m} - 1) "
               f"= {int(per_run)} calls")
    elif method == "direct":
        runs, per_run, how = _runs_direct(data, units), 1.0, "each call is one sample"
    elif method == "geak" and "iterations" in opts:
        t = int(opts["iterations"])
        runs, per_run = _runs_geak(data, units, t), float(2 * t)
        how = f"runs of {t} iterations x 2 calls = {2 * t} calls"
    elif method == "reflexion" and "max_iters" in opts:
        m = int(opts["max_iters"])
        internal = opts.get("feedback", "visible") == "internal"
        runs, per_run = _runs_reflexion(data, units, m), float(int(internal) + 1 + 2 * (m - 1))
        how = (f"trials read from call roles; cost per trial capped at {'1 + ' if internal else ''}1 + 2 x ({m} - 1) "
               f"= {int(per_run)} calls")
    else:
        empty = pd.DataFrame(columns=RUN_COLS)
        return MethodRuns(method, float("nan"), "unknown", empty, None,
                          f"{method}: no known run structure, so no pass@k over runs", float("nan"), float("nan"))
    tokens, evals = _run_spend(data, runs)
    complete = runs[runs["complete"]]
    if method == "reflexion" and len(complete):
        # The x-axis charges every trial its cap (never understating cost); the mean a trial
        # actually spent is shown beside it, since trials that succeed stop early.
        observed = float((complete["calls_end"] - complete["calls_start"]).mean())
        how += f" (observed mean {observed:.1f} calls per complete trial)"
    missing = sorted(set(units["task"]) - set(complete["task"]))
    note = ""
    curve = None
    if missing:
        note = (f"{method}: no complete run ({how}) within the budget for task(s) {', '.join(missing)}; "
                "pass@k over runs is not estimable")
    else:
        success = [g["answer_pass"].to_numpy(bool) for _, g in complete.groupby("task", sort=True)]
        curve = curve_points_only(runs_pass_at_k(success, per_run, n_resamples=n_resamples, method=RATE_BAND,
                                                 seed=seed))
        dropped = int((~runs["complete"]).sum())
        if dropped:
            note = f"{method}: {dropped} run(s) cut off by the budget left out"
    return MethodRuns(method, per_run, how, runs, curve, note, tokens, evals)


def _run_spend(data: RunData, runs: pd.DataFrame) -> tuple[float, float]:
    """Mean tokens and GPU evaluations (`gpu_eval_positions`) per complete run."""
    complete = runs[runs["complete"]]
    if not len(complete):
        return float("nan"), float("nan")
    cum = _unit_tokens(data)
    fb = gpu_eval_positions(data)
    toks, evals = [], []
    for r in complete.itertuples(index=False):
        key = (r.method, r.task, r.repeat)
        c = cum.get(key, np.zeros(0))
        end, start = min(int(r.calls_end), len(c)), min(int(r.calls_start), len(c))
        toks.append((c[end - 1] if end else 0) - (c[start - 1] if start else 0))
        f = fb.get(key, np.zeros(0))
        evals.append(int(np.searchsorted(f, r.calls_end, "right") - np.searchsorted(f, r.calls_start, "right")))
    return float(np.mean(toks)), float(np.mean(evals))


def parallel_scaling(data: RunData, n_resamples: int = 10_000, seed: int = 0) -> dict[str, MethodRuns]:
    return {m: independent_runs(data, m, n_resamples, seed) for m in data.methods
            if (data.units["method"] == m).any()}
