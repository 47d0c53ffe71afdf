"""Tests of the pure stats/ package: exact values, edge cases and refusals."""

from __future__ import annotations

import ast
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

import stats
from stats import (
    Estimate,
    adjust_pvalues,
    aggregate_curves,
    binary_ci,
    curve_by_task,
    exact_ci,
    fast_p,
    fast_p_table,
    flagged_share,
    geomean,
    geomean_ci,
    latency_stats,
    mcnemar_exact,
    mean_ci,
    mean_ci_columns,
    oracle_curve,
    paired_diff_ci,
    pass_at_k,
    pass_at_k_table,
    runs_pass_at_k,
    speedup_summary,
    submitted_curve,
    t_ci,
    task_mean_curves,
    visible_false_positive_rate,
    wilcoxon_log_ratio,
    wilson_ci,
)

STATS_DIR = Path(stats.__file__).resolve().parent


# ---------------------------------------------------------------- purity
def test_stats_package_imports_only_allowed_modules() -> None:
    allowed = {"numpy", "scipy", "statsmodels", "pandas", "__future__"}
    import sys

    stdlib = set(sys.stdlib_module_names)
    for py in STATS_DIR.glob("*.py"):
        tree = ast.parse(py.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level > 0:  # relative import inside stats/
                    continue
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            for r in roots:
                assert r in allowed or r in stdlib, f"{py.name} imports {r}"


def test_all_exports_exist() -> None:
    assert len(stats.__all__) == len(set(stats.__all__))
    for name in stats.__all__:
        assert hasattr(stats, name), name


# ---------------------------------------------------------------- pass@k
def _exact_passk(n: int, c: int, k: int) -> Fraction:
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def test_pass_at_k_matches_exact_rationals() -> None:
    rng = np.random.default_rng(0)
    ns = rng.integers(1, 250, 400)
    cs = np.array([rng.integers(0, n + 1) for n in ns])
    ks = np.array([rng.integers(1, n + 1) for n in ns])
    got = pass_at_k(ns, cs, ks)
    want = np.array([float(_exact_passk(int(n), int(c), int(k))) for n, c, k in zip(ns, cs, ks, strict=True)])
    assert got.shape == (400,)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    # scalar path agrees and returns a float
    for n, c, k in list(zip(ns, cs, ks, strict=True))[:50]:
        v = pass_at_k(int(n), int(c), int(k))
        assert isinstance(v, float)
        assert abs(v - float(_exact_passk(int(n), int(c), int(k)))) <= 1e-12


def test_pass_at_k_edge_cases() -> None:
    assert pass_at_k(10, 0, 3) == 0.0
    assert pass_at_k(10, 10, 3) == 1.0
    assert pass_at_k(10, 8, 3) == 1.0  # n - c = 2 < k = 3
    assert pass_at_k(10, 7, 3) < 1.0  # n - c = 3 == k: not yet certain
    assert pass_at_k(10, 7, 3) == pytest.approx(1 - 1 / math.comb(10, 3), abs=1e-15)
    assert pass_at_k(5, 5, 5) == 1.0
    assert pass_at_k(5, 0, 5) == 0.0
    np.testing.assert_allclose(pass_at_k(np.array([10, 20]), np.array([3, 5]), 1), [0.3, 0.25], atol=1e-15)


@pytest.mark.parametrize(
    "n,c,k",
    [(5, 2, 6), (5, 6, 1), (-1, 0, 1), (5, -1, 1), (5, 2, 0), (5.5, 2, 1), ([5, 3], [1, 1], 4)],
)
def test_pass_at_k_refuses_invalid(n: object, c: object, k: object) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_pass_at_k_table_shape_and_monotone() -> None:
    n = np.array([10, 10, 12])
    c = np.array([0, 3, 12])
    tab = pass_at_k_table(n, c, np.arange(1, 11))
    assert tab.shape == (10, 3)
    assert np.all(tab[:, 0] == 0.0) and np.all(tab[:, 2] == 1.0)
    assert np.all(np.diff(tab[:, 1]) >= 0)
    assert tab[0, 1] == pytest.approx(0.3)
    with pytest.raises(ValueError):
        pass_at_k_table(n, c, np.arange(1, 12))  # k = 11 > n = 10 for two tasks


# ---------------------------------------------------------------- intervals
def test_mean_ci_contains_estimate_and_is_reproducible() -> None:
    x = np.random.default_rng(1).random(200)
    for m in ("BCa", "percentile", "basic"):
        e = mean_ci(x, method=m, n_resamples=2000, seed=3)
        assert e.lo < e.value < e.hi
        assert e.value == pytest.approx(x.mean())
        assert e.method == f"bootstrap-{m}" and e.n == 200
        assert e == mean_ci(x, method=m, n_resamples=2000, seed=3)
    # percentile interval equals the percentiles of the same scipy bootstrap
    ref = sps.bootstrap((x,), np.mean, n_resamples=2000, method="percentile", rng=np.random.default_rng(3))
    e = mean_ci(x, method="percentile", n_resamples=2000, seed=3)
    assert e.lo == pytest.approx(ref.confidence_interval.low, abs=0.01)
    assert e.hi == pytest.approx(ref.confidence_interval.high, abs=0.01)
    # width shrinks roughly like 1/sqrt(n)
    wide = mean_ci(x[:50], method="percentile", n_resamples=2000)
    assert wide.width > 1.5 * e.width


def test_mean_ci_degenerate_inputs() -> None:
    e = mean_ci([0.7, 0.7, 0.7])
    assert (e.value, e.lo, e.hi, e.method, e.n) == (0.7, 0.7, 0.7, "degenerate", 3)
    e1 = mean_ci([0.25])
    assert (e1.lo, e1.hi, e1.method) == (0.25, 0.25, "degenerate")
    with pytest.raises(ValueError):
        mean_ci([])
    with pytest.raises(ValueError):
        mean_ci([0.1, np.nan])
    with pytest.raises(ValueError):
        mean_ci([0.1, 0.2], method="studentized")


def test_mean_ci_bca_failure_falls_back_to_percentile() -> None:
    # with one resample the bias-correction z0 is infinite, so BCa cannot be computed
    e = mean_ci([0.0, 1.0], n_resamples=1, seed=0)
    assert e.method == "bootstrap-percentile (BCa failed)"
    assert np.isfinite(e.lo) and np.isfinite(e.hi)


def test_mean_ci_columns_mixed_degenerate() -> None:
    x = np.column_stack([np.zeros(20), np.linspace(0, 1, 20), np.ones(20)])
    cols = mean_ci_columns(x, n_resamples=500, method="percentile")
    assert cols.methods == ("degenerate", "bootstrap-percentile", "degenerate")
    assert cols.lo[0] == cols.hi[0] == 0.0 and cols.lo[2] == cols.hi[2] == 1.0
    assert cols.lo[1] < 0.5 < cols.hi[1]


def test_t_ci_known_value() -> None:
    e = t_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    half = sps.t.ppf(0.975, 4) * math.sqrt(2.5) / math.sqrt(5)  # t_{4} * s / sqrt(n)
    assert (e.value, e.method, e.n) == (3.0, "t", 5)
    assert (e.lo, e.hi) == pytest.approx((3.0 - half, 3.0 + half), abs=1e-12)
    assert half == pytest.approx(1.9632, abs=1e-4)
    d = t_ci([0.4, 0.4])
    assert (d.lo, d.hi, d.method) == (0.4, 0.4, "degenerate")


def test_wilson_and_exact_known_values() -> None:
    w = wilson_ci(8, 10)
    assert (w.lo, w.hi) == pytest.approx((0.49016, 0.94332), abs=1e-4)
    z = sps.norm.ppf(0.975)
    p, n = 0.8, 10
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert (w.lo, w.hi) == pytest.approx((centre - half, centre + half), abs=1e-12)
    assert w.value == 0.8 and w.method == "wilson" and w.n == 10
    ex = exact_ci(0, 10)
    assert ex.lo == 0.0 and ex.hi == pytest.approx(1 - 0.025 ** (1 / 10), abs=1e-9)
    assert exact_ci(10, 10).hi == pytest.approx(1.0) and exact_ci(10, 10).lo == pytest.approx(0.025 ** 0.1)
    with pytest.raises(ValueError):
        wilson_ci(11, 10)
    with pytest.raises(ValueError):
        exact_ci(1, 0)


def test_binary_ci_small_and_large_suites() -> None:
    small = binary_ci(np.arange(20) < 6, n_resamples=1000)
    assert set(small) == {"bootstrap", "wilson", "exact"}
    for e in small.values():
        assert e.value == pytest.approx(0.3) and e.lo <= 0.3 <= e.hi
    large = binary_ci(np.arange(60) < 6, n_resamples=1000)
    assert set(large) == {"bootstrap"}
    with pytest.raises(ValueError):
        binary_ci([0, 2, 1])


# ---------------------------------------------------------------- paired
def test_paired_diff_ci() -> None:
    rng = np.random.default_rng(2)
    base = rng.random(100)
    a = np.clip(base + 0.05 + rng.normal(0, 0.02, 100), 0, 1)
    b = base
    e = paired_diff_ci(a, b, n_resamples=2000)
    assert e.value == pytest.approx(np.mean(a - b))
    assert e.lo < e.value < e.hi and e.lo > 0  # pairing removes the shared difficulty
    unpaired = mean_ci(a, n_resamples=2000)
    assert e.width < unpaired.width / 3
    assert e.method.startswith("paired-bootstrap")
    same = paired_diff_ci(a, a)
    assert (same.value, same.lo, same.hi) == (0.0, 0.0, 0.0) and "degenerate" in same.method
    with pytest.raises(ValueError):
        paired_diff_ci(a, b[:-1])


def test_mcnemar_known_table() -> None:
    # 8 tasks a-only, 2 tasks b-only, 5 both, 5 neither: p = 2 * P(X <= 2 | Bin(10, .5)) = 112/1024
    a = np.array([1] * 8 + [0] * 2 + [1] * 5 + [0] * 5, dtype=bool)
    b = np.array([0] * 8 + [1] * 2 + [1] * 5 + [0] * 5, dtype=bool)
    r = mcnemar_exact(a, b)
    assert (r.n10, r.n01, r.n) == (8, 2, 20)
    assert r.statistic == 2.0
    assert r.pvalue == pytest.approx(112 / 1024, abs=1e-12)
    none = mcnemar_exact(a, a)
    assert none.pvalue == 1.0 and none.note == "no discordant pairs"
    with pytest.raises(ValueError):
        mcnemar_exact(a, b[:-1])


def test_wilcoxon_log_ratio() -> None:
    rng = np.random.default_rng(4)
    sa = np.exp(rng.normal(0.3, 0.2, 25))
    sb = np.exp(rng.normal(0.0, 0.2, 25))
    r = wilcoxon_log_ratio(sa, sb)
    ref = sps.wilcoxon(np.log(sa) - np.log(sb), zero_method="wilcox")
    assert r.pvalue == pytest.approx(ref.pvalue) and r.statistic == pytest.approx(ref.statistic)
    assert r.pvalue < 0.01 and r.n10 > r.n01 and r.n == 25
    # NaN pairs (incorrect tasks) are dropped and reported
    sa2 = np.append(sa, np.nan)
    sb2 = np.append(sb, 2.0)
    r2 = wilcoxon_log_ratio(sa2, sb2)
    assert r2.n == 25 and "dropped 1" in r2.note and r2.pvalue == pytest.approx(r.pvalue)
    # all differences zero: graceful
    z = wilcoxon_log_ratio([1.5, 2.0, 3.0], [1.5, 2.0, 3.0])
    assert z.pvalue == 1.0 and "all differences zero" in z.note
    empty = wilcoxon_log_ratio([np.nan], [1.0])
    assert empty.pvalue == 1.0 and "no pairs" in empty.note
    one = wilcoxon_log_ratio([2.0], [1.0])
    assert 0.0 < one.pvalue <= 1.0
    with pytest.raises(ValueError):
        wilcoxon_log_ratio([1.0, -1.0], [1.0, 1.0])
    with pytest.raises(ValueError):
        wilcoxon_log_ratio(sa, sb, zero_method="drop")


def test_adjust_pvalues_hand_computed() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # Holm: sorted .005,.01,.03,.04 -> 4*.005=.02, 3*.01=.03, 2*.03=.06, max(.04, .06)=.06
    np.testing.assert_allclose(adjust_pvalues(p, "holm"), [0.03, 0.06, 0.06, 0.02], atol=1e-12)
    # BH: m*p/rank = .02, .02, .04, .04, then running min from the top
    np.testing.assert_allclose(adjust_pvalues(p, "fdr_bh"), [0.02, 0.04, 0.04, 0.02], atol=1e-12)
    assert adjust_pvalues(np.array([0.6, 0.7]), "holm").max() <= 1.0
    with pytest.raises(ValueError):
        adjust_pvalues(p, "hs")  # Holm-Sidak is not accepted implicitly
    with pytest.raises(ValueError):
        adjust_pvalues([0.1, 1.5])


# ---------------------------------------------------------------- speedups
def test_geomean() -> None:
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert geomean([2.0, 8.0, 4.0]) == pytest.approx(4.0)
    assert geomean([0.5, 2.0]) == pytest.approx(1.0)
    assert math.isnan(geomean([]))
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])
    g = geomean_ci(np.exp(np.random.default_rng(5).normal(0.2, 0.3, 80)), n_resamples=2000)
    assert g.lo < g.value < g.hi and g.method.startswith("log-bootstrap")


