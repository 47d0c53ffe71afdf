"""judge/sanitize.py (`--sanitize`): a passing final submission judged again under
compute-sanitizer's memcheck and racecheck. No GPU and no compute-sanitizer here: a stand-in
`compute-sanitizer` on PATH writes the log a tool would and then runs the command it was given,
so the command line, the template it starts, the candidate judged under it and the reading of
the log are all the real code's."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.registry import get_task
from judge.candidate.verdict import Verdict
from judge.job import Job
from judge.phases import PhaseClock
from judge.sanitize import TOOLS, sanitized, tool_errors

FAKE_TOOL = f'''#!{sys.executable}
"""compute-sanitizer's stand-in: the report of $FAKE_REPORT_<TOOL> in its log, its command line
noted in $FAKE_CALLS, then the command it was given, in its place (as the tool runs it)."""
import os, sys
args, opts = sys.argv[1:], {{}}
while args and args[0].startswith("--"):
    opts[args[0]], args = args[1], args[2:]
with open(os.environ["FAKE_CALLS"], "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
with open(opts["--log-file"], "w") as f:
    f.write(os.environ.get("FAKE_REPORT_" + opts["--tool"].upper(), "========= ERROR SUMMARY: 0 errors\\n"))
os.execvp(args[0], args)
'''
RACE = ("========= COMPUTE-SANITIZER\n========= Error: Race reported between Write access at 0x1a0 in "
        "_add_kernel\n=========     and Read access at 0x1f0 in _add_kernel [128 hazards]\n"
        "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n========= ERROR SUMMARY: 2 errors\n")


class LentCaches:
    def __init__(self) -> None:
        self.lent: list[tuple[str, bool]] = []

    def lend(self, proc: Any, source: str, hidden: bool = False) -> None:
        self.lent.append((source, hidden))


def test_a_log_with_errors_names_the_tool_its_count_and_first_lines() -> None:
    assert tool_errors("memcheck", "========= ERROR SUMMARY: 0 errors\n") is None
    assert tool_errors("memcheck", "") is None  # no log at all: nothing reported
    message = tool_errors("racecheck", RACE)
    assert message is not None and message.startswith("compute-sanitizer racecheck: 2 error(s): ========= COMPUTE")
    assert "Race reported between Write access" in message and "ERROR SUMMARY" not in message


@pytest.fixture
def tool_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "compute-sanitizer"
    tool.write_text(FAKE_TOOL)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_CALLS", str(tmp_path / "calls"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    return tmp_path / "calls"


def _sanitize(tmp_path: Path, caches: LentCaches) -> tuple[Verdict, Verdict]:
    task = get_task("vector_add")
    job = Job("vector_add", task.baseline_source(), case_set="hidden", timing=True, sanitize=True, timeout=300)
    passed = Verdict("correct", "", cases_run=3)
    got = sanitized(task, job, task.visible, passed, device="cpu", interpreter=True, folder=tmp_path / "logs",
                    caches=caches, clock=PhaseClock())
    return passed, got


@pytest.mark.slow
def test_under_a_tool_that_reports_nothing_the_verdict_stands(tmp_path: Path, tool_on_path: Path) -> None:
    caches = LentCaches()
    passed, got = _sanitize(tmp_path, caches)
    assert got is passed
    calls = tool_on_path.read_text().splitlines()
    assert [c.split()[1] for c in calls] == list(TOOLS)  # memcheck, then racecheck, each once
    for tool, call in zip(TOOLS, calls, strict=True):
        assert call.startswith(f"--tool {tool} --target-processes all --print-limit 10 "
                               f"--log-file {tmp_path / 'logs' / f'{tool}.log'} {sys.executable} -m judge.template")
    # Each tool's candidate was lent the source's caches as a hidden judging is, and loaded it.
    assert caches.lent == [(get_task("vector_add").baseline_source(), True)] * 2


@pytest.mark.slow
def test_errors_under_a_tool_make_a_wrong_result(tmp_path: Path, tool_on_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_REPORT_RACECHECK", RACE)
    passed, got = _sanitize(tmp_path, LentCaches())
    assert got.kind == "wrong_result" and got.cases_run == passed.cases_run and got.kernel_launched
    assert got.message.startswith("compute-sanitizer racecheck: 2 error(s):")


def test_without_the_tool_the_verdict_says_it_was_not_sanitized(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there
    passed, got = _sanitize(tmp_path, LentCaches())
    assert got.kind == "correct" and got.message == "compute-sanitizer not found; not sanitized"
    assert not (tmp_path / "logs").exists()
