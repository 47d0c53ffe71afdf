"""Planning a comparison run: the minimum detectable difference and the power of the paired
test over tasks for a given number of tasks and repeats (`python cli.py plan`).

Why: "no detectable difference" from a run too small to detect anything is not a finding;
the size of a run is decided before it is paid for. The math is in stats/power.py; this
module reads a pilot run (when given) and states the plan.

Without a pilot the variance of a per-task difference comes from an assumed model (ICC 0.5,
correlation 0.8 between the two methods' per-task success; stats.PassVarianceModel). With
`--pilot RUN_DIR` it is estimated from that run, for every pair of its methods, on submitted
pass at the full budget: each method's within-task variance (one-way ANOVA over its repeats)
and the variance of the TRUE per-task differences (the observed variance of per-task
differences minus their within-task part), both as ratios to the pilot's P(1-P), so they
carry over to another baseline pass rate (ratios, not shares: the first exceeds 1 where the
methods pass different tasks; the plan prints the shares of a per-task difference's variance
that each part makes at the planned repeats, which sum to 1). The pair with the largest spread is used (the
conservative choice). A pilot needs repeats: with one repeat per task, within-task noise
cannot be told apart from task differences.

With one repeat per task the per-task difference is ternary and its spread grows under the
alternative, so the normal formula was optimistic there (29 points at 30 tasks x 1 repeat at
0.5, where the test's simulated power was 0.69-0.78): at one repeat the power is computed
exactly over the ternary outcomes (stats.ternary_power, the alternative of
stats.one_repeat_cells), 32.6 points at 30 tasks. With repeats the normal formula stays.
Below the small-suite minimum (stats.min_tasks_to_reject) the report gives no verdict at all,
and the plan says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from results.readers import RunData, load_run
from stats import (
    ALPHA,
    TARGET_POWER,
    PassVarianceModel,
    min_tasks_to_reject,
    minimum_detectable_difference,
    one_repeat_cells,
    paired_power,
    ternary_mde,
    ternary_power,
    variance_components,
)

POWER_AT_POINTS = (5, 10, 20)


class PlanError(ValueError):
    """Bad plan input or an unusable pilot: one line for the user."""


@dataclass(frozen=True)
class PairEstimate:
    """Variance of per-task differences between methods a and b in a pilot run.

    between_var: variance of the true per-task differences (clipped at 0: `clipped`);
    within_a / within_b: a unit's variance around its task's success probability;
    model: both as ratios to the pilot's P(1-P) (stats.PassVarianceModel; they exceed 1 where the
    methods pass different tasks); `Plan.shares` turns them into shares of a difference's variance."""

    a: str
    b: str
    n_tasks: int
    between_var: float
    within_a: float
    within_b: float
    clipped: bool
    model: PassVarianceModel

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "tasks": self.n_tasks, "between_task_difference_var": self.between_var,
                "within_var": {self.a: self.within_a, self.b: self.within_b}, "clipped_at_zero": self.clipped,
                "between_var_ratio": self.model.between_share, "within_var_ratio": self.model.within_share}


@dataclass(frozen=True)
class PilotEstimate:
    run: Path
    n_tasks: int
    repeats: float
    pass_rate: float
    pairs: list[PairEstimate]

    def chosen(self, baseline: float, repeats: int) -> PairEstimate:
        """The pair whose per-task differences spread most at this baseline and repeat count."""
        return max(self.pairs, key=lambda p: p.model.difference_sd(baseline, repeats))


