"""A judge worker whose pool process died ends itself (bench/orphan_watch.py): a pool cut by
`timeout` or killed runs no cleanup, and its workers went on judging on the GPU. So does a
probing child (bench/adapters/shape_probe.py) whose worker died: it leads a session of its own,
so the worker's process group took nothing of it along."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WORKER = ("import time; from bench.orphan_watch import end_when_orphaned\n"
          "end_when_orphaned(0.05); time.sleep(60)\n")
PARENT = ("import subprocess, sys, time\n"
          f"child = subprocess.Popen([sys.executable, '-c', {WORKER!r}], start_new_session=True)\n"
          "print(child.pid, flush=True); time.sleep(60)\n")


# A worker probing shapes: the child gets a payload whose unpickling stalls (as a reference's probe
# can, up to PROBE_LIMIT_S), the way `_run_child` starts it from a job's thread.
PROBING_WORKER = ("import pickle, threading, time\n"
                  "from bench.adapters.shape_probe import _run_child\n"
                  "class Stall:\n"
                  "    def __reduce__(self):\n"
                  "        return (time.sleep, (60,))\n"
                  "threading.Thread(target=_run_child, args=(pickle.dumps(Stall()), time.monotonic() + 120),\n"
                  "                 daemon=True).start()\n"
                  "time.sleep(60)\n")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, IndexError, ProcessLookupError):
                continue
            if int(stat[1]) == pid:
                found.append(int(entry.name))
    return found


def _threads(pid: int) -> int:
    try:
        return len(list(Path(f"/proc/{pid}/task").iterdir()))
    except FileNotFoundError:
        return 0


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


def _ends_soon(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def test_a_probing_child_whose_worker_dies_ends_itself() -> None:
    worker = subprocess.Popen([sys.executable, "-c", PROBING_WORKER], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    child = 0
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the child started, its watch running (a second thread)
            found = _children(worker.pid)
            if found and _threads(found[0]) >= 2:
                child = found[0]
                break
            time.sleep(0.05)
        assert child, "the probing child never started"
        time.sleep(0.3)
        assert _alive(child)  # stalled in its probe, not ended while its worker lives
        worker.kill()
        worker.wait(10)
        assert _ends_soon(child)
    finally:
        worker.kill()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)
