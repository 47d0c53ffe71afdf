"""One judge worker process, seen from the parent: how it is started (`python -m judge.worker`
in its own session, with an environment built from an allow-list so API keys and tokens never
reach candidate code, its task sources on its command line) and the conversation with it, one
job at a time: a job line carrying a random nonce the reply must echo, the reply read with a
deadline, then a second nonce made only after the job, whose digest check tells the worker's
own reply from a line a candidate forged. A worker that dies, stalls or breaks the protocol
raises; LocalPool (runners/pool.py) decides what that costs.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.thread_share import THREADS_ENV
from judge.device import Target
from judge.gate import GATE_ENV
from judge.job import Job, JobError, JobReply

PROJECT_ROOT = Path(__file__).resolve().parent.parent

_ENV_ALLOW_PREFIXES = ("TRITON_", "CUDA_", "HIP_", "ROCR_", "HSA_", "NCCL_", "TORCH_", "NVSHMEM_", "OMP_",
                       "MKL_", "OPENBLAS_", "LC_", "KMC_")
_ENV_ALLOW = {"PATH", "HOME", "LANG", "TMPDIR", "LD_LIBRARY_PATH", "USER", "TERM", "XDG_CACHE_HOME"}
_ENV_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Allow-listed variables only, and never one whose name suggests a secret. The import
    path is the project's, then the caller's own PYTHONPATH: packages installed there reach
    the workers too. Before, only the project was kept, so `pyseccomp` installed on a
    PYTHONPATH folder was missing in every worker, and no candidate had its seccomp filter
    (on an H200 host, a candidate killed its template: `crash` instead of a refused signal)."""
    env = {}
    for name, value in os.environ.items():
        allowed = name in _ENV_ALLOW or name.startswith(_ENV_ALLOW_PREFIXES)
        if allowed and not any(word in name.upper() for word in _ENV_SECRET_WORDS):
            env[name] = value
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([str(PROJECT_ROOT), *inherited]))
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env


def worker_command(task_sources: tuple[str, ...] = ()) -> list[str]:
    """How a worker is started. What it must know that its environment does not say (the run's
    task sources) goes on its command line, never through this process's environment."""
    return [sys.executable, "-m", "judge.worker", *(arg for s in task_sources for arg in ("--task-source", s))]


class WorkerDied(Exception):
    pass


class WorkerTimeout(Exception):
    pass


class ProtocolViolation(Exception):
    """The worker's reply channel carried something other than the reply to this job."""


class WorkerStartError(RuntimeError):
    """The environment, not a candidate, is broken: no verdict can be trusted, so stop."""


WORKER_LOST: tuple[type[Exception], ...] = (WorkerDied, WorkerTimeout, ProtocolViolation)
"""What a job's worker raises when the worker, not the job, is lost: it is killed and replaced."""