@dataclass(frozen=True)
class Plan:
    n_tasks: int
    repeats: int
    baseline: float
    model: PassVarianceModel
    sd: float
    mde: float
    power: dict[int, float]
    alternatives: dict[str, float]
    pilot: PilotEstimate | None = None
    alpha: float = ALPHA
    target_power: float = TARGET_POWER
    notes: list[str] = field(default_factory=list)

    @property
    def mde_points(self) -> float:
        return 100 * self.mde

    @property
    def shares(self) -> tuple[float, float]:
        """(between tasks, repeat noise): the parts of a per-task difference's variance at this
        plan's repeats, as shares that sum to 1. The model's own parameters are ratios to P(1-P)
        and exceed 1 where the pilot's methods succeed on different tasks (negatively correlated)."""
        between = 2 * self.model.between_share
        within = 2 * self.model.within_share / self.repeats
        return between / (between + within), within / (between + within)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tasks": self.n_tasks, "repeats": self.repeats, "baseline": self.baseline, "alpha": self.alpha,
            "target_power": self.target_power, "test": "paired t-test on per-task differences (two-sided)"
            + ("; power exact over ternary per-task differences (one repeat)" if self.repeats == 1 else
               "; power from the noncentral t"),
            "mde_points": self.mde_points, "power": {str(k): v for k, v in self.power.items()},
            "sd_per_task_difference": self.sd,
            "model": {"source": self.model.source, "between_share": self.shares[0], "within_share": self.shares[1],
                      "between_var_ratio": self.model.between_share, "within_var_ratio": self.model.within_share},
            "mde_points_if": self.alternatives, "notes": self.notes,
        }
        if self.pilot is not None:
            out["pilot"] = {"run": str(self.pilot.run), "tasks": self.pilot.n_tasks, "repeats": self.pilot.repeats,
                            "pass_rate": self.pilot.pass_rate, "pairs": [p.to_json() for p in self.pilot.pairs]}
        return out

    def text(self) -> str:
        r = "repeat" if self.repeats == 1 else "repeats"
        lines = [
            f"plan: {self.n_tasks} tasks x {self.repeats} {r}, baseline pass rate {self.baseline:.2f}; paired t-test "
            f"on per-task differences, two-sided alpha {self.alpha:g}",
            f"variance: {self.model.source}; of a per-task difference's variance at {self.repeats} {r}, "
            f"{self.shares[0]:.0%} is between tasks and {self.shares[1]:.0%} repeat noise (true per-task "
            f"differences vary {self.model.between_share:.3f} x 2P(1-P), a unit {self.model.within_share:.3f} x "
            f"P(1-P) around its task's rate); sd of a per-task difference {self.sd:.3f}",
            f"minimum detectable difference (power {self.target_power:g}): {self.mde_points:.1f} points"
            + (" (more than any difference of pass rates: this run cannot detect one)" if self.mde >= 1 else ""),
            "power at " + ", ".join(f"{k} points {v:.2f}" for k, v in self.power.items()),
            "MDE if: " + "; ".join(f"{k} {v:.1f} points" for k, v in self.alternatives.items()),
        ]
        return "\n".join(lines + self.notes)


def _within(values_by_task: list[np.ndarray]) -> float:
    return variance_components(values_by_task).within


def estimate_pilot(data: RunData) -> PilotEstimate:
    """Variance shares of per-task differences in submitted pass, for every method pair of a run."""
    u = data.units
    methods = [m for m in data.methods if (u["method"] == m).any()]
    if len(methods) < 2:
        raise PlanError(f"the pilot {data.first.path} has {len(methods)} method(s); a pilot needs two to compare")
    sizes = u.groupby(["method", "task"]).size()
    if sizes.max() < 2:
        raise PlanError(f"the pilot {data.first.path} has one repeat per task: within-task noise cannot be told "
                        "apart from task differences; run the pilot with --repeats 2 or more")
    rate = float(u.groupby(["method", "task"])["submitted_pass"].mean().mean())
    if not 0 < rate < 1:
        raise PlanError(f"the pilot's pass rate is {rate:g}: every unit {'passes' if rate else 'fails'}, so it says "
                        "nothing about variance; use a pilot with some passes and some failures, or --baseline alone")
    scale = rate * (1 - rate)
    pairs = []
    for b, a in combinations(methods, 2):
        ua, ub = u[u["method"] == a], u[u["method"] == b]
        tasks = sorted(set(ua["task"]) & set(ub["task"]))
        if len(tasks) < 2:
            continue
        ga = [ua.loc[ua["task"] == t, "submitted_pass"].to_numpy(float) for t in tasks]
        gb = [ub.loc[ub["task"] == t, "submitted_pass"].to_numpy(float) for t in tasks]
        wa, wb = _within(ga), _within(gb)
        d = np.array([x.mean() - y.mean() for x, y in zip(ga, gb, strict=True)])
        noise = float(np.mean([wa / x.size + wb / y.size for x, y in zip(ga, gb, strict=True)]))
        raw = float(np.var(d, ddof=1)) - noise
        between = max(0.0, raw)
        within_share = (wa + wb) / 2 / scale
        if between == 0 and within_share == 0:
            continue
        model = PassVarianceModel(between / (2 * scale), within_share, source=f"pilot {data.first.name}: {a} vs {b}")
        pairs.append(PairEstimate(a, b, len(tasks), between, wa, wb, raw < 0, model))
    if not pairs:
        raise PlanError(f"the pilot {data.first.path} shows no variance between any two methods on shared tasks")
    return PilotEstimate(data.first.path, int(u["task"].nunique()), float(sizes.mean()), rate, pairs)


