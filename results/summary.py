"""summary.json and the end-of-run table, computed from the run folder alone.

Because it reads only the run folder (config.json and the store, through results.readers,
the frames the report reads) and takes every figure from results.analysis.headline (the
code behind the report's tables and verdicts, with the report's default bootstrap: 10,000
resamples, seed 0), summary.json and `report RUN` agree to the digit, and the summary of a
resumed run is computed exactly as that of an uninterrupted one (it holds no wall-clock
fields, so the two compare equal).

Stable fields (scripts rely on them): simulated, budget, budget_unit, and per method
calls_used, tokens_used (per task, summed over repeats), submitted_pass, oracle_pass
(means over tasks of per-task means over repeats), submitted_pass_ci (95% over tasks: the band
chosen by measured coverage, stats.RATE_BAND; issue 43 replaced the BCa bootstrap; `ci_method`
names it and `ci_coverage` gives its measured coverage at this suite size in words, as the
report does), speedup_geomean (geometric mean over tasks of each task's geometric mean over
its correct, timed, unflagged repeats, against the expert Triton kernel; null when none).
Also per method: errored_units and failed_calls (ints: units that ended on a model call
that failed for good, and those calls; design invariant 10), oneshot_examples (how many
one-shot examples calls showed, and their largest and mean similarity to the task's answer,
null when none), runs_independent (the method's declaration for its runs; pass@k over runs
is computed only when true), unsupported_on_interpreter (units whose final submission the CPU
interpreter could not run: not passes, and counted apart from the method's failures). Top level `matched` says what the run matched across methods
(budget, implementation temperature, GPU-evaluation cap per unit) and what it did not. The
per-method entry is built in one place (`method_entry`), so
fields added later land beside these. Beside the stable fields, per method: oracle_pass_ci,
ci_method, ci_coverage, gpu_evals, submitted_pass_fixed_suite_ci and icc (with repeats),
speedup_geomean_ci, speedup_tasks, speedups (per baseline, `expert` and `eager`: geometric mean
with its interval, tasks and units, fast_p and fast_p_ci at 0/1/1.5/2, units left out, flagged
units, the figures with them included); top level: `bootstrap` and `comparisons` (per method pair
and metric: estimate, t interval, test, p, Holm-adjusted p, minimum detectable difference). An
undefined figure is null, never NaN. Two meanings were corrected: speedup_geomean used to pool
every correct unit, repeats and flagged timings included, so a task with more correct repeats
weighed more (with one repeat and no flagged timing the two agree); visible_false_positive_rate
used to pick up another unit's verdict for a shared source, and now reads the unit's own visible
feedback only. A registered statistic (results/statistics.py) adds per method `<name>` and, with
an interval, `<name>_ci` after these, and the top-level `statistics` names each one's class
(absent when none is registered).

Below the small-suite minimum (design invariant 12; `interval_min_tasks`, 7 tasks at alpha 0.05,
results/bands.py) no per-method figure has an interval: its `*_ci` field is null (as are
`ci_method` and `ci_coverage`), `no_interval_reason` says which fields and why (null when every
interval is given), and `submitted_pass_count` / `oracle_pass_count` give the tasks the value
rests on ("2/3 tasks" when every per-task score is 0 or 1, else "3 tasks"; null where the
interval is given); each entry of
`speedups` has its own `no_interval_reason` (its geometric mean and fast_p rest on their own tasks).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from modelio.ledger import matched_eval_cap
from results.analysis import Headline, headline
from results.bands import (
    INTERVAL_MIN_TASKS,
    band_label,
    count_words,
    coverage_words,
    has_interval,
    too_few_words,
)
from results.labels import SIMULATED_BANNER, TOO_FEW, interval_text
from results.method_stats import MethodStats, SpeedupStats
from results.plugins import PluginError
from results.readers import RunData, load_run
from results.statistics import StatisticValues
from results.verdicts import Comparison
from stats import Estimate


def build_summary(run_dir: Path) -> dict[str, Any]:
    """summary.json's content for a run folder."""
    return summarize(headline(load_run(run_dir)))


def _num(x: float | None) -> float | None:
    """JSON has no NaN: an undefined figure is null."""
    return None if x is None or not math.isfinite(x) else float(x)


def _ci(e: Estimate | None) -> list[float] | None:
    """[lo, hi]; null when there is no value or no interval (withheld below the small-suite minimum)."""
    if e is None or not all(math.isfinite(x) for x in (e.value, e.lo, e.hi)):
        return None
    return [float(e.lo), float(e.hi)]


