"""Worker process: `python -m runners.worker`. Imports torch and triton once, then judges
candidates sent as JSON lines on stdin, one at a time.

The parent owns every limit (time, restarts); the worker only has to be honest about what
it saw. Replies go out on a private duplicate of the original stdout, and fd 1 is pointed
at stderr, so a candidate that prints cannot corrupt the protocol. A device error (illegal
memory access and the like) poisons the CUDA context, so the reply asks for a restart.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO


def _protocol_stream() -> TextIO:
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", buffering=1)


class Worker:
    def __init__(self) -> None:
        import torch  # noqa: F401 - import once, up front: that is the point of a persistent worker

        from runners.device import detect_target
        from runners.oracle import install_launch_counter

        self.target = detect_target()
        self.device = "cpu" if self.target.interpreter else "cuda"
        install_launch_counter()
        self.tmp = Path(tempfile.mkdtemp(prefix="kmc-worker-"))
        self.baselines: dict[str, Any] = {}
        self.counter = 0

    def _load(self, source: str, stem: str) -> Any:
        from runners.oracle import load_module

        self.counter += 1
        folder = self.tmp / f"c{self.counter}"
        folder.mkdir()
        path = folder / f"{stem}.py"
        path.write_text(source)
        return load_module(path, f"kmc_candidate_{os.getpid()}_{self.counter}")

    def _baseline(self, task: Any) -> Any:
        if task.id not in self.baselines:
            module = self._load(task.baseline_source(), f"baseline_{task.id}")
            self.baselines[task.id] = getattr(module, task.entry_point)
        return self.baselines[task.id]

    def handle(self, job: dict[str, Any]) -> dict[str, Any]:
        from bench.registry import get_task
        from runners.oracle import CandidateLoadError, format_exception, is_device_error, judge, mentions_device_error
        from runners.timing import TimingPolicy, time_candidate
        from runners.verdict import Evaluation, Verdict

        task = get_task(job["task"])
        cases = task.cases(job["case_set"], self.target.interpreter)
        fatal = False
        timing = None
        try:
            module = self._load(job["source"], f"candidate_{task.id}")
            entry = getattr(module, task.entry_point, None)
            if not callable(entry):
                verdict = Verdict("compile_error", f"the candidate defines no function {task.entry_point!r}")
            else:
                verdict = judge(task, entry, cases, self.device, self.target.interpreter)
                if verdict.correct and job.get("timing") and not self.target.interpreter:
                    policy = TimingPolicy(**job.get("timing_policy", {}))
                    timing = time_candidate(task, entry, self._baseline(task), task.perf, self.target.vendor,
                                            0, policy)
        except CandidateLoadError as exc:
            verdict = Verdict(exc.kind, str(exc))
        except Exception as exc:  # noqa: BLE001 - a failure inside timing is still a verdict
            verdict = Verdict("runtime_error", f"during timing: {format_exception(exc)}")
            fatal = is_device_error(exc)
        if verdict.kind == "runtime_error" and mentions_device_error(verdict.message):
            fatal = True
        return {"id": job["id"], "evaluation": Evaluation(verdict, timing).to_json(), "fatal": fatal}

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def main() -> None:
    out = _protocol_stream()
    worker = Worker()
    out.write(json.dumps({"ready": True, "pid": os.getpid(), "target": worker.target.to_json()}) + "\n")
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            job = json.loads(line)
            reply = worker.handle(job)
            out.write(json.dumps(reply) + "\n")
            if reply["fatal"]:
                break  # a poisoned device context must not judge the next candidate
    finally:
        worker.close()


if __name__ == "__main__":
    main()
