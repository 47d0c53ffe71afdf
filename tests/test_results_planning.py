"""`plan`: minimum detectable difference and power of a comparison run, assumed or estimated
from a pilot run with repeats (results/planning.py, stats/power.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from results.planning import PlanError, estimate_pilot, make_plan
from results.readers import load_run
from stats import PassVarianceModel, minimum_detectable_difference
from tests.fixtures.synthetic_run import Cand, UnitSpec, make_synthetic_run, write_run


def _main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The command line in-process, as a user runs it: (exit status, stdout, stderr)."""
    import cli

    monkeypatch.setattr(sys, "argv", ["cli.py", *args])
    try:
        cli.main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_plan_json_at_30_tasks_one_repeat(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _main(monkeypatch, capsys, "plan", "--tasks", "30", "--repeats", "1", "--baseline", "0.5", "--json")
    assert code == 0
    plan = json.loads(out)
    assert 20 <= plan["mde_points"] <= 40
    assert list(plan["power"]) == ["5", "10", "20"]
    powers = list(plan["power"].values())
    assert powers == sorted(powers) and 0.05 < powers[0] < powers[-1] < 0.8  # 20 points is below the MDE
    assert plan["model"]["source"].startswith("assumed")


def test_repeats_and_tasks_shrink_the_mde() -> None:
    one, three = make_plan(30, 1, 0.5), make_plan(30, 3, 0.5)
    # one repeat: exact power over ternary differences, 32.6 points (the normal formula's 29 was optimistic,
    # issue 43: simulated power 0.69-0.78 there); three repeats: the noncentral t as before
    assert 32 < one.mde_points < 34 and 18 < three.mde_points < 21
    assert make_plan(60, 1, 0.5).mde_points < one.mde_points
    assert one.alternatives["2 repeats"] < one.mde_points and one.alternatives["60 tasks"] < one.mde_points
    assert "32.6 points" in one.text()


@pytest.mark.parametrize("args,message", [
    (("--tasks", "1", "--baseline", "0.5"), "--tasks must be at least 2"),
    (("--tasks", "30", "--baseline", "1.2"), "--baseline must be a pass rate"),
    (("--tasks", "30", "--repeats", "0", "--baseline", "0.5"), "--repeats must be at least 1"),
    (("--tasks", "30"), "give --baseline P"),
])
def test_plan_bad_input(args: tuple[str, ...], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        make_plan(int(args[1]), int(args[args.index("--repeats") + 1]) if "--repeats" in args else 1,
                  float(args[args.index("--baseline") + 1]) if "--baseline" in args else None)


def _pilot(tmp_path: Path, n_tasks: int, repeats: int, seed: int, spread_u: float = 0.15) -> tuple[Path, dict]:
    """A pilot of two methods whose per-task success probabilities are known: p_b = 0.5 + e,
    p_a = 0.5 + e + u, e ~ U(-0.2, 0.2), u ~ U(-spread_u, spread_u); one pass/fail unit per repeat."""
    rng = np.random.default_rng(seed)
    e = rng.uniform(-0.2, 0.2, n_tasks)
    u = rng.uniform(-spread_u, spread_u, n_tasks)
    tasks = tuple(f"t{i:03d}" for i in range(n_tasks))
    spec: dict = {}
    for i, t in enumerate(tasks):
        for method, p in (("direct", 0.5 + e[i]), ("geak", 0.5 + e[i] + u[i])):
            units = []
            for _ in range(repeats):
                kind = "correct" if rng.random() < p else "wrong_result"
                units.append(UnitSpec(("generator",), (Cand(1, kind, kind),), ((1, 0),), speedup=1.0))
            spec[(method, t)] = tuple(units)
    run = write_run(tmp_path / f"pilot{seed}", spec, tasks=tasks, budget=1, repeats=repeats, seed=seed)
    var_e, var_u = 0.2 ** 2 / 3, spread_u ** 2 / 3
    truth = {"between": var_u, "within_direct": 0.25 - var_e, "within_geak": 0.25 - var_e - var_u}
    return run, truth


def test_pilot_estimates_match_the_known_variances(tmp_path: Path) -> None:
    run, truth = _pilot(tmp_path, n_tasks=80, repeats=4, seed=2)
    est = estimate_pilot(load_run(run))
    (pair,) = est.pairs
    assert (pair.a, pair.b) == ("geak", "direct") and est.repeats == 4
    assert pair.within_b == pytest.approx(truth["within_direct"], abs=0.03)  # s.e. about 0.011
    assert pair.within_a == pytest.approx(truth["within_geak"], abs=0.03)
    # the sd of a per-task difference at the pilot's own design, predicted vs true (the between part alone is
    # too small to estimate well from 80 tasks; its sum with the within part is what the MDE needs)
    true_sd = np.sqrt(truth["between"] + (truth["within_direct"] + truth["within_geak"]) / 4)
    assert pair.model.difference_sd(est.pass_rate, 4) == pytest.approx(true_sd, rel=0.12)
    plan = make_plan(30, 4, 0.5, run)
    true_mde = minimum_detectable_difference(true_sd, 30)
    assert plan.mde == pytest.approx(true_mde, rel=0.15) and plan.model.source.startswith("pilot pilot2")
    assert plan.to_json()["pilot"]["pairs"][0]["within_var"]["direct"] == pair.within_b


def test_pilot_without_repeats_or_second_method_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    one_repeat = make_synthetic_run(tmp_path / "one")
    with pytest.raises(PlanError, match="one repeat per task"):
        make_plan(30, 1, 0.5, one_repeat)
    spec = {("direct", "vector_add"): UnitSpec(("generator",), (Cand(1, "correct", "correct"),), ((1, 0),),
                                               speedup=1.0)}
    lone = write_run(tmp_path / "lone", spec, tasks=("vector_add",), budget=1, repeats=2)
    with pytest.raises(PlanError, match="needs two to compare"):
        make_plan(30, 1, 0.5, lone)
    code, out, err = _main(monkeypatch, capsys, "plan", "--tasks", "30", "--pilot", str(one_repeat))
    assert code == 2 and out == "" and err.startswith("error: the pilot") and "one repeat per task" in err
    assert len(err.strip().splitlines()) == 1


def test_pilot_without_a_baseline_uses_its_own_pass_rate(tmp_path: Path) -> None:
    run, _ = _pilot(tmp_path, n_tasks=8, repeats=3, seed=5)
    plan = make_plan(20, 2, None, run)
    assert plan.baseline == pytest.approx(estimate_pilot(load_run(run)).pass_rate)
    assert any("8 tasks: its variance estimates are rough" in n for n in plan.notes)


def test_assumed_model_is_the_documented_default() -> None:
    plan = make_plan(30, 1, 0.5)
    assert plan.model == PassVarianceModel.from_icc(0.5, 0.8)