def make_plan(n_tasks: int, repeats: int = 1, baseline: float | None = None, pilot: Path | None = None,
              alpha: float = ALPHA, target_power: float = TARGET_POWER) -> Plan:
    """The MDE and power of a run of `n_tasks` x `repeats` at pass rate `baseline` (the pilot's
    own rate when a pilot is given without one)."""
    if n_tasks < 2:
        raise PlanError(f"--tasks must be at least 2 (a paired t-test over tasks), got {n_tasks}")
    if repeats < 1:
        raise PlanError(f"--repeats must be at least 1, got {repeats}")
    if baseline is not None and not 0 < baseline < 1:
        raise PlanError(f"--baseline must be a pass rate strictly between 0 and 1, got {baseline:g}")
    est = estimate_pilot(load_run(pilot)) if pilot is not None else None
    if baseline is None:
        if est is None:
            raise PlanError("give --baseline P (the expected pass rate) or --pilot RUN_DIR")
        baseline = est.pass_rate
    notes = []
    if est is not None:
        pick = est.chosen(baseline, repeats)
        model = pick.model
        if len(est.pairs) > 1:
            notes.append(f"pilot pairs: {', '.join(f'{p.a} vs {p.b}' for p in est.pairs)}; the one whose "
                         "differences spread most is used (the conservative choice)")
        if pick.clipped:
            notes.append("in the pilot, per-task differences varied less than within-task noise alone explains: "
                         "the between-task part is taken as 0")
        if est.n_tasks < 10:
            notes.append(f"the pilot has {est.n_tasks} tasks: its variance estimates are rough")
    else:
        model = PassVarianceModel.from_icc()

    assert baseline is not None
    p = float(baseline)

    def mde_at(n: int, r: int) -> float:
        if r == 1:  # ternary per-task differences: exact power (module docstring)
            exact = ternary_mde(model, p, n, alpha, target_power)
            return exact if exact == exact else 1.0  # NaN: no difference that fits reaches the power
        return minimum_detectable_difference(model.difference_sd(p, r), n, alpha, target_power)

    def power_at(delta: float) -> float:
        if repeats == 1:
            try:
                return ternary_power(*one_repeat_cells(model, p, delta), n_tasks, alpha)
            except ValueError:  # the difference does not fit around the baseline
                return float("nan")
        return paired_power(delta, sd, n_tasks, alpha)

    minimum = min_tasks_to_reject(alpha)
    if n_tasks < minimum:
        notes.append(f"{n_tasks} tasks is below the report's small-suite minimum ({minimum} tasks for a single "
                     "verdict, more when a report holds several): the report will give counts and no verdict")
    sd = model.difference_sd(p, repeats)
    return Plan(
        n_tasks=n_tasks, repeats=repeats, baseline=p, model=model, sd=sd, mde=mde_at(n_tasks, repeats),
        power={k: power_at(k / 100) for k in POWER_AT_POINTS},
        alternatives={f"{2 * repeats} repeats": 100 * mde_at(n_tasks, 2 * repeats),
                      f"{2 * n_tasks} tasks": 100 * mde_at(2 * n_tasks, repeats)},
        pilot=est, alpha=alpha, target_power=target_power, notes=notes,
    )
