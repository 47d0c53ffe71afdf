"""No silent failure (issue 13, item 2), end to end through the command line against serve-sim
made to answer HTTP 400: to every JSON-mode request, and to every 7th request. The run
completes, says which units errored in one warning line, exits with status 3, keeps the
server's message with each failed call, and `--resume --retry-errors` finishes the errored
units from their recorded calls."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from modelio.server import ServerOptions, SimServer
from tests.helpers import run_cli

pytestmark = pytest.mark.slow  # whole runs through the CLI with a worker


def rows(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return [tuple(r) for r in con.execute(sql).fetchall()]
    finally:
        con.close()


def only_run(folder: Path) -> Path:
    (run,) = [p for p in folder.iterdir() if p.is_dir()]
    return run


def test_an_endpoint_that_rejects_json_mode_errors_every_method_alike_and_says_so(tmp_path: Path) -> None:
    config = tmp_path / "json.yaml"
    config.write_text("answer_format: json\njson_mode: true\n")
    with SimServer(options=ServerOptions(reject_json_mode=True)) as server:
        proc = run_cli("compare", "--base-url", server.url, "--model", "sim", "--budget", "3", "--tasks", "vector_add",
                       "--config", str(config), "--workers", "1", "--quiet", "--out", str(tmp_path / "runs"),
                       timeout=400)
    assert proc.returncode == 3, proc.stderr[-3000:]
    warning = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "3 unit(s) ended on an error, a failed model call" in warning[0] and "--retry-errors" in warning[0]
    db = only_run(tmp_path / "runs") / "store.sqlite"
    units = rows(db, "SELECT method, error FROM units ORDER BY method")
    assert [m for m, _ in units] == ["direct", "geak", "reflexion"]  # every method, not GEAK alone
    assert all("HTTP 400: response_format of type json_object is not supported" in e for _, e in units)
    failed = rows(db, "SELECT method, call_index, charged FROM calls WHERE error IS NOT NULL ORDER BY method")
    assert failed == [("direct", 0, 0), ("geak", 0, 0), ("reflexion", 0, 0)]  # nothing produced, nothing charged
    summary = json.loads((db.parent / "summary.json").read_text())
    assert {m: (e["errored_units"], e["failed_calls"]) for m, e in summary["methods"].items()} == \
        {"direct": (1, 1), "reflexion": (1, 1), "geak": (1, 1)}
    table_rows = [line for line in proc.stdout.splitlines() if line.startswith(("direct ", "reflexion ", "geak "))]
    assert len(table_rows) == 3 and all(" 1/1 " in line for line in table_rows), proc.stdout


def test_every_7th_request_rejected_then_retry_errors_finishes_the_run(tmp_path: Path) -> None:
    # --eval-budget 6: every unit spends its whole call budget (the matched GPU cap would stop direct early)
    args = ("--model", "sim", "--budget", "6", "--eval-budget", "6", "--tasks", "vector_add,add_relu", "--workers", "1",
            "--quiet")
    with SimServer(options=ServerOptions(reject_every=7)) as server:
        proc = run_cli("compare", "--base-url", server.url, *args, "--out", str(tmp_path / "runs"), timeout=500)
        assert proc.returncode == 3, proc.stderr[-3000:]
        rejected = server.counters().faults.get("400", 0)
        run = only_run(tmp_path / "runs")
        db = run / "store.sqlite"
        errored = rows(db, "SELECT method, task, repeat FROM units WHERE error IS NOT NULL")
        failed = rows(db, "SELECT method, task, repeat, error FROM calls WHERE error IS NOT NULL")
        assert rejected >= 2 and len(failed) == rejected and len(errored) == rejected  # one failure ends its unit
        summary = json.loads((run / "summary.json").read_text())
        assert sum(m["errored_units"] for m in summary["methods"].values()) == len(errored)
        assert sum(m["failed_calls"] for m in summary["methods"].values()) == rejected
        assert all("maximum context length" in e for *_, e in failed)
        assert {(m, t, r) for m, t, r, _ in failed} == set(errored)

        plain = run_cli("compare", "--resume", str(run), "--quiet", timeout=300)  # without the flag: still errored
        assert plain.returncode == 3, plain.stderr[-3000:]

        good = rows(db, "SELECT COUNT(*) FROM calls c JOIN units u ON c.method=u.method AND c.task=u.task AND "
                        "c.repeat=u.repeat WHERE u.error IS NOT NULL AND c.error IS NULL")[0][0]
        server.options = dataclasses.replace(server.options, reject_every=0)  # the endpoint recovered
        before = server.counters().answered
        retried = run_cli("compare", "--resume", str(run), "--retry-errors", "--quiet", timeout=500)
        assert retried.returncode == 0, retried.stderr[-3000:]
        answered = server.counters().answered - before
    assert rows(db, "SELECT COUNT(*) FROM units WHERE error IS NOT NULL") == [(0,)]
    assert rows(db, "SELECT COUNT(*) FROM calls WHERE error IS NOT NULL") == [(0,)]
    assert len(rows(db, "SELECT * FROM retried_calls")) == rejected  # the failures stay on record
    assert set(rows(db, "SELECT calls_used FROM units")) == {(6,)}  # every unit spent its whole budget
    # The retried units replayed their good calls from the store: only the rest were sent.
    assert answered == 6 * len(errored) - good
    summary = json.loads((run / "summary.json").read_text())
    assert sum(m["errored_units"] for m in summary["methods"].values()) == 0
    assert sum(m["failed_calls"] for m in summary["methods"].values()) == rejected  # the failures still count
