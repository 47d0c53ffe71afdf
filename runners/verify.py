"""`verify RUN_DIR`: audit a recorded run on this machine.

Why: a reviewer handed a run folder should not have to trust it. This re-judges every
submission the methods made (and, with `candidates`, every candidate they generated) on the
task's hidden cases, in fresh evaluation workers, and compares each verdict with the one
the run recorded; on a GPU it also re-times every final submission the run timed and
compares the speedups. Nothing is written to the run folder: the audit reads it only.

What counts as agreement:
- Verdicts: the same verdict kind. When the run was judged on another kind of target (a GPU
  run audited on the CPU interpreter, or the reverse) the hidden case sets differ; a
  verdict decided by a case the other side's set does not contain cannot be compared and is
  listed under "not checked here" instead of counted as a disagreement.
- Speedups (GPU only): per method, the ratio re-measured / recorded as a geometric mean over
  tasks (repeats averaged within a task first, as every interval of the toolkit treats the
  task as the unit) with a t interval on the per-task log ratios; it agrees within noise when
  that interval reaches into [1/(1+tol), 1+tol] (`speedup_tolerance`, default 5%). With one
  timed task the re-measured speedup's own bootstrap interval stands in for it. A run timed
  on another GPU model is still compared, and the report says the devices differ.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.registry import TaskSourceError, UnknownTaskError, get_task, load_sources, resolve_sources
from judge.candidate.verdict import Evaluation
from judge.device import Target, default_device, detect_target
from judge.policy import FINAL_FULL, TimingPolicy
from judge.privileges import PrivilegeError
from record.run_folder import RunFolder
from record.store import Store
from results.readers import RunData, deciding_evaluation, load_run
from runners.config import ConfigError
from runners.evaluator import judged_source
from runners.pool import LocalPool
from stats.intervals import t_ci

DEFAULT_SPEEDUP_TOLERANCE = 0.05


@dataclass(frozen=True)
class VerifyOptions:
    candidates: bool = False  # re-judge every candidate, not only the submissions
    workers: int | None = None
    device: str | None = None  # "auto" | "cpu" [$KMC_FORCE_CPU's default]
    sources: list[str] | None = None  # task sources on this machine [the run's recorded ones]
    timeout: float | None = None  # seconds per evaluation [the pool's default]
    speedup_tolerance: float = DEFAULT_SPEEDUP_TOLERANCE
    on_progress: Callable[[int, int], None] = lambda _done, _total: None  # evaluations done, planned


@dataclass(frozen=True)
class Disagreement:
    method: str
    task: str
    repeat: int
    kind: str  # "submission" or "candidate"
    index: int  # its submission_index or candidate_index
    source_hash: str
    recorded: str
    rejudged: str
    message: str  # the re-judged verdict's one line

    def describe(self) -> str:
        return (f"{self.method} {self.task} repeat {self.repeat} {self.kind} {self.index} ({self.source_hash[:10]}): "
                f"recorded {self.recorded}, re-judged {self.message}")


@dataclass(frozen=True)
class SpeedupCheck:
    """Re-measured against recorded speedups of one method's final submissions (GPU only)."""

    timed: int  # final submissions re-timed
    tasks: int
    ratio: float  # geometric mean of re-measured / recorded over tasks
    lo: float
    hi: float
    interval: str  # how [lo, hi] was obtained
    within_noise: bool
    per_unit: tuple[tuple[str, int, float, float], ...]  # (task, repeat, recorded, re-measured)
    not_timed: tuple[str, ...] = ()  # units whose re-timing gave no speedup, with why


@dataclass(frozen=True)
class MethodAudit:
    method: str
    judged: int  # submissions (and candidates) whose verdicts were compared
    agreed: int
    disagreements: tuple[Disagreement, ...]
    not_comparable: int  # verdicts decided by a case the other target's hidden set lacks
    speedup: SpeedupCheck | None

    @property
    def ok(self) -> bool:
        return not self.disagreements and (self.speedup is None or self.speedup.within_noise)