def test_fast_p_counts_failures_as_not_fast() -> None:
    correct = np.array([True, True, False, False])
    speed = np.array([2.0, 0.5, np.nan, np.nan])
    assert fast_p(correct, speed, 1.0) == 0.25
    assert fast_p(correct, speed, 0.0) == 0.5  # fast_0 = correct rate
    assert fast_p(correct, speed, 3.0) == 0.0
    # a failed task with a recorded (bogus) big speedup is still not fast
    assert fast_p(correct, np.array([2.0, 0.5, 10.0, np.nan]), 1.0) == 0.25
    tab = fast_p_table(correct, speed)
    assert tab == {0.0: 0.5, 0.5: 0.25, 0.8: 0.25, 1.0: 0.25, 1.5: 0.25, 2.0: 0.0}
    with pytest.raises(ValueError):
        fast_p(correct, np.array([np.nan, 0.5, np.nan, np.nan]), 1.0)  # correct task without speedup


def test_speedup_summary() -> None:
    correct = np.array([True, True, False, True])
    speed = np.array([2.0, 0.5, np.nan, 4.0])
    s = speedup_summary(correct, speed, n_resamples=1000)
    assert (s.n_tasks, s.n_correct) == (4, 3)
    assert s.correct_rate.value == 0.75
    assert s.geomean_correct_only.value == pytest.approx(4.0 ** (1 / 3))
    assert s.geomean_all.value == pytest.approx(4.0 ** (1 / 4))  # failure counted as 1.0
    assert s.fast_p[1.0] == 0.5
    s2 = speedup_summary(correct, speed, failure_speedup=0.5, n_resamples=1000)
    assert s2.geomean_all.value == pytest.approx(2.0 ** (1 / 4))
    none = speedup_summary([False, False], [np.nan, np.nan], n_resamples=100)
    assert math.isnan(none.geomean_correct_only.value) and none.geomean_correct_only.method == "no correct tasks"
    assert none.geomean_all.value == 1.0 and none.fast_p[0.0] == 0.0
    with pytest.raises(ValueError):
        speedup_summary(correct, speed, failure_speedup=0.0)