def _count(e: Estimate) -> str | None:
    """The tasks a point value without an interval rests on, as its cells print them: "2/3 tasks"
    (results.bands.count_words); None when it has its interval."""
    if e.method.startswith(f"{TOO_FEW} (") and e.method.endswith(")"):
        return e.method[len(TOO_FEW) + 2:-1]
    return None


def _no_interval(withheld: list[tuple[str, Estimate | None]]) -> str | None:
    """Which interval fields are null because their figure rests on too few tasks, and why; None
    when every interval is given."""
    off = [(name, e) for name, e in withheld if e is not None and e.method.startswith(TOO_FEW)]
    if not off:
        return None
    fields = "; ".join(f"{name} over {count_words(None, e.n)}" for name, e in off)
    return f"null interval fields ({fields}): {too_few_words()}"


def _p_key(p: float) -> str:
    return f"{p:g}"


def speedup_entry(s: SpeedupStats) -> dict[str, Any]:
    fast = next(iter(s.fast_p.values()), None)  # every fast_p rests on the same fast_p_tasks
    return {
        "geomean": _num(s.geomean.value), "geomean_ci": _ci(s.geomean), "tasks": s.n_tasks, "units": s.n_units,
        "fast_p": {_p_key(p): _num(e.value) for p, e in s.fast_p.items()},
        "fast_p_ci": {_p_key(p): _ci(e) for p, e in s.fast_p.items()},
        "fast_p_tasks": s.fast_p_tasks, "excluded_units": s.excluded_units, "flagged_units": s.flagged_units,
        "with_flagged": None if s.with_flagged is None else {"geomean": _num(s.with_flagged[0]),
                                                              "fast_1": _num(s.with_flagged[1])},
        "no_interval_reason": _no_interval([("geomean_ci", s.geomean), ("fast_p_ci", fast)]),
    }


def method_entry(m: MethodStats, registered: list[StatisticValues] | None = None) -> dict[str, Any]:
    """One method's summary.json entry (see the module docstring for the stable fields), with the
    fields of the registered statistics (results/statistics.py) last."""
    expert = m.speedups.get("expert")
    banded = has_interval(m.n_tasks)
    extra = registered or []
    entry = {
        "calls_used": m.calls,
        "tokens_used": m.tokens,
        "gpu_evals": m.gpu_evals,
        "submitted_pass": float(m.submitted.value),
        "oracle_pass": float(m.oracle.value),
        "submitted_pass_ci": _ci(m.submitted),
        "oracle_pass_ci": _ci(m.oracle),
        "ci_method": f"{band_label()} over {m.n_tasks} tasks ({m.submitted.method})" if banded else None,
        "ci_coverage": coverage_words(m.n_tasks) if banded else None,
        "interval_min_tasks": INTERVAL_MIN_TASKS,
        "no_interval_reason": _no_interval([("submitted_pass_ci", m.submitted), ("oracle_pass_ci", m.oracle),
                                            ("submitted_pass_fixed_suite_ci", m.submitted_fixed),
                                            ("speedup_geomean_ci", expert.geomean if expert else None)]
                                           + [(f"{r.name}_ci", r.values.get(m.method)) for r in extra
                                              if r.shows.interval]),
        "submitted_pass_count": _count(m.submitted),
        "oracle_pass_count": _count(m.oracle),
        "submitted_pass_fixed_suite_ci": _ci(m.submitted_fixed),
        "icc": _num(m.variance.icc) if m.variance else None,
        "visible_false_positive_rate": _num(m.visible_fp_rate),
        "speedup_geomean": _num(expert.geomean.value) if expert else None,
        "speedup_geomean_ci": _ci(expert.geomean) if expert else None,
        "speedup_tasks": expert.n_tasks if expert else 0,
        "speedup_correct_only": True,
        "speedups": {b: speedup_entry(s) for b, s in m.speedups.items()},
        "errored_units": m.errored_units,
        "failed_calls": m.failed_calls,
        "oneshot_examples": {"shown": m.examples, "similarity_max": _num(m.example_similarity_max),
                             "similarity_mean": _num(m.example_similarity_mean)},
        "runs_independent": m.runs_independent,
    }
    for r in extra:
        _add_statistic(entry, r, r.values.get(m.method))
    return entry


