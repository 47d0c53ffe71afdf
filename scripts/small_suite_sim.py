#!/usr/bin/env python
"""Issue 43, items 1, 2 and 5 before and after, by simulation and exact computation.

1. Small suites: under "no difference" (the model of scripts/null_fpr_sim.py: latent task
   difficulty shared by both methods, a symmetric task-by-method effect, R repeats), how often
   the verdict rejects with the old rule (paired t-test at any suite size) and with the new one
   (no verdict below stats.min_tasks_to_reject); and how often the old rule rejected where no
   exact test could (p below the sign-flip floor 2 / 2^n).
2. The interval beside the verdict: how often the paired BCa bootstrap (old) and the t interval
   (new) exclude 0 under that null, at 10 and 30 tasks with repeats.
5. `plan` at one repeat: the t-test's exact power (stats.ternary_power) at the old plan's MDE
   (normal formula) and at the new one (stats.ternary_mde), 30 tasks x 1 repeat at 0.5.

Usage: ``python scripts/small_suite_sim.py [--reps 1000] [--boot-reps 300] [--seed 0] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
from scipy import special

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from stats import (  # noqa: E402
    PassVarianceModel,
    min_tasks_to_reject,
    minimum_detectable_difference,
    one_repeat_cells,
    paired_diff_ci,
    paired_t_test,
    sign_flip_min_p,
    t_ci,
    ternary_mde,
    ternary_power,
)

ALPHA = 0.05


def _suite(rng: np.random.Generator, t: int, r: int, s: float) -> np.ndarray:
    z = rng.normal(0.0, 1.5, t)
    u = rng.normal(0.0, s, t)
    ya = rng.random((t, r)) < special.expit(z + u)[:, None]
    yb = rng.random((t, r)) < special.expit(z - u)[:, None]
    return ya.mean(axis=1) - yb.mean(axis=1)


def small_suites(reps: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    minimum = min_tasks_to_reject(ALPHA)
    for t in (3, 5, 7, 10):
        for r in (1, 3, 5):
            old = below_floor = new = 0
            for _ in range(reps):
                d = _suite(rng, t, r, 0.5)
                p = paired_t_test(d, 1024, 0).pvalue
                old += p < ALPHA
                below_floor += p < sign_flip_min_p(t)
                new += t >= minimum and p < ALPHA
            out.append({"tasks": t, "repeats": r, "old_reject": old / reps, "old_below_exact_floor": below_floor / reps,
                        "new_reject": new / reps})
    return out


def interval_beside(reps: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for t in (10, 30):
        for r in (3,):
            boot = tint = 0
            for i in range(reps):
                d = _suite(rng, t, r, 0.5)
                b = paired_diff_ci(d, np.zeros_like(d), n_resamples=1000, method="BCa", seed=i)
                c = t_ci(d)
                boot += b.lo > 0 or b.hi < 0
                tint += c.lo > 0 or c.hi < 0
            out.append({"tasks": t, "repeats": r, "bca_excludes_zero": boot / reps, "t_excludes_zero": tint / reps,
                        "suites": reps})
    return out


def plan_one_repeat() -> dict:
    model = PassVarianceModel.from_icc()
    old = minimum_detectable_difference(model.difference_sd(0.5, 1), 30)
    new = ternary_mde(model, 0.5, 30)
    return {"old_mde_points": 100 * old, "power_at_old": ternary_power(*one_repeat_cells(model, 0.5, old), 30),
            "new_mde_points": 100 * new, "power_at_new": ternary_power(*one_repeat_cells(model, 0.5, new), 30)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--boot-reps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    start = time.time()
    result = {"small_suites": small_suites(args.reps, args.seed),
              "interval_beside": interval_beside(args.boot_reps, args.seed + 1),
              "plan_one_repeat": plan_one_repeat(), "reps": args.reps, "boot_reps": args.boot_reps, "seed": args.seed}
    result["seconds"] = time.time() - start
    for row in result["small_suites"]:
        print("item 1", row)
    for row in result["interval_beside"]:
        print("item 2", row)
    print("item 5", result["plan_one_repeat"])
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
