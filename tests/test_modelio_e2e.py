"""The model layer through the command line: compare over HTTP against serve-sim, its replay
with no network, --dry-run, an unreachable endpoint, and the serve-sim command itself."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from modelio.server import SimServer
from tests.helpers import ROOT, cli_env, run_cli
from tests.test_modelio_client import free_port

# What a call row says about the response; created/latency_s are wall-clock, and cached/retries
# say how the response was obtained (a replayed response is a cache hit, fetched without retries).
CALL_COLUMNS = ("method, task, repeat, call_index, role, messages_hash, messages, temperature, max_tokens, seed, "
                "sample_index, response, prompt_tokens, completion_tokens, model, error, charged")


def only_dir(folder: Path) -> Path:
    dirs = [p for p in folder.iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def table(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return [tuple(r) for r in con.execute(sql).fetchall()]
    finally:
        con.close()


@pytest.mark.slow
def test_compare_over_http_then_replay_reproduces_it_with_zero_requests(tmp_path: Path) -> None:
    with SimServer() as server:
        proc = run_cli("compare", "--base-url", server.url, "--model", "sim", "--budget", "2", "--tasks", "vector_add",
                       "--methods", "direct", "--out", str(tmp_path / "live"), "--quiet", timeout=240)
        assert proc.returncode == 0, proc.stderr[-3000:]
        after_live = server.counters()
        assert after_live.answered == 2 and after_live.models_requests == 1
        live = only_dir(tmp_path / "live")

        replay = run_cli("compare", "--replay", str(live), "--out", str(tmp_path / "replay"), "--quiet", timeout=240)
        assert replay.returncode == 0, replay.stderr[-3000:]
        assert server.counters().requests == after_live.requests  # the replay sent nothing
    again = only_dir(tmp_path / "replay")
    assert "REPLAY of" in replay.stderr

    summary = json.loads((live / "summary.json").read_text())
    assert summary["simulated"] is True and summary["model"] == "sim"  # serve-sim output is labelled simulated
    assert summary["methods"]["direct"]["calls_used"] == {"vector_add": 2}
    assert (again / "summary.json").read_bytes() == (live / "summary.json").read_bytes()

    a, b = live / "store.sqlite", again / "store.sqlite"
    order = "ORDER BY method, task, repeat, call_index"
    assert table(a, f"SELECT {CALL_COLUMNS} FROM calls {order}") == table(b, f"SELECT {CALL_COLUMNS} FROM calls {order}")
    assert table(a, "SELECT cached FROM calls") == [(0,), (0,)]
    assert table(b, "SELECT cached FROM calls") == [(1,), (1,)]
    for sql in ("SELECT source_hash, task, case_set, device_key, verdict FROM evaluations ORDER BY 1, 2, 3, 4",
                "SELECT * FROM candidates ORDER BY 1, 2, 3, 4", "SELECT * FROM submissions ORDER BY 1, 2, 3, 4",
                "SELECT * FROM feedback ORDER BY 1, 2, 3, 4", "SELECT * FROM units ORDER BY 1, 2, 3"):
        assert table(a, sql) == table(b, sql), sql
    assert table(b, "SELECT value FROM meta WHERE key='replay_of'") == [(json.dumps(str(live)),)]


@pytest.mark.slow
def test_unreachable_endpoint_exits_2_with_one_line_and_spends_nothing(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    proc = run_cli("compare", "--base-url", url, "--model", "m", "--budget", "2", "--tasks", "vector_add",
                   "--methods", "direct", "--out", str(tmp_path / "runs"), "--quiet", timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and url in lines[0] and "unreachable" in lines[0], proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.slow
def test_dry_run_prints_the_estimate_and_creates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    proc = run_cli("compare", "--dry-run", "--budget", "10", "--tasks", "vector_add,softmax", "--base-url",
                   "http://127.0.0.1:9/v1", "--model", "gpt-4o-mini", "--out", str(out), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "DRY RUN" in proc.stdout
    total = next(line for line in proc.stdout.splitlines() if line.startswith("total"))
    assert total.split()[1:3] == ["6", "60"]  # 3 methods x 2 tasks; 10 calls each
    assert "$0.15 / $0.60 per 1M" in proc.stdout
    assert not out.exists()


def test_replay_of_a_folder_that_is_not_a_run_is_bad_input(tmp_path: Path) -> None:
    from tests.test_cli_usability import invoke  # in process: the CLI's own error path, without a start-up

    code, _, err = invoke("compare", "--replay", str(tmp_path), "--out", str(tmp_path / "runs"))
    assert code == 2 and "not a recorded run folder" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_serve_sim_command_serves_models_and_rejects_bad_options() -> None:
    proc = subprocess.Popen([sys.executable, str(ROOT / "cli.py"), "serve-sim", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env(), cwd=str(ROOT))
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        with urllib.request.urlopen(f"{url}/models", timeout=10) as response:
            models = json.loads(response.read())
        assert {m["id"] for m in models["data"]} >= {"sim"}
        assert all(m["owned_by"] == "kmc-simulated" for m in models["data"])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    bad = run_cli("serve-sim", "--fail-rate", "1.5", timeout=60)
    assert bad.returncode == 2 and "fail rate" in bad.stderr


@pytest.mark.parametrize("flag", ["--latency=-1", "--faults=429,boom", "--fail-rate=1.5"])
def test_serve_sim_bad_fault_options_are_one_line_errors(flag: str) -> None:
    from tests.test_cli_usability import invoke  # in process: the CLI's own error path, without a start-up

    code, _, err = invoke("serve-sim", flag)
    assert code == 2 and len(err.strip().splitlines()) == 1
