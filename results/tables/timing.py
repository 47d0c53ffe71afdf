"""Timing and evaluation-cost tables: latency noise per task and clock state, every timed case
(files only), evaluation seconds by phase and method, per job kind, and timings by protocol."""

from __future__ import annotations

import numpy as np

from results.analysis import Analysis
from results.latency import summarise
from results.occupancy import job_intervals, occupancy, planned_workers
from results.phases import PHASE_COLUMNS, phase_seconds, phase_seconds_by_kind
from results.protocols import PROTOCOL_SUMMARY_COLS, protocol_summary
from results.tables.cells import (
    Table,
    fmt,
    make_table,
    pct,
)
from results.verdicts import display


def latency_table(a: Analysis) -> Table | None:
    """Spread of the timings per task and clock state (lock, flagged), flagged ones apart."""
    lat = a.latency
    if not len(lat):
        return None
    rows = []
    for (task, state), g in lat.groupby(["task", "clock_state"], sort=True):
        summ = summarise(g, include_flagged=True)  # a flagged group is its own row: nothing mixed in
        num = {"task": task, "clock_state": state, "cases": len(g), "samples_median": float(g["n"].median()),
               "median_ci_width": summ["median_ci_width"], "rel_iqr_median": summ["rel_iqr"],
               "rel_mad_median": summ["rel_mad"], "cv_median": summ["cv"],
               "baseline_rel_iqr_median": float(g["baseline_rel_iqr"].median()),
               "sm_mhz": ", ".join(sorted(set(g["sm_mhz"]))), "mem_mhz": ", ".join(sorted(set(g["mem_mhz"]))),
               "throttle": ", ".join(sorted({t for x in g["throttle"] if x for t in x.split(", ")}))}
        txt = {"task": task, "clock state": state, "cases timed": str(len(g)),
               "samples/case": fmt(num["samples_median"], 0), "median's 95% CI (rel. width)": pct(num["median_ci_width"]),
               "IQR/median": pct(num["rel_iqr_median"]), "MAD/median": pct(num["rel_mad_median"]),
               "CV (beside)": pct(num["cv_median"]), "baseline IQR/median": pct(num["baseline_rel_iqr_median"]),
               "SM MHz": num["sm_mhz"], "memory MHz": num["mem_mhz"], "throttle": num["throttle"] or "-"}
        rows.append((num, txt))
    clean, everything = summarise(lat), summarise(lat, include_flagged=True)
    flagged = int(lat["flagged"].sum())
    notes = ["Per task and clock state (locked by --lock-clocks or not, and whether the timing was flagged for "
             "moving clocks or throttling): medians over timed cases of the median's bootstrap interval width, "
             "IQR/median and MAD/median of a case's raw samples (robust spreads); the CV is beside them only, "
             "since one outlier can inflate it. SM/memory MHz: the readings before->after a case's samples. Every "
             "case, with its median and interval, is in latency_cases.csv."]
    if flagged:
        notes.append(f"Over all tasks, flagged timings left out ({int(clean['cases'])} cases): IQR/median "
                     f"{pct(clean['rel_iqr'])}, MAD/median {pct(clean['rel_mad'])}; with the {flagged} flagged case(s) "
                     f"included: {pct(everything['rel_iqr'])}, {pct(everything['rel_mad'])}.")
    else:
        notes.append(f"No timing was flagged; over all {int(clean['cases'])} cases IQR/median {pct(clean['rel_iqr'])}, "
                     f"MAD/median {pct(clean['rel_mad'])}.")
    return make_table("latency", "Latency noise per task and clock state (candidate samples per timed case)", rows, a,
                  notes)


def latency_cases_table(a: Analysis) -> Table | None:
    """Every timed (evaluation, case): median with its interval, spreads, clock state, and the
    evaluation's speedup with its interval (written as files; long)."""
    lat = a.latency
    if not len(lat):
        return None
    rows = []
    for r in lat.itertuples(index=False):
        num = r._asdict()
        txt = {"task": r.task, "case": r.case, "case set": r.case_set, "source": r.source_hash[:10],
               "clock state": r.clock_state, "SM MHz": r.sm_mhz, "memory MHz": r.mem_mhz, "samples": str(r.n),
               "median ms [95% CI]": f"{r.median_ms:.4g} [{r.median_lo:.4g}, {r.median_hi:.4g}]",
               "IQR/median": pct(r.rel_iqr), "MAD/median": pct(r.rel_mad), "CV": pct(r.cv),
               "speedup [95% CI]": (f"{r.speedup:.3f}x [{r.speedup_lo:.3f}, {r.speedup_hi:.3f}]"
                                    if np.isfinite(r.speedup) else "n/a"),
               "flags": r.flag_reasons or "-"}
        rows.append((num, txt))
    t = make_table("latency_cases", "Every timed case: median latency with its bootstrap interval, spread, clock state, "
               "and the timing's speedup with its interval", rows, a,
               ["Speedup: the evaluation's geometric mean over its perf cases of median ratios, with the interval "
                "from resampling interleaved rounds (judge/timing.py)."])
    t.in_report = False
    return t


PHASE_LABELS = {c: c.removesuffix("_s") + " s" for c in PHASE_COLUMNS}
"""Column titles of the phase tables (results/phases.py PHASE_COLUMNS)."""


