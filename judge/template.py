"""The warm template: `python -m judge.template FD`, started by the judge worker.

It imports torch, triton and the candidate-side modules once, installs the launch recorder
and the poisoned allocators, pays the first-call costs a fresh process would (judge/warmup.py), takes the project off the import path (the task registry,
references and the judge's own modules cannot be imported after that), and then forks one
fresh candidate process per candidate on the judge's request. It never creates a GPU context
(a fork after one is unsafe); each child makes its own. It is a child subreaper, so a process a
candidate manages to start cannot outlive it unseen.

Control messages on FD (a Unix socket; JSON frames, the candidate's socket passed beside
them): `spawn` -> `{"pid"}` (the child contains itself when its
`load` message brings the source and a judge/containment.py Plan); `status` (pid) -> how it ended.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pkgutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.abc import MetaPathFinder
from pathlib import Path
from typing import Any

import judge.candidate
from bench.thread_share import take_thread_share
from judge import sandbox, sandbox_layout
from judge.relay import StderrRelay

PROJECT_ROOT = sandbox_layout.PROJECT_ROOT
# Importable from a candidate process: what it runs on, every module of judge/candidate/, and the
# modules that build its boundary from outside or that bench/ shares with it (pyproject.toml's
# last import-linter contract holds them all to importing nothing of the judge side). Everything
# else of the project is not.
_CANDIDATE_SIDE = ("judge.candidate",
                   *(f"judge.candidate.{m.name}" for m in pkgutil.iter_modules(judge.candidate.__path__)),
                   "judge.containment", "judge.sandbox", "judge.sandbox_layout", "judge.relay",
                   "bench.modules", "bench.poison", "bench.sequences", "bench.slack", "bench.faults")


class _ProjectBlocker(MetaPathFinder):
    """Refuses the project's other modules: a candidate asking for `bench.registry` (to copy a
    reference) gets ModuleNotFoundError, as if the project were not there."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        top = name.split(".")[0]
        if top in ("bench", "judge", "runners", "results", "methods", "modelio", "stats", "cli") \
                and name not in sys.modules:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    data = json.dumps(message).encode()
    sock.sendall(struct.pack("!I", len(data)) + data)


def _recv(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    fds: list[int] = []
    head = b""
    while len(head) < 4:
        data, got, _f, _a = socket.recv_fds(sock, 4 - len(head), 2)
        fds += got
        if not data:
            return None, fds
        head += data
    (n,) = struct.unpack("!I", head)
    body = b""
    while len(body) < n:
        data, got, _f, _a = socket.recv_fds(sock, n - len(body), 2)
        fds += got
        if not data:
            return None, fds
        body += data
    return json.loads(body), fds


def request(sock: socket.socket, message: dict[str, Any], fd: int | None = None) -> dict[str, Any]:
    """The judge's side of one control exchange."""
    data = json.dumps(message).encode()
    payload = struct.pack("!I", len(data)) + data
    if fd is None:
        sock.sendall(payload)
    else:
        socket.send_fds(sock, [payload], [fd])
    reply, fds = _recv(sock)
    for extra in fds:
        os.close(extra)
    if reply is None:
        raise EOFError("the template process is gone")
    return reply


@dataclass
class Launched:
    """A template process started and not yet waited for: its start-up (seconds of imports and
    warm-up) runs while the judge worker that launched it does its own."""

    proc: subprocess.Popen[bytes]
    control: socket.socket
    device: str


def launch(device: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()) -> Launched:
    """Start `python -m judge.template` for candidates on `device`, without waiting for it.
    Needs neither torch nor the judge's modules, so a judge worker calls it first thing: the
    template's import of torch and its warm-up (several seconds) then overlap the worker's own
    import of torch instead of following it."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    proc = subprocess.Popen([*prefix, sys.executable, "-m", "judge.template", str(theirs.fileno())],
                            pass_fds=(theirs.fileno(),), env=candidate_environment(env or os.environ, device),
                            stdin=subprocess.DEVNULL)
    theirs.close()
    return Launched(proc, ours, device)


def candidate_environment(env: Mapping[str, str], device: str) -> dict[str, str]:
    """The template's (so every candidate's) environment: the worker's, less the judge's own
    autotuning cache switch (judge/sandbox_layout.py `AUTOTUNE_CACHE_ENV`), plus the device.
    Bytecode is read, never written: the run's bytecode folder (runners/bytecode.py), which the
    judge's own processes import from, is theirs to write."""
    return {**{k: v for k, v in env.items() if k != sandbox_layout.AUTOTUNE_CACHE_ENV},
            "PYTHONDONTWRITEBYTECODE": "1", "KMC_CANDIDATE_DEVICE": device}


