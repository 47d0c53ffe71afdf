"""stats/ for inference on tasks: the paired t and sign-flip tests on per-task differences,
power and the minimum detectable difference (checked against a simulation of pass/fail
outcomes), variance components and the fixed-suite interval (checked by hand)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from stats import (
    PassVarianceModel,
    fixed_suite_ci,
    minimum_detectable_difference,
    paired_power,
    paired_t_test,
    sign_flip_test,
    variance_components,
)


# ---------------------------------------------------------------------------- paired tests
def test_paired_t_test_is_scipys_one_sample_t_on_differences() -> None:
    d = np.array([0.5, 0.0, 1.0, -0.25, 0.75, 0.0, 0.25])
    res = paired_t_test(d)
    ref = sps.ttest_1samp(d, 0.0)
    assert res.pvalue == pytest.approx(ref.pvalue) and res.statistic == pytest.approx(ref.statistic)
    assert (res.n10, res.n01, res.n) == (4, 1, 7) and res.method == "paired t"


def test_paired_t_test_degenerate_cases() -> None:
    zero = paired_t_test([0.0, 0.0, 0.0])
    assert zero.pvalue == 1.0 and "zero" in zero.note
    same = paired_t_test([0.5] * 5)  # zero spread: t infinite; the exact sign-flip p is 2 / 2^5
    assert same.pvalue == pytest.approx(2 / 32) and "sign-flip" in same.note
    assert paired_t_test([1.0]).pvalue == 1.0
    with pytest.raises(ValueError):
        paired_t_test([0.1, float("nan")])


def test_sign_flip_test_enumerates_every_sign_pattern() -> None:
    d = np.array([1.0, 0.5, -0.25, 1.0, 0.0, 0.75])
    observed = abs(d.mean())
    means = [abs(np.mean(d * np.array(signs))) for signs in itertools.product((1, -1), repeat=d.size)]
    by_hand = np.mean(np.array(means) >= observed - 1e-12)
    res = sign_flip_test(d)
    assert res.method == "sign-flip permutation (exact)"
    assert res.pvalue == pytest.approx(by_hand)
    assert sign_flip_test([0.0, 0.0]).pvalue == 1.0


def test_sign_flip_test_random_patterns_for_large_suites() -> None:
    rng = np.random.default_rng(1)
    d = rng.normal(0.3, 1.0, 60)
    res = sign_flip_test(d, n_resamples=20_000, seed=0)
    assert "random sign patterns" in res.method
    assert res.pvalue == pytest.approx(sps.ttest_1samp(d, 0.0).pvalue, abs=0.02)  # near-normal data: close to t


# ---------------------------------------------------------------------------- power and MDE
def test_default_model_gives_the_issue_figures() -> None:
    """About 30 points at 30 tasks and 1 repeat, about 20 at 3 repeats (alpha 0.05, power 0.8, P 0.5)."""
    model = PassVarianceModel.from_icc()
    assert (model.between_share, model.within_share) == pytest.approx((0.1, 0.5))
    one = minimum_detectable_difference(model.difference_sd(0.5, 1), 30)
    three = minimum_detectable_difference(model.difference_sd(0.5, 3), 30)
    assert 0.27 < one < 0.31 and 0.18 < three < 0.21
    assert paired_power(one, model.difference_sd(0.5, 1), 30) == pytest.approx(0.8, abs=1e-6)
    assert paired_power(0.0, 1.0, 30) == pytest.approx(0.05)


def test_mde_against_noncentral_t_by_hand() -> None:
    sd, n = 0.4, 25
    mde = minimum_detectable_difference(sd, n)
    nc = mde / (sd / math.sqrt(n))
    crit = sps.t.ppf(0.975, n - 1)
    power = sps.nct.sf(crit, n - 1, nc) + sps.nct.cdf(-crit, n - 1, nc)
    assert power == pytest.approx(0.8, abs=1e-6)


@pytest.mark.parametrize("bad", [dict(sd=0.0, n_tasks=10), dict(sd=0.3, n_tasks=1), dict(sd=0.3, n_tasks=10, alpha=1.0)])
def test_power_refuses_bad_input(bad: dict) -> None:
    with pytest.raises(ValueError):
        minimum_detectable_difference(**bad)


def _simulated_rejection_rate(delta: float, n_tasks: int, repeats: int, reps: int, seed: int) -> float:
    """Pass/fail outcomes: p_B = 0.5 - delta/2 + e, p_A = 0.5 + delta/2 + e + u per task,
    e ~ U(-0.2, 0.2) shared, u ~ U(-0.1, 0.1) method-by-task; the paired t-test on per-task means."""
    rng = np.random.default_rng(seed)
    e = rng.uniform(-0.2, 0.2, (reps, n_tasks))
    u = rng.uniform(-0.1, 0.1, (reps, n_tasks))
    pb, pa = 0.5 - delta / 2 + e, 0.5 + delta / 2 + e + u
    ya = rng.binomial(repeats, pa) / repeats
    yb = rng.binomial(repeats, pb) / repeats
    p = sps.ttest_1samp(ya - yb, 0.0, axis=1).pvalue
    return float(np.mean(p < 0.05))


def _true_model(delta: float) -> PassVarianceModel:
    """The components of the simulation above, exactly: Var(u) = 0.1^2/3, and a unit's
    within-task variance E[p(1-p)] = mean(1-mean) - Var(p) for each method."""
    var_e, var_u = 0.2 ** 2 / 3, 0.1 ** 2 / 3
    mb, ma = 0.5 - delta / 2, 0.5 + delta / 2
    wb, wa = mb * (1 - mb) - var_e, ma * (1 - ma) - var_e - var_u
    return PassVarianceModel(between_share=var_u / (2 * 0.25), within_share=(wa + wb) / 2 / 0.25, source="true")


@pytest.mark.parametrize("n_tasks,repeats", [(30, 1), (30, 3), (15, 5)])
def test_mde_matches_a_simulation_of_pass_fail_outcomes(n_tasks: int, repeats: int) -> None:
    """At the MDE the simulated paired t-test rejects about 80% of the time (4000 suites: s.e. 0.006)."""
    delta = 0.2
    for _ in range(4):  # the within-task variance depends on delta: iterate to the fixed point
        delta = minimum_detectable_difference(_true_model(delta).difference_sd(0.5, repeats), n_tasks)
    rate = _simulated_rejection_rate(delta, n_tasks, repeats, 4000, seed=n_tasks * 10 + repeats)
    assert 0.77 <= rate <= 0.83, (delta, rate)
    # and below the MDE the power is clearly lower: the check can fail
    assert _simulated_rejection_rate(delta / 2, n_tasks, repeats, 4000, seed=1) < 0.45


# ---------------------------------------------------------------------------- variance components
def test_variance_components_by_hand() -> None:
    groups = [[1, 1, 0], [0, 0, 0], [1, 1, 1], [1, 0, 1]]  # task means 2/3, 0, 1, 2/3; grand 7/12
    v = variance_components(groups)
    means = np.array([2 / 3, 0, 1, 2 / 3])
    msb = 3 * np.sum((means - 7 / 12) ** 2) / 3
    msw = (2 * (1 / 3) ** 2 + (2 / 3) ** 2) * 2 / 8  # two tasks with 1/3, 1/3, 2/3 deviations; 8 df
    assert v.within == pytest.approx(msw) and v.between == pytest.approx((msb - msw) / 3)
    assert v.icc == pytest.approx(v.between / (v.between + v.within)) and v.df_within == 8
    assert v.within_share_of_mean_variance(3) == pytest.approx((msw / 3) / (v.between + msw / 3))


def test_variance_components_recover_a_known_icc() -> None:
    rng = np.random.default_rng(0)
    means = rng.normal(0.0, 1.0, 2000)  # between 1.0
    groups = [m + rng.normal(0.0, 2.0, 5) for m in means]  # within 4.0
    v = variance_components(groups)
    # standard errors: about 0.057 for between, 0.063 for within
    assert v.between == pytest.approx(float(np.var(means, ddof=1)), abs=0.17) and v.within == pytest.approx(4.0, abs=0.19)
    assert v.icc == pytest.approx(0.2, abs=0.03)


def test_variance_components_need_repeats_and_tasks() -> None:
    with pytest.raises(ValueError, match="repeats"):
        variance_components([[1], [0], [1]])
    with pytest.raises(ValueError, match="2 tasks"):
        variance_components([[1, 0, 1]])


def test_fixed_suite_interval_by_hand() -> None:
    groups = [[1, 1, 0], [0, 0, 0], [1, 1, 1], [1, 0, 1]]
    e = fixed_suite_ci(groups)
    msw = variance_components(groups).within
    se = math.sqrt(msw * 4 / 3) / 4
    half = sps.t.ppf(0.975, 8) * se
    assert e.value == pytest.approx(7 / 12) and (e.lo, e.hi) == pytest.approx((7 / 12 - half, 7 / 12 + half))
    flat = fixed_suite_ci([[1, 1], [0, 0], [1, 1]])  # no within-task spread at all
    assert flat.method == "degenerate (no within-task spread: every task's repeats agree)" and flat.lo == flat.hi == pytest.approx(2 / 3)


def test_sign_flip_test_of_one_task_is_p_one_not_an_error() -> None:
    """A run of one task and several methods reaches the sign-flip test with one difference;
    scipy refuses a one-observation sample, and summary.json used to crash there."""
    from stats.paired import sign_flip_test

    test = sign_flip_test([0.5])
    assert test.pvalue == 1.0 and test.n == 1 and "one task" in test.note
