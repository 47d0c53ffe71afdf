#!/usr/bin/env python
"""False-positive rate of the paired verdict under "no difference", by simulation.

Why: a verdict test is only trustworthy if, when two methods are equally good on the
population of tasks, it rejects at about its nominal 5%. Repeats are nested in tasks, so a
test that counts (task, repeat) pairs as independent (exact McNemar over units, the old
verdict) rejects too often as repeats grow and as methods differ task by task; a test on
per-task differences (the paired t-test, and the sign-flip permutation test beside it) does not.

Model (one suite per replication): T tasks, latent difficulty z_i ~ N(0, 1.5^2) shared by
both methods, and a task-by-method effect u_i ~ N(0, s^2) (method A is better on some tasks,
B on others); logit p_A,i = z_i + u_i, logit p_B,i = z_i - u_i. Because u is symmetric, the
population mean difference E[p_A - p_B] is exactly 0: the null holds for tasks like these,
though not task by task. Each method runs R repeats per task (Bernoulli outcomes).

Reported per (T, R, s): the rejection rate at alpha 0.05 of the paired t-test on per-task
mean differences (the report's verdict), the sign-flip permutation test on the same
differences, and exact McNemar over (task, repeat) pairs; with the Monte-Carlo s.e.

Usage: ``python scripts/null_fpr_sim.py [--reps 4000] [--seed 0] [--out results.json] [--light]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import special

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from stats import mcnemar_exact, paired_t_test, sign_flip_test  # noqa: E402

ALPHA = 0.05


@dataclass(frozen=True)
class NullConfig:
    task_counts: tuple[int, ...] = (10, 30)
    repeats: tuple[int, ...] = (1, 3, 5)
    interaction_sd: tuple[float, ...] = (0.0, 0.5, 1.0)  # s: none, moderate, strong task-by-method variation
    difficulty_sd: float = 1.5
    sign_flip_resamples: int = 2000


def _one(rng: np.random.Generator, t: int, r: int, s: float, cfg: NullConfig) -> dict[str, bool]:
    z = rng.normal(0.0, cfg.difficulty_sd, t)
    u = rng.normal(0.0, s, t) if s > 0 else np.zeros(t)
    ya = rng.random((t, r)) < special.expit(z + u)[:, None]
    yb = rng.random((t, r)) < special.expit(z - u)[:, None]
    d = ya.mean(axis=1) - yb.mean(axis=1)
    return {
        "paired t": paired_t_test(d, cfg.sign_flip_resamples, rng).pvalue < ALPHA,
        "sign-flip": sign_flip_test(d, cfg.sign_flip_resamples, rng).pvalue < ALPHA,
        "McNemar (task, repeat)": mcnemar_exact(ya.ravel(), yb.ravel()).pvalue < ALPHA,
    }


def _chunk(args: tuple[int, np.random.SeedSequence, NullConfig]) -> list[dict[str, object]]:
    n, ss, cfg = args
    rng = np.random.default_rng(ss)
    rows: list[dict[str, object]] = []
    for _ in range(n):
        for t in cfg.task_counts:
            for r in cfg.repeats:
                for s in cfg.interaction_sd:
                    for test, rejected in _one(rng, t, r, s, cfg).items():
                        rows.append({"T": t, "R": r, "s": s, "test": test, "rejected": rejected})
    return rows


def simulate_null(n_reps: int, seed: int = 0, cfg: NullConfig = NullConfig(), workers: int = 1,
                  chunk_size: int = 50) -> pd.DataFrame:
    """Rejection rates under the null, one row per (T, R, s, test): rate, mc_se, reps, verdict
    (inside 0.04-0.06, or not). Depends on seed and chunk_size only, not on workers."""
    if n_reps < 1:
        raise ValueError("n_reps must be >= 1")
    sizes = [chunk_size] * (n_reps // chunk_size) + ([n_reps % chunk_size] if n_reps % chunk_size else [])
    jobs = [(n, ss, cfg) for n, ss in zip(sizes, np.random.SeedSequence(seed).spawn(len(sizes)), strict=True)]
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as ex:
            parts = list(ex.map(_chunk, jobs))
    else:
        parts = [_chunk(j) for j in jobs]
    df = pd.DataFrame([row for part in parts for row in part])
    out = df.groupby(["T", "R", "s", "test"], sort=False)["rejected"].agg(rate="mean", reps="size").reset_index()
    out["mc_se"] = np.sqrt(out["rate"] * (1 - out["rate"]) / out["reps"])
    out["verdict"] = np.where((out["rate"] >= 0.04) & (out["rate"] <= 0.06), "inside 0.04-0.06",
                              np.where(out["rate"] > 0.06, "TOO HIGH", "below 0.04 (conservative)"))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=4000, help="replications per setting (default 4000: s.e. 0.0034)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--light", action="store_true", help="400 replications")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--out", default=None, help="write the table as JSON here")
    args = ap.parse_args(argv)
    reps = 400 if args.light else args.reps
    cfg = NullConfig()
    t0 = time.perf_counter()
    res = simulate_null(reps, args.seed, cfg, workers=args.workers)
    dt = time.perf_counter() - t0
    pd.set_option("display.width", 200)
    print(f"false-positive rate under the null at alpha {ALPHA}: {reps} replications per setting, seed {args.seed}, "
          f"difficulty sd {cfg.difficulty_sd} (logit), s = sd of the task-by-method effect; {dt:.1f} s")
    wide = res.pivot_table(index=["T", "R", "s"], columns="test", values="rate").reset_index()
    print(wide.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    verdict = res[res["test"] == "paired t"]
    inside = verdict[verdict["verdict"] == "inside 0.04-0.06"]
    print(f"\npaired t (the verdict): {len(inside)}/{len(verdict)} settings inside 0.04-0.06; "
          f"Monte-Carlo s.e. about {float(verdict['mc_se'].mean()):.4f}")
    for _, r in verdict[verdict["verdict"] != "inside 0.04-0.06"].iterrows():
        print(f"  outside: T={r['T']} R={r['R']} s={r['s']}: {r['rate']:.3f}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"reps": reps, "seed": args.seed, "alpha": ALPHA, "config": asdict(cfg), "seconds": dt,
                       "rows": res.to_dict(orient="records")}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
