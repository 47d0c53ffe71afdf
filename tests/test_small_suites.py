"""Issue 43: verdicts that hold at every suite size (small-suite rule, the decider's own
interval, errored units in the verdict, label and Wilcoxon fixes, `plan` at one repeat).
Each test fails on the code before the issue: the 3-task "exceeds, p = 0.006" verdict, the
2-task "faster, p = 0.020" verdict, a paired bootstrap beside the verdict, verdicts silent
on errored units, "the same on all N tasks" for a fixed-suite interval of differing tasks,
Wilcoxon's n counting dropped zeros, and `plan`'s 29 points at 30 tasks x 1 repeat."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from results.labels import interval_text
from results.readers import load_run
from results.verdicts import paired_comparisons, verdict_sentence
from stats import (
    PassVarianceModel,
    fixed_suite_ci,
    min_tasks_to_reject,
    one_repeat_cells,
    sign_flip_min_p,
    ternary_mde,
    ternary_power,
    wilcoxon_log_ratio,
)
from tests.fixtures.synthetic_run import Cand, UnitSpec, write_run

RES = 200


def _unit(ok: bool, speedup: float | None = None) -> UnitSpec:
    kind = "correct" if ok else "wrong_result"
    return UnitSpec(("generator",), (Cand(1, kind, kind),), ((1, 0),), speedup=(speedup or 1.0) if ok else None)


def _run(path: Path, a: list[list[bool]], b: list[list[bool]], speed_a: float = 2.0, speed_b: float = 1.0) -> Path:
    """GEAK (a) against direct (b): a[i][r] is whether a's repeat r of task i passes."""
    tasks = tuple(f"t{i:02d}" for i in range(len(a)))
    repeats = len(a[0])
    spec: dict = {}
    for i, t in enumerate(tasks):
        spec[("direct", t)] = tuple(_unit(ok, speed_b) for ok in b[i])
        spec[("geak", t)] = tuple(_unit(ok, speed_a * (1 + 0.01 * i)) for ok in a[i])
    return write_run(path, spec, tasks=tasks, budget=1, simulated=False, model="m", repeats=repeats)


# ---------------------------------------------------------------------------- item 1: the small-suite rule
def test_exact_floor_and_minimum_suite() -> None:
    assert sign_flip_min_p(3) == 0.25 and sign_flip_min_p(2) == 0.5 and sign_flip_min_p(1) == 1.0
    # 2^(1-n) <= alpha / (2 family): 7 tasks for one verdict at 0.05, more for a larger family
    assert [min_tasks_to_reject(0.05, f) for f in (1, 2, 3, 4, 6, 7)] == [7, 8, 8, 9, 9, 10]
    assert min_tasks_to_reject(0.05, 1, margin=1.0) == 6  # the bare floor: 2/64 < 0.05 <= 2/32
    assert min_tasks_to_reject(0.01, 1) == 9


def test_three_tasks_give_counts_not_a_verdict(tmp_path: Path) -> None:
    """The audit's case: per-task differences (0.8, 0.8, 1.0) over 3 tasks gave 'exceeds,
    Holm-adjusted p = 0.006'; no exact test over 3 tasks goes below 0.25."""
    a = [[True] * 5] * 3
    b = [[True, False, False, False, False], [True, False, False, False, False], [False] * 5]
    comps = paired_comparisons(load_run(_run(tmp_path / "r", a, b)), n_resamples=RES)
    (c,) = [x for x in comps if x.metric == "submitted pass"]
    assert c.value == pytest.approx((0.8 + 0.8 + 1.0) / 3)
    assert not c.tested and not c.significant and math.isnan(c.test.pvalue) and math.isnan(c.t_interval.lo)
    s = verdict_sentence(c)
    assert "exceeds" not in s and "p =" not in s and "CI" not in s
    assert "too few tasks to test" in s and "(GEAK ahead on 3, direct prompting ahead on 0, tied on 0)" in s
    assert "no exact test over 3 tasks can give a p-value below 0.250" in s


def test_two_task_speedup_is_not_called_faster(tmp_path: Path) -> None:
    """The audit's case: 2 tasks where both are correct gave 'faster, p = 0.020'."""
    a = [[True]] * 2
    comps = paired_comparisons(load_run(_run(tmp_path / "r", a, a, 2.0, 1.0)), n_resamples=RES)
    (s,) = [x for x in comps if x.metric == "speedup"]
    assert s.n_tasks == 2 and not s.tested and "faster" not in verdict_sentence(s)
    assert "no exact test over 2 tasks can give a p-value below 0.500" in verdict_sentence(s)


def test_a_large_enough_suite_gets_a_verdict_decided_by_the_t_test(tmp_path: Path) -> None:
    n = 10
    a = [[True]] * n
    b = [[i < 2] for i in range(n)]
    d = load_run(_run(tmp_path / "r", a, b))
    comps = {c.metric: c for c in paired_comparisons(d, n_resamples=RES)}
    # one comparison that can be tested (the speedup rests on the 2 tasks direct passes): a family of one needs 7
    c = comps["submitted pass"]
    assert c.tested and c.min_tasks == 7 and not comps["speedup"].tested and c.significant
    s = verdict_sentence(c)
    assert "decided by the paired t-test on per-task differences (10 tasks)" in s
    assert "paired bootstrap" not in s  # item 2: the interval beside the verdict is the decider's own
    # the verdict and its printed interval agree before adjustment
    assert (c.test.pvalue < 0.05) == (c.t_interval.lo > 0 or c.t_interval.hi < 0)


