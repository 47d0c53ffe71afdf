"""A judge worker, or a probing child (bench/adapters/shape_probe.py), ends with the process
that started it.

Why: the pool's process can die without closing its workers (`timeout` sends SIGTERM, a user or
a scheduler SIGKILL, and Python runs no cleanup for either), and each worker, in a session of its
own, went on judging: on an H100 (2026-12-06) a `bench check` cut by `timeout` left its workers
and their probing children on the GPU while the next command ran (the 7-task command's first run
then saw the GPU's SM 68% busy on average, its second 37%). PR_SET_PDEATHSIG is no answer: it
fires when the parent *thread* ends, and the pool starts and restarts workers from threads (and
a worker its probing children from the job's thread). In bench/ so both can import it.
"""

from __future__ import annotations

import os
import signal
import threading
import time

POLL_S = 1.0


def end_when_orphaned(poll_s: float = POLL_S) -> threading.Thread:
    """Watch the parent from a daemon thread; once this process is orphaned (reparented), kill
    its process group where it leads one (a worker's template and candidates go with it), else
    itself."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
        else:
            os.kill(os.getpid(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="orphan-watch", daemon=True)
    thread.start()
    return thread
