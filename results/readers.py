"""Readers: one run folder (or several compatible ones) into pandas DataFrames.

Why: every table, curve, figure and verdict of the report is computed from these frames
and nothing else, so what the report says can always be traced back to rows of the run
store. Each frame is keyed by what a row is ((run, method, task, repeat, index) or a
source hash), never by position, and hidden verdicts are joined on the source hash.

Several runs can be read as one when they asked the same question: the same tasks,
budget, budget unit, model and method options (different seeds or repeat counts simply
add repeats). Repeats are renumbered run after run so (method, task, repeat) stays a
unique unit key; the original folder and repeat stay in the `run` and `run_repeat` columns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from results.run_folder import RunFolder, RunFolderError
from results.store import Store
from results.summary import unit_outcomes

UNIT_KEY = ["method", "task", "repeat"]
TEST_RUN_COLS = UNIT_KEY + ["test_run_index", "calls_used", "source_hash", "tests_hash", "verdict", "tests_passed",
                            "tests_total"]


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

    @property
    def name(self) -> str:
        return self.path.name


@dataclass
class RunData:
    """The frames of one run or of several combined runs (see the module docstring).

    units: one row per finished unit: method, task, repeat, run, run_repeat, calls_used,
        prompt_tokens, completion_tokens, tokens_used, feedback_evals, error,
        submitted_pass, oracle_pass, submitted_visible_pass, speedup (final submission,
        hidden cases, timed; NaN when not correct or not timed).
    candidates: one row per candidate of a finished unit: unit key, candidate_index,
        calls_used and tokens_used when it was proposed, source_hash, hidden_verdict,
        hidden_pass, visible_verdict (its first visible feedback in that unit, or None).
    submissions: the anytime submission timeline: unit key, submission_index, calls_used,
        tokens_used, source_hash, hidden_verdict, hidden_pass, visible_verdict.
    feedback: visible evaluations a method asked for: unit key, feedback_index, calls_used,
        source_hash, verdict.
    evaluations: one row per stored evaluation: run, source_hash, task, case_set,
        device_key, timed, verdict, speedup, speedup_lo, speedup_hi, speedup_vs_eager,
        candidate_ms, flagged, flag_reasons, skip_reasons (cases the judge skipped, with why).
    timings: one row per (timed evaluation, case): run, source_hash, task, case_set,
        case, candidate_ms (tuple of raw samples), baseline_ms, launches_per_sample, flagged.
    calls: one row per model call: unit key, call_index, role, prompt_tokens,
        completion_tokens, charged, cached, error, latency_s.
    runs: independent runs the methods declared: unit key, run_index, calls_start,
        calls_end (NaN when the budget cut the run short). Candidates carry run_index
        (-1 when the method declared no runs).
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
    """A run folder's identity from its config.json (results/run_folder.py reads and validates
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
    )


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
def _frame(rows: list[Any], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame([dict(r) for r in rows], columns=columns)


def read_evaluations(store: Store) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(evaluations, timings): one row per stored evaluation, and one per timed case."""
    ev_rows, t_rows = [], []
    for r in store.query("SELECT source_hash, task, case_set, device_key, verdict, evaluation FROM evaluations"):
        ev = json.loads(r["evaluation"])
        timing = ev.get("timing") or None
        t: dict[str, Any] = timing or {}
        ci = t.get("speedup_ci") or (None, None)
        ev_rows.append({
            "source_hash": r["source_hash"], "task": r["task"], "case_set": r["case_set"],
            "device_key": r["device_key"], "timed": timing is not None, "verdict": r["verdict"],
            "speedup": _num((timing or {}).get("speedup_vs_baseline")), "speedup_lo": _num(ci[0]),
            "speedup_hi": _num(ci[1]), "speedup_vs_eager": _num((timing or {}).get("speedup_vs_eager")),
            "candidate_ms": _num((timing or {}).get("candidate_ms")),
            "flagged": bool((timing or {}).get("flagged", False)),
            "flag_reasons": tuple((timing or {}).get("flag_reasons", ())),
            "skip_reasons": tuple((ev.get("verdict") or {}).get("skip_reasons", ())),
        })
        for case in (timing or {}).get("cases", ()):
            t_rows.append({
                "source_hash": r["source_hash"], "task": r["task"], "case_set": r["case_set"],
                "case": case["case"], "candidate_ms": tuple(case["candidate_ms"]),
                "baseline_ms": tuple(case["baseline_ms"]), "launches_per_sample": case.get("launches_per_sample", 1),
                "flagged": bool(t.get("flagged", False)),
            })
    ev_cols = ["source_hash", "task", "case_set", "device_key", "timed", "verdict", "speedup", "speedup_lo",
               "speedup_hi", "speedup_vs_eager", "candidate_ms", "flagged", "flag_reasons", "skip_reasons"]
    t_cols = ["source_hash", "task", "case_set", "case", "candidate_ms", "baseline_ms", "launches_per_sample",
              "flagged"]
    return pd.DataFrame(ev_rows, columns=ev_cols), pd.DataFrame(t_rows, columns=t_cols)