@dataclass(frozen=True)
class VerifyReport:
    run_dir: Path
    simulated: bool
    recorded_target: dict[str, Any]
    target: Target
    candidates: bool
    methods: tuple[MethodAudit, ...]
    not_checked: tuple[str, ...] = field(default_factory=tuple)
    speedup_tolerance: float = DEFAULT_SPEEDUP_TOLERANCE

    @property
    def ok(self) -> bool:
        """Everything that could be checked here agrees (verdicts exactly, speedups within noise)."""
        return all(m.ok for m in self.methods)

    def to_json(self) -> dict[str, Any]:
        return {
            "run": str(self.run_dir), "ok": self.ok, "simulated": self.simulated, "candidates": self.candidates,
            "recorded_target": self.recorded_target, "target": self.target.to_json(),
            "speedup_tolerance": self.speedup_tolerance,
            "methods": {m.method: {"judged": m.judged, "agreed": m.agreed, "not_comparable": m.not_comparable,
                                   "disagreements": [asdict(d) for d in m.disagreements],
                                   "speedup": _speedup_json(m.speedup)} for m in self.methods},
            "not_checked": list(self.not_checked),
        }

    def format(self) -> str:
        here = _describe_target(self.target.to_json())
        lines = [f"verify {self.run_dir}: recorded on {_describe_target(self.recorded_target)}; re-judged here on "
                 f"{here}" + (" -- SIMULATED MODEL run" if self.simulated else "")]
        what = "submissions and candidates" if self.candidates else "submissions"
        header = f"{'method':<12} {'judged':>7} {'agree':>6} {'disagree':>9}   speedup re-measured / recorded"
        lines += [f"verdicts of {what} on the hidden cases:", header, "-" * len(header)]
        for m in self.methods:
            lines.append(f"{m.method:<12} {m.judged:>7} {m.agreed:>6} {len(m.disagreements):>9}   "
                         + _describe_speedup(m.speedup, self.target))
        wrong = [d for m in self.methods for d in m.disagreements]
        if wrong:
            lines.append("disagreements:")
            lines += [f"  {d.describe()}" for d in wrong]
        if self.not_checked:
            lines.append("not checked here:")
            lines += [f"  - {n}" for n in self.not_checked]
        lines.append("result: " + ("everything checked agrees" if self.ok else "DISAGREES with the recorded run"))
        return "\n".join(lines)


def _speedup_json(s: SpeedupCheck | None) -> dict[str, Any] | None:
    if s is None:
        return None
    d = asdict(s)
    d["per_unit"] = [{"task": t, "repeat": r, "recorded": a, "remeasured": b} for t, r, a, b in s.per_unit]
    return d


def _describe_target(t: dict[str, Any]) -> str:
    if t.get("interpreter"):
        return "the CPU interpreter"
    return f"{t.get('vendor', '?')} {t.get('device_name', '')}".strip()


def _describe_speedup(s: SpeedupCheck | None, target: Target) -> str:
    if s is None:
        return "n/a (CPU interpreter: nothing timed)" if target.interpreter else "n/a (nothing timed)"
    mark = "within noise" if s.within_noise else "OUTSIDE noise"
    return f"{s.ratio:.3f} [{s.lo:.3f}, {s.hi:.3f}] over {s.tasks} task(s), {s.timed} timed: {mark}"


# ---------------------------------------------------------------------------- what to judge
@dataclass(frozen=True)
class _Item:
    method: str
    task: str
    repeat: int
    kind: str
    index: int
    source_hash: str
    recorded: str


def _items(data: RunData, candidates: bool) -> list[_Item]:
    frames = [("submission", data.submissions, "submission_index")]
    if candidates:
        frames.append(("candidate", data.candidates, "candidate_index"))
    out = []
    for kind, df, index in frames:
        for r in df.itertuples(index=False):
            if r.hidden_verdict is None or (isinstance(r.hidden_verdict, float) and math.isnan(r.hidden_verdict)):
                continue  # never judged on the hidden cases (cannot happen for a finished unit)
            out.append(_Item(str(r.method), str(r.task), int(r.run_repeat), kind, int(getattr(r, index)),
                             str(r.source_hash), str(r.hidden_verdict)))
    return out


def _case_names(task_id: str, interpreter: bool) -> set[str]:
    return {c.name for c in get_task(task_id).cases("hidden", interpreter)}


