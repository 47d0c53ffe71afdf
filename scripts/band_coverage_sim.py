#!/usr/bin/env python
"""Issue 43 item 3: which band for pass@k and budget curves, chosen by measured coverage.

Suites of T tasks are drawn from a population whose per-task success probabilities are
known, and every candidate interval for the mean over tasks of a per-task rate is built with
``stats.band_columns``; coverage is the share of suites whose interval holds the population's
true mean (the estimand of a band over tasks: tasks like these).

Populations:

* ``simulated``: the built-in simulated model's own ground truth: each of the registry's tasks
  with ``SimulatedModel().fresh_success_probability(task)`` (0.10-0.45 by difficulty); a suite
  draws its T tasks from the registry with replacement, so the truth is the registry's mean.
* ``spread``: p ~ Beta(0.8, 1.2) (scripts/coverage_sim.py's model), many tasks near 0 and 1:
  the skewed case where intervals over few tasks break first.

Rates (one per-task score each, then a mean over tasks):

* ``pass@1`` and ``pass@5`` over 10 samples per task (stats.pass_at_k; the parallel-scaling
  table's pass@k over runs is this, with runs for samples);
* ``curve@1 x1``: a budget curve at 1 call with 1 repeat (one 0/1 outcome per task, success
  probability p: also the accuracy table's submitted pass at one repeat);
* ``curve@8 x3``: a budget curve at 8 calls, 3 repeats averaged per task (each repeat succeeds
  with 1 - (1 - p)^8, a direct-prompting oracle curve), where many tasks sit at 1.

Candidates: ``BCa`` (the old band of the accuracy and sequential tables and summary.json),
``percentile`` (the old band of budget curves and pass@k over runs), ``t`` over tasks, the
studentised bootstrap and ``wilson`` (Wilson's score interval at an effective number of tasks,
Student-t quantile; stats/intervals.py ``_wilson_columns``). Suites are processed in blocks of
``BLOCK`` that share one set of task resamples (each suite's interval is still its own; blocks
are seeded apart).

Usage: ``python scripts/band_coverage_sim.py [--reps 2000] [--boot 1000] [--seed 0] [--out FILE]``
(prints a before/after coverage table; 2000 suites give a Monte-Carlo s.e. of 0.005 at 0.95).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from stats import BAND_METHODS, RATE_BAND, band_columns, pass_at_k  # noqa: E402

TASK_COUNTS = (3, 10, 30)
RATES = ("pass@1", "pass@5", "curve@1 x1", "curve@8 x3")
SAMPLES = 10
BLOCK = 50
OLD = {"pass@1": "BCa", "pass@5": "percentile", "curve@1 x1": "BCa", "curve@8 x3": "percentile"}
CANDIDATES = ("BCa", "percentile", "t", "studentized", "wilson")


def simulated_population() -> np.ndarray:
    """The simulated model's true per-task success probabilities over the registry's tasks."""
    from bench.registry import all_tasks
    from modelio.simulated import SimulatedModel

    model = SimulatedModel()
    return np.array([model.fresh_success_probability(t) for t in all_tasks()], dtype=float)


def _truth_given_p(rate: str, p: np.ndarray) -> np.ndarray:
    if rate == "pass@1" or rate == "curve@1 x1":
        return p
    if rate == "pass@5":
        return 1.0 - (1.0 - p) ** 5
    return 1.0 - (1.0 - p) ** 8


def truths(population: str, pool: np.ndarray | None) -> dict[str, float]:
    """Population means of every rate (exact for the registry; by quadrature for the Beta)."""
    if population == "simulated":
        assert pool is not None
        return {r: float(_truth_given_p(r, pool).mean()) for r in RATES}
    from scipy import integrate
    from scipy.stats import beta

    return {r: float(integrate.quad(lambda q, r=r: _truth_given_p(r, np.array(q)) * beta.pdf(q, 0.8, 1.2), 0, 1)[0])
            for r in RATES}


def draw_p(rng: np.random.Generator, population: str, pool: np.ndarray | None, shape: tuple[int, int]) -> np.ndarray:
    if population == "simulated":
        assert pool is not None
        return pool[rng.integers(0, pool.size, size=shape)]
    return rng.beta(0.8, 1.2, size=shape)


def scores(rng: np.random.Generator, rate: str, p: np.ndarray) -> np.ndarray:
    """Per-task scores (tasks x suites) of one rate, drawn given the tasks' probabilities."""
    if rate in ("pass@1", "pass@5"):
        c = rng.binomial(SAMPLES, p)
        return np.asarray(pass_at_k(np.full_like(c, SAMPLES), c, 1 if rate == "pass@1" else 5), dtype=float)
    if rate == "curve@1 x1":
        return (rng.random(p.shape) < p).astype(float)
    q = _truth_given_p(rate, p)
    return (rng.random((3,) + p.shape) < q).mean(axis=0)