def _add_statistic(entry: dict[str, Any], r: StatisticValues, e: Estimate | None) -> None:
    """A registered statistic's fields in a method's entry: `<name>` and, with an interval, `<name>_ci`."""
    fields: dict[str, Any] = {r.name: None if e is None else _num(e.value)}
    if r.shows.interval:
        fields[f"{r.name}_ci"] = _ci(e)
    taken = [f for f in fields if f in entry]
    if taken:
        raise PluginError(f"statistic {r.name!r} ({r.origin}): summary.json already has the field {taken[0]!r}")
    entry.update(fields)


def comparison_entry(c: Comparison) -> dict[str, Any]:
    """One verdict: `tested` false below the small-suite minimum (`min_tasks`; then test, p and ci are
    null and only the counts `tasks_a_better` / `tasks_b_better` stand); `decided_by` names the test;
    `errored` counts each method's errored units and `without_errors` gives the figures without them."""
    w = c.without_errors
    return {"a": c.a, "b": c.b, "metric": c.metric, "tasks": c.n_tasks, "tested": c.tested, "min_tasks": c.min_tasks,
            "estimate": _num(c.value),
            "ci": [_num(c.t_interval.lo), _num(c.t_interval.hi)] if c.tested else None,
            "test": c.test.method if c.tested else None, "decided_by": c.decided_by or None,
            "p": _num(c.test.pvalue), "p_adjusted": _num(c.p_adjusted), "adjust_method": c.adjust_method,
            "significant": c.significant, "mde": _num(c.mde.value),
            "tasks_a_better": c.test.n10, "tasks_b_better": c.test.n01,
            "errored": {c.a: c.errored[0], c.b: c.errored[1]},
            "without_errors": None if w is None else {
                "tasks": w.n_tasks, "estimate": _num(w.value), "p": _num(w.p), "tested": w.tested,
                "ci": [_num(w.t_interval.lo), _num(w.t_interval.hi)] if w.t_interval is not None else None}}


def matched_entry(data: RunData) -> dict[str, Any]:
    """What the run matched across methods and what it did not (issue 43): the budget (always,
    by the ledger), the temperature of each method's code-writing calls, and the cap on GPU
    evaluations per unit (config.json's eval_budget, else the matched cap when match_evals;
    a run recorded before match_evals existed had none)."""
    info = data.first
    opts = info.options
    temps = {m: o.get("impl_temperature", o.get("temperature")) for m, o in data.method_options.items()}
    known = [t for t in temps.values() if t is not None]
    same_temp = len(set(known)) == 1 and len(known) == len(temps)
    cap = opts.get("eval_budget")
    if cap is None and opts.get("match_evals", False):
        cap = matched_eval_cap(info.budget, info.budget_unit)
    unmatched = []
    if not same_temp:
        unmatched.append("implementation temperature: " + ", ".join(f"{m} {t}" for m, t in temps.items()))
    if cap is None:
        unmatched.append("GPU evaluations per unit: not capped (counted per method under gpu_evals)")
    if info.budget_unit == "calls":
        unmatched.append("tokens: counted, not matched (the budget is in calls)")
    return {"budget": {"unit": info.budget_unit, "per_unit": info.budget, "matched": True},
            "implementation_temperature": temps, "same_temperature": same_temp,
            "gpu_eval_cap_per_unit": cap, "gpu_evals_matched": cap is not None, "not_matched": unmatched}


def summarize(h: Headline) -> dict[str, Any]:
    data: RunData = h.data
    info = data.first
    unit = info.budget_unit
    summary: dict[str, Any] = {
        "simulated": info.simulated,
        "model": info.model,
        "budget": info.budget,
        "budget_unit": "calls" if unit == "calls" else "tokens",
        "tokens_counted": None if unit == "calls" else ("output" if unit == "output_tokens" else "total"),
        "repeats": info.repeats,
        "seed": info.seed,
        "bootstrap": {"resamples": h.n_resamples, "seed": h.seed},
        "methods": {},
        "comparisons": [comparison_entry(c) for c in h.comparisons],
        "matched": matched_entry(data),
    }
    if h.statistics:  # registered statistics (results/statistics.py): each one's class
        summary["statistics"] = {r.name: r.origin for r in h.statistics}
    unsupported = unsupported_counts(data)
    for method in info.methods:
        m = h.methods.get(method)
        summary["methods"][method] = method_entry(m, h.statistics) if m else {
            "calls_used": {}, "tokens_used": {}, "submitted_pass": None, "oracle_pass": None,
            "submitted_pass_ci": None, "speedup_geomean": None, "errored_units": 0, "failed_calls": 0}
        if not m:
            for r in h.statistics:
                _add_statistic(summary["methods"][method], r, None)
        summary["methods"][method]["unsupported_on_interpreter"] = unsupported.get(method, 0)
    return summary


