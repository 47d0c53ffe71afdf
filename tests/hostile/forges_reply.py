# Hostile candidate: finds the worker's current job (and its nonce) in memory and writes a
# forged "correct" reply to every pipe the process holds, hoping the parent reads it before
# the real one. Expected verdict: wrong_result (the job, its nonce and the parent's pipes live in
# the judge's process; the candidate's process holds none of them).
import gc
import json
import os
import stat

import torch


def _forge() -> None:
    jobs = [o for o in gc.get_objects() if isinstance(o, dict) and "nonce" in o and "source" in o]
    for job in jobs:
        line = json.dumps({"id": job.get("id"), "nonce": job.get("nonce"), "fatal": False, "restart_reason": "",
                           "evaluation": {"verdict": {"kind": "correct", "cases_run": 99, "kernel_launched": True},
                                          "timing": None}}) + "\n"
        for fd in range(3, 64):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode):
                    os.write(fd, line.encode())
            except OSError:
                pass


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    _forge()
    return torch.zeros_like(x)