# ---------------------------------------------------------------- latency, false positives
def test_latency_stats_and_flags() -> None:
    ls = latency_stats([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (ls.median, ls.iqr, ls.n) == (3.0, 2.0, 5)
    assert ls.cv == pytest.approx(math.sqrt(2.5) / 3.0)
    assert ls.rel_iqr == pytest.approx(2.0 / 3.0)
    single = latency_stats([0.2])
    assert single.iqr == 0.0 and math.isnan(single.cv)
    with pytest.raises(ValueError):
        latency_stats([1.0, -1.0])
    assert flagged_share([True, False, False, False]) == 0.25
    assert math.isnan(flagged_share([]))


def test_visible_false_positive_rate() -> None:
    assert visible_false_positive_rate([1, 1, 1, 0], [1, 0, 0, 1]) == pytest.approx(2 / 3)
    assert visible_false_positive_rate([True, True], [True, True]) == 0.0
    assert math.isnan(visible_false_positive_rate([False, False], [True, False]))


# ---------------------------------------------------------------- curves
def test_submitted_curve_exact() -> None:
    got = submitted_curve([2, 5], [True, False], 7)
    np.testing.assert_array_equal(got, [0, 0, 1, 1, 1, 0, 0, 0])
    assert got.shape == (8,) and got.dtype == float
    np.testing.assert_array_equal(submitted_curve([0, 3, 3], [False, False, True], 4), [0, 0, 0, 1, 1])
    np.testing.assert_array_equal(submitted_curve([], [], 3), [0, 0, 0, 0])
    np.testing.assert_array_equal(submitted_curve([1, 9], [True, False], 4), [0, 1, 1, 1, 1])
    with pytest.raises(ValueError):
        submitted_curve([5, 2], [True, False], 7)


def test_oracle_curve_exact() -> None:
    np.testing.assert_array_equal(oracle_curve([3, 1, 6, 7], [False, False, True, True], 7), [0] * 6 + [1, 1])
    np.testing.assert_array_equal(oracle_curve([1, 2], [False, False], 3), [0, 0, 0, 0])
    np.testing.assert_array_equal(oracle_curve([5], [True], 3), [0, 0, 0, 0])
    # oracle dominates the submitted curve for the same unit
    sub = submitted_curve([2, 5], [True, False], 7)
    orc = oracle_curve([2, 5], [True, False], 7)
    assert np.all(orc >= sub)


def test_task_mean_and_aggregate_curves() -> None:
    ids = np.array(["A", "B", "A"])
    curves = np.array([[0, 1, 1], [0, 0, 0], [0, 0, 1]], dtype=float)
    uniq, per_task = task_mean_curves(ids, curves)
    np.testing.assert_array_equal(uniq, ["A", "B"])
    np.testing.assert_allclose(per_task, [[0, 0.5, 1], [0, 0, 0]])
    band = aggregate_curves(ids, curves, n_resamples=500)
    np.testing.assert_allclose(band.mean, [0, 0.25, 0.5])
    assert band.lo[0] == band.hi[0] == 0.0  # b = 0: every task at 0 -> degenerate
    assert np.all(band.lo <= band.mean) and np.all(band.mean <= band.hi)
    np.testing.assert_array_equal(band.budgets, [0, 1, 2])
    df = pd.DataFrame({"task": ids, "repeat": [0, 0, 1], "curve": list(curves)})
    band_df = curve_by_task(df, n_resamples=500)
    np.testing.assert_allclose(band_df.mean, band.mean)
    np.testing.assert_allclose(band_df.lo, band.lo)
    with pytest.raises(ValueError):
        curve_by_task(df.drop(columns="curve"))


def test_aggregate_curves_at_scale_keeps_shape_and_monotone_mean() -> None:
    """Its speed at this scale is a figure of benchmarks/bench_stats.py, not a test."""
    rng = np.random.default_rng(6)
    units, budget = 2000, 100
    ids = rng.integers(0, 500, units)
    firsts = rng.integers(0, 150, units)
    curves = (np.arange(budget + 1)[None, :] >= firsts[:, None]).astype(float)
    band = aggregate_curves(ids, curves, n_resamples=2000)
    assert band.per_task.shape == (len(np.unique(ids)), budget + 1) and np.all(np.diff(band.mean) >= 0)
    assert np.all(band.lo <= band.mean + 1e-12) and np.all(band.mean <= band.hi + 1e-12)


def test_runs_pass_at_k() -> None:
    runs = [[True, False, False, False], [False, False, False, False], [True, True, False, False, True]]
    cur = runs_pass_at_k(runs, calls_per_run=20, n_resamples=500)
    np.testing.assert_array_equal(cur.k, [1, 2, 3, 4])  # fewest runs: 4
    np.testing.assert_allclose(cur.cost, [20, 40, 60, 80])
    k = np.arange(1, 5)
    task0 = k / 4  # 1 - C(3,k)/C(4,k)
    task2 = np.array([float(_exact_passk(5, 3, int(j))) for j in k])
    np.testing.assert_allclose(cur.mean, (task0 + 0 + task2) / 3, atol=1e-12)
    assert np.all(cur.lo <= cur.mean + 1e-12) and np.all(cur.mean <= cur.hi + 1e-12)
    with pytest.raises(ValueError):
        runs_pass_at_k([[]], calls_per_run=1)


def test_estimate_is_frozen() -> None:
    e = Estimate(0.5, 0.4, 0.6, "x", 3)
    with pytest.raises(AttributeError):
        e.value = 1.0  # type: ignore[misc]
    assert e.contains(0.45) and not e.contains(0.7) and e.width == pytest.approx(0.2)
