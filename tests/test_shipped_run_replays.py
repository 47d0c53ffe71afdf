"""The shipped GPU run replays on a CPU (issue 46, Done-when 1): `compare --replay` of a copy of
benchmarks/results/gpu_run_small (recorded on an H200: `compare --budget 6 --tasks
vector_add,softmax,layer_norm --repeats 2 --seed 0`) reproduces its summary.json, here, with the
GPU hidden, so a change that breaks the replay of the published run fails here when it is made.

An exact replay runs no candidate at all (`NothingRuns`: no worker, no GPU, no interpreter): every
model reply and every evaluation, GPU timings included, is read from the recorded store
(modelio/replay.py, record/recorded.py), and every decision (candidates,
verdicts, the speed-based picks between candidates, submissions, calls, budgets) is remade by
this version's code from them. So the timing figures (speedups, fast_p) are not left out: they
are the H200's measurements carried through the replay, not re-measured, and they must match.

What a replay does not take from the record is summary.json's statistics: summary.json is
computed from the store by the replaying version (results/summary.py), and its intervals (the
`*_ci` fields and what describes them) follow that version's statistics, which change between
versions on their own (issue 43's invariant 12, say, withholds intervals below 7 tasks). So:
every field of the shipped summary.json but those equals the replay's; the replay's summary.json
is byte for byte the one this version computes from the shipped store itself (so the intervals
are the recorded run's too, as this version states them); and while the statistics are the
recording's, the two files are byte-identical. A prompt this version words otherwise is answered
by its position (the replay says so); that alone does not fail."""


from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from record.run_folder import RunFolder
from tests.helpers import ROOT, cli_env, run_cli

SHIPPED = ROOT / "benchmarks" / "results" / "gpu_run_small"
# every store row a replay writes as recorded (timestamps, latencies and phase seconds are not)
TABLES = {
    "calls": "SELECT method, task, repeat, call_index, role, temperature, max_tokens, seed, sample_index, response, "
             "prompt_tokens, completion_tokens, model, error, charged FROM calls ORDER BY 1, 2, 3, 4",
    "candidates": "SELECT * FROM candidates ORDER BY 1, 2, 3, 4",
    "submissions": "SELECT * FROM submissions ORDER BY 1, 2, 3, 4",
    "units": "SELECT * FROM units ORDER BY 1, 2, 3",
    "evaluations": "SELECT source_hash, task, case_set, device_key, timed, evaluation FROM evaluations "
                   "ORDER BY 1, 2, 3, 4, 5",
}


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def rows(store: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return [tuple(r) for r in con.execute(sql).fetchall()]
    finally:
        con.close()


def recomputed(key: str) -> bool:
    """A summary.json field of the replaying version's statistics rather than of the record: an
    interval, or what says how (or whether) intervals are given."""
    return key.endswith(("_ci", "_pass_count")) or key in {"ci", "ci_method", "ci_coverage", "no_interval_reason",
                                                            "interval_min_tasks"}


def compared(recorded: Any, replayed: Any, at: str = "") -> tuple[list[str], list[str]]:
    """(the JSON paths of `recorded` compared, those where `replayed` differs): every leaf the
    recorded summary holds, but the recomputed statistics; fields a later version adds are not in
    the record (the byte comparison with this version's own summary covers them)."""
    if isinstance(recorded, dict):
        if not isinstance(replayed, dict):
            return [at], [at]
        seen: list[str] = []
        differ: list[str] = []
        for k in sorted(recorded, key=str):
            if recomputed(str(k)):
                continue
            if k not in replayed:
                seen, differ = seen + [f"{at}.{k}"], differ + [f"{at}.{k} (gone)"]
                continue
            a, b = compared(recorded[k], replayed[k], f"{at}.{k}")
            seen, differ = seen + a, differ + b
        return seen, differ
    if isinstance(recorded, list) and isinstance(replayed, list) and len(recorded) == len(replayed):
        seen, differ = [], []
        for k, (x, y) in enumerate(zip(recorded, replayed, strict=True)):
            a, b = compared(x, y, f"{at}[{k}]")
            seen, differ = seen + a, differ + b
        return seen, differ
    return [at], [] if recorded == replayed else [at]


@pytest.mark.slow  # seconds: the fast subset stays under two minutes
def test_the_shipped_gpu_run_replays_on_the_cpu_and_reproduces_its_summary(tmp_path: Path) -> None:
    from results.summary import build_summary

    before = digests(SHIPPED)
    assert set(before) == {"config.json", "env.json", "run.log", "store.sqlite", "summary.json"}
    recorded_config = json.loads((SHIPPED / "config.json").read_text())
    assert recorded_config["resolved"]["target"]["device_name"] == "NVIDIA H200"
    copy = tmp_path / "shipped"  # replay reads its source read-only; a copy all the same
    shutil.copytree(SHIPPED, copy)
    out = tmp_path / "replays"

    done = run_cli("compare", "--replay", str(copy), "--out", str(out), "--quiet", timeout=300,
                   env=cli_env(KMC_FORCE_CPU="1", CUDA_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES=""))
    assert done.returncode == 0, done.stderr[-3000:]
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    replayed = RunFolder(run_dir)

    # every decision as recorded: the store's rows (prompt text aside, which may be worded otherwise)
    for table, sql in TABLES.items():
        assert rows(replayed.store_path, sql) == rows(copy / "store.sqlite", sql), table
    config = json.loads(replayed.config_path.read_text())
    assert config["resolved"] == recorded_config["resolved"]  # judged as the H200 did: its keys, timed finals
    assert config["executor"]["kind"] == "replay" and config["executor"]["workers"] == 0  # nothing ran here

    # summary.json: every recorded field but the statistics' intervals, timings included
    shipped = json.loads((SHIPPED / "summary.json").read_text())
    summary = json.loads(replayed.summary_path.read_text())
    seen, differ = compared(shipped, summary)
    assert not differ, differ
    for method in ("direct", "reflexion", "geak"):
        for field in ("calls_used.vector_add", "gpu_evals.layer_norm", "tokens_used.softmax", "submitted_pass",
                      "oracle_pass", "errored_units", "speedup_geomean", "speedups.expert.geomean",
                      "speedups.expert.fast_p.1", "speedups.eager.units", "visible_false_positive_rate"):
            assert f".methods.{method}.{field}" in seen, field
    assert {m: (sum(v["calls_used"].values()), sum(v["gpu_evals"].values())) for m, v in summary["methods"].items()} \
        == {"direct": (36, 18), "reflexion": (36, 18), "geak": (36, 18)}  # as the H200 run printed them
    assert {m: round(v["submitted_pass"] * 6) for m, v in summary["methods"].items()} == {
        "direct": 4, "reflexion": 5, "geak": 5}

    # the statistics too: the replay's summary.json is the one this version computes from the record
    # (while this version's statistics are the recording's, that is the shipped file, byte for byte)
    own = RunFolder(tmp_path / "own")
    own.path.mkdir()
    own.write_summary(build_summary(copy))
    assert replayed.summary_path.read_bytes() == own.summary_path.read_bytes()

    assert digests(SHIPPED) == before  # the published folder is as it was: no -wal/-shm, no outputs
    assert digests(copy) == before
