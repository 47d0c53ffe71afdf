"""Which timing protocol produced a run's numbers, per method (issue 15 item 2).

Visible feedback is timed by the short protocol ("feedback-short": few candidate samples
against reference timings the judge worker measured once and re-uses, stopping early once
the speedup's interval decides against 1.0x) and final submissions by the full one
("final-full"). This table says how many timings each produced, how many samples they took,
how often the sequential rule stopped early, how often the references came from the cache,
how many drift events replaced a cached reference, and the timing seconds each cost, so a
reader can see what the cheap protocol saved and what it rests on. Shared evaluations are
split between the methods that proposed the code (results/phases.py). Pure pandas.
"""

from __future__ import annotations

import pandas as pd

from results.phases import attribute_to_methods

PROTOCOL_SUMMARY_COLS = ["method", "protocol", "timings", "samples_per_timing", "early_stopped", "baselines_reused",
                         "drift_events", "timing_s_per_timing"]
_SUMMED = ("samples", "early_stopped", "baselines_reused", "drift_events", "timing_s")


def protocol_summary(evaluations: pd.DataFrame, candidates: pd.DataFrame) -> pd.DataFrame:
    """One row per (method, protocol) with a timing: timings (count, shared ones split), mean
    candidate samples and timing seconds per timing (NaN where no timing second was measured,
    as in a replay), and totals of early-stopped cases, cases on reused references and drift
    events. Empty when the run has no timing (the CPU interpreter times nothing)."""
    if evaluations.empty or "protocol" not in evaluations.columns:
        return pd.DataFrame(columns=PROTOCOL_SUMMARY_COLS)
    timed = evaluations[evaluations["protocol"].notna()]
    joined = attribute_to_methods(timed, candidates)
    if joined.empty:
        return pd.DataFrame(columns=PROTOCOL_SUMMARY_COLS)
    joined = joined.assign(timings=joined["share"], measured=joined["timing_s"].notna() * joined["share"],
                           **{c: joined[c].fillna(0.0) * joined["share"] for c in _SUMMED})
    out = joined.groupby(["method", "protocol"], sort=True)[["timings", "measured", *_SUMMED]].sum().reset_index()
    out["samples_per_timing"] = out["samples"] / out["timings"]
    out["timing_s_per_timing"] = (out["timing_s"] / out["measured"]).where(out["measured"] > 0)
    return out[PROTOCOL_SUMMARY_COLS]