def close_launched(launched: Launched) -> None:
    """A template that will not be used (or is done with): its control socket closed, the
    process killed and reaped."""
    with contextlib.suppress(OSError):
        launched.control.close()
    with contextlib.suppress(OSError):
        launched.proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        launched.proc.wait(timeout=10)


def _child(sock_fd: int, device: str, interpreter: bool, setting: CandidateSetting, errors: int) -> None:
    """The forked child's life: its boundary first (judge/sandbox.py, or with `--unsandboxed`
    the best-effort containment's plan), then the candidate server. What shapes the boundary
    comes from the template's own start, never from a message."""
    from judge import containment
    from judge.candidate.server import serve_candidate

    containment.detach()
    plan = setting.plan_for(interpreter)
    if setting.spec is None:
        os.dup2(errors, 2)
        os.close(errors)
    else:
        try:
            entered = sandbox.enter(setting.spec, sock_fd, errors, setting.cache, setting.layout)
        except (sandbox.SandboxError, OSError) as exc:
            _refuse(sock_fd, f"candidate sandbox: {exc}")
            return
        sock_fd = entered.channel
        plan = dataclasses.replace(plan, sandbox=entered.statement)
        _inside_the_sandbox()
    serve_candidate(socket.socket(fileno=sock_fd), device, interpreter, plan)


def _inside_the_sandbox() -> None:
    """The host's home and temporary folders are not in the sandbox: this process and what it
    starts (ptxas, the C compiler, CUDA's caches) use its own /tmp. The one place a module of the
    toolkit writes a process's environment (tests/test_recorded_config.py allows it by name): it is
    the sandboxed candidate's own, which nothing of the toolkit reads."""
    # TEARDOWN_CUPTI=0: the device trace's Kineto sessions (judge/candidate/kernel_trace.py) keep
    # CUPTI set up between calls instead of tearing it down after each
    os.environ.update({"HOME": "/tmp", "TMPDIR": "/tmp", "TRITON_HOME": "/tmp", "TEARDOWN_CUPTI": "0"})
    tempfile.tempdir = "/tmp"
    import triton

    cache = getattr(getattr(triton, "knobs", None), "cache", None)
    if cache is not None and hasattr(cache, "home_dir"):  # Triton 3.4 on: its dump and override folders
        cache.home_dir = "/tmp"


def _refuse(sock_fd: int, reason: str) -> None:
    """A child whose boundary could not be built tells the judge why instead of ever saying
    it is ready (judge/remote.py `wait_ready` raises with this line)."""
    from judge.candidate import wire

    with contextlib.suppress(OSError, wire.WireError):
        wire.Link(socket.socket(fileno=sock_fd), pin=False).send({"ready": False, "error": reason[:500]})
    os.write(2, f"{reason}\n".encode())


@dataclass(frozen=True)
class CandidateSetting:
    """One spawned candidate's place: a folder the template made for it (its working folder
    without the sandbox; its Triton cache's parent either way) and, on a GPU, that cache."""

    folder: str
    cache: str | None
    spec: sandbox_layout.Spec | None
    layout: sandbox_layout.Layout | None
    tmp_cap_mb: int
    uid: int | None
    gid: int | None

    def plan_for(self, interpreter: bool) -> Any:
        from judge import containment

        if self.spec is not None:
            return containment.Plan(folder=sandbox.CANDIDATE_FOLDER, tmp_cap_mb=self.tmp_cap_mb,
                                    allow_exec=not interpreter,
                                    writable=(sandbox_layout.TRITON_CACHE,) if self.cache else ())
        return containment.Plan(folder=os.path.join(self.folder, "work"), tmp_cap_mb=self.tmp_cap_mb,
                                allow_exec=not interpreter, uid=self.uid, gid=self.gid,
                                writable=(self.cache,) if self.cache else ())


