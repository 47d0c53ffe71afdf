"""Where a run's evaluation time went, per method and phase (issue 15 item 3).

Each stored evaluation carries the seconds of its phases (queue wait, compile, correctness,
timing, GPU gate wait, out-of-memory retries, the candidate process's start, the rest of the
worker's time; judge/phases.py). An evaluation is cached by (source, task, case set, device), so one
evaluation can serve several methods that proposed the same source for the same task: its
seconds are split equally between them, so the rows add up to the run's total. Pure pandas
over the readers' frames.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from record.store import PHASES

PHASE_COLUMNS = tuple(f"{p}_s" for p in PHASES)
PROFILE_MARK = "@"  # `<task>@<profile>`: the suite's own check of a task's submission (bench.registry)


def attribute_to_methods(evaluations: pd.DataFrame, candidates: pd.DataFrame) -> pd.DataFrame:
    """The evaluations joined to the methods whose candidates they judged, one row per
    (evaluation, method), with `share`: 1 / the number of methods that proposed that source for
    that task (a profile evaluation `<task>@<profile>` belongs to its task's candidates), so
    shares add up to one per evaluation. Empty when nothing joins."""
    if evaluations.empty or candidates.empty:
        return evaluations.assign(method=pd.Series(dtype=str), share=pd.Series(dtype=float)).iloc[0:0]
    ev = evaluations.copy()
    ev["base_task"] = ev["task"].astype(str).str.split(PROFILE_MARK).str[0]
    keys = ["run"] if "run" in ev.columns and "run" in candidates.columns else []
    owners = candidates[[*keys, "task", "source_hash", "method"]].drop_duplicates()
    owners = owners.rename(columns={"task": "base_task"})
    joined = ev.merge(owners, on=[*keys, "base_task", "source_hash"], how="inner")
    joined["share"] = 1.0 / joined.groupby([*keys, "source_hash", "task", "case_set", "device_key", "timed"])[
        "method"].transform("count")
    return joined


def judged_by_a_job(evaluations: pd.DataFrame) -> pd.Series:
    """Which evaluation rows a judge job produced: those with a phase recorded. A replayed
    evaluation, one from an older store or a hidden verdict earlier results decided
    (runners/savings.py) has none."""
    return evaluations[list(PHASE_COLUMNS)].notna().any(axis=1)


def phase_seconds(evaluations: pd.DataFrame, candidates: pd.DataFrame) -> pd.DataFrame:
    """One row per method: evaluations (their count, shared ones split), seconds per phase and
    in all. Evaluations with no phase recorded (replayed, or from older stores) are left out;
    an empty frame when none has one."""
    cols = ["method", "evaluations", *PHASE_COLUMNS, "total_s"]
    if evaluations.empty or candidates.empty:
        return pd.DataFrame(columns=cols)
    joined = attribute_to_methods(evaluations[judged_by_a_job(evaluations)], candidates)
    if joined.empty:
        return pd.DataFrame(columns=cols)
    joined["evaluations"] = joined["share"]
    for c in PHASE_COLUMNS:
        joined[c] = joined[c].fillna(0.0) * joined["share"]
    out = joined.groupby("method", sort=True)[["evaluations", *PHASE_COLUMNS]].sum().reset_index()
    out["total_s"] = out[list(PHASE_COLUMNS)].sum(axis=1)
    return out[cols]


def job_kind(case_set: str, timed: bool) -> str:
    """What a judge job was, from its case set: `visible`, `hidden`, `internal` (a method's own
    tests; `internal:<hash>`), or a suite profile's set, with ` timed` when it was timed."""
    return case_set.split(":")[0] + (" timed" if timed else "")


def phase_seconds_by_kind(evaluations: pd.DataFrame) -> pd.DataFrame:
    """One row per job kind (`job_kind`): how many jobs, the mean seconds per phase and the
    seconds in all. Why: a run's cost is its job counts times their unit costs, and the kinds
    differ by an order of magnitude (a timed feedback against a method's own small tests), so a
    run of another size or suite is planned from these rows. Jobs with no phase recorded are
    left out; an empty frame when none has one."""
    cols = ["kind", "jobs", *PHASE_COLUMNS, "total_s"]
    if evaluations.empty:
        return pd.DataFrame(columns=cols)
    ev = evaluations[judged_by_a_job(evaluations)].copy()
    if ev.empty:
        return pd.DataFrame(columns=cols)
    ev["kind"] = [job_kind(str(c), bool(t)) for c, t in zip(ev["case_set"], ev["timed"], strict=True)]
    ev[list(PHASE_COLUMNS)] = ev[list(PHASE_COLUMNS)].fillna(0.0)
    grouped = ev.groupby("kind", sort=True)
    out = grouped[list(PHASE_COLUMNS)].mean().reset_index()
    out.insert(1, "jobs", grouped.size().to_numpy())
    out["total_s"] = grouped[list(PHASE_COLUMNS)].sum().sum(axis=1).to_numpy()
    return out[cols]


PEAK_STEP_PREFIX = "memory:peak"
"""Step names of a job's memory peaks begin so (judge/device_memory.py `PEAK_STEPS`)."""
NAMED_STEP_KINDS = {"internal_tests": "internal", "worker_start": "worker_start", "warmup": "warmup"}
"""Step lines whose row is named by their kind (a method's own tests, a worker's start, a hidden
warm-up); the others are rowed by case set and timing (`job_kind`)."""


def steps_by_kind(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per job kind from the judge workers' step lines (judge/phases.py `record_steps`):
    jobs, the mean wall seconds at the worker, the mean seconds the worker's named phases left
    unexplained, and the mean seconds of each step (0 where a job had none). Why: `other`, as
    the pool measures it, mixes the worker's unnamed work with the messages' way to and from
    it; these lines tell the two apart, and split `start` into the spare's own waits."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        named = NAMED_STEP_KINDS.get(str(line.get("kind")))
        kind = named or job_kind(str(line.get("case_set")), bool(line.get("timing")))
        grouped.setdefault(kind, []).append(line)
    rows = []
    for kind, jobs in sorted(grouped.items()):
        names = sorted({name for job in jobs for name in job.get("steps", {})})
        n = len(jobs)
        row: dict[str, Any] = {"kind": kind, "jobs": n,
                               "wall_s": sum(float(j.get("wall", 0.0)) for j in jobs) / n,
                               "unnamed_s": sum(float(j.get("wall", 0.0)) - sum(j.get("phases", {}).values())
                                                for j in jobs) / n}
        row.update({name: sum(float(j.get("steps", {}).get(name, 0.0)) for j in jobs) / n for name in names})
        # A memory peak's mean hides the job that filled the GPU: its largest beside it.
        row.update({f"{name}:max": max(float(j.get("steps", {}).get(name, 0.0)) for j in jobs)
                    for name in names if name.startswith(PEAK_STEP_PREFIX)})
        row.update(_compile_passes([j.get("compile_pass") or {} for j in jobs]))
        rows.append(row)
    return rows


def _compile_passes(reports: list[dict[str, Any]]) -> dict[str, float]:
    """What the jobs' compile passes did (judge/candidate/precompile.py `PassReport`), for telling
    whether the pass worked on a run: how many jobs ran one; among those, the mean kernels it left
    compiled, carried to the fresh import, written to the cache (compiled rather than found:
    judge/precompile.py) and cases whose entry point raised on placeholders; and how many lost
    their process to it (judged afresh without it). Nothing for jobs that recorded no pass
    (older workers, the pass off)."""
    ran = [r for r in reports if "launches" in r]
    lost = sum(1 for r in reports if "lost" in r)
    if not ran and not lost:
        return {}
    def mean(field: str) -> float:
        return sum(float(r.get(field, 0)) for r in ran) / max(len(ran), 1)

    return {"pass:jobs": len(ran), "pass:kernels": mean("kernels"), "pass:carried": mean("carried"),
            "pass:written": mean("written"), "pass:failures": mean("failures"), "pass:lost": lost}
