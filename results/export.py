"""`export RUN_DIR --format csv|parquet|jsonl`: a run's per-unit results and candidates as flat files.

Why: a reviewer or an author wants the numbers in pandas, R or a spreadsheet, not in SQLite.
Two tables: `units` (one row per finished (method, task, repeat): outcomes, spend, speedup)
and `candidates` (one row per generated candidate: when, its verdicts, whether it was
submitted). The files are plain: `pandas.read_csv` reads them as they are. The simulated
label is a column of every row and a field of the sidecar `export.json` (which also says
how much of the run was done and what each column means), never a comment line.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from record.progress import RunProgress, run_progress
from record.run_folder import RunFolder, ensure_writable, output_folder
from record.store import Store
from results.readers import RunData, RunError, load_run, task_difficulty

FORMATS = ("csv", "parquet", "jsonl")
SIDECAR = "export.json"
SIMULATED_LABEL = "SIMULATED MODEL: these results come from the built-in simulated model, not a real LLM"

UNIT_COLUMNS = {
    "run": "run folder name",
    "method": "method",
    "task": "task id",
    "repeat": "repeat index within the run",
    "difficulty": "task difficulty as the run recorded it",
    "simulated": "true when the run used the simulated model",
    "model": "model name",
    "budget": "budget per (method, task, repeat)",
    "budget_unit": "what the budget counts: calls, output_tokens or total_tokens",
    "submitted_pass": "the method's final submission passes the hidden cases",
    "oracle_pass": "some candidate the method generated passes the hidden cases",
    "submitted_visible_pass": "the final submission passes the visible cases (empty when never asked)",
    "final_verdict": "hidden verdict of the final submission (empty: nothing submitted)",
    "calls_used": "model calls charged",
    "prompt_tokens": "prompt tokens charged",
    "completion_tokens": "completion tokens charged",
    "tokens_used": "prompt + completion tokens",
    "evaluations": "GPU evaluations the method used: visible feedback plus runs of its own tests",
    "candidates": "candidates generated",
    "submissions": "times the submission changed",
    "speedup": "final submission vs the expert Triton baseline, geometric mean over perf cases (empty: not "
               "correct or not timed)",
    "speedup_lo": "lower end of the speedup's 95% bootstrap interval",
    "speedup_hi": "upper end of the speedup's 95% bootstrap interval",
    "speedup_vs_eager": "final submission vs PyTorch eager (empty: not correct or not timed)",
    "timing_flagged": "the timing was flagged (clocks moved, throttling, side streams): kept out of averages "
                      "(empty: nothing timed)",
    "timing_protocol": "protocol of the final submission's timing: final-full, the full interleaved one "
                       "(empty: nothing timed)",
    "timing_samples": "candidate samples that timing took, over all perf cases (empty: nothing timed)",
    "error": "why the unit ended early (a failed model call), else empty",
    "failed_calls": "model calls of the unit that failed for good (those --retry-errors sent again included)",
}
CANDIDATE_COLUMNS = {
    "run": "run folder name", "method": "method", "task": "task id", "repeat": "repeat index within the run",
    "candidate_index": "order in which the unit proposed it (0, 1, ...)",
    "run_index": "the method's independent run it belongs to (-1: none declared)",
    "calls_used": "calls the unit had spent when it was proposed",
    "tokens_used": "tokens the unit had spent when it was proposed",
    "evals_used": "GPU evaluations the unit had spent when it was proposed",
    "source_hash": "hash of its code (show RUN_DIR --all prints the code)",
    "hidden_verdict": "verdict on the hidden cases", "hidden_pass": "passes the hidden cases",
    "visible_verdict": "first visible feedback the method asked for on it (empty: never asked)",
    "visible_timing_protocol": "protocol of its visible feedback's timing: feedback-short, few samples against "
                               "cached reference timings (empty: not timed: not correct, never asked, or a CPU run)",
    "visible_speedup": "the speedup that feedback showed the method (empty: not timed)",
    "visible_samples": "candidate samples that feedback timing took, over all visible perf cases",
    "visible_early_stopped": "perf cases whose sampling the sequential rule stopped early",
    "visible_baselines_reused": "perf cases timed against reference timings from the worker's cache (the rest "
                                "measured them afresh)",
    "visible_drift_events": "cached reference timings found out of date and replaced during that timing",
    "submitted": "the method submitted it at some point", "final": "it is the final submission",
    "simulated": "true when the run used the simulated model",
    "source": "its code (only with --sources)",
}


class ExportError(RunError):
    """A format that cannot be written here (parquet without pyarrow): one line with the fix."""


@dataclass(frozen=True)
class ExportFiles:
    units: Path
    candidates: Path
    sidecar: Path
    rows: int
    candidate_rows: int
    progress: RunProgress

    @property
    def banner(self) -> str | None:
        return self.progress.banner()


def unit_table(data: RunData) -> pd.DataFrame:
    """One row per finished unit, the columns of UNIT_COLUMNS."""
    u = data.units
    info = {i.name: i for i in data.infos}
    finals = data.submissions.sort_values("submission_index").groupby(["run", "method", "task", "repeat"]).tail(1)
    final = finals.set_index(["run", "method", "task", "repeat"])
    counts_c = data.candidates.groupby(["run", "method", "task", "repeat"]).size()
    counts_s = data.submissions.groupby(["run", "method", "task", "repeat"]).size()
    timed = data.evaluations[(data.evaluations["case_set"] == "hidden") & data.evaluations["has_timing"]]
    timing = {(h, t): r for h, t, r in zip(timed["source_hash"], timed["task"], timed.itertuples(index=False),
                                           strict=True)}
    difficulty = task_difficulty(data, list(data.tasks))
    rows = []
    for r in u.itertuples(index=False):
        key = (r.run, r.method, r.task, r.repeat)
        f = final.loc[key] if key in final.index else None
        t = timing.get((f["source_hash"], r.task)) if f is not None else None
        run = info.get(str(r.run), data.first)
        rows.append({
            "run": r.run, "method": r.method, "task": r.task, "repeat": int(r.run_repeat),
            "difficulty": difficulty.get(r.task), "simulated": run.simulated, "model": run.model,
            "budget": run.budget, "budget_unit": run.budget_unit,
            "submitted_pass": bool(r.submitted_pass), "oracle_pass": bool(r.oracle_pass),
            "submitted_visible_pass": _maybe_bool(r.submitted_visible_pass),
            "final_verdict": f["hidden_verdict"] if f is not None else None,
            "calls_used": int(r.calls_used), "prompt_tokens": int(r.prompt_tokens),
            "completion_tokens": int(r.completion_tokens), "tokens_used": int(r.prompt_tokens + r.completion_tokens),
            "evaluations": int(r.feedback_evals), "candidates": int(counts_c.get(key, 0)),
            "submissions": int(counts_s.get(key, 0)), "speedup": _num(r.speedup),
            "speedup_lo": _num(t.speedup_lo) if t is not None and bool(r.submitted_pass) else None,
            "speedup_hi": _num(t.speedup_hi) if t is not None and bool(r.submitted_pass) else None,
            "speedup_vs_eager": _num(r.speedup_vs_eager),
            "timing_flagged": bool(r.speedup_flagged) if t is not None else None,
            "timing_protocol": t.protocol if t is not None else None,
            "timing_samples": _int(t.samples) if t is not None else None,
            "error": r.error if isinstance(r.error, str) and r.error else None,
            "failed_calls": int(r.failed_calls),
        })
    return pd.DataFrame(rows, columns=list(UNIT_COLUMNS))


def candidate_table(data: RunData, with_sources: bool = False) -> pd.DataFrame:
    c = data.candidates
    finals = data.submissions.sort_values("submission_index").groupby(["run", "method", "task", "repeat"]).tail(1)
    final_keys = set(zip(finals["run"], finals["method"], finals["task"], finals["repeat"], finals["source_hash"],
                         strict=True))
    submitted = set(zip(data.submissions["run"], data.submissions["method"], data.submissions["task"],
                        data.submissions["repeat"], data.submissions["source_hash"], strict=True))
    simulated = {i.name: i.simulated for i in data.infos}
    out = pd.DataFrame({
        "run": c["run"], "method": c["method"], "task": c["task"], "repeat": c["run_repeat"].astype(int),
        "candidate_index": c["candidate_index"].astype(int), "run_index": c["run_index"].astype(int),
        "calls_used": c["calls_used"].astype(int), "tokens_used": c["tokens_used"].astype(int),
        "evals_used": c["evals_used"].astype(int),
        "source_hash": c["source_hash"], "hidden_verdict": c["hidden_verdict"], "hidden_pass": c["hidden_pass"],
        "visible_verdict": c["visible_verdict"],
    })
    visible = data.evaluations[(data.evaluations["case_set"] == "visible") & data.evaluations["protocol"].notna()]
    timed = {(r.run, r.task, r.source_hash): r for r in visible.itertuples(index=False)}
    found = [timed.get((run, task, h)) for run, task, h in zip(c["run"], c["task"], c["source_hash"], strict=True)]
    out["visible_timing_protocol"] = [t.protocol if t is not None else None for t in found]
    out["visible_speedup"] = [_num(t.speedup) if t is not None else None for t in found]
    for column in ("samples", "early_stopped", "baselines_reused", "drift_events"):
        out[f"visible_{column}"] = [_int(getattr(t, column)) if t is not None else None for t in found]
    keys = list(zip(c["run"], c["method"], c["task"], c["repeat"], c["source_hash"], strict=True))
    out["submitted"] = [k in submitted for k in keys]
    out["final"] = [k in final_keys for k in keys]
    out["simulated"] = [simulated.get(str(r), data.simulated) for r in c["run"]]
    if with_sources:  # one run per export (export_run), so one store holds every source
        store = Store.for_reading(RunFolder(data.first.path).store_path)
        try:
            sources = {str(h): store.source(str(h)) for h in set(c["source_hash"])}
        finally:
            store.close()
        out["source"] = [sources[str(h)] for h in c["source_hash"]]
    return out


def export_run(run_dir: Path, fmt: str = "csv", out_dir: Path | None = None, with_sources: bool = False) -> ExportFiles:
    """Write units.<fmt>, candidates.<fmt> and export.json under `out_dir` [RUN_DIR-export, beside the
    run folder: the run folder itself is never written]. ExportError (one line) when `out_dir` cannot
    be written."""
    if fmt not in FORMATS:
        raise ExportError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "parquet":
        _require_pyarrow()
    data = load_run(Path(run_dir))
    progress = run_progress(Path(run_dir))
    out = Path(out_dir) if out_dir is not None else output_folder([Path(run_dir)], "export")
    try:  # a folder that exists but cannot be written (a read-only run folder's export/) fails here, in one line
        ensure_writable(out)
    except OSError as exc:
        raise ExportError(f"cannot write to {out}: {exc.strerror or exc}") from None
    units, candidates = unit_table(data), candidate_table(data, with_sources)
    paths = (out / f"units.{fmt}", out / f"candidates.{fmt}")
    info = data.first
    sidecar = out / SIDECAR
    about = {
        "run": str(info.path), "simulated": data.simulated, "label": SIMULATED_LABEL if data.simulated else None,
        "model": info.model, "budget": info.budget, "budget_unit": info.budget_unit, "methods": list(data.methods),
        "tasks": list(data.tasks), "repeats": info.repeats, "device": info.device_name,
        "progress": progress.to_json(), "partial": progress.banner(),
        "files": {"units": paths[0].name, "candidates": paths[1].name, "format": fmt},
        "columns": {"units": UNIT_COLUMNS, "candidates": {k: v for k, v in CANDIDATE_COLUMNS.items()
                                                          if k != "source" or with_sources}},
    }
    try:  # a file that cannot be written (a full disk, a name taken by a folder) is one line too
        for df, path in zip((units, candidates), paths, strict=True):
            _write(df, path, fmt)
        sidecar.write_text(json.dumps(about, indent=2) + "\n")
    except OSError as exc:
        raise ExportError(f"cannot write to {out}: {exc.strerror or exc}") from None
    return ExportFiles(paths[0], paths[1], sidecar, len(units), len(candidates), progress)


def _write(df: pd.DataFrame, path: Path, fmt: str) -> None:
    if fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "jsonl":
        df.to_json(path, orient="records", lines=True)
    else:
        df.to_parquet(path, index=False)


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ExportError("parquet needs pyarrow: pip install pyarrow (or pip install -e '.[parquet]'), "
                          "or export --format csv") from None


def _num(x: Any) -> float | None:
    return float(x) if x is not None and np.isfinite(float(x)) else None


def _int(x: Any) -> int | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else int(x)


def _maybe_bool(x: Any) -> bool | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return bool(x)