class Spawner:
    """Makes each candidate's folder and setting from what the template was started with."""

    def __init__(self, device: str) -> None:
        from judge.privileges import GID_ENV, UID_ENV

        self.gpu = device != "cpu"
        self.root = tempfile.mkdtemp(prefix="kmc-candidates-")
        self.spec = None if sandbox.unsandboxed() else sandbox_layout.Spec.from_environment(
            self.gpu, hidden=[PROJECT_ROOT, self.root])
        self.forker = sandbox.Forker() if self.spec is not None else None
        # The allow-list is read once: the same for every candidate but for its own cache.
        self.layout = sandbox_layout.Layout.for_spec(self.spec, None, sandbox_layout.copy_etc(self.root)) \
            if self.spec is not None else None
        uid, gid = os.environ.get(UID_ENV), os.environ.get(GID_ENV)
        self.uid: int | None = int(uid) if uid and gid else None
        self.gid: int | None = int(gid) if uid and gid else None
        self.count = 0

    def fork(self) -> int:
        """A candidate's process: PID 1 of a PID namespace of its own where sandboxed."""
        return self.forker.fork() if self.forker is not None else os.fork()

    def next(self) -> CandidateSetting:
        self.count += 1
        folder = os.path.join(self.root, f"c{self.count}")
        os.mkdir(folder, 0o700)
        cache = None
        if self.gpu:
            cache = os.path.join(folder, "triton-cache")
            os.mkdir(cache, 0o700)
        if self.uid is not None and self.gid is not None:
            for path in filter(None, (folder, cache)):
                os.chown(path, self.uid, self.gid)
        return CandidateSetting(folder, cache, self.spec, self.layout,
                                int(os.environ.get("KMC_CANDIDATE_TMP_MB", "256")), self.uid, self.gid)


_ENDED_KEPT = 1000


