"""Latency under controlled clocks: per-case medians with intervals, robust spreads, and the clock
state of each sample set, from the records the judge writes (no GPU needed) and, on a GPU, from a
real timing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from judge.candidate.verdict import CaseTiming, Evaluation, Timing, Verdict
from record.store import Store
from results.latency import case_frame, summarise
from results.readers import load_run
from stats import latency_stats, median_ci
from tests.fixtures.synthetic_run import DEVICE, make_synthetic_run
from tests.helpers import ROOT, run_cli

LOCKED = {"available": True, "sm_mhz": 1980, "mem_mhz": 3201, "throttle": ["applications_clocks_setting"]}
DROPPED = {"available": True, "sm_mhz": 1755, "mem_mhz": 3201, "throttle": ["sw_thermal_slowdown"]}


def test_robust_spreads_ignore_one_outlier_where_the_cv_does_not() -> None:
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(1.0, 0.01, 99), 50.0]
    s = latency_stats(x)
    assert s.cv > 3.0  # one outlier in 100 samples: CV above 300%
    assert s.rel_iqr < 0.02 and s.rel_mad < 0.01
    assert s.mad == pytest.approx(np.median(np.abs(x - np.median(x))))


def test_median_interval_contains_the_median_and_narrows_with_samples() -> None:
    rng = np.random.default_rng(1)
    few, many = rng.lognormal(0, 0.1, 30), rng.lognormal(0, 0.1, 1000)
    med, lo, hi = median_ci(few)
    assert lo <= med <= hi and med == pytest.approx(float(np.median(few)))
    _, lo2, hi2 = median_ci(many)
    assert (hi2 - lo2) < (hi - lo) / 2
    assert median_ci([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)


def test_clock_readings_round_trip_through_the_judge_records() -> None:
    ct = CaseTiming("perf", (1.0, 1.1), (2.0, 2.1), clocks_before=LOCKED, clocks_after=DROPPED)
    t = Timing(cases=(ct,), clocks_locked=True, flagged=True, flag_reasons=("sm_mhz_moved:1980->1755",))
    ev = Evaluation(Verdict("correct", cases_run=1, kernel_launched=True), t)
    back = Evaluation.from_json(json.loads(json.dumps(ev.to_json())))
    assert back == ev and back.timing is not None and back.timing.cases[0].clocks_after["sm_mhz"] == 1755
    old = ev.to_json()
    del old["timing"]["clocks_locked"]
    for c in old["timing"]["cases"]:
        del c["clocks_before"], c["clocks_after"]
    legacy = Evaluation.from_json(old)  # records written before these fields read with defaults
    assert legacy.timing is not None and legacy.timing.clocks_locked is None and legacy.timing.cases[0].clocks_before == {}


def test_case_frame_labels_each_sample_set_with_its_clock_state(tmp_path: Path) -> None:
    run = make_synthetic_run(tmp_path / "r")
    store = Store(run / "store.sqlite")
    h = store.put_source("# a candidate timed with clocks locked\n")
    samples = tuple(1.0 + 0.01 * i for i in range(40))
    cases = (CaseTiming("small", samples, tuple(2 * x for x in samples), clocks_before=LOCKED, clocks_after=LOCKED),
             CaseTiming("large", samples, tuple(2 * x for x in samples), clocks_before=LOCKED, clocks_after=DROPPED))
    timing = Timing(cases=cases, clocks_locked=True, flagged=True, flag_reasons=("sm_mhz_moved:1980->1755",),
                    speedup_vs_baseline=2.0, speedup_ci=(1.9, 2.1))
    store.record_evaluation(h, "flip", "visible", DEVICE, Evaluation(Verdict("correct"), timing).to_json(), timed=True)
    store.close()
    lat = case_frame(load_run(run).timings)
    mine = lat[lat["source_hash"] == h].set_index("case")
    assert set(mine["clock_state"]) == {"locked, flagged"}
    assert mine.loc["small", "sm_mhz"] == "1980" and mine.loc["large", "sm_mhz"] == "1980->1755"
    assert mine.loc["large", "throttle"] == "applications_clocks_setting, sw_thermal_slowdown"
    assert mine.loc["small", "median_ms"] == pytest.approx(float(np.median(samples)))
    assert mine.loc["small", "median_lo"] < mine.loc["small", "median_ms"] < mine.loc["small", "median_hi"]
    legacy = lat[lat["source_hash"] != h]
    assert set(legacy["clock_state"]) == {"lock not recorded", "lock not recorded, flagged"}
    clean, everything = summarise(lat), summarise(lat, include_flagged=True)
    assert clean["cases"] == len(lat) - lat["flagged"].sum() and everything["cases"] == len(lat)


@pytest.mark.gpu
def test_a_real_timing_records_clocks_per_case() -> None:
    """On a GPU: `eval --json` of an expert kernel returns per-case clock readings and the lock state."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    proc = run_cli("eval", "--task", "vector_add", "--candidate", str(ROOT / "bench" / "kernels" / "vector_add.py"),
                   "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    timing = json.loads(proc.stdout)["timing"]
    assert timing["clocks_locked"] is False
    for case in timing["cases"]:
        assert case["clocks_before"].get("available") and case["clocks_after"].get("sm_mhz")