class WorkerProcess:
    def __init__(self, slot: int, target: Target, startup_timeout: float, device: str | None = None,
                 gpu_gate: Path | None = None, torch_threads: int = 0, workdir: Path | None = None,
                 extra_env: dict[str, str] | None = None, task_sources: tuple[str, ...] = ()):
        self.slot = slot
        self.task_sources = tuple(task_sources)
        self.extra_env = dict(extra_env or {})
        self.target = target
        self.startup_timeout = startup_timeout
        self.device = device
        self.gpu_gate = gpu_gate
        self.torch_threads = torch_threads
        self.workdir = workdir or Path(tempfile.gettempdir())
        self.proc: subprocess.Popen[bytes] | None = None
        self.buffer = b""
        self.last_line = b""
        self.log_path = self.workdir / f"worker-{slot}.log"
        self.next_id = 0
        self.judged: set[str] = set()  # task ids this process has had a job of (`first_job_allowance`)
        self._lock = threading.Lock()  # one conversation at a time: warm-up and jobs must not interleave

    closed = False

    def sibling(self, slot: int, extra_env: dict[str, str]) -> WorkerProcess:
        """A worker like this one (device, gate, threads, folder, task sources, environment), in
        `slot`, with `extra_env` added: runners/compile_ahead.py's lane workers."""
        return WorkerProcess(slot, self.target, self.startup_timeout, device=self.device, gpu_gate=self.gpu_gate,
                             torch_threads=self.torch_threads, workdir=self.workdir,
                             extra_env={**self.extra_env, **extra_env}, task_sources=self.task_sources)

    def ensure_started(self) -> None:
        with self._lock:
            if not self.closed and not self.alive():
                self.start()

    def _env(self) -> dict[str, str]:
        extra: dict[str, str] = {}
        if self.target.interpreter:
            extra["TRITON_INTERPRET"] = "1"
            extra["CUDA_VISIBLE_DEVICES"] = ""
        elif self.target.visible_devices_var and self.device is not None:
            extra[self.target.visible_devices_var] = self.device
        if self.gpu_gate is not None:
            extra[GATE_ENV] = str(self.gpu_gate)
        if self.torch_threads > 0:
            extra[THREADS_ENV] = str(self.torch_threads)
        # The worker's temporary folders (its own, adapted suites' imports) live in the pool's
        # folder, which the pool removes when it closes: a worker killed on a timeout or a crash
        # runs no cleanup of its own.
        if self.workdir != Path(tempfile.gettempdir()):
            tmp = self.workdir / "tmp"
            tmp.mkdir(exist_ok=True)
            extra["TMPDIR"] = str(tmp)
        return scrubbed_env({**extra, **self.extra_env})

    def start(self) -> None:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            worker_command(self.task_sources),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            env=self._env(), cwd=str(self.workdir), start_new_session=True,
        )
        log.close()
        self.buffer = b""
        self.judged = set()
        try:
            hello = self._read_line(self.startup_timeout)
        except WORKER_LOST as exc:
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
                    try:
                        code: int | None = self.proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        code = None  # reply channel closed but the process lives on: killed by the caller
                    how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
                    raise WorkerDied(f"worker process ended ({how}); last output: {self._log_tail()}")
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        self.last_line = line
        try:
            reply = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ProtocolViolation(f"unreadable line on the reply channel: {line[:200]!r}") from None
        if not isinstance(reply, dict):
            raise ProtocolViolation(f"unexpected reply: {str(reply)[:200]}")
        return reply

    def run(self, job: Job, timeout: float) -> JobReply:
        with self._lock:
            return self._run(job, timeout)

    def _run(self, job: Job, timeout: float) -> JobReply:
        if self.closed:
            raise WorkerDied("the pool was closed")
        if not self.alive():
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        self.next_id += 1
        nonce = secrets.token_hex(16)
        line = json.dumps(job.with_(id=self.next_id, nonce=nonce).to_json())
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            # Died while idle (after its last reply): the job never reached it, so this is
            # not the candidate's doing. Start afresh and send it once more.
            self.kill()
            self.start()
            assert self.proc is not None and self.proc.stdin is not None
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
        read = self._read_line(timeout)
        if read.get("nonce") != nonce or read.get("id") != self.next_id or "evaluation" not in read:
            raise ProtocolViolation("a reply without this job's nonce arrived (a forged line on the reply channel?): "
                                    f"{json.dumps(read)[:200]}")
        try:
            reply = JobReply.from_json(read)
        except JobError as exc:
            raise ProtocolViolation(f"a reply that is not one: {exc}") from None
        self._confirm(hashlib.sha256(self.last_line).hexdigest())
        return reply

    def _confirm(self, digest: str) -> None:
        """Ask the worker, with a nonce made only now, for the digest of the reply it wrote.

        The job's nonce sat in the worker's memory while candidate code ran, so a candidate
        could have found it and written a reply of its own first; this nonce did not exist
        then, and only the worker's own reply matches the digest it gives back."""
        assert self.proc is not None and self.proc.stdin is not None
        token = secrets.token_hex(16)
        try:
            self.proc.stdin.write((json.dumps({"confirm": token}) + "\n").encode())
            self.proc.stdin.flush()
            answer = self._read_line(30.0)
        except (BrokenPipeError, WorkerDied, WorkerTimeout) as exc:
            raise ProtocolViolation(f"the worker did not confirm its reply ({type(exc).__name__}: {exc})") from None
        if answer.get("confirm") != token or answer.get("digest") != digest:
            raise ProtocolViolation("the reply read was not the one the worker wrote (a forged line on the reply "
                                    "channel?)")