def coverage(reps: int, boot: int, seed: int, methods: tuple[str, ...] = CANDIDATES,
             task_counts: tuple[int, ...] = TASK_COUNTS, populations: tuple[str, ...] = ("simulated", "spread"),
             rates: tuple[str, ...] = RATES, pool: np.ndarray | None = None) -> list[dict]:
    """One row per (population, rate, tasks, method): coverage, mean width, suites."""
    if "simulated" in populations and pool is None:
        pool = simulated_population()
    root = np.random.SeedSequence(seed)
    rows = []
    for pop, pop_ss in zip(populations, root.spawn(len(populations)), strict=True):
        truth = truths(pop, pool)
        for rate, rate_ss in zip(rates, pop_ss.spawn(len(rates)), strict=True):
            for t, t_ss in zip(task_counts, rate_ss.spawn(len(task_counts)), strict=True):
                rng = np.random.default_rng(t_ss)
                hit = {m: 0 for m in methods}
                width = {m: 0.0 for m in methods}
                for block in range(0, reps, BLOCK):
                    size = min(BLOCK, reps - block)
                    x = scores(rng, rate, draw_p(rng, pop, pool, (t, size)))
                    boot_seed = int(rng.integers(2**63))
                    for m in methods:
                        cols = band_columns(x, 0.95, m, boot, boot_seed)
                        hit[m] += int(np.sum((cols.lo <= truth[rate]) & (truth[rate] <= cols.hi)))
                        width[m] += float(np.sum(cols.hi - cols.lo))
                for m in methods:
                    rows.append({"population": pop, "rate": rate, "tasks": t, "method": m, "truth": truth[rate],
                                 "coverage": hit[m] / reps, "mean_width": width[m] / reps, "suites": reps})
    return rows


def table(rows: list[dict]) -> str:
    """The before/after table: per (population, rate, tasks), the old band, the chosen band and
    every candidate's coverage."""
    methods = list(dict.fromkeys(r["method"] for r in rows))
    keys = list(dict.fromkeys((r["population"], r["rate"], r["tasks"]) for r in rows))
    cov = {(r["population"], r["rate"], r["tasks"], r["method"]): r["coverage"] for r in rows}
    head = f"{'population':<10} {'rate':<11} {'tasks':>5}  {'before':>17}  {'after (' + RATE_BAND + ')':>15}  " + " ".join(
        f"{m:>11}" for m in methods)
    out = [head, "-" * len(head)]
    for pop, rate, t in keys:
        old = OLD[rate]
        before = f"{old} {cov.get((pop, rate, t, old), float('nan')):.3f}"
        after = f"{cov.get((pop, rate, t, RATE_BAND), float('nan')):.3f}"
        out.append(f"{pop:<10} {rate:<11} {t:>5}  {before:>17}  {after:>15}  "
                   + " ".join(f"{cov.get((pop, rate, t, m), float('nan')):>11.3f}" for m in methods))
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tasks", type=int, nargs="*", default=list(TASK_COUNTS))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    assert set(CANDIDATES) <= set(BAND_METHODS)
    start = time.time()
    rows = coverage(args.reps, args.boot, args.seed, task_counts=tuple(args.tasks))
    print(table(rows))
    result = {"rows": rows, "reps": args.reps, "boot": args.boot, "seed": args.seed, "chosen": RATE_BAND,
              "old": OLD, "seconds": round(time.time() - start, 1)}
    print(f"{result['seconds']} s")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