# ---------------------------------------------------------------------------- the audit
def verify_run(run_dir: Path, options: VerifyOptions | None = None) -> VerifyReport:
    """Re-judge (and on a GPU re-time) what a run recorded; see the module docstring.
    ConfigError / RunFolderError (one line) for a folder that is not a finished run or task
    sources that cannot be loaded here."""
    opts = options or VerifyOptions()
    if not opts.speedup_tolerance >= 0:
        raise ConfigError(f"speedup tolerance must be >= 0, got {opts.speedup_tolerance}")
    folder = RunFolder(run_dir)
    recorded = folder.read_config()
    data = load_run(Path(run_dir))
    target = detect_target(force_cpu=(opts.device or default_device()) == "cpu")
    sources = resolve_sources(opts.sources) if opts.sources is not None else list(recorded.config.get("task_sources")
                                                                                   or [])
    try:
        load_sources(sources, target.vendor)
    except TaskSourceError as exc:
        raise ConfigError(f"{exc} (give this machine's copy with --source ADAPTER:PATH)") from None
    recorded_target = recorded.resolved.target
    recorded_interpreter = bool(recorded_target.get("interpreter", False))
    # Final submissions were timed by the full protocol, whatever the recorded policy's default.
    policy = TimingPolicy.from_json(recorded.config.get("timing_policy")).for_protocol(FINAL_FULL)

    not_checked: list[str] = []
    items = _items(data, opts.candidates)
    unknown = sorted({i.task for i in items if not _known(i.task)})
    if unknown:
        not_checked.append(f"{sum(i.task in unknown for i in items)} verdicts of task(s) unknown here: "
                           f"{', '.join(unknown)} (load their suite with --source)")
        items = [i for i in items if i.task not in unknown]
    timed_units = _timed_finals(data, unknown)
    if target.interpreter and len(timed_units):
        not_checked.append(f"speedups of {len(timed_units)} final submission(s): the CPU interpreter times nothing "
                           "(run verify on a GPU)")
    if not items:
        raise ConfigError(f"{run_dir}: nothing that can be re-judged here")

    store = Store.for_reading(folder.store_path)
    try:
        sources_by_key = {(i.source_hash, i.task): store.source(i.source_hash) for i in items}
        for _, row in timed_units.iterrows():
            sources_by_key.setdefault((row["final_hash"], row["task"]), store.source(row["final_hash"]))
        recorded_evals = {key: deciding_evaluation(store, data.evaluations, *key, "hidden") for key in sources_by_key}
    finally:
        store.close()

    jobs: list[tuple[str, str, bool]] = [(h, t, False) for (h, t) in {(i.source_hash, i.task) for i in items}]
    if not target.interpreter:
        jobs += [(str(r["final_hash"]), str(r["task"]), True) for _, r in timed_units.iterrows()]
    results = _run_jobs(jobs, sources_by_key, target, sources, policy, opts)

    audits = []
    comparable_cases = recorded_interpreter == target.interpreter
    for method in data.methods:
        mine = [i for i in items if i.method == method]
        disagreements, agreed, not_comparable = [], 0, 0
        for i in mine:
            ev = _rejudged(results, i.source_hash, i.task)
            now = ev.verdict.kind
            if now == i.recorded:
                agreed += 1
                continue
            if not comparable_cases and _decided_elsewhere(i, ev, recorded_evals.get((i.source_hash, i.task)),
                                                          recorded_interpreter, target.interpreter):
                not_comparable += 1
                continue
            disagreements.append(Disagreement(i.method, i.task, i.repeat, i.kind, i.index, i.source_hash, i.recorded,
                                              now, ev.verdict.one_line()))
        speedup = None
        if not target.interpreter:
            speedup = _speedup_check(timed_units[timed_units["method"] == method], results, opts.speedup_tolerance)
        audits.append(MethodAudit(method, len(mine), agreed, tuple(disagreements), not_comparable, speedup))
    n_not_comparable = sum(a.not_comparable for a in audits)
    if n_not_comparable:
        not_checked.append(f"{n_not_comparable} verdict(s) decided by a case that the "
                           f"{'GPU' if target.interpreter else 'CPU interpreter'}'s hidden set has and this "
                           "machine's lacks (or the reverse)")
    if not target.interpreter and not recorded_interpreter and recorded_target.get("device_name") \
            and recorded_target.get("device_name") != target.device_name:
        not_checked.append(f"speedups were recorded on {recorded_target.get('device_name')} and re-measured on "
                           f"{target.device_name}: a ratio away from 1 may be the hardware, not the run")
    return VerifyReport(Path(run_dir), data.simulated, recorded_target, target, opts.candidates, tuple(audits),
                        tuple(not_checked), opts.speedup_tolerance)


def _known(task_id: str) -> bool:
    try:
        get_task(task_id)
    except UnknownTaskError:
        return False
    return True


def _timed_finals(data: RunData, unknown: list[str]) -> pd.DataFrame:
    """Finished units whose final submission the run timed: method, task, repeat, final_hash, speedup."""
    units = data.units[np.isfinite(data.units["speedup"].to_numpy(dtype=float))]
    units = units[~units["task"].isin(unknown)]
    finals = data.submissions.sort_values("submission_index").groupby(["method", "task", "repeat"]).tail(1)
    merged = units.merge(finals[["method", "task", "repeat", "source_hash"]], on=["method", "task", "repeat"],
                         how="inner")
    return merged.rename(columns={"source_hash": "final_hash"})[["method", "task", "run_repeat", "final_hash",
                                                                 "speedup"]]


