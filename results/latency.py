"""Latency per timed case, with the clock state each sample set was taken under.

Why: a speedup is only as good as the timings under it. For every perf case of every timed
evaluation this gives the median with a bootstrap interval, the robust spreads IQR/median and
MAD/median (the CV beside them only: one outlier in 100 samples can make it several hundred
percent), and the clock state: whether clocks were locked (`--lock-clocks`), SM and memory
clocks before and after the samples, throttle reasons, and whether the timing was flagged
for moving clocks or throttling. Flagged timings are left out of averages by default
(`summarise(..., include_flagged=False)`), with the figures including them beside.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from stats import latency_stats, median_ci

MEDIAN_RESAMPLES = 2000  # bootstrap resamples per case median (percentile interval)

CASE_COLS = ["task", "case", "case_set", "source_hash", "clock_state", "locked", "flagged", "flag_reasons",
             "sm_mhz", "mem_mhz", "throttle", "n", "median_ms", "median_lo", "median_hi", "rel_iqr", "rel_mad", "cv",
             "baseline_median_ms", "baseline_rel_iqr", "baseline_rel_mad", "baseline_cv", "speedup", "speedup_lo",
             "speedup_hi"]


def _lock_label(locked: Any) -> str:
    return "locked" if locked is True else "not locked" if locked is False else "lock not recorded"


def clock_state(locked: Any, flagged: bool) -> str:
    """The label timings are grouped by: lock state, and whether the timing was flagged."""
    return _lock_label(locked) + (", flagged" if flagged else "")


def _mhz(before: dict[str, Any], after: dict[str, Any], key: str) -> str:
    b, a = before.get(key), after.get(key)
    if not b and not a:
        return "n/a"
    return f"{b}" if b == a or not a else f"{b}->{a}"


def case_frame(timings: pd.DataFrame, seed: int = 0, n_resamples: int = MEDIAN_RESAMPLES) -> pd.DataFrame:
    """One row per timed (evaluation, case): CASE_COLS (medians in ms, spreads as fractions)."""
    rows = []
    rng = np.random.default_rng(seed)
    for r in timings.itertuples(index=False):
        if not len(r.candidate_ms):
            continue
        cand = latency_stats(r.candidate_ms)
        med, lo, hi = median_ci(r.candidate_ms, n_resamples=n_resamples, seed=rng)
        base = latency_stats(r.baseline_ms) if len(r.baseline_ms) else None
        nan = float("nan")
        throttle = sorted(set(r.clocks_before.get("throttle", [])) | set(r.clocks_after.get("throttle", [])))
        rows.append({
            "task": r.task, "case": r.case, "case_set": r.case_set, "source_hash": r.source_hash,
            "clock_state": clock_state(r.clocks_locked, r.flagged), "locked": r.clocks_locked, "flagged": r.flagged,
            "flag_reasons": ", ".join(r.flag_reasons), "sm_mhz": _mhz(r.clocks_before, r.clocks_after, "sm_mhz"),
            "mem_mhz": _mhz(r.clocks_before, r.clocks_after, "mem_mhz"), "throttle": ", ".join(throttle),
            "n": cand.n, "median_ms": med, "median_lo": lo, "median_hi": hi, "rel_iqr": cand.rel_iqr,
            "rel_mad": cand.rel_mad, "cv": cand.cv,
            "baseline_median_ms": base.median if base else nan, "baseline_rel_iqr": base.rel_iqr if base else nan,
            "baseline_rel_mad": base.rel_mad if base else nan, "baseline_cv": base.cv if base else nan,
            "speedup": r.speedup, "speedup_lo": r.speedup_lo, "speedup_hi": r.speedup_hi,
        })
    return pd.DataFrame(rows, columns=CASE_COLS)


def summarise(cases: pd.DataFrame, include_flagged: bool = False) -> dict[str, float]:
    """Medians over cases of the spreads (and of the median's relative interval width); flagged
    timings left out unless `include_flagged`."""
    c = cases if include_flagged else cases[~cases["flagged"]]
    width = (c["median_hi"] - c["median_lo"]) / c["median_ms"]
    return {"cases": float(len(c)), "rel_iqr": float(c["rel_iqr"].median()), "rel_mad": float(c["rel_mad"].median()),
            "cv": float(c["cv"].median()), "median_ci_width": float(width.median())}