def unsupported_counts(data: RunData) -> dict[str, int]:
    """Per method, the units whose final submission the CPU interpreter could not run
    (`unsupported_on_interpreter`: inline assembly, bfloat16 atomics): neither a pass nor the
    method's failure, counted apart as the outcome figure counts them (results/figure_outcomes.py)."""
    from results.figure_outcomes import outcome_table

    table = outcome_table(data)
    if table.empty:
        return {}
    return {str(m): int(n) for m, n in table.groupby("method")["unsupported_on_the_interpreter"].sum().items()}


def format_table(summary: dict[str, Any], interpreter: bool) -> str:
    lines = []
    if summary["simulated"]:
        lines.append(SIMULATED_BANNER)
    unit = summary["budget_unit"]
    lines.append(f"budget {summary['budget']} {unit} per (method, task, repeat); repeats {summary['repeats']}")
    rows: list[tuple[str, ...] | str] = []
    for name, m in summary["methods"].items():
        if m["submitted_pass"] is None:
            rows.append(f"{name:<12} (no finished units)")
            continue
        n_tasks = len(m["calls_used"])
        ci = m["submitted_pass_ci"] or [None, None]
        # Below the small-suite minimum the value and its count only: "0.667 (2/3 tasks)" (design invariant 12)
        count = m.get("submitted_pass_count")
        reason = f"{TOO_FEW} ({count})" if count and m["submitted_pass_ci"] is None else ""
        sub = interval_text(m["submitted_pass"], ci[0], ci[1], n_tasks, digits=3, rate=True, reason=reason)
        calls = sum(m["calls_used"].values())
        tokens = sum(m["tokens_used"].values())
        evals = sum(m.get("gpu_evals", {}).values())
        sp, n_sp = m["speedup_geomean"], m.get("speedup_tasks", 0)
        speed = ("n/a on CPU" if interpreter else "no correct timed submission" if sp is None
                 else f"{sp:.2f}x over {n_sp} task" + ("s" if n_sp != 1 else ""))
        errors = f"{m.get('errored_units', 0)}/{m.get('failed_calls', 0)}"
        rows.append((name, sub, f"{m['oracle_pass']:.3f}", str(calls), str(tokens), str(evals), errors, speed))
    # The pass column is as wide as its longest entry: "0.000 (none of 12 tasks passes; no interval)"
    # is longer than an interval, and the columns after it must stay aligned.
    width = max([40] + [len(r[1]) for r in rows if isinstance(r, tuple)])
    evals_name = "evals" if interpreter else "GPU evals"  # a CPU run ran no GPU
    header = (f"{'method':<12} {'submitted pass, 95% CI over tasks':<{width}} {'oracle':>7} {'calls':>7} "
              f"{'tokens':>9} {evals_name:>9} {'errored/failed':>14}  {'speedup (correct only)':<24}")
    lines.append(header)
    lines.append("-" * len(header))
    for r in rows:
        if isinstance(r, str):
            lines.append(r)
            continue
        name, sub, oracle, calls_s, tokens_s, evals_s, errors, speed = r
        lines.append(f"{name:<12} {sub:<{width}} {oracle:>7} {calls_s:>7} {tokens_s:>9} {evals_s:>9} "
                     f"{errors:>14}  {speed:<24}")
    fewest = min((len(m["calls_used"]) for m in summary["methods"].values() if m["submitted_pass"] is not None),
                 default=INTERVAL_MIN_TASKS)
    if fewest < INTERVAL_MIN_TASKS:
        lines.append(f"A pass rate given with its count of tasks, e.g. 0.667 (2/3 tasks), has no interval: "
                     f"{too_few_words()}.")
    lines.append("submitted: the method's own pick passes the hidden tests; oracle: any candidate it generated does. "
                 "speedup: geometric mean over correct submissions vs the expert Triton kernel (failures are not "
                 "counted as 1x; `report` gives fast_p, which counts them). errored/failed: units that ended on a "
                 "model call that failed for good / such calls (`report` lists them).")
    return "\n".join(lines)