def _reap(ended: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        ended[pid] = status
        if len(ended) > _ENDED_KEPT:  # statuses nobody asked for (ended candidates are not waited for)
            del ended[next(iter(ended))]


def exit_status(pid: int, ended: dict[int, int], wait_s: float = 0.0) -> int | None:
    """Candidate `pid`'s exit code, waited for until it ends; with `wait_s`, for at most that
    long. None where it still runs then, or where it is unknown (not this process's child, or
    its status already taken)."""
    deadline = time.monotonic() + wait_s
    while pid not in ended:
        try:
            done, status = os.waitpid(pid, os.WNOHANG if wait_s > 0 else 0)
        except ChildProcessError:
            break
        if done:
            ended[done] = status
        elif time.monotonic() >= deadline:
            return None
        else:
            time.sleep(0.01)
    return os.waitstatus_to_exitcode(ended.pop(pid)) if pid in ended else None


PROFILE_STARTUP_ENV = "KMC_PROFILE_TEMPLATE"
"""Set by scripts/judge_profile.py --cold: the template's warm-up runs under cProfile and its
top lines travel with the ready message. Nearly all of the warm-up was PyTorch importing
torch._dynamo the first time an allocation ran under the recorder's dispatch mode; the recorder
no longer lets torch wrap its mode in Dynamo's guard (judge/candidate/launches.py
`_OpRecorder._should_skip_dynamo`), and the warm-up is now a small fraction of what it was
(benchmarks/results/README.md)."""


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    from judge.containment import undumpable

    undumpable()
    if not sandbox.unsandboxed():
        # Where the toolkit is not root: root of a user namespace of its own, before torch
        # starts any thread (a process with threads cannot enter one). A failure here is said
        # by each candidate's spawn instead (judge/remote.py), in one line.
        with contextlib.suppress(sandbox.SandboxError, OSError):
            sandbox.Forker.claim()
    import importlib
    import time

    # Seconds per start-up step, sent with the ready message: a worker's start-up is mostly
    # this process's (scripts/judge_profile.py --cold prints them).
    startup: dict[str, float] = {}
    mark = time.perf_counter()

    def step(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        startup[name] = round(now - mark, 3)
        mark = now

    import torch  # noqa: F401 - imported once, here: the point of a warm template

    step("import torch")
    import triton  # noqa: F401

    step("import triton")
    import judge.containment as containment

    for module in _CANDIDATE_SIDE:
        # Every candidate-side module now, while the project is on the path: one imported
        # lazily inside a candidate process (judge.candidate.sampling for a timing step) would find the
        # project gone and end that process.
        importlib.import_module(module)
    from judge.candidate.loading import prepare_process

    take_thread_share()
    step("candidate-side modules")
    prepare_process()
    from judge.candidate.server import _profiler, _top_lines
    from judge.warmup import lazy_triton_imports, triton_hashes, triton_host_lookups, warm_up

    profiler = _profiler(PROFILE_STARTUP_ENV)
    if profiler is not None:
        profiler.enable()
    warm_up(os.environ.get("TRITON_INTERPRET") == "1")
    step("warm-up")
    if profiler is not None:
        profiler.disable()
    if os.environ.get("TRITON_INTERPRET") != "1":  # the interpreter compiles nothing
        triton_hashes()
        step("Triton's hashes")
        lazy_triton_imports()
        step("Triton's lazy imports")
        triton_host_lookups()
        step("Triton's host lookups")
        from judge.candidate.launchers import note_launchers

        # The signatures of the launchers a candidate makes, told to the judge (judge/candidate/launchers.py).
        note_launchers()
    with contextlib.suppress(ImportError, OSError, RuntimeError):  # pyseccomp without libseccomp: RuntimeError
        containment.seccomp_bindings()  # imported while the project is still on the path
    subreaper = containment.become_subreaper()
    device = os.environ.get("KMC_CANDIDATE_DEVICE", "cpu")
    interpreter = os.environ.get("TRITON_INTERPRET") == "1"
    spawner = Spawner(device)  # while the project's modules can still be imported
    step("containment")
    for name in list(sys.modules):
        top = name.split(".")[0]
        if top in ("bench", "judge") and name not in _CANDIDATE_SIDE and name not in ("bench", "judge"):
            sys.modules.pop(name, None)
    sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != Path(PROJECT_ROOT)]
    sys.meta_path.insert(0, _ProjectBlocker())
    ended: dict[int, int] = {}
    _send(control, {"ready": True, "pid": os.getpid(), "subreaper": subreaper, "startup": startup,
                    "root": spawner.root, "sandboxed": spawner.spec is not None,
                    "startup_profile": _top_lines(profiler) if profiler is not None else ""})
    relay = StderrRelay()
    while True:
        relay.wait_for(control)
        message, fds = _recv(control)
        if message is None:
            break
        _reap(ended)
        if message.get("op") == "spawn" and len(fds) == 1:
            setting = spawner.next()
            errors_r, errors_w = os.pipe()
            try:
                pid = spawner.fork()
            except (OSError, sandbox.SandboxError) as exc:
                for fd in (errors_r, errors_w, fds[0]):
                    os.close(fd)
                _send(control, {"error": f"candidate sandbox: {exc}"})
                continue
            if pid == 0:
                code = 0
                try:
                    control.close()
                    relay.close_in_child()
                    os.close(errors_r)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    _child(fds[0], device, interpreter, setting, errors_w)
                except BaseException:  # noqa: BLE001 - a child never returns into the template's loop
                    import traceback

                    traceback.print_exc()  # to the judge worker's stderr: why the candidate process ended
                    code = 70
                finally:
                    os._exit(code)
            os.close(fds[0])
            os.close(errors_w)
            relay.add(errors_r, pid)
            _send(control, {"pid": pid, "folder": setting.folder, "cache": setting.cache})
        elif message.get("op") == "status":
            pid = int(message["pid"])
            exit_code = exit_status(pid, ended, float(message.get("wait_s") or 0.0))
            _send(control, {"pid": pid, "status": exit_code,
                            "stderr_tail": relay.tail(pid) if exit_code is not None else ""})
        else:
            for fd in fds:
                os.close(fd)
            _send(control, {"error": f"unknown request {str(message)[:100]}"})


if __name__ == "__main__":
    main()