# ---------------------------------------------------------------------------- item 6: errored units
def test_verdicts_count_errored_units_and_give_the_verdict_without_them(tmp_path: Path) -> None:
    from record.store import Store

    n = 12
    run = _run(tmp_path / "r", [[True]] * n, [[i < 2] for i in range(n)])
    store = Store(run / "store.sqlite")
    try:  # half of GEAK's units ended on a failed call (they still count as submitted failures)
        for i in range(0, n, 2):
            store._write("UPDATE units SET error=? WHERE method='geak' AND task=?", ("HTTP 400: too long", f"t{i:02d}"))
    finally:
        store.close()
    (c,) = [x for x in paired_comparisons(load_run(run), n_resamples=RES) if x.metric == "submitted pass"]
    assert c.errored == (6, 0)
    w = c.without_errors
    assert w is not None and w.n_tasks == 6 and w.tested is False  # 6 < 7 tasks (a family of one: the 2-task speedup is untested)
    assert w.value == pytest.approx(5 / 6)
    s = verdict_sentence(c)
    assert "Errored units on these tasks: GEAK 6, direct prompting 0; with them left out: +83.3 points over 6 " \
           "tasks, too few to test (at least 7 needed)." in s


# ---------------------------------------------------------------------------- item 9: labels and Wilcoxon
def test_zero_width_fixed_suite_interval_is_not_called_the_same_on_every_task() -> None:
    e = fixed_suite_ci([np.array([1.0, 1.0]), np.array([0.0, 0.0]), np.array([1.0, 1.0])])
    assert e.lo == e.hi
    text = interval_text(e.value, e.lo, e.hi, e.n, rate=True, reason=e.method)
    assert "the same on all" not in text and "every task's repeats agree" in text


def test_wilcoxon_n_counts_only_the_pairs_it_ranks() -> None:
    r = wilcoxon_log_ratio([2.0, 3.0, 1.0, 1.5, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0])
    assert r.n == 3 and "dropped 2 zero difference(s)" in r.note
    assert wilcoxon_log_ratio([2.0, 3.0, 1.0], [1.0, 1.0, 1.0], zero_method="pratt").n == 3


# ---------------------------------------------------------------------------- item 5: plan at one repeat
def test_ternary_power_by_hand_on_two_tasks() -> None:
    """n = 2: the t-test rejects nothing with spread (t_{0.975,1} = 12.7 needs |t| > 12.7; (1, 0)
    gives t = 1); all +1 or all -1 falls back to the sign-flip p = 0.5: never below 0.05."""
    assert ternary_power(0.5, 0.2, 2) == 0.0
    # n = 7: only the all-same-sign outcomes with zero spread, or large t, reject; check one cell
    p = ternary_power(1.0, 0.0, 7)
    assert p == pytest.approx(1.0)  # every difference +1: sign-flip p = 2/128 < 0.05


def test_plan_at_one_repeat_is_the_exact_ternary_power() -> None:
    model = PassVarianceModel.from_icc()
    assert one_repeat_cells(model, 0.5, 0.0) == pytest.approx((0.15, 0.15))
    mde = ternary_mde(model, 0.5, 30)
    assert 0.32 <= mde <= 0.34
    assert ternary_power(*one_repeat_cells(model, 0.5, mde), 30) == pytest.approx(0.8, abs=0.002)
    from results.planning import make_plan

    plan = make_plan(30, 1, 0.5)
    assert 32 <= plan.mde_points <= 34 and "exact" in plan.to_json()["test"]
    assert make_plan(30, 3, 0.5).mde_points < plan.mde_points


# ---------------------------------------------------------------------------- item 8: what was matched
def test_summary_records_what_the_run_matched(tmp_path: Path) -> None:
    import json

    from results.summary import build_summary
    from tests.fixtures.synthetic_run import make_synthetic_run

    old = build_summary(make_synthetic_run(tmp_path / "old"))["matched"]  # a run before match_evals: no cap
    assert old["gpu_eval_cap_per_unit"] is None and not old["gpu_evals_matched"]
    assert old["implementation_temperature"] == {"direct": 1.0, "reflexion": 0.0, "geak": 1.0}
    assert not old["same_temperature"] and any("reflexion 0.0" in x for x in old["not_matched"])
    run = make_synthetic_run(tmp_path / "new")
    config = json.loads((run / "config.json").read_text())
    config["config"]["match_evals"] = True
    config["resolved"]["method_options"]["reflexion"]["impl_temperature"] = 1.0
    (run / "config.json").write_text(json.dumps(config))
    new = build_summary(run)["matched"]
    assert new["gpu_eval_cap_per_unit"] == 2 and new["gpu_evals_matched"] and new["same_temperature"]
    assert new["not_matched"] == ["tokens: counted, not matched (the budget is in calls)"]
