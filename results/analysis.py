"""Everything the tables, figures, report and summary.json show, computed once from a RunData.

Why: tables, figures and summary.json must agree to the digit, so all read one Analysis
instead of recomputing (and the bootstrap, seeded once here, is not run twice with different
draws). `headline` is the part summary.json needs (per-method figures, the registered
statistics of results/statistics.py and the paired comparisons); `analyse` adds budget curves,
parallel scaling and the report's notes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from record.store import FULL_PROTOCOL
from results.bands import INTERVAL_MIN_TASKS, band_note, has_interval, too_few_words
from results.curves import AXES, MethodCurves, MethodRuns, budget_curves, parallel_scaling
from results.labels import TOO_FEW
from results.latency import CASE_COLS, case_frame
from results.method_stats import SMALL_SUITE, MethodStats, method_stats, timed_baselines
from results.readers import RunData
from results.statistics import StatisticValues, compute_statistics
from results.verdicts import SIGN_FLIP_BELOW, Comparison, display, paired_comparisons, uncompared_speedups
from stats import ALPHA

#: The bootstrap's defaults: summary.json uses them, so `report RUN` with default options reproduces it.
N_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0

__all__ = ["Analysis", "Headline", "analyse", "headline", "N_RESAMPLES", "BOOTSTRAP_SEED", "SMALL_SUITE"]


@dataclass
class Headline:
    """Per-method figures and paired comparisons: what summary.json and the report's main tables say."""

    data: RunData
    n_resamples: int
    seed: int
    methods: dict[str, MethodStats]
    comparisons: list[Comparison]
    statistics: list[StatisticValues] = field(default_factory=list)  # registered ones (results/statistics.py)

    @property
    def n_tasks(self) -> int:
        return int(self.data.units["task"].nunique())


@dataclass
class Analysis(Headline):
    curves: dict[str, dict[str, MethodCurves]] = field(default_factory=dict)
    runs: dict[str, MethodRuns] = field(default_factory=dict)
    latency: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=CASE_COLS))  # results.latency
    notes: list[str] = field(default_factory=list)


