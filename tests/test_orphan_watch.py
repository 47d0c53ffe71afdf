"""A judge worker whose pool process died ends itself (judge/orphan_watch.py): a pool cut by
`timeout` or killed runs no cleanup, and its workers went on judging on the GPU."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WORKER = ("import time; from judge.orphan_watch import end_when_orphaned\n"
          "end_when_orphaned(0.05); time.sleep(60)\n")
PARENT = ("import subprocess, sys, time\n"
          f"child = subprocess.Popen([sys.executable, '-c', {WORKER!r}], start_new_session=True)\n"
          "print(child.pid, flush=True); time.sleep(60)\n")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"  # a zombie nobody reaps here has ended


def test_a_worker_whose_parent_dies_ends_itself() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], cwd=ROOT, stdout=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    try:
        time.sleep(0.5)
        assert _alive(worker)  # watching, not ended while its parent lives
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(worker)
    finally:
        parent.kill()
        if _alive(worker):
            os.kill(worker, signal.SIGKILL)