def _run_jobs(jobs: list[tuple[str, str, bool]], sources: dict[tuple[str, str], str], target: Target,
              task_sources: list[str], policy: TimingPolicy,
              opts: VerifyOptions) -> dict[tuple[str, str, bool], Evaluation]:
    """Each (source hash, task, timed) judged once on the hidden cases, in parallel on a fresh pool,
    completed as the run's evaluator completed it (Task.complete_source)."""
    try:
        pool = LocalPool(target, workers=opts.workers, job_timeout=opts.timeout, task_sources=task_sources)
    except PrivilegeError as exc:
        raise ConfigError(str(exc)) from None
    done = 0
    out: dict[tuple[str, str, bool], Evaluation] = {}
    with pool, ThreadPoolExecutor(max_workers=max(1, pool.size)) as threads:
        futures = {job: threads.submit(pool.evaluate, job[1], judged_source(job[1], sources[(job[0], job[1])]),
                                       "hidden", timing=job[2], timing_policy=policy) for job in jobs}
        opts.on_progress(0, len(jobs))
        for job, future in futures.items():
            out[job] = future.result()
            done += 1
            opts.on_progress(done, len(jobs))
    return out


def _rejudged(results: dict[tuple[str, str, bool], Evaluation], h: str, task: str) -> Evaluation:
    """A source's re-judged hidden verdict, read as the run's verdicts are read
    (results/readers.py hidden_verdicts): when it was also re-timed, a failing evaluation wins,
    then the untimed one."""
    untimed, timed = results[(h, task, False)], results.get((h, task, True))
    if timed is not None and untimed.verdict.kind == "correct" and timed.verdict.kind != "correct":
        return timed
    return untimed


def _decided_elsewhere(item: _Item, now: Evaluation, recorded: dict[str, Any] | None, recorded_interpreter: bool,
                       here_interpreter: bool) -> bool:
    """True when the verdict that failed (on either side) was decided by a case the other
    target's hidden set does not contain: the two verdicts judged different cases."""
    deciding = []
    if recorded is not None and recorded.get("verdict", {}).get("failing_case"):
        deciding.append((recorded["verdict"]["failing_case"], here_interpreter))
    if now.verdict.failing_case:
        deciding.append((now.verdict.failing_case, recorded_interpreter))
    return any(case not in _case_names(item.task, other) for case, other in deciding)


def _speedup_check(units: pd.DataFrame, results: dict[tuple[str, str, bool], Evaluation],
                   tolerance: float) -> SpeedupCheck | None:
    if units.empty:
        return None
    per_unit, not_timed = [], []
    remeasured_ci: tuple[float, float] | None = None
    for _, r in units.iterrows():
        ev = results[(str(r["final_hash"]), str(r["task"]), True)]
        t = ev.timing
        if t is None or t.speedup_vs_baseline is None or not t.speedup_vs_baseline > 0:
            not_timed.append(f"{r['task']} repeat {r['run_repeat']}: {ev.verdict.one_line()}")
            continue
        per_unit.append((str(r["task"]), int(r["run_repeat"]), float(r["speedup"]), float(t.speedup_vs_baseline)))
        if t.speedup_ci is not None:
            remeasured_ci = (t.speedup_ci[0] / float(r["speedup"]), t.speedup_ci[1] / float(r["speedup"]))
    if not per_unit:
        return SpeedupCheck(0, 0, float("nan"), float("nan"), float("nan"), "none re-timed", False, (),
                            tuple(not_timed))
    by_task: dict[str, list[float]] = defaultdict(list)
    for task, _, rec, now in per_unit:
        by_task[task].append(math.log(now / rec))
    logs = np.array([np.mean(v) for v in by_task.values()])
    est = t_ci(logs)
    lo, hi, how = math.exp(est.lo), math.exp(est.hi), f"{est.method} over tasks"
    if len(logs) == 1 and remeasured_ci is not None and len(per_unit) == 1:
        lo, hi, how = remeasured_ci[0], remeasured_ci[1], "the re-measured speedup's bootstrap interval"
    within = lo <= 1 + tolerance and hi >= 1 / (1 + tolerance)
    return SpeedupCheck(len(per_unit), len(by_task), math.exp(est.value), lo, hi, how, within, tuple(per_unit),
                        tuple(not_timed))