def headline(data: RunData, n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Headline:
    u = data.units
    baselines = timed_baselines(u)
    methods = {m: method_stats(u[u["method"] == m], n_resamples, seed, baselines,
                               data.examples[data.examples["method"] == m], data.runs[data.runs["method"] == m])
               for m in data.methods if (u["method"] == m).any()}
    return Headline(data, n_resamples, seed, methods, paired_comparisons(data, n_resamples, seed),
                    compute_statistics(data, methods, n_resamples, seed))


def analyse(data: RunData, n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Analysis:
    h = headline(data, n_resamples, seed)
    a = Analysis(data, n_resamples, seed, h.methods, h.comparisons, h.statistics,
                 curves={axis: budget_curves(data, axis, n_resamples, seed) for axis in AXES},
                 runs=parallel_scaling(data, n_resamples, seed),
                 # Timing noise is read from full-protocol timings only: a short feedback timing has
                 # a handful of samples by design, and its cached reference samples recur in many.
                 latency=case_frame(data.timings[data.timings["protocol"] == FULL_PROTOCOL], seed))
    a.notes.extend(_notes(a))
    return a


def _small_suite_figures(a: Analysis) -> list[str]:
    """Design invariant 12 for per-method figures: which rest on fewer than INTERVAL_MIN_TASKS tasks
    (and so are printed as a value with its count of tasks, with no interval and no band), and why."""
    def tasks(n: int) -> str:
        return f"{n} task" + ("s" if n != 1 else "")

    what = []
    for name, m in a.methods.items():
        if not has_interval(m.n_tasks):
            what.append(f"{display(name)}'s pass rates, pass@k and budget curves ({tasks(m.n_tasks)})")
        for s in m.speedups.values():
            if s.geomean.method.startswith(TOO_FEW):
                what.append(f"{display(name)}'s speedup geometric mean against the {s.label} ({tasks(s.n_tasks)})")
            if any(e.method.startswith(TOO_FEW) for e in s.fast_p.values()):
                what.append(f"{display(name)}'s fast_p against the {s.label} ({tasks(s.fast_p_tasks)})")
    if not what:
        return []
    return [f"Small suite, per method (design invariant 12): {'; '.join(what)} rest on fewer than "
            f"{INTERVAL_MIN_TASKS} tasks, so tables, summary.json and figures give each such figure as its value "
            "with the tasks it rests on, e.g. 0.67 (2/3 tasks), with no interval (null in summary.json) and no "
            f"band drawn: {too_few_words()}."]


def _notes(a: Analysis) -> list[str]:
    d = a.data
    repeats = max((m.repeats[1] for m in a.methods.values()), default=1)
    notes = [
        "What the intervals are about (the estimand): the population of tasks like these. A method's per-task "
        "score is the mean over its repeats, and suite means get intervals over tasks (95%). "
        + band_note(a.n_tasks, "Pass rates, pass@k and the pointwise bands of budget curves")
        + " (It replaced the BCa and percentile bootstrap, which covered 0.88-0.96 at 30 tasks and 0.82-0.97 at 10 in the same simulation.) "
        f"Speedups and fast_p are bootstrapped ({a.n_resamples} resamples, seed {a.seed}). "
        "Repeats are nested in tasks and never counted as independent."
        + (" The variance table adds the fixed-suite interval (these tasks only: within-task sampling noise), "
           "which leaves out task sampling (so it is usually, not always, narrower: with few tasks the "
           "bootstrap's own interval can be the narrower one), and splits each method's variance into between tasks and between repeats (ICC)."
           if repeats > 1 else " With one repeat per task, within-task noise cannot be told apart from task "
           "differences: run repeats for the fixed-suite interval and the variance split."),
        "Which test answers which question: a difference between two methods is decided by the paired t-test on "
        "per-task differences, and the Student-t interval on the same differences is the interval printed beside "
        "it (they agree before adjustment); the project's coverage simulation (scripts/coverage_sim.py) found that "
        "percentile and BCa bootstrap intervals for paired differences under-cover and reject a true null 7-13% "
        "of the time, so the paired BCa bootstrap is in the comparisons CSV only, as a description. "
        + (f"Below {SIGN_FLIP_BELOW} tasks the sign-flip permutation test on the same differences is shown "
           "beside the t-test. " if a.n_tasks < SIGN_FLIP_BELOW else "")
        + "Exact McNemar over (task, repeat) pairs treats repeats as independent, so its discordant pairs are "
        "descriptive only. Speedups are compared on per-task log ratios with the same t-test, Wilcoxon "
        "signed-rank (zero_method='wilcox', zero ratios left out of its n) beside it. All verdict p-values are "
        "adjusted together with Holm's method. Every verdict gives each method's errored units and, when any, "
        "the comparison with them left out.",
        "No detectable difference is not evidence of equivalence: each such verdict gives the smallest difference "
        "its test could detect (power 0.8, two-sided alpha 0.05 before Holm's adjustment, so optimistic when "
        "several comparisons are made), from the observed spread of per-task differences; "
        "`python cli.py plan` sizes the next run.",
        "Submitted pass: the method's own pick, chosen from visible feedback only, passes the hidden cases. Oracle "
        "pass: any candidate generated within the budget passes them (an upper bound, not a fair score).",
    ]
    untested = [c for c in a.comparisons if not c.tested]
    if untested:
        least = untested[0].min_tasks
        notes.append(
            f"Small suite (design invariant 12): {len(untested)} comparison(s) rest on fewer than {least} tasks, the "
            f"fewest on which an exact test could reject at alpha {ALPHA:g} across this report's family of "
            "verdicts with a margin of 2 (an exact sign-flip test over n tasks cannot give p below 2 / 2^n: 0.25 "
            "at 3 tasks, 0.5 at 2). They get no verdict and no interval, only the counts of tasks on which each "
            "method was ahead.")
    notes.extend(_small_suite_figures(a))
    if INTERVAL_MIN_TASKS <= a.n_tasks < 30:  # below the minimum no comparison has an interval to read
        notes.append(
            f"With {a.n_tasks} tasks (< 30), intervals are rough: in the coverage simulation (scripts/coverage_sim.py, "
            "2,000 suites) at 10 tasks the bootstrap intervals of paired differences covered 0.76-0.90 instead of "
            "0.95 and the t interval 0.90-0.95; read the t interval of comparisons, and prefer more tasks.")
    if any(m.pooled and has_interval(m.n_tasks) for m in a.methods.values()):
        notes.append(
            f"With {a.n_tasks} tasks (< {SMALL_SUITE}) and one repeat each, Wilson and Clopper-Pearson (exact) "
            "intervals over the tasks' outcomes are shown beside the bootstrap (each task is one Bernoulli trial). "
            "With repeats they would ignore the clustering of repeats in tasks, so they are left out.")
    if not d.has_timings:
        notes.append("No timed evaluations in this run (the CPU interpreter times nothing): speedup, fast_p and "
                     "latency tables and figures are left out.")
    else:
        notes.append("Speedups: the geometric mean is over correct submissions only, with the number of tasks it "
                     "rests on (per-task geometric mean over correct repeats first); fast_p is the share of all "
                     "tasks (per task: of its repeats) whose submission is correct and more than p times as fast "
                     "as the baseline (failures are never fast), against the expert Triton kernel and against "
                     "PyTorch eager (KernelBench's definition). No figure counts a failure as 1x. Timings flagged "
                     "for moving clocks or throttling are left out of every average (their unit's speed is "
                     "unknown); the speedup table's notes give the figures with them included.")
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