def phase_table(a: Analysis) -> Table | None:
    """Seconds of evaluation per method and phase (queue wait, compile, correctness, timing),
    with the run's total: where a slow run spends its time (results/phases.py)."""
    per_method = phase_seconds(a.data.evaluations, a.data.candidates)
    if per_method.empty:
        return None
    labels = {**PHASE_LABELS, "total_s": "total s"}
    rows = []
    total = per_method.drop(columns="method").sum()
    for method, r in [*((m, r) for m, r in zip(per_method["method"], per_method.to_dict("records"), strict=True)),
                      ("all", total.to_dict())]:
        num: dict = {"method": method, **{k: float(r[k]) for k in ("evaluations", *labels)}}
        txt: dict = {"method": display(method) if method != "all" else "all methods",
                     "evaluations": fmt(num["evaluations"], 1),
                     **{label: fmt(num[k], 1) for k, label in labels.items()}}
        rows.append((num, txt))
    notes = ["Seconds summed over the evaluations a method's candidates needed (visible feedback, its own tests, "
             "hidden judging, final timing), by phase: waiting for an idle worker (queue), importing the candidate "
             "(compile), the oracle or the method's tests (correctness), the perf-case check and the timing protocol "
             "(timing, GPU only), waiting at the GPU's fair gate (gate: judging behind a timer, or a timer behind the "
             "judging jobs already on the GPU) and attempts lost to a GPU out-of-memory error beside other workers, "
             "judged again alone (retry). An evaluation shared by methods that proposed the same code is split between them. "
             "Replayed evaluations (compare --replay) took no time and are not counted. Workers run in parallel, so "
             "the total exceeds the run's wall time."]
    return make_table("phases", "Evaluation time by phase and method", rows, a, notes)


def job_kind_table(a: Analysis) -> Table | None:
    """Judge jobs by kind, with the mean seconds of each phase per job: what a run of another
    budget or suite will cost, from its job counts (results/phases.py `phase_seconds_by_kind`)."""
    per_kind = phase_seconds_by_kind(a.data.evaluations)
    if per_kind.empty:
        return None
    labels = PHASE_LABELS
    rows = []
    for r in per_kind.to_dict("records"):
        num: dict = {"kind": r["kind"], "jobs": int(r["jobs"]), **{k: float(r[k]) for k in labels},
                     "total_s": float(r["total_s"])}
        txt: dict = {"kind": r["kind"], "jobs": str(num["jobs"]), **{label: fmt(num[k], 2) for k, label in labels.items()},
                     "all jobs s": fmt(num["total_s"], 1)}
        rows.append((num, txt))
    notes = ["Jobs the workers ran, by kind: visible feedback (timed on a GPU when correct), hidden judging, a "
             "method's own tests (internal), final submissions' timing (hidden timed); phase columns are means per "
             "job, the last column the seconds of all jobs of the kind. Replayed evaluations are not counted."]
    if len(a.data.infos) == 1:  # one run's jobs share one pool: its sweep says what bound the run
        swept = occupancy(job_intervals(a.data.evaluations), planned_workers(a.data.first.path))
        if swept is not None:
            notes.append(f"Jobs over time: {swept.line()}. Busy with jobs waiting: the judge's capacity bounded "
                         "the run (cheaper jobs or more workers move it); free with none waiting: the methods' "
                         "chains of dependent evaluations did (results/occupancy.py).")
    return make_table("job_kinds", "Evaluation time per job, by kind", rows, a, notes)


def protocol_table(a: Analysis) -> Table | None:
    """Which timing protocol produced the run's timings, per method: the short feedback protocol
    and the full final one, with samples, early stops, reused references, drift events and
    timing seconds per timing (results/protocols.py). None when nothing was timed."""
    per = protocol_summary(a.data.evaluations, a.data.candidates)
    if per.empty:
        return None
    rows = []
    for r in per.to_dict("records"):
        num = {k: (r[k] if k in ("method", "protocol") else float(r[k])) for k in PROTOCOL_SUMMARY_COLS}
        txt = {"method": display(str(r["method"])), "protocol": str(r["protocol"]), "timings": fmt(r["timings"], 1),
               "samples per timing": fmt(r["samples_per_timing"], 1), "cases stopped early": fmt(r["early_stopped"], 1),
               "cases on reused baselines": fmt(r["baselines_reused"], 1), "drift events": fmt(r["drift_events"], 1),
               "timing s per timing": fmt(r["timing_s_per_timing"], 2)}
        rows.append((num, txt))
    notes = ["final-full: the full interleaved protocol (warm-up, L2 flush, candidate, expert baseline and eager "
             "PyTorch round by round until every median is precise): final submissions. feedback-short: visible "
             "feedback, a few candidate samples against expert-baseline and eager timings the judge worker "
             "measured once per (task, case, device, clock state) and re-uses, re-checked for drift; sampling "
             "stops once the speedup's interval lies above 1.0x, below it, or within the equivalence margin "
             "around it (timing_policy feedback_equivalence, 5% by default; Bonferroni over looks). "
             "Samples are the candidate's, over all perf cases. Speedups of final submissions, and every figure "
             "of timing noise, come from final-full timings only."]
    return make_table("timing_protocols", "Timings by protocol and method", rows, a, notes)