def _num(x: Any) -> float:
    return float(x) if x is not None else float("nan")


def hidden_verdicts(evaluations: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(source hash, task) -> hidden verdict; the untimed evaluation wins over the timed one
    (both judge the same cases; results/summary.py reads them the same way)."""
    hidden = evaluations[evaluations["case_set"] == "hidden"].sort_values("timed", kind="stable")
    out: dict[tuple[str, str], str] = {}
    for h, task, verdict in zip(hidden["source_hash"], hidden["task"], hidden["verdict"], strict=True):
        out.setdefault((h, task), verdict)
    return out


def read_units(store: Store) -> pd.DataFrame:
    """Finished units with their outcomes (results.summary.unit_outcomes) and raw spend."""
    cols = ["method", "task", "repeat", "calls_used", "tokens_used", "feedback_evals", "submitted_pass", "oracle_pass",
            "submitted_visible_pass", "speedup"]
    outcomes = pd.DataFrame([o.__dict__ for o in unit_outcomes(store)], columns=cols)
    raw = _frame(store.query("SELECT method, task, repeat, prompt_tokens, completion_tokens, error FROM units "
                             "WHERE status='done'"), UNIT_KEY + ["prompt_tokens", "completion_tokens", "error"])
    units = outcomes.merge(raw, on=UNIT_KEY, how="left", validate="one_to_one")
    units["speedup"] = pd.to_numeric(units["speedup"], errors="coerce").astype(float)
    for c in ("submitted_pass", "oracle_pass"):
        units[c] = units[c].astype(bool)
    return units


def read_calls(store: Store) -> pd.DataFrame:
    cols = UNIT_KEY + ["call_index", "role", "prompt_tokens", "completion_tokens", "charged", "cached", "error",
                       "latency_s"]
    return _frame(store.query(f"SELECT {', '.join(cols)} FROM calls ORDER BY method, task, repeat, call_index"), cols)


def read_feedback(store: Store) -> pd.DataFrame:
    cols = UNIT_KEY + ["feedback_index", "calls_used", "source_hash", "verdict"]
    return _frame(store.query(f"SELECT {', '.join(cols)} FROM feedback ORDER BY method, task, repeat, feedback_index"),
                  cols)


def read_test_runs(store: Store) -> pd.DataFrame:
    return _frame(store.query(f"SELECT {', '.join(TEST_RUN_COLS)} FROM test_runs "
                              "ORDER BY method, task, repeat, test_run_index"), TEST_RUN_COLS)


def read_runs(store: Store) -> pd.DataFrame:
    """Independent runs the methods declared (`ctx.begin_run`): calls_end is NaN for a run
    the budget cut short."""
    cols = UNIT_KEY + ["run_index", "calls_start", "calls_end"]
    df = _frame(store.query(f"SELECT {', '.join(cols)} FROM runs ORDER BY method, task, repeat, run_index"), cols)
    df["calls_end"] = pd.to_numeric(df["calls_end"], errors="coerce").astype(float)
    return df


def _events(store: Store, table: str, index: str, hidden: dict[tuple[str, str], str],
            feedback: pd.DataFrame, extra: tuple[str, ...] = ()) -> pd.DataFrame:
    cols = UNIT_KEY + [index, "calls_used", "tokens_used", "source_hash", *extra]
    df = _frame(store.query(f"SELECT {', '.join(cols)} FROM {table} ORDER BY method, task, repeat, {index}"), cols)
    df["hidden_verdict"] = [hidden.get((h, t)) for h, t in zip(df["source_hash"], df["task"], strict=True)]
    df["hidden_pass"] = df["hidden_verdict"] == "correct"
    first_fb = feedback.drop_duplicates(UNIT_KEY + ["source_hash"])[UNIT_KEY + ["source_hash", "verdict"]]
    df = df.merge(first_fb.rename(columns={"verdict": "visible_verdict"}), on=UNIT_KEY + ["source_hash"], how="left")
    df["visible_verdict"] = df["visible_verdict"].astype(object).where(df["visible_verdict"].notna(), None)
    return df


def _read_store(path: Path) -> dict[str, pd.DataFrame | int]:
    store = Store(path)
    try:
        evaluations, timings = read_evaluations(store)
        hidden = hidden_verdicts(evaluations)
        feedback = read_feedback(store)
        frames: dict[str, pd.DataFrame | int] = {
            "units": read_units(store),
            "candidates": _events(store, "candidates", "candidate_index", hidden, feedback, ("run_index",)),
            "submissions": _events(store, "submissions", "submission_index", hidden, feedback),
            "feedback": feedback,
            "evaluations": evaluations,
            "timings": timings,
            "calls": read_calls(store),
            "runs": read_runs(store),
            "test_runs": read_test_runs(store),
            "unfinished": int(store.query("SELECT COUNT(*) FROM units WHERE status != 'done'")[0][0]),
        }
    finally:
        store.close()
    return frames


# ---------------------------------------------------------------------------- public entry points
def load_runs(paths: list[Path] | tuple[Path, ...]) -> RunData:
    """Read one or more compatible run folders as one RunData (RunError when not possible)."""
    if not paths:
        raise RunError("no run folder given")
    infos = [read_run_info(Path(p)) for p in paths]
    check_compatible(infos)
    parts: dict[str, list[pd.DataFrame]] = {k: [] for k in
                                            ("units", "candidates", "submissions", "feedback", "evaluations",
                                             "timings", "calls", "runs", "test_runs")}
    unfinished = 0
    offset = 0
    labels = [info.name for info in infos]
    if len(set(labels)) < len(labels):  # same folder name under different parents
        labels = [f"{i}:{name}" for i, name in enumerate(labels)]
    for info, label in zip(infos, labels, strict=True):
        frames = _read_store(info.path / "store.sqlite")
        unfinished += int(frames.pop("unfinished"))
        for name, df in frames.items():
            assert isinstance(df, pd.DataFrame)
            df = df.copy()
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
    for name in ("candidates", "submissions", "feedback", "calls", "runs", "test_runs"):
        df = frames_all[name]
        frames_all[name] = df[unit_index(df).isin(done)].reset_index(drop=True)
    data = RunData(infos=infos, unfinished_units=unfinished, units=units.reset_index(drop=True),
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
    """Difficulty of each task as the run recorded it (config.json), so a report needs only the
    run folder: no torch, and adapted suites need not be loadable where the report is made.
    Runs recorded before that fall back to the bench registry (None for a task it does not know)."""
    recorded: dict[str, int] = {}
    for info in data.infos:
        recorded.update(info.task_difficulty)
    out: dict[str, int | None] = {t: recorded.get(t) for t in task_ids}
    missing = [t for t in task_ids if out[t] is None]
    if missing:
        from bench.registry import UnknownTaskError, get_task  # lazily: the registry loads torch

        for t in missing:
            try:
                out[t] = int(get_task(t).difficulty)
            except UnknownTaskError:
                out[t] = None
    return out


def finite(x: Any) -> bool:
    return x is not None and bool(np.isfinite(x))
