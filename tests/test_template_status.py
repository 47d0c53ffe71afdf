"""The template's answer to "how did candidate N end" (judge/template.py `exit_status`): waited
for, or for at most a grace, so the judge can tell a process that ended by itself (its own exit
status or signal) from one it had to kill (judge/remote.py `CandidateProcess._ended`)."""

from __future__ import annotations

import os
import signal
import time

from judge.template import exit_status


def _child(seconds: float, code: int) -> int:
    pid = os.fork()
    if pid == 0:
        time.sleep(seconds)
        os._exit(code)
    return pid


def test_a_child_that_ends_within_the_grace_gives_its_own_status() -> None:
    pid = _child(0.2, 3)
    assert exit_status(pid, {}, wait_s=5.0) == 3


def test_a_child_still_running_after_the_grace_is_none_until_it_ends() -> None:
    pid = _child(30.0, 0)
    ended: dict[int, int] = {}
    started = time.monotonic()
    try:
        assert exit_status(pid, ended, wait_s=0.2) is None
        assert time.monotonic() - started < 5.0
    finally:
        os.kill(pid, signal.SIGKILL)
    assert exit_status(pid, ended) == -signal.SIGKILL  # waited for: the kill's status


def test_a_status_reaped_earlier_is_taken_from_what_was_kept() -> None:
    pid = _child(0.0, 7)
    _, status = os.waitpid(pid, 0)
    assert exit_status(pid, {pid: status}) == 7
    assert exit_status(pid, {}) is None  # not a child any more: unknown
