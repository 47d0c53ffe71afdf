"""Readers: one run folder (or several compatible ones) into pandas DataFrames.

Why: every table, curve, figure and verdict of the report is computed from these frames
and nothing else, so what the report says can always be traced back to rows of the run
store. Each frame is keyed by what a row is ((run, method, task, repeat, index) or a
source hash), never by position, and hidden verdicts are joined on the source hash.

Several runs can be read as one when they asked the same question: the same tasks,
budget, budget unit, model and method options (different seeds or repeat counts simply
add repeats). Runs whose units share seeds are refused, whatever other option differs: every
unit's seed derives from the run seed, method, task and repeat, so such repeats are copies of
each other, not independent draws, and combining them would shrink intervals and p-values for
nothing (`allow_same_seed` counts each copy once instead). Repeats are
renumbered run after run so (method, task, repeat) stays a unique unit key; the original
folder and repeat stay in the `run` and `run_repeat` columns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from modelio.ledger import stable_seed
from record.run_folder import RunFolder, RunFolderError
from record.store import FULL_PROTOCOL, PROTOCOL_COLUMNS, Store
from results.phases import PHASE_COLUMNS

UNIT_KEY = ["method", "task", "repeat"]
TEST_RUN_COLS = UNIT_KEY + ["test_run_index", "calls_used", "source_hash", "tests_hash", "verdict", "tests_passed",
                            "tests_total"]
EXAMPLE_COLS = UNIT_KEY + ["call_index", "program", "query_by", "similarity"]


class RunError(RunFolderError):
    """A folder that is not a run, or runs that cannot be combined: one line for the user."""


@dataclass(frozen=True)
class RunInfo:
    """What one run folder's config.json says about the run (its identity for combining)."""

    path: Path
    budget: int
    budget_unit: str
    tasks: tuple[str, ...]
    methods: tuple[str, ...]
    method_options: dict[str, dict[str, Any]]
    repeats: int
    seed: int
    simulated: bool
    model: str
    interpreter: bool
    device_name: str
    task_difficulty: dict[str, int] = field(default_factory=dict)  # empty for runs recorded before it was
    new_shape_slots: dict[str, int] = field(default_factory=dict)  # adapted tasks' new-shape hidden cases, declared
    options: dict[str, Any] = field(default_factory=dict)  # the recorded options that shape a unit (run_options)
    oneshot: dict[str, Any] = field(default_factory=dict)  # the one-shot corpus and guard (config.json resolved.oneshot)
    unsandboxed: bool = False  # candidates ran without the sandbox (`--unsandboxed`, the user's accepted risk)

    @property
    def name(self) -> str:
        return self.path.name


