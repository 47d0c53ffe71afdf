"""Everything the tables, figures and report show, computed once from a RunData.

Why: tables and figures must agree to the digit, so both read one Analysis instead of
recomputing (and the bootstrap, seeded once here, is not run twice with different draws).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from results.curves import AXES, MethodCurves, MethodRuns, budget_curves, parallel_scaling
from results.readers import RunData
from results.verdicts import Comparison, paired_comparisons, uncompared_speedups

SMALL_SUITE = 50  # below this many tasks, Wilson and exact intervals are shown beside the bootstrap


@dataclass
class Analysis:
    data: RunData
    n_resamples: int
    seed: int
    curves: dict[str, dict[str, MethodCurves]]
    runs: dict[str, MethodRuns]
    comparisons: list[Comparison]
    notes: list[str] = field(default_factory=list)

    @property
    def n_tasks(self) -> int:
        return int(self.data.units["task"].nunique())


def analyse(data: RunData, n_resamples: int = 10_000, seed: int = 0) -> Analysis:
    curves = {axis: budget_curves(data, axis, n_resamples, seed) for axis in AXES}
    runs = parallel_scaling(data, n_resamples, seed)
    comparisons = paired_comparisons(data, n_resamples, seed)
    a = Analysis(data, n_resamples, seed, curves, runs, comparisons)
    a.notes.extend(_notes(a))
    return a


def _notes(a: Analysis) -> list[str]:
    d = a.data
    notes = [
        "Intervals are 95%. The resampling unit is the task: a method's per-task score is the mean over its "
        f"repeats, and suite means are bootstrapped over tasks ({a.n_resamples} resamples, seed {a.seed}; BCa "
        "for table values, percentile for the pointwise bands of budget curves).",
        "Paired comparisons use the Student-t interval on per-task differences, with the paired BCa bootstrap "
        "shown beside it: the project's coverage simulation (scripts/coverage_sim.py) found that percentile and "
        "BCa bootstrap intervals for paired differences of pass@k under-cover at 30 tasks (0.87-0.90) while the "
        "t interval holds (0.93-0.95).",
        "McNemar's exact test pairs units by (task, repeat); Wilcoxon signed-rank tests on log speedup ratios use "
        "zero_method='wilcox'. All p-values in this report are adjusted together with Holm's method.",
        "Submitted pass: the method's own pick, chosen from visible feedback only, passes the hidden cases. Oracle "
        "pass: any candidate generated within the budget passes them (an upper bound, not a fair score).",
    ]
    if a.n_tasks < SMALL_SUITE:
        notes.append(
            f"With {a.n_tasks} tasks (< {SMALL_SUITE}), Wilson and Clopper-Pearson (exact) intervals are shown "
            "beside the bootstrap; they treat each unit (task, repeat) as an independent Bernoulli trial, so with "
            "several repeats per task they ignore the correlation of repeats and are narrower than they should be.")
    if not d.has_timings:
        notes.append("No timed evaluations in this run (the CPU interpreter times nothing): speedup, fast_p and "
                     "latency tables and figures are left out.")
    else:
        notes.append("Speedups are against the task's expert Triton baseline, timed interleaved with the candidate. "
                     "The correct-only geometric mean is always shown beside the correct rate; the all-task "
                     "geometric mean counts a failure as 1x (the user keeps the baseline); fast_p counts failures "
                     "as not fast.")
    for m, r in a.runs.items():
        if r.note:
            notes.append(r.note + ".")
        opts = d.method_options.get(m, {})
        temp = opts.get("impl_temperature", opts.get("temperature"))
        if r.curve is not None and temp == 0:
            notes.append(f"{m}: its code is generated at temperature 0, so its runs are not independent samples "
                         "and pass@k over them is not a parallel-scaling estimate.")
    if d.budget_unit != "calls":
        notes.append("The budget is in tokens; the calls axis of budget curves runs to the most calls any unit spent.")
    else:
        notes.append("Against tokens, a unit that stopped (its calls budget spent) keeps its last submission at larger "
                     "token values; the token axis shows total (prompt + completion) tokens.")
    notes.extend(uncompared_speedups(d))
    if d.unfinished_units:
        notes.append(f"{d.unfinished_units} unit(s) not finished were left out.")
    return notes
