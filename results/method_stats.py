"""Per-method figures of a run, computed once: summary.json and the report's tables read them.

Why: two pipelines computing "the same" number drift apart (summary.json once said 2.21x
where the report said 1.41x for one run). Every per-method figure is defined here, from the
units frame of results/readers.py, and nowhere else.

The task is the unit of inference (design invariant 11): a method's per-task score is the
mean over that task's repeats, and suite figures are means over tasks with intervals over
tasks (the population of tasks like these): pass rates with the band chosen by measured
coverage (stats.RATE_BAND, results/bands.py), speedups with the bootstrap. Beside it, where there are
repeats, the fixed-suite interval (within-task sampling only) and the variance components
(between tasks vs between repeats, ICC).

Speedups never reward failing: the geometric mean is over correct submissions only (with
the number of tasks and units it rests on), and fast_p (KernelBench's: the share of tasks
whose submission is correct AND faster than p times the baseline, per task over its repeats)
counts failures as not fast. Both against the expert Triton kernel and against PyTorch
eager. A timing flagged for moving clocks or throttling is left out by default (its unit's
speed is unknown, so it leaves the fast_p denominator too); a sensitivity line gives the
figures with those timings included.

Below the small-suite minimum (results/bands.py INTERVAL_MIN_TASKS: 7 tasks at alpha 0.05; design
invariant 12) a figure gets no interval: each Estimate over fewer tasks keeps its value, has NaN
ends and names its count of tasks in its method (results.bands.point_only), so every table, the
summary and the figures print "0.67 (2/3 tasks)" and say why.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from results.bands import point_only
from stats import (
    RATE_BAND,
    Estimate,
    VarianceComponents,
    exact_ci,
    fast_p,
    fixed_suite_ci,
    geomean_ci,
    mean_band,
    mean_ci,
    variance_components,
    visible_false_positive_rate,
    wilson_ci,
)

#: Thresholds p of the reported fast_p (KernelBench reports fast_0, fast_1, fast_1.5, fast_2 style figures).
REPORTED_FAST_PS: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)
#: The two baselines speedups are measured against: column of the units frame, label.
BASELINES: dict[str, tuple[str, str]] = {"expert": ("speedup", "expert Triton kernel"),
                                         "eager": ("speedup_vs_eager", "PyTorch eager")}
SMALL_SUITE = 50  # below this many tasks, with one repeat, Wilson and exact intervals are shown beside the bootstrap
NO_VALUE = Estimate(float("nan"), float("nan"), float("nan"), "no values", 0)


@dataclass(frozen=True)
class SpeedupStats:
    """One method's speedups against one baseline.

    geomean: over tasks of the per-task geometric mean over correct, timed, unflagged
        repeats; bootstrap interval over those tasks (NaN value when there are none).
    n_tasks / n_units: what the geometric mean rests on.
    fast_p: {p: mean over tasks of the share of its known repeats that are correct and faster
        than p x the baseline}, with bootstrap intervals over tasks (a failure is a known,
        not-fast repeat; a correct repeat without a usable timing is unknown and left out).
    fast_p_tasks: tasks with at least one known repeat.
    excluded_units: correct units left out (timing flagged, or no timing against this baseline).
    flagged_units: of those, the ones whose timing was flagged.
    with_flagged: (geomean, fast_1) with flagged timings included, when any was flagged.
    """

    against: str
    geomean: Estimate
    n_tasks: int
    n_units: int
    fast_p: dict[float, Estimate]
    fast_p_tasks: int
    excluded_units: int
    flagged_units: int
    with_flagged: tuple[float, float] | None = None

    @property
    def label(self) -> str:
        return BASELINES[self.against][1]


@dataclass(frozen=True)
class MethodStats:
    """Everything the summary and the accuracy, speedup and variance tables say about one method.

    submitted / oracle: mean over tasks of per-task pass, with stats.RATE_BAND over tasks (the
    population estimand; the Wilson score interval at an effective number of tasks). submitted_fixed: the fixed-suite interval (None with one repeat).
    variance: between/within-task components of submitted pass (None with one repeat or one
    task). pooled: Wilson and exact intervals over units, only when every task has one unit
    and the suite is small (then units are independent across tasks; with repeats they are
    not, and these intervals are left out). visible_fp_rate: P(hidden fail | the last
    submission passed the visible cases). calls/tokens/gpu_evals: per task, summed over
    repeats. speedups: per baseline; empty when nothing was timed.
    errored_units / failed_calls: units that ended on a model call that failed for good, and
    the calls that did (design invariant 10); errors: (task, repeat, error) of each errored
    unit. examples: one-shot examples shown (one per call and program), with the largest and
    mean similarity to the task's answer (NaN when none was shown). runs_independent: the
    method's declaration for its runs (None when it declared none).
    """

    method: str
    n_tasks: int
    n_units: int
    repeats: tuple[int, int]
    submitted: Estimate
    oracle: Estimate
    submitted_fixed: Estimate | None
    variance: VarianceComponents | None
    pooled: dict[str, Estimate]
    visible_fp_rate: float
    calls: dict[str, int]
    tokens: dict[str, int]
    gpu_evals: dict[str, int]
    speedups: dict[str, SpeedupStats] = field(default_factory=dict)
    errored_units: int = 0
    failed_calls: int = 0
    errors: tuple[tuple[str, int, str], ...] = ()
    examples: int = 0
    example_similarity_max: float = float("nan")
    example_similarity_mean: float = float("nan")
    runs_independent: bool | None = None

    @property
    def per_unit(self) -> dict[str, float]:
        """Mean calls, tokens and GPU evaluations per unit."""
        n = max(self.n_units, 1)
        return {"calls": sum(self.calls.values()) / n, "tokens": sum(self.tokens.values()) / n,
                "gpu_evals": sum(self.gpu_evals.values()) / n}


def _clip_rate(e: Estimate) -> Estimate:
    """A pass rate lies in [0, 1]; the t-based fixed-suite interval can reach past it with few
    tasks, so it is intersected with that range (coverage is kept) and says so."""
    lo, hi = max(e.lo, 0.0), min(e.hi, 1.0)
    return e if (lo, hi) == (e.lo, e.hi) else replace(e, lo=lo, hi=hi, method=f"{e.method} (clipped to [0, 1])")


def _by_task(units: pd.DataFrame, col: str) -> list[np.ndarray]:
    return [g.to_numpy(float) for _, g in units.groupby("task")[col]]


def timed_baselines(units: pd.DataFrame) -> tuple[str, ...]:
    """The baselines a run has timings against (none on the CPU interpreter; eager only when timed)."""
    return tuple(b for b, (col, _) in BASELINES.items() if units[col].notna().any())


def method_stats(units: pd.DataFrame, n_resamples: int, seed: int, baselines: tuple[str, ...],
                 examples: pd.DataFrame | None = None, runs: pd.DataFrame | None = None) -> MethodStats:
    """The figures of one method (`units`: its rows of the units frame; `baselines`: those the run
    has timings against, `timed_baselines` of the whole run's units; `examples` and `runs`: its
    rows of those frames)."""
    if not len(units):
        raise ValueError("no units")
    method = str(units["method"].iloc[0])
    sizes = units.groupby("task").size()
    per_task = units.groupby("task")[["submitted_pass", "oracle_pass"]].mean()
    # The band of a rate over tasks chosen by measured coverage (stats.RATE_BAND; results/bands.py).
    # Below the small-suite minimum, the value and its count only (results.bands.point_only).
    sub_scores, orc_scores = per_task["submitted_pass"].to_numpy(float), per_task["oracle_pass"].to_numpy(float)
    submitted = point_only(mean_band(sub_scores, method=RATE_BAND, n_resamples=n_resamples, seed=seed), sub_scores)
    oracle = point_only(mean_band(orc_scores, method=RATE_BAND, n_resamples=n_resamples, seed=seed), orc_scores)
    fixed: Estimate | None = None
    comps: VarianceComponents | None = None
    if len(sizes) >= 2 and sizes.max() >= 2:
        groups = _by_task(units, "submitted_pass")
        comps = variance_components(groups)
        fixed = point_only(_clip_rate(fixed_suite_ci(groups)), sub_scores)
    pooled: dict[str, Estimate] = {}
    if sizes.max() == 1 and len(sizes) < SMALL_SUITE:
        s, n = int(units["submitted_pass"].sum()), len(units)
        pooled = {"wilson": point_only(wilson_ci(s, n), sub_scores), "exact": point_only(exact_ci(s, n), sub_scores)}
    vis = units["submitted_visible_pass"]
    known = vis.notna()
    fp = (visible_false_positive_rate(vis[known].astype(bool).to_numpy(), units.loc[known, "submitted_pass"].to_numpy(bool))
          if known.any() else float("nan"))
    sums = units.groupby("task")[["calls_used", "tokens_used", "feedback_evals"]].sum()
    return MethodStats(
        method=method, n_tasks=len(sizes), n_units=len(units), repeats=(int(sizes.min()), int(sizes.max())),
        submitted=submitted, oracle=oracle, submitted_fixed=fixed, variance=comps, pooled=pooled,
        visible_fp_rate=float(fp),
        calls={str(t): int(v) for t, v in sums["calls_used"].items()},
        tokens={str(t): int(v) for t, v in sums["tokens_used"].items()},
        gpu_evals={str(t): int(v) for t, v in sums["feedback_evals"].items()},
        speedups={b: speedup_stats(units, b, n_resamples, seed) for b in baselines},
        **_failures(units), **_examples(examples),
        runs_independent=None if runs is None or not len(runs) else bool(runs["independent"].all()),
    )


def _failures(units: pd.DataFrame) -> dict[str, Any]:
    errored = units[units["error"].notna()].sort_values(["task", "repeat"])
    return {"errored_units": len(errored), "failed_calls": int(units["failed_calls"].sum()),
            "errors": tuple((str(t), int(r), str(e)) for t, r, e in
                            errored[["task", "repeat", "error"]].itertuples(index=False, name=None))}


def _examples(examples: pd.DataFrame | None) -> dict[str, Any]:
    if examples is None or not len(examples):
        return {}
    sim = examples["similarity"].to_numpy(float)
    return {"examples": len(sim), "example_similarity_max": float(sim.max()),
            "example_similarity_mean": float(sim.mean())}


def _speedup_figures(units: pd.DataFrame, col: str, include_flagged: bool, n_resamples: int,
                     seed: int) -> tuple[Estimate, int, int, dict[float, Estimate], int, int]:
    correct = units["submitted_pass"].to_numpy(bool)
    s = units[col].to_numpy(float)
    usable = correct & np.isfinite(s) & (s > 0)
    if not include_flagged:
        usable &= ~units["speedup_flagged"].to_numpy(bool)
    known = ~correct | usable  # a failure is known (not fast); a correct unit needs a usable timing
    ok = units[usable]
    if len(ok):
        logs = np.log(ok[col].to_numpy(float))
        per_task = np.exp(pd.Series(logs).groupby(ok["task"].to_numpy()).mean()).to_numpy(float)
        geo = point_only(geomean_ci(per_task, n_resamples=n_resamples, method="BCa", seed=seed))
    else:
        per_task, geo = np.array([]), NO_VALUE
    kn = units[known]
    fast: dict[float, Estimate] = {}
    tasks = kn["task"].nunique()
    for p in REPORTED_FAST_PS:
        scores = [fast_p(g["submitted_pass"].to_numpy(bool), g[col].where(g["submitted_pass"]).to_numpy(float), p)
                  for _, g in kn.groupby("task")]
        fast[p] = (point_only(mean_ci(np.asarray(scores, float), n_resamples=n_resamples, method="BCa", seed=seed),
                              scores) if scores else NO_VALUE)
    return geo, len(per_task), len(ok), fast, tasks, int((correct & ~usable).sum())


def speedup_stats(units: pd.DataFrame, against: str, n_resamples: int, seed: int) -> SpeedupStats:
    """Speedups of one method's units against one baseline (see SpeedupStats)."""
    col = BASELINES[against][0]
    geo, n_tasks, n_units, fast, fast_tasks, excluded = _speedup_figures(units, col, False, n_resamples, seed)
    timed_ok = units["submitted_pass"] & units[col].notna()
    flagged = int((timed_ok & units["speedup_flagged"]).sum())
    with_flagged = None
    if flagged:
        g2, _, _, f2, _, _ = _speedup_figures(units, col, True, n_resamples, seed)
        with_flagged = (g2.value, f2[1.0].value)
    return SpeedupStats(against, geo, n_tasks, n_units, fast, fast_tasks, excluded, flagged, with_flagged)