@dataclass
class RunData:
    """The frames of one run or of several combined runs (see the module docstring).

    units: one row per finished unit (`unit_outcomes`): method, task, repeat, run,
        run_repeat, calls_used, prompt_tokens, completion_tokens, tokens_used,
        feedback_evals (GPU evaluations: visible feedback plus runs of its own tests), error
        (why the unit ended early: a model call that failed for good; None when it did not),
        failed_calls (its model calls that failed for good, those a `--retry-errors` sent
        again included), submitted_pass, oracle_pass, submitted_visible_pass,
        speedup and speedup_vs_eager (final submission, hidden cases, timed; NaN when not
        correct or not timed), speedup_flagged (that timing was flagged).
    candidates: one row per candidate of a finished unit: unit key, candidate_index,
        calls_used, tokens_used and evals_used (GPU evaluations) when it was proposed,
        source_hash, hidden_verdict, hidden_pass, visible_verdict (its first visible feedback
        in that unit, or None).
    submissions: the anytime submission timeline: unit key, submission_index, calls_used,
        tokens_used, evals_used, source_hash, hidden_verdict, hidden_pass, visible_verdict.
        (Stores written before evals_used was recorded get it counted from the evaluation
        events at or before the same call.)
    feedback: visible evaluations a method asked for: unit key, feedback_index, calls_used,
        source_hash, verdict.
    evaluations: one row per stored evaluation: run, source_hash, task, case_set,
        device_key, timed (the store's flag: timing was asked for), has_timing (a timing
        was recorded: only correct candidates are timed), verdict, speedup, speedup_lo,
        speedup_hi, speedup_vs_eager, candidate_ms, flagged, flag_reasons, skip_reasons
        (cases the judge skipped, with why), queue_s, compile_s, correctness_s, timing_s,
        gate_s, retry_s, other_s, start_s (seconds per phase, judge/phases.py; NaN when not measured: a replayed
        evaluation or an older store), and how it was timed (None / NaN when not timed): protocol
        ("final-full" or "feedback-short", judge/policy.py), samples (candidate samples over
        all cases), early_stopped (cases the sequential rule stopped early),
        baselines_reused (cases whose reference timings came from the worker's cache),
        drift_events; created: when it was stored (the store's clock, seconds since the epoch),
        which with the phase seconds places its job in time (results/occupancy.py).
    timings: one row per (timed evaluation, case): run, source_hash, task, case_set,
        case, candidate_ms, baseline_ms and eager_ms (tuples of raw samples),
        launches_per_sample, flagged and flag_reasons (the evaluation's), clocks_locked (None
        when not recorded), clocks_before / clocks_after (the case's readings, or the
        timing's first and last when the record predates per-case readings: case_clocks
        False), and the evaluation's speedup with its interval (speedup_lo, speedup_hi); the
        evaluation's protocol, the case's baseline_source ("interleaved", "fresh" or
        "reused"), early_stopped and decision (the short protocol's verdict against 1.0x).
    calls: one row per model call: unit key, call_index, role, prompt_tokens,
        completion_tokens, charged, cached, error, latency_s.
    runs: runs the methods declared: unit key, run_index, calls_start, calls_end (NaN when
        the budget cut the run short), independent (the method's declaration that its runs
        are independent draws; stores from before it was recorded read True). Candidates
        carry run_index (-1 when the method declared no runs).
    examples: one-shot examples shown, one row per (call, program): unit key, call_index,
        program (bench/oneshot.py name), query_by, similarity (to the task's answer).
    test_runs: a method's own tests run against its candidates (Reflexion's internal
        feedback): unit key, test_run_index, calls_used, source_hash, tests_hash, verdict,
        tests_passed, tests_total. Empty for stores written before the table existed.
    """

    infos: list[RunInfo]
    units: pd.DataFrame
    candidates: pd.DataFrame
    submissions: pd.DataFrame
    feedback: pd.DataFrame
    evaluations: pd.DataFrame
    timings: pd.DataFrame
    calls: pd.DataFrame
    runs: pd.DataFrame
    test_runs: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=TEST_RUN_COLS))
    examples: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=EXAMPLE_COLS))
    unfinished_units: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def first(self) -> RunInfo:
        return self.infos[0]

    @property
    def simulated(self) -> bool:
        return any(i.simulated for i in self.infos)

    @property
    def budget(self) -> int:
        return self.first.budget

    @property
    def budget_unit(self) -> str:
        return self.first.budget_unit

    @property
    def tasks(self) -> tuple[str, ...]:
        return self.first.tasks

    @property
    def methods(self) -> tuple[str, ...]:
        """Methods in first-seen order over the runs."""
        seen: dict[str, None] = {}
        for info in self.infos:
            for m in info.methods:
                seen.setdefault(m, None)
        return tuple(seen)

    @property
    def method_options(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for info in self.infos:
            for m, opts in info.method_options.items():
                out.setdefault(m, opts)
        return out

    @property
    def has_timings(self) -> bool:
        return bool(len(self.timings))


# ---------------------------------------------------------------------------- run info
def read_run_info(path: Path) -> RunInfo:
    """A run folder's identity from its config.json (record/run_folder.py reads and validates
    it); RunError (one line) when it is not a run folder."""
    folder = RunFolder(path)
    if not folder.path.is_dir():
        raise RunError(f"{folder.path} is not a folder")
    if not folder.has_config() or not folder.has_store():
        raise RunError(f"{folder.path} is not a run folder (needs config.json and store.sqlite)")
    try:
        recorded = folder.read_config()
    except RunFolderError as exc:
        raise RunError(str(exc)) from None
    config, resolved = recorded.config, recorded.resolved
    return RunInfo(
        path=folder.path,
        budget=int(config["budget"]),
        budget_unit=resolved.budget_unit,
        tasks=resolved.tasks,
        methods=tuple(config["methods"]),
        method_options=resolved.method_options,
        repeats=int(config["repeats"]),
        seed=int(config["seed"]),
        simulated=resolved.simulated,
        model=resolved.model,
        interpreter=bool(resolved.target.get("interpreter", False)),
        device_name=str(resolved.target.get("device_name", "")),
        task_difficulty=resolved.task_difficulty,
        new_shape_slots=resolved.new_shape_slots,
        options=run_options(config),
        oneshot=dict(resolved.oneshot),
        unsandboxed=bool(config.get("unsandboxed", False)),
    )


#: Options of config.json that cannot change what a unit does (how many units, where and how
#: fast they run, how the endpoint is reached), left out when deciding whether two runs are copies.
OPERATIONAL_OPTIONS = ("repeats", "methods", "tasks", "suite", "workers", "concurrency", "job_timeout_s",
                       "worker_user", "device", "method_modules", "task_sources", "unsandboxed")
OPERATIONAL_ENDPOINT = ("api_key_env", "max_concurrency", "timeout_s", "max_retries")


def run_options(config: dict[str, Any]) -> dict[str, Any]:
    """The recorded options that shape what a unit does (seed included): config.json's
    `config` without the operational ones."""
    out = {k: v for k, v in config.items() if k not in OPERATIONAL_OPTIONS}
    if isinstance(out.get("endpoint"), dict):
        out["endpoint"] = {k: v for k, v in out["endpoint"].items() if k not in OPERATIONAL_ENDPOINT}
    return out


def unit_seeds(info: RunInfo) -> dict[int, tuple[str, str, int]]:
    """Every planned unit's seed (what its model calls are drawn with: modelio.ledger's
    `stable_seed(run seed, method, task, repeat)`) -> (method, task, repeat)."""
    return {stable_seed(info.seed, m, t, r): (m, t, r)
            for m in info.methods for t in info.tasks for r in range(info.repeats)}


def copied_units(infos: list[RunInfo], allow_same_seed: bool = False) -> list[set[tuple[str, str, int]]]:
    """Per run, the units whose seed an earlier run's unit already has: copies, whatever other
    option differs (an option that does not bind, `--eval-budget 50` at budget 4, changes nothing
    they draw). RunError naming the seed unless `allow_same_seed`, which counts each copy once
    (the earlier run's unit stays)."""
    seen: dict[int, tuple[str, tuple[str, str, int]]] = {}
    out: list[set[tuple[str, str, int]]] = []
    for info in infos:
        mine = unit_seeds(info)
        dup = {unit: seed for seed, unit in mine.items() if seed in seen}
        if dup and not allow_same_seed:
            seed, (m, t, r) = next((s, u) for u, s in sorted(dup.items()))
            first = seen[seed][0]
            raise RunError(f"cannot combine {first} and {info.name}: {len(dup)} unit(s) share their seeds (run seed "
                           f"{info.seed}; unit {m}/{t}/repeat {r} has seed {seed} in both), so those repeats are "
                           "copies, not independent draws, whatever other options differ; re-run one with another "
                           "--seed, or pass --allow-same-seed to count each copy once")
        out.append(set(dup))
        for seed, unit in mine.items():
            seen.setdefault(seed, (info.name, unit))
    return out


def check_compatible(infos: list[RunInfo]) -> None:
    """Refuse to combine runs that asked different questions (RunError naming the first mismatch)."""
    seen: set[Path] = set()
    for info in infos:
        real = info.path.resolve()
        if real in seen:
            raise RunError(f"run folder {info.path} is given twice")
        seen.add(real)
    ref = infos[0]
    for info in infos[1:]:
        checks = [
            ("tasks", sorted(ref.tasks), sorted(info.tasks)),
            ("budget", ref.budget, info.budget),
            ("budget unit", ref.budget_unit, info.budget_unit),
            ("model", ref.model, info.model),
            ("simulated model", ref.simulated, info.simulated),
        ]
        for what, a, b in checks:
            if a != b:
                raise RunError(f"cannot combine {ref.name} and {info.name}: {what} differ ({_short(a)} vs {_short(b)})")
        for m in set(ref.method_options) & set(info.method_options):
            if ref.method_options[m] != info.method_options[m]:
                raise RunError(f"cannot combine {ref.name} and {info.name}: options of method {m} differ")


def _short(x: Any) -> str:
    s = ",".join(map(str, x)) if isinstance(x, list) else str(x)
    return s if len(s) <= 60 else s[:57] + "..."


# ---------------------------------------------------------------------------- frames of one store
def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame([{c: r[c] for c in columns} for r in rows], columns=columns)


EVALUATION_COLS = ["source_hash", "task", "case_set", "device_key", "timed", "has_timing", "verdict", "speedup",
                   "speedup_lo", "speedup_hi", "speedup_vs_eager", "candidate_ms", "flagged", "flag_reasons",
                   "skip_reasons", *PHASE_COLUMNS, *PROTOCOL_COLUMNS, "created"]
TIMING_COLS = ["source_hash", "task", "case_set", "case", "candidate_ms", "baseline_ms", "eager_ms",
               "launches_per_sample", "flagged", "flag_reasons", "clocks_locked", "clocks_before", "clocks_after",
               "case_clocks", "speedup", "speedup_lo", "speedup_hi", "protocol", "baseline_source", "early_stopped",
               "decision"]


def read_evaluations(store: Store) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(evaluations, timings): one row per stored evaluation, and one per timed case."""
    ev_rows, t_rows = [], []
    for r in store.evaluations():
        ev = json.loads(r["evaluation"])
        t: dict[str, Any] = ev.get("timing") or {}
        ci = t.get("speedup_ci") or (None, None)
        ev_rows.append({
            "source_hash": r["source_hash"], "task": r["task"], "case_set": r["case_set"],
            "device_key": r["device_key"], "timed": bool(r["timed"]), "has_timing": bool(t), "verdict": r["verdict"],
            "speedup": _num(t.get("speedup_vs_baseline")), "speedup_lo": _num(ci[0]), "speedup_hi": _num(ci[1]),
            "speedup_vs_eager": _num(t.get("speedup_vs_eager")), "candidate_ms": _num(t.get("candidate_ms")),
            "flagged": bool(t.get("flagged", False)), "flag_reasons": tuple(t.get("flag_reasons", ())),
            "skip_reasons": tuple((ev.get("verdict") or {}).get("skip_reasons", ())),
            **{c: _num(r.get(c)) for c in PHASE_COLUMNS},
            "protocol": r.get("protocol"),
            **{c: _num(r.get(c)) for c in PROTOCOL_COLUMNS if c != "protocol"},
            "created": _num(r.get("created")),
        })
        for case in t.get("cases", ()):
            per_case = bool(case.get("clocks_before") or case.get("clocks_after"))
            t_rows.append({
                "source_hash": r["source_hash"], "task": r["task"], "case_set": r["case_set"],
                "case": case["case"], "candidate_ms": tuple(case["candidate_ms"]),
                "baseline_ms": tuple(case["baseline_ms"]), "eager_ms": tuple(case.get("eager_ms", ())),
                "launches_per_sample": case.get("launches_per_sample", 1),
                "flagged": bool(t.get("flagged", False)), "flag_reasons": tuple(t.get("flag_reasons", ())),
                "clocks_locked": t.get("clocks_locked"),
                # the case's own readings; older records have only the timing's first and last
                "clocks_before": dict(case.get("clocks_before") or t.get("clocks_before") or {}),
                "clocks_after": dict(case.get("clocks_after") or t.get("clocks_after") or {}),
                "case_clocks": per_case,
                "speedup": _num(t.get("speedup_vs_baseline")), "speedup_lo": _num(ci[0]), "speedup_hi": _num(ci[1]),
                "protocol": str(t.get("protocol") or FULL_PROTOCOL),
                "baseline_source": str(case.get("baseline_source") or "interleaved"),
                "early_stopped": bool(case.get("early_stopped", False)), "decision": case.get("decision"),
            })
    return pd.DataFrame(ev_rows, columns=EVALUATION_COLS), pd.DataFrame(t_rows, columns=TIMING_COLS)


def _num(x: Any) -> float:
    return float(x) if x is not None else float("nan")


def deciding_evaluation(store: Store, evaluations: pd.DataFrame, h: str, task: str,
                        case_set: str) -> dict[str, Any] | None:
    """The recorded evaluation whose verdict the run reports for (source, task, case set), read
    as `hidden_verdicts` reads it (a failing one first, then the untimed one), with its message
    and failing case; None when there is none."""
    rows = evaluations[(evaluations["source_hash"] == h) & (evaluations["task"] == task)
                       & (evaluations["case_set"] == case_set)].copy()
    rows["_fails"] = rows["verdict"] != "correct"
    for r in rows.sort_values(["_fails", "timed"], ascending=[False, True], kind="stable").itertuples(index=False):
        found = store.evaluation(h, task, case_set, str(r.device_key), timed=bool(r.timed))
        if found is not None:
            return found
    return None


def hidden_verdicts(evaluations: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(source hash, task) -> hidden verdict. A final submission on a GPU has two hidden
    evaluations, untimed and timed; both judge the hidden cases (which include the perf cases
    on a GPU), and the timed one also re-checks the output after timing, so they can differ
    (a kernel with a race, say). A candidate counts as correct only when every hidden
    evaluation of it says so: a failing one wins, then the untimed one."""
    hidden = evaluations[evaluations["case_set"] == "hidden"].copy()
    hidden["_fails"] = hidden["verdict"] != "correct"
    hidden = hidden.sort_values(["_fails", "timed"], ascending=[False, True], kind="stable")
    out: dict[tuple[str, str], str] = {}
    for h, task, verdict in zip(hidden["source_hash"], hidden["task"], hidden["verdict"], strict=True):
        out.setdefault((h, task), verdict)
    return out


UNIT_COLS = UNIT_KEY + ["calls_used", "tokens_used", "feedback_evals", "submitted_pass", "oracle_pass",
                        "submitted_visible_pass", "speedup", "speedup_vs_eager", "speedup_flagged", "prompt_tokens",
                        "completion_tokens", "error", "failed_calls"]


def unit_outcomes(raw: pd.DataFrame, candidates: pd.DataFrame, submissions: pd.DataFrame,
                  evaluations: pd.DataFrame) -> pd.DataFrame:
    """Finished units with their outcomes: the one definition the report and summary.json share.

    submitted_pass: the unit's last submission passes the hidden cases; oracle_pass: any of its
    candidates does; submitted_visible_pass: the visible verdict the method saw for its last
    submission (None when it asked for none); speedup, speedup_vs_eager, speedup_flagged: the
    timed hidden evaluation of a passing last submission (NaN / False otherwise)."""
    units = raw.copy()
    units["tokens_used"] = units["prompt_tokens"] + units["completion_tokens"]
    if "failed_calls" not in units.columns:
        units["failed_calls"] = 0
    units["error"] = units["error"].astype(object).where(units["error"].notna(), None)
    last = submissions.sort_values("submission_index").groupby(UNIT_KEY, sort=False).tail(1)
    last = last[UNIT_KEY + ["source_hash", "hidden_pass", "visible_verdict"]]
    units = units.merge(last, on=UNIT_KEY, how="left", validate="one_to_one")
    units["submitted_pass"] = units["hidden_pass"].eq(True)
    units["submitted_visible_pass"] = [None if v is None or (isinstance(v, float) and np.isnan(v)) else v == "correct"
                                       for v in units["visible_verdict"]]
    oracle = candidates.groupby(UNIT_KEY)["hidden_pass"].any().rename("oracle_pass").reset_index()
    units = units.merge(oracle, on=UNIT_KEY, how="left", validate="one_to_one")
    units["oracle_pass"] = units["oracle_pass"].eq(True)
    timed = evaluations[(evaluations["case_set"] == "hidden") & evaluations["has_timing"]]
    timed = timed.drop_duplicates(["source_hash", "task"])[["source_hash", "task", "speedup", "speedup_vs_eager",
                                                            "flagged"]]
    units = units.merge(timed.rename(columns={"flagged": "speedup_flagged"}), on=["source_hash", "task"], how="left",
                        validate="many_to_one")
    for col in ("speedup", "speedup_vs_eager"):
        units[col] = units[col].where(units["submitted_pass"]).astype(float)
    units["speedup_flagged"] = units["speedup_flagged"].eq(True) & units["speedup"].notna()
    return units[UNIT_COLS].reset_index(drop=True)


def _events(rows: list[dict[str, Any]], index: str, hidden: dict[tuple[str, str], str],
            feedback: pd.DataFrame, extra: tuple[str, ...] = ()) -> pd.DataFrame:
    cols = UNIT_KEY + [index, "calls_used", "tokens_used", "source_hash", *extra]
    df = _frame(rows, cols)
    df["hidden_verdict"] = [hidden.get((h, t)) for h, t in zip(df["source_hash"], df["task"], strict=True)]
    df["hidden_pass"] = df["hidden_verdict"] == "correct"
    first_fb = feedback.drop_duplicates(UNIT_KEY + ["source_hash"])[UNIT_KEY + ["source_hash", "verdict"]]
    df = df.merge(first_fb.rename(columns={"verdict": "visible_verdict"}), on=UNIT_KEY + ["source_hash"], how="left")
    df["visible_verdict"] = df["visible_verdict"].astype(object).where(df["visible_verdict"].notna(), None)
    return df


CALL_COLS = UNIT_KEY + ["call_index", "role", "prompt_tokens", "completion_tokens", "charged", "cached", "error",
                        "latency_s"]
RUN_COLS = UNIT_KEY + ["run_index", "calls_start", "calls_end", "independent"]
RAW_UNIT_COLS = UNIT_KEY + ["calls_used", "prompt_tokens", "completion_tokens", "feedback_evals", "error"]


def _read_store(path: Path) -> dict[str, pd.DataFrame | int]:
    store = Store.for_reading(path)
    try:
        evaluations, timings = read_evaluations(store)
        hidden = hidden_verdicts(evaluations)
        feedback = _frame(store.events("feedback"), UNIT_KEY + ["feedback_index", "calls_used", "source_hash",
                                                                "verdict"])
        test_runs = _frame(store.events("test_runs"), TEST_RUN_COLS)
        candidates = _events(store.events("candidates"), "candidate_index", hidden, feedback,
                             ("run_index", "evals_used"))
        submissions = _events(store.events("submissions"), "submission_index", hidden, feedback, ("evals_used",))
        for events in (candidates, submissions):
            _fill_evals_used(events, feedback, test_runs)
        runs = _frame(store.runs(), RUN_COLS)
        runs["calls_end"] = pd.to_numeric(runs["calls_end"], errors="coerce").astype(float)
        runs["independent"] = runs["independent"].astype(bool)
        calls = _frame(store.calls(tuple(CALL_COLS)), CALL_COLS)
        raw_units = _frame(store.units(done=True), RAW_UNIT_COLS)
        raw_units["failed_calls"] = _failed_calls(raw_units, calls, store.retried_calls())
        frames: dict[str, pd.DataFrame | int] = {
            "units": unit_outcomes(raw_units, candidates, submissions, evaluations),
            "candidates": candidates,
            "submissions": submissions,
            "feedback": feedback,
            "evaluations": evaluations,
            "timings": timings,
            "calls": calls,
            "runs": runs,
            "test_runs": test_runs,
            "examples": _frame(store.events("examples"), EXAMPLE_COLS),
            "unfinished": len(store.units(done=False)),
        }
    finally:
        store.close()
    return frames


def _fill_evals_used(events: pd.DataFrame, feedback: pd.DataFrame, test_runs: pd.DataFrame) -> None:
    """Stores written before evals_used was recorded (-1): the GPU evaluations the unit had
    asked for at or before the event's call count (an upper bound by at most the one
    evaluation of that call's own candidate)."""
    missing = events["evals_used"] < 0
    if not missing.any():
        return
    evals = pd.concat([feedback[UNIT_KEY + ["calls_used"]], test_runs[UNIT_KEY + ["calls_used"]]])
    at = {k: np.sort(g["calls_used"].to_numpy(np.int64)) for k, g in evals.groupby(UNIT_KEY, sort=False)}
    events.loc[missing, "evals_used"] = [
        int(np.searchsorted(at.get((m, t, r), np.zeros(0, np.int64)), c, side="right"))
        for m, t, r, c in events.loc[missing, UNIT_KEY + ["calls_used"]].itertuples(index=False, name=None)]


def _failed_calls(units: pd.DataFrame, calls: pd.DataFrame, retried: list[dict[str, Any]]) -> list[int]:
    """Per unit, its model calls that failed for good: recorded failures plus those a
    `--retry-errors` moved aside when it sent them again."""
    failed = calls[calls["error"].notna()].groupby(UNIT_KEY).size().to_dict()
    for r in retried:
        key = (r["method"], r["task"], r["repeat"])
        failed[key] = failed.get(key, 0) + 1
    return [int(failed.get(k, 0)) for k in units[UNIT_KEY].itertuples(index=False, name=None)]


# ---------------------------------------------------------------------------- public entry points
def load_runs(paths: list[Path] | tuple[Path, ...], allow_same_seed: bool = False) -> RunData:
    """Read one or more compatible run folders as one RunData (RunError when not possible).
    Units whose seed an earlier run's unit has are copies: refused, or with `allow_same_seed`
    counted once (left out of the later run, and said in the notes)."""
    if not paths:
        raise RunError("no run folder given")
    infos = [read_run_info(Path(p)) for p in paths]
    check_compatible(infos)
    copies = copied_units(infos, allow_same_seed)
    notes = [f"{len(c)} unit(s) of {info.name} share their seeds with units of an earlier run: copies, counted "
             "once (--allow-same-seed)" for info, c in zip(infos, copies, strict=True) if c]
    parts: dict[str, list[pd.DataFrame]] = {k: [] for k in
                                            ("units", "candidates", "submissions", "feedback", "evaluations",
                                             "timings", "calls", "runs", "test_runs", "examples")}
    unfinished = 0
    offset = 0
    labels = [info.name for info in infos]
    if len(set(labels)) < len(labels):  # same folder name under different parents
        labels = [f"{i}:{name}" for i, name in enumerate(labels)]
    for info, label, copied in zip(infos, labels, copies, strict=True):
        frames = _read_store(info.path / "store.sqlite")
        unfinished += int(frames.pop("unfinished"))
        for name, df in frames.items():
            assert isinstance(df, pd.DataFrame)
            df = df.copy()
            if copied and {"method", "task", "repeat"} <= set(df.columns):
                keys = pd.MultiIndex.from_frame(df[["method", "task", "repeat"]].astype({"repeat": int}))
                df = df[~keys.isin(list(copied))]
            df.insert(0, "run", label)
            if "repeat" in df.columns:
                df.insert(1, "run_repeat", df["repeat"])
                df["repeat"] = df["repeat"] + offset
            parts[name].append(df)
        offset += info.repeats
    frames_all = {k: pd.concat(v, ignore_index=True) if len(v) > 1 else v[0] for k, v in parts.items()}
    # Only finished units are reported on; events of a unit still running (or killed) are left out.
    units = frames_all["units"]
    done = unit_index(units)
    for name in ("candidates", "submissions", "feedback", "calls", "runs", "test_runs", "examples"):
        df = frames_all[name]
        frames_all[name] = df[unit_index(df).isin(done)].reset_index(drop=True)
    data = RunData(infos=infos, unfinished_units=unfinished, units=units.reset_index(drop=True), notes=notes,
                   **{k: v for k, v in frames_all.items() if k != "units"})
    if not len(data.units):
        raise RunError(f"{', '.join(str(i.path) for i in infos)}: no finished units to report on")
    return data


def load_run(path: Path) -> RunData:
    return load_runs([path])


def unit_index(df: pd.DataFrame) -> pd.MultiIndex:
    """The (method, task, repeat) index of a frame's rows."""
    return pd.MultiIndex.from_frame(df[UNIT_KEY])


def task_difficulty(data: RunData, task_ids: list[str] | tuple[str, ...]) -> dict[str, int | None]:
    """Difficulty of each task as the run recorded it (config.json's `resolved.task_difficulty`,
    written when the run starts), so a report needs only the run folder: no torch, no task registry,
    and adapted suites need not be loadable where the report is made. None for a task no run
    recorded it for (runs recorded before it was, or a task a run did not resolve): reported as
    unknown, never guessed."""
    recorded: dict[str, int] = {}
    for info in data.infos:
        recorded.update(info.task_difficulty)
    return {t: recorded.get(t) for t in task_ids}


def finite(x: Any) -> bool:
    return x is not None and bool(np.isfinite(x))
