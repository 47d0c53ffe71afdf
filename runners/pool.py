"""A pool of persistent worker processes: the local executor.

Each worker is a separate process (`python -m runners.worker`, never a fork of the parent)
in its own session, bound to one GPU through CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES,
with an environment built from an allow-list, so API keys and tokens never reach
candidate code. The parent enforces every limit: a job that runs past its time limit, a
worker that dies (segfault, `os._exit`), or a reply asking for a restart (device error)
costs that one verdict and one worker restart, never the run.
"""

from __future__ import annotations

import json
import os
import queue
import selectors
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runners.device import Target
from runners.verdict import Evaluation, Verdict

PROJECT_ROOT = Path(__file__).resolve().parent.parent

_ENV_ALLOW_PREFIXES = ("TRITON_", "CUDA_", "HIP_", "ROCR_", "HSA_", "NCCL_", "TORCH_", "NVSHMEM_", "OMP_",
                       "MKL_", "OPENBLAS_", "LC_", "KMC_")
_ENV_ALLOW = {"PATH", "HOME", "LANG", "TMPDIR", "LD_LIBRARY_PATH", "USER", "TERM", "XDG_CACHE_HOME"}
_ENV_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Allow-listed variables only, and never one whose name suggests a secret."""
    env = {}
    for name, value in os.environ.items():
        allowed = name in _ENV_ALLOW or name.startswith(_ENV_ALLOW_PREFIXES)
        if allowed and not any(word in name.upper() for word in _ENV_SECRET_WORDS):
            env[name] = value
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env


class WorkerDied(Exception):
    pass


class WorkerTimeout(Exception):
    pass


class WorkerStartError(RuntimeError):
    """The environment, not a candidate, is broken: no verdict can be trusted, so stop."""


@dataclass
class PoolStats:
    jobs: int = 0
    restarts: int = 0
    timeouts: int = 0
    crashes: int = 0


class WorkerProcess:
    def __init__(self, slot: int, target: Target, startup_timeout: float):
        self.slot = slot
        self.target = target
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.buffer = b""
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"kmc-worker-{os.getpid()}-{slot}.log"
        self.next_id = 0
        self._lock = threading.Lock()  # one conversation at a time: warm-up and jobs must not interleave

    def ensure_started(self) -> None:
        with self._lock:
            if not self.alive():
                self.start()

    def _env(self) -> dict[str, str]:
        extra: dict[str, str] = {}
        if self.target.interpreter:
            extra["TRITON_INTERPRET"] = "1"
            extra["CUDA_VISIBLE_DEVICES"] = ""
        elif self.target.visible_devices_var:
            extra[self.target.visible_devices_var] = str(self.slot % max(self.target.device_count, 1))
        return scrubbed_env(extra)

    def start(self) -> None:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "runners.worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            env=self._env(), cwd=str(PROJECT_ROOT), start_new_session=True,
        )
        log.close()
        self.buffer = b""
        try:
            hello = self._read_line(self.startup_timeout)
        except (WorkerDied, WorkerTimeout) as exc:
            self.kill()
            raise WorkerStartError(f"evaluation worker {self.slot} failed to start: {exc or 'timed out'}") from None
        if not hello.get("ready"):
            raise WorkerStartError(f"evaluation worker {self.slot} did not start: {hello}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream:
                stream.close()
        self.proc = None

    def _log_tail(self, n: int = 600) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace").strip()
        except OSError:
            return ""

    def _read_line(self, timeout: float) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WorkerTimeout()
                if not sel.select(timeout=left):
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    code = self.proc.wait(timeout=10)
                    how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
                    raise WorkerDied(f"worker process ended ({how}); last output: {self._log_tail()}")
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def run(self, job: dict[str, Any], timeout: float) -> dict[str, Any]:
        with self._lock:
            return self._run(job, timeout)

    def _run(self, job: dict[str, Any], timeout: float) -> dict[str, Any]:
        if not self.alive():
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        self.next_id += 1
        job = {**job, "id": self.next_id}
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise WorkerDied(f"worker process gone before the job was sent; last output: {self._log_tail()}") from None
        return self._read_line(timeout)


class LocalPool:
    """Evaluate candidates on persistent local workers; thread-safe and blocking per call."""

    def __init__(self, target: Target, workers: int | None = None, job_timeout: float | None = None,
                 startup_timeout: float = 300.0):
        self.target = target
        if workers is None:
            workers = max(1, min(os.cpu_count() or 1, 4)) if target.interpreter else max(1, target.device_count)
        self.job_timeout = job_timeout or (600.0 if target.interpreter else 180.0)
        self.stats = PoolStats()
        self._stats_lock = threading.Lock()
        self._idle: queue.Queue[WorkerProcess] = queue.Queue()
        self._all = [WorkerProcess(i, target, startup_timeout) for i in range(workers)]
        for w in self._all:
            self._idle.put(w)

    @property
    def size(self) -> int:
        return len(self._all)

    def warm_up(self) -> None:
        """Start every worker now, in parallel, so imports overlap with other work."""
        def start(w: WorkerProcess) -> None:
            try:
                w.ensure_started()
            except WorkerStartError:
                pass  # raised again, with its message, when the worker is first used

        threads = [threading.Thread(target=start, args=(w,), daemon=True) for w in self._all]
        for t in threads:
            t.start()

    def _count(self, field: str) -> None:
        with self._stats_lock:
            setattr(self.stats, field, getattr(self.stats, field) + 1)

    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool = False,
                 timing_policy: dict[str, Any] | None = None, timeout: float | None = None) -> Evaluation:
        job = {"task": task_id, "source": source, "case_set": case_set, "timing": timing,
               "timing_policy": timing_policy or {}}
        limit = timeout or self.job_timeout
        worker = self._idle.get()
        try:
            self._count("jobs")
            try:
                reply = worker.run(job, limit)
            except WorkerTimeout:
                self._count("timeouts")
                self._restart(worker)
                return Evaluation(Verdict("timeout", f"no verdict within {limit:.0f} s; worker restarted",
                                          worker_restarted=True))
            except WorkerDied as exc:
                self._count("crashes")
                self._restart(worker)
                return Evaluation(Verdict("crash", str(exc), worker_restarted=True))
            evaluation = Evaluation.from_json(reply["evaluation"])
            if reply.get("fatal"):
                self._restart(worker)
            return evaluation
        finally:
            self._idle.put(worker)

    def _restart(self, worker: WorkerProcess) -> None:
        self._count("restarts")
        worker.kill()

    def close(self) -> None:
        for w in self._all:
            w.kill()
            try:
                w.log_path.unlink()
            except OSError:
                pass

    def __enter__(self) -> "LocalPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
