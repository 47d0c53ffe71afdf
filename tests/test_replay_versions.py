"""Replay across versions (issue 46 item 1): a run recorded by another version of the toolkit,
whose prompts that version worded otherwise, replays with every call answered by its unit and
call index, and says how many prompts differed; a record whose calls cannot be matched fails in
one line naming both versions and where the calls part, and leaves no run folder behind."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from modelio.replay import ReplayMiss
from record.provenance import this_version
from record.run_folder import RunFolder
from runners.compare import CompareOptions, RunResult, recorded_options, run_compare
from runners.config import CompareConfig, compose_config

pytestmark = pytest.mark.slow  # whole runs (one recorded, the others replayed)

ROOT = Path(__file__).resolve().parent.parent
OLDER = "kmc 0.0.9 (git 0123456789ab)"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    config = CompareConfig(budget=3, tasks=["vector_add"], device="cpu", workers=1, task_sources=[],
                           method_modules=[])
    return run_compare(config, CompareOptions(out=tmp_path_factory.mktemp("recorded")))


def older_copy(run_dir: Path, to: Path) -> Path:
    """A copy of a run folder as an older version would have left it: its env.json names that
    version, and every prompt says "Write" where this one says "Implement"."""
    to.mkdir(parents=True)
    for name in ("config.json", "env.json", "store.sqlite", "summary.json"):
        shutil.copy(run_dir / name, to / name)
    env = json.loads((to / "env.json").read_text())
    env.update(toolkit_version="0.0.9", git={"commit": "0123456789ab" + "0" * 28, "dirty": False})
    (to / "env.json").write_text(json.dumps(env))
    con = sqlite3.connect(to / "store.sqlite")
    for key, messages in con.execute("SELECT rowid, messages FROM calls").fetchall():
        older = [{**m, "content": m["content"].replace("Implement", "Write")} for m in json.loads(messages)]
        digest = hashlib.sha256(json.dumps(older, sort_keys=True).encode()).hexdigest()
        con.execute("UPDATE calls SET messages = ?, messages_hash = ? WHERE rowid = ?",
                    (json.dumps(older), digest, key))
    con.commit()
    con.close()
    return to


def replay(source: Path, out: Path, **options: Any) -> RunResult:
    return run_compare(compose_config({}, None, recorded_options(source)),
                       CompareOptions(replay=source, out=out, **options))


def changed_prompts(run_dir: Path) -> int:
    con = sqlite3.connect(run_dir / "store.sqlite")
    try:
        return sum("Implement" in m for (m,) in con.execute("SELECT messages FROM calls"))
    finally:
        con.close()


def test_a_run_recorded_by_another_version_replays_by_position_and_reproduces_its_summary(
        recorded: RunResult, tmp_path: Path) -> None:
    older = older_copy(recorded.run_dir, tmp_path / "older")
    differed = changed_prompts(recorded.run_dir)
    assert differed > 0
    messages: list[str] = []
    result = replay(older, tmp_path / "replays", on_message=messages.append)
    assert result.summary_path.read_bytes() == recorded.summary_path.read_bytes()
    (said,) = [m for m in messages if m.startswith("replay: ")]
    assert said.startswith(f"replay: {differed} of 9 prompts differed from the recorded ones (recorded by {OLDER}, "
                           f"replayed by {this_version()})")
    assert "\\nWrite exactly" in said and "\\nImplement exactly" in said
    assert said in RunFolder(result.run_dir).log_path.read_text()
    con = sqlite3.connect(RunFolder(result.run_dir).store_path)
    meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
    con.close()
    assert json.loads(meta["replay_prompts_differed"]) == differed
    assert json.loads(meta["replay_versions"]) == {"recorded": OLDER, "replayed": this_version()}


@pytest.mark.parametrize("change", ["one call fewer", "one call more"])
def test_a_record_whose_calls_cannot_be_matched_fails_in_one_line_and_leaves_nothing(
        recorded: RunResult, tmp_path: Path, change: str) -> None:
    older = older_copy(recorded.run_dir, tmp_path / "older")
    con = sqlite3.connect(older / "store.sqlite")
    if change == "one call fewer":
        con.execute("DELETE FROM calls WHERE method = 'direct' AND call_index = 2")
    else:
        con.execute("INSERT INTO calls SELECT method, task, repeat, 3, role, messages_hash, messages, temperature, "
                    "max_tokens, seed, 3, response, prompt_tokens, completion_tokens, latency_s, cached, model, error, "
                    "charged, created, retries FROM calls WHERE method = 'direct' AND call_index = 2")
    con.commit()
    con.close()
    out = tmp_path / "replays"
    with pytest.raises(ReplayMiss) as caught:
        replay(older, out)
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith(f"cannot replay {older} (recorded by {OLDER}, replayed by {this_version()}): the calls "
                           "part at direct/vector_add/repeat 0 call ")
    if change == "one call fewer":
        assert "call 2: this version makes call 2 (generator) and the recorded unit made 2 calls; it asks '" in line
    else:
        assert "call 3: this version ended the unit after 3 calls and the recorded unit made 4: call 3 (generator)" \
            in line
    assert "differed, the first at " in line and ", character " in line
    assert not out.exists()  # no run folder, and not the output folder the replay made


def test_an_exact_replay_of_the_same_version_reports_no_differing_prompt(recorded: RunResult,
                                                                         tmp_path: Path) -> None:
    messages: list[str] = []
    result = replay(recorded.run_dir, tmp_path, on_message=messages.append)
    assert result.summary_path.read_bytes() == recorded.summary_path.read_bytes()
    assert not [m for m in messages if m.startswith("replay: ")]


def test_a_record_whose_unit_submitted_otherwise_stops_where_this_version_decides_otherwise(
        recorded: RunResult, tmp_path: Path) -> None:
    """A method whose rules changed since a run was recorded (the first shipped GPU run, recorded
    340 commits back: a speed tie rule added since kept direct's first of two equally fast
    candidates where the recorded run submitted the second) submits otherwise with the recorded
    replies and verdicts. Its replay stops at that unit's end in one line naming both versions and
    both submission lists, with exit status 2 and no folder left behind. The shipped run, re-recorded
    since, replays (tests/test_shipped_run_replays.py)."""
    older = older_copy(recorded.run_dir, tmp_path / "older")
    con = sqlite3.connect(older / "store.sqlite")
    subs = con.execute("SELECT submission_index, source_hash, calls_used FROM submissions WHERE method = 'direct' "
                       "AND task = 'vector_add' AND repeat = 0 ORDER BY submission_index").fetchall()
    index, source, _ = subs[-1]
    con.execute("INSERT INTO submissions SELECT method, task, repeat, ?, 3, tokens_used, source_hash, evals_used "
                "FROM submissions WHERE method = 'direct' AND task = 'vector_add' AND repeat = 0 "
                "AND submission_index = ?", (index + 1, index))
    con.commit()
    con.close()
    out = tmp_path / "replays"
    done = subprocess.run([sys.executable, str(ROOT / "cli.py"), "compare", "--replay", str(older), "--out", str(out),
                           "--quiet"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error: ")]
    now = ", ".join(f"{h[:10]} after call {c}" for _, h, c in subs)
    assert line.startswith(f"error: cannot replay {older} (recorded by {OLDER}, replayed by {this_version()}): this "
                           "version decides otherwise at direct/vector_add/repeat 0: with the recorded replies and "
                           f"verdicts this version submits {now}; the recorded run submitted {now}, {source[:10]} after "
                           "call 3 (the method's rules decide otherwise)"), line
    assert "prompts differed, the first at" in line
    assert not out.exists()
