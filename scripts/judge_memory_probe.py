#!/usr/bin/env python
"""GPU memory a judge worker keeps after each job: one judge worker in this process judges the
experts of the given tasks (hidden cases, timed as a final submission), and after each job this
prints the worker's allocated and reserved bytes, its peak, and the GPU's memory in use.

Why: a full-suite run filled an H100 (79 GiB) with four workers and candidates were judged out
of memory; this run showed one worker peaking at 15.8-18.6 GiB reserved and keeping 2.1-5.7 GiB of
idle cached blocks between jobs (judge/device_memory.py says what the worker does about it).

Usage: python scripts/judge_memory_probe.py [swiglu,axpby,gather,embedding,transpose]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from bench.registry import get_task  # noqa: E402
from judge.case_inputs import set_input_cache_bytes  # noqa: E402
from judge.job import Job  # noqa: E402
from judge.policy import FINAL_FULL, TimingPolicy  # noqa: E402
from runners.sizing import INPUT_CACHE_MIB  # noqa: E402

DEFAULT_TASKS = "swiglu,axpby,gather,embedding,transpose"


def gpu_used() -> str:
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown"


def main(argv: list[str]) -> int:
    if not torch.cuda.is_available():
        print("judge_memory_probe: needs a GPU (torch sees none)", file=sys.stderr)
        return 2
    from judge.worker import Worker

    set_input_cache_bytes(INPUT_CACHE_MIB << 20)  # the pool's bound for one worker
    worker = Worker()
    started = time.perf_counter()
    try:
        for i, task_id in enumerate((argv[0] if argv else DEFAULT_TASKS).split(",")):
            job = Job(task_id, get_task(task_id).baseline_source(), case_set="hidden", timing=True,
                      timing_policy=TimingPolicy(protocol=FINAL_FULL).to_json(), id=i)
            verdict = worker.handle(job)["evaluation"]["verdict"]["kind"]
            print(f"{time.perf_counter() - started:6.1f} s {task_id:14s} {verdict:12s} judge allocated "
                  f"{torch.cuda.memory_allocated() >> 20} MiB, reserved {torch.cuda.memory_reserved() >> 20} MiB, "
                  f"peak reserved {torch.cuda.max_memory_reserved() >> 20} MiB; GPU in use {gpu_used()}", flush=True)
    finally:
        worker.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
