"""The timing protocol's statistics, on synthetic samples (no GPU needed).

`speedup_with_ci` and `median_rse` decide when sampling stops and what interval is
reported; the GPU path only feeds them numbers, so their behaviour is fixed here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from judge.candidate.verdict import CaseTiming, Evaluation, Timing, Verdict
from judge.timing import TimingPolicy, median_rse, side_stream_suspected, speedup_with_ci


def _case(cand: np.ndarray, base: np.ndarray, eager: np.ndarray | None = None, name: str = "c") -> CaseTiming:
    return CaseTiming(case=name, candidate_ms=tuple(map(float, cand)), baseline_ms=tuple(map(float, base)),
                      eager_ms=tuple(map(float, eager)) if eager is not None else ())


def test_median_rse_matches_the_normal_theory() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(100.0, 1.0, size=400)
    expected = 1.2533 * 1.0 / math.sqrt(400) / 100.0
    assert median_rse(x) == pytest.approx(expected, rel=0.15)


def test_median_rse_ignores_a_rare_outlier() -> None:
    """One 100x sample (a context switch) must not stop the stopping rule from firing."""
    rng = np.random.default_rng(2)
    x = rng.normal(10.0, 0.05, size=50)
    spiked = x.copy()
    spiked[7] = 1000.0
    assert median_rse(spiked) < 0.01
    assert median_rse(spiked) == pytest.approx(median_rse(x), rel=0.25)
    sd_based = 1.2533 * np.std(spiked, ddof=1) / math.sqrt(50) / np.median(spiked)
    assert sd_based > 1.0  # what the plain-SD rule would have seen


def test_median_rse_edge_cases() -> None:
    assert median_rse(np.array([1.0])) == math.inf
    assert median_rse(np.array([0.0, 0.0, 0.0])) == math.inf
    assert median_rse(np.array([2.0, 2.0, 2.0])) == 0.0


def test_speedup_point_estimate_and_interval() -> None:
    rng = np.random.default_rng(3)
    base = rng.lognormal(math.log(10.0), 0.02, size=200)
    cand = rng.lognormal(math.log(5.0), 0.02, size=200)
    s, (lo, hi) = speedup_with_ci([_case(cand, base)], TimingPolicy(seed=0))
    assert s == pytest.approx(2.0, rel=0.01)
    assert lo < s < hi
    assert lo > 1.98 and hi < 2.02


def test_speedup_is_the_geometric_mean_over_cases() -> None:
    twice = _case(np.full(20, 5.0), np.full(20, 10.0), name="a")
    half = _case(np.full(20, 10.0), np.full(20, 5.0), name="b")
    s, (lo, hi) = speedup_with_ci([twice, half], TimingPolicy())
    assert s == pytest.approx(1.0)
    assert lo == pytest.approx(1.0) and hi == pytest.approx(1.0)
    s4, _ = speedup_with_ci([twice, _case(np.full(20, 2.5), np.full(20, 20.0), name="c")], TimingPolicy())
    assert s4 == pytest.approx(4.0)  # sqrt(2 * 8)


def test_interleaved_rounds_are_resampled_as_pairs() -> None:
    """Drift shared by a round (here: a 3x swing) cancels in the ratio when rounds stay paired."""
    drift = np.linspace(0.5, 1.5, 101)
    s, (lo, hi) = speedup_with_ci([_case(5.0 * drift, 10.0 * drift)], TimingPolicy(seed=4))
    assert s == pytest.approx(2.0)
    assert hi - lo < 1e-9
    unpaired = _case(5.0 * drift, 10.0 * drift[:-1])  # unequal lengths: independent resampling
    _, (lo2, hi2) = speedup_with_ci([unpaired], TimingPolicy(seed=4))
    assert hi2 - lo2 > 0.1


def test_bootstrap_interval_covers_the_true_speedup() -> None:
    rng = np.random.default_rng(5)
    policy = TimingPolicy(bootstrap_resamples=400, seed=6)
    covered = 0
    reps = 80
    for _ in range(reps):
        base = rng.lognormal(math.log(10.0), 0.1, size=60)
        cand = rng.lognormal(math.log(8.0), 0.1, size=60)
        _, (lo, hi) = speedup_with_ci([_case(cand, base)], policy)
        covered += lo <= 1.25 <= hi
    assert 0.85 <= covered / reps <= 1.0


def test_speedup_against_eager_and_bad_input() -> None:
    c = _case(np.full(10, 2.0), np.full(10, 4.0), eager=np.full(10, 6.0))
    assert speedup_with_ci([c], TimingPolicy(), against="eager")[0] == pytest.approx(3.0)
    with pytest.raises(ValueError, match="at least one case"):
        speedup_with_ci([], TimingPolicy())
    with pytest.raises(ValueError, match="no eager samples"):
        speedup_with_ci([_case(np.full(3, 1.0), np.full(3, 1.0))], TimingPolicy(), against="eager")
    s, ci = speedup_with_ci([_case(np.zeros(5), np.full(5, 1.0))], TimingPolicy())
    assert math.isfinite(s) and all(math.isfinite(v) for v in ci)


def test_side_stream_check() -> None:
    honest = CaseTiming("c", (0.50,) * 5, (0.52,) * 5, candidate_wall_ms=0.56, baseline_wall_ms=0.58)
    hidden = CaseTiming("c", (0.01,) * 5, (0.52,) * 5, candidate_wall_ms=0.56, baseline_wall_ms=0.58)
    tiny = CaseTiming("c", (0.001,) * 5, (0.002,) * 5, candidate_wall_ms=0.02, baseline_wall_ms=0.02)
    assert not side_stream_suspected(honest)
    assert side_stream_suspected(hidden)
    assert not side_stream_suspected(tiny)  # launch overhead dominates: not judged
    assert not side_stream_suspected(CaseTiming("c", (1.0,), (1.0,)))


def test_timing_records_round_trip_through_json() -> None:
    ct = CaseTiming("perf", (1.0, 1.1), (2.0, 2.1), (3.0,), 4, "graph", 1.2, 2.2)
    t = Timing(cases=(ct,), flag_reasons=("throttle:sw_power_cap",), speedup_ci=(1.8, 2.1), speedup_vs_baseline=1.9)
    ev = Evaluation(Verdict("correct", cases_run=3, kernel_launched=True), t)
    assert Evaluation.from_json(ev.to_json()) == ev
