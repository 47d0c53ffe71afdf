"""The candidate sandbox (judge/sandbox.py) and the syscall filter that completes it
(judge/containment.py), checked from inside a sandboxed child: each test forks, enters the
sandbox as the template's child does, looks around or tries a system call, and reports back
on the only descriptor it keeps. Where user namespaces are unavailable the sandbox cannot be
built and these tests skip; the CLI's refusal there is tested on its own (test_sandbox_refusal.py).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from judge import containment, sandbox, sandbox_layout

PROBLEM = sandbox.probe()
needs_sandbox = pytest.mark.skipif(PROBLEM is not None or os.geteuid() != 0,
                                   reason=f"no sandbox here ({PROBLEM}), or not root: the test process would "
                                          "have to claim a user namespace as the template does")
pytestmark = [needs_sandbox]
BASIC_DEV = {"null", "zero", "full", "random", "urandom", "shm", "fd", "stdin", "stdout", "stderr"}
FORKER = sandbox.Forker() if PROBLEM is None and os.geteuid() == 0 else None


def in_sandbox(body: Callable[[], object], spec: sandbox_layout.Spec | None = None, cache: str | None = None,
               timeout: float = 30.0) -> object:
    """`body()`'s JSON-able result, run in a freshly sandboxed child; raises what it raised."""
    read_fd, write_fd = os.pipe()
    pid = FORKER.fork()
    if pid == 0:
        code = 0
        try:
            os.close(read_fd)
            entered = sandbox.enter(spec or sandbox_layout.Spec.from_environment(False, hidden=[sandbox_layout.PROJECT_ROOT]),
                                    write_fd, write_fd, cache)
            try:
                answer = {"ok": body(), "statement": entered.statement}
            except BaseException as exc:  # noqa: BLE001 - reported to the test
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            os.write(entered.channel, json.dumps(answer).encode())
        except BaseException as exc:  # noqa: BLE001
            os.write(write_fd, json.dumps({"error": f"enter: {type(exc).__name__}: {exc}"}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    deadline = time.monotonic() + timeout
    chunks = []
    while True:
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            raise TimeoutError("the sandboxed child did not answer")
        chunk = os.read(read_fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    answer = json.loads(b"".join(chunks).decode())
    if "error" in answer:
        raise AssertionError(answer["error"])
    return answer["ok"]


def _look_around() -> dict[str, object]:
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {"pid": os.getpid(), "ppid": os.getppid(), "uid": os.getuid(), "gid": os.getgid(),
            "processes": sorted(p for p in os.listdir("/proc") if p.isdigit()),
            "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
            "caps": {k: status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")},
            "no_new_privs": status["NoNewPrivs"].strip(), "root": sorted(os.listdir("/")),
            "tmp": sorted(os.listdir("/tmp")), "dev": sorted(os.listdir("/dev")),
            "hostname": os.uname().nodename}


def test_the_candidate_is_pid_1_of_its_namespace_without_privilege_or_descriptors() -> None:
    seen = in_sandbox(_look_around)
    assert isinstance(seen, dict)
    assert seen["pid"] == 1 and seen["ppid"] == 0  # the keeper outside cannot be named
    assert seen["processes"] == ["1"]  # a procfs of its own: no judge, worker or template in it
    assert seen["uid"] == sandbox.INSIDE_ID and seen["gid"] == sandbox.INSIDE_ID
    assert set(seen["caps"].values()) == {"0000000000000000"}, seen["caps"]
    assert seen["no_new_privs"] == "1"
    # its channel (3), stdio, and the descriptor listing /proc/self/fd itself
    assert seen["fds"] == [0, 1, 2, 3, 4], seen["fds"]
    assert seen["hostname"] == "kmc-sandbox"
    # its own folder, and the mount points of the interpreter's folders that live under /tmp
    # (packages installed with pip --target /tmp/site, say)
    bound = {Path(p).relative_to("/tmp").parts[0] for p in sandbox_layout.python_paths() if p.startswith("/tmp/")}
    assert set(seen["tmp"]) == {os.path.basename(sandbox.CANDIDATE_FOLDER)} | bound, seen["tmp"]
    assert set(seen["dev"]) <= BASIC_DEV


def test_the_project_the_host_tmp_and_the_judges_proc_files_are_out_of_reach(tmp_path: Path) -> None:
    marker = Path(tempfile.gettempdir()) / f"kmc-host-marker-{os.getpid()}"
    marker.write_text("host")
    judge_pid = os.getpid()
    try:
        def look() -> dict[str, object]:
            project = Path(sandbox_layout.PROJECT_ROOT)
            reached: dict[str, object] = {}
            for path in (project / "bench" / "kernels", project / "judge", project / "cli.py", marker, tmp_path,
                         f"/proc/{judge_pid}/mem", f"/proc/{judge_pid}/environ", f"/proc/{judge_pid}/fd",
                         f"/proc/1/root{project}/cli.py", f"/proc/1/cwd{project}/cli.py"):
                reached[str(path)] = os.path.exists(path)
            # The project folder may exist as the mount point of a virtual environment inside it
            # (.venv), bound on its own: nothing else of it is there.
            reached["project files"] = sorted(set(os.listdir(project)) - {".venv", "venv"}) \
                if project.exists() else []
            return reached
        reached = in_sandbox(look)
    finally:
        marker.unlink()
    assert isinstance(reached, dict)
    assert not any(reached.values()), {k: v for k, v in reached.items() if v}


def test_every_host_file_in_view_is_read_only_and_tmp_is_private_and_capped() -> None:
    def write_everywhere() -> dict[str, str]:
        outcome = {}
        for folder in ("/", "/usr", "/etc", "/dev", "/sys", "/proc/sys/kernel", sys.prefix,
                       os.path.dirname(os.__file__)):
            path = os.path.join(folder, "kmc-written")
            try:
                with open(path, "w") as f:
                    f.write("x")
                outcome[folder] = "written"
            except OSError as exc:
                outcome[folder] = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        with open("/tmp/kmc-candidate/fits", "w") as f:
            f.write("x")
        try:
            with open("/tmp/big", "wb") as f:
                for _ in range(64):
                    f.write(b"\0" * (1 << 20))
            outcome["/tmp past its cap"] = "written"
        except OSError as exc:
            outcome["/tmp past its cap"] = errno.errorcode.get(exc.errno or 0, "?")
        return outcome

    outcome = in_sandbox(write_everywhere, sandbox_layout.Spec(tmp_cap_mb=16, hidden=(sandbox_layout.PROJECT_ROOT,)))
    assert isinstance(outcome, dict)
    assert "written" not in outcome.values(), outcome
    assert outcome["/tmp past its cap"] == "ENOSPC"


def test_processes_it_starts_die_with_it() -> None:
    """A child of the candidate holding the channel open (a copy of the descriptor) would keep
    the pipe from ending: it ends only because PID 1's death kills the whole namespace."""
    def leave_a_process_behind() -> str:
        child = os.fork()
        if child == 0:
            os.setsid()
            import signal

            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(300)
            os._exit(0)
        return "left"

    started = time.monotonic()
    assert in_sandbox(leave_a_process_behind, timeout=20) == "left"
    assert time.monotonic() - started < 15


def _libc_call(name: str, *args: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    rc = int(getattr(libc, name)(*args))
    return 0 if rc >= 0 else ctypes.get_errno()


def test_sysv_segments_stay_in_its_ipc_namespace() -> None:
    """One it leaves behind is gone with the namespace; the host's are not in view."""
    ipc_private, ipc_creat = 0, 0o1000
    host_id = ctypes.CDLL(None).shmget(ipc_private, 4096, ipc_creat | 0o600)
    assert host_id >= 0
    try:
        def make_and_look() -> dict[str, object]:
            made = ctypes.CDLL(None).shmget(ipc_private, 64 << 20, ipc_creat | 0o600)
            seen = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
            return {"made": made, "seen": len(seen)}

        before = Path("/proc/sysvipc/shm").read_text().splitlines()
        got = in_sandbox(make_and_look)
        after = Path("/proc/sysvipc/shm").read_text().splitlines()
    finally:
        ctypes.CDLL(None).shmctl(host_id, 0, None)  # IPC_RMID
    assert isinstance(got, dict)
    assert got["made"] >= 0 and got["seen"] == 1  # its own segment only
    assert len(after) == len(before)


X86_64 = {"ptrace": 101, "process_vm_readv": 310, "perf_event_open": 298, "bpf": 321, "userfaultfd": 323,
          "keyctl": 250, "mount": 165, "setns": 308, "unshare": 272, "clone": 56, "pidfd_getfd": 438,
          "pidfd_send_signal": 424, "kill": 62, "open_tree": 428, "fsopen": 430}
CLONE_NEWUSER, CLONE_FS = 0x10000000, 0x00000200

# Arguments chosen so that the call, were it let through, would do nothing harmful and fail
# (or succeed) with something other than EPERM: only the filter answers EPERM to all of them.
REFUSED_CALLS = {
    "ptrace": (0, 0, 0, 0),  # PTRACE_TRACEME would succeed
    "process_vm_readv": ("self", 0, 0, 0, 0, 0),  # zero vectors: 0
    "perf_event_open": (0, 0, -1, -1, 0),  # NULL attributes: EFAULT
    "bpf": (0, 0, 0),
    "userfaultfd": (0,),
    "keyctl": (0, -1, 0),  # KEYCTL_GET_KEYRING_ID of the thread keyring: an id
    "mount": (0, 0, 0, 0, 0),  # NULL target: EFAULT
    "setns": (-1, 0),  # EBADF
    "unshare": (0,),  # nothing to unshare: 0
    "clone": (CLONE_NEWUSER | CLONE_FS, 0, 0, 0, 0),  # an invalid pair: EINVAL
    "pidfd_getfd": (-1, 0, 0),  # EBADF
    "pidfd_send_signal": (-1, 0, 0, 0),  # EBADF
    "kill": (2, 0),  # another process of its namespace (none): ESRCH
    "open_tree": (-1, 0, 0),  # EBADF or EFAULT
    "fsopen": (0, 0),  # EFAULT
}


@pytest.mark.skipif(platform.machine() != "x86_64", reason="system call numbers written for x86_64")
@pytest.mark.parametrize("name", sorted(REFUSED_CALLS))
def test_the_syscall_filter_refuses(name: str) -> None:
    pytest.importorskip("pyseccomp")

    def try_it() -> dict[str, object]:
        plan = containment.Plan(folder=sandbox.CANDIDATE_FOLDER, sandbox="test")
        statement = containment.apply(plan)
        args = [os.getpid() if a == "self" else a for a in REFUSED_CALLS[name]]
        libc = ctypes.CDLL(None, use_errno=True)
        rc = libc.syscall(X86_64[name], *[ctypes.c_long(int(a)) for a in args])  # type: ignore[call-overload]
        return {"rc": rc, "errno": ctypes.get_errno() if rc < 0 else 0, "statement": statement}

    got = in_sandbox(try_it)
    assert isinstance(got, dict)
    assert "seccomp" in str(got["statement"]) and "NOT enforced" not in str(got["statement"]), got["statement"]
    assert got["rc"] == -1 and got["errno"] == errno.EPERM, got


def test_the_triton_cache_is_its_one_writable_folder(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()

    def write_cache() -> list[str]:
        Path(sandbox_layout.TRITON_CACHE, "entry").mkdir()
        Path(sandbox_layout.TRITON_CACHE, "entry", "kernel.bin").write_bytes(b"k")
        return sorted(os.listdir(sandbox_layout.TRITON_CACHE))

    assert in_sandbox(write_cache, cache=str(cache)) == ["entry"]
    assert (cache / "entry" / "kernel.bin").read_bytes() == b"k"


def test_a_project_inside_a_bound_folder_is_hidden_and_a_venv_inside_the_project_stays(tmp_path: Path) -> None:
    """The allow-list's rule, on plain folders: a bound folder holding a hidden one shows an
    empty folder there, and a folder bound below the hidden one is still there."""
    tree = tmp_path / "opt"
    (tree / "project" / "bench").mkdir(parents=True)
    (tree / "project" / "bench" / "expert.py").write_text("secret")
    (tree / "project" / ".venv" / "lib").mkdir(parents=True)
    (tree / "project" / ".venv" / "lib" / "module.py").write_text("library")
    (tree / "other.txt").write_text("shown")
    layout = sandbox_layout.Layout.for_spec(sandbox_layout.Spec(hidden=(str(tree / "project"),)), None)
    layout = sandbox_layout.Layout(list(layout.binds), dict(layout.symlinks), [str(tree / "project")])
    layout.add(str(tree))
    layout.add(str(tree / "project" / ".venv"))

    def look() -> dict[str, object]:
        return {"other": Path(tree / "other.txt").read_text(),
                "expert": os.path.exists(tree / "project" / "bench" / "expert.py"),
                "library": Path(tree / "project" / ".venv" / "lib" / "module.py").read_text()}

    read_fd, write_fd = os.pipe()
    pid = FORKER.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            entered = sandbox.enter(sandbox_layout.Spec(), write_fd, write_fd, None, layout)
            os.write(entered.channel, json.dumps(look()).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as f:
        seen = json.loads(f.read() or b"{}")
    os.waitpid(pid, 0)
    assert seen == {"other": "shown", "expert": False, "library": "library"}


def test_what_a_sandbox_costs_is_small() -> None:
    """Not a timing gate (benchmarks/bench_sandbox.py measures it): a sanity bound that catches
    a sandbox rebuilt from scratch per file (seconds), on a 2-core machine under load."""
    started = time.perf_counter()
    in_sandbox(lambda: 0)
    assert time.perf_counter() - started < 5.0


TWICE = """
import triton
import triton.language as tl


@triton.jit
def twice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
"""


def _use_the_gpu() -> dict[str, object]:
    """Inside the sandbox: compile a C file as Triton's launchers are built, import a Triton
    kernel from a file in the candidate folder, run it, list /dev and the cache."""
    import importlib.util
    import shutil
    import subprocess

    os.environ["TRITON_CACHE_DIR"] = sandbox.TRITON_CACHE
    os.environ["HOME"] = os.environ["TMPDIR"] = "/tmp"
    probe = Path(sandbox.CANDIDATE_FOLDER, "probe.c")
    probe.write_text("#include <stddef.h>\n#include <stdlib.h>\nint f(void) { return (int) sizeof(size_t); }\n")
    compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang") or "cc"  # as Triton picks
    cc = subprocess.run([compiler, "-v", "-c", str(probe), "-o", str(probe.with_suffix(".o"))],
                        capture_output=True, text=True)
    path = Path(sandbox.CANDIDATE_FOLDER, "twice.py")
    path.write_text(TWICE)
    spec = importlib.util.spec_from_file_location("twice", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import torch

    x = torch.arange(1000, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)
    module.twice[(4,)](x, out, 1000, BLOCK=256)
    torch.cuda.synchronize()
    return {"sum": float(out.sum().item()), "dev": sorted(os.listdir("/dev")), "cc": cc.returncode,
            "cc_err": cc.stderr[-2000:], "cache": sorted(os.listdir(sandbox.TRITON_CACHE))}


def gpu_check(cache: str) -> object:
    """`_use_the_gpu` in a sandbox forked from this process (which must not have made a CUDA
    context yet: run from a fresh interpreter)."""
    return in_sandbox(_use_the_gpu, spec=sandbox.Spec.from_environment(True, hidden=[sandbox.PROJECT_ROOT]),
                      cache=cache, timeout=120.0)


@pytest.mark.gpu
def test_on_a_gpu_the_candidate_compiles_and_runs_triton_and_sees_only_gpu_device_nodes(tmp_path: Path) -> None:
    """On a GPU the sandbox binds the device nodes and driver files the context needs, the C
    compiler Triton builds its launchers with (and its headers), and the one writable Triton
    cache: a kernel compiles (ptxas runs from the bound package) and runs, and /dev holds
    nothing but the basic nodes and the GPU's. Forked from a fresh interpreter: a process that
    already made a CUDA context (this test process, after other GPU tests) cannot fork one."""
    import subprocess

    cache = tmp_path / "cache"
    cache.mkdir()
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", "import json, sys; from tests import test_sandbox as t; "
                           f"print(json.dumps(t.gpu_check({str(cache)!r})))"],
                          capture_output=True, text=True, cwd=str(root), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(got, dict), got
    assert got["cc"] == 0, got["cc_err"]
    assert got["sum"] == 2 * sum(range(1000))
    unexpected = [n for n in got["dev"] if not (n.startswith(("nvidia", "dri", "kfd")) or n in BASIC_DEV)]
    assert not unexpected, got["dev"]
    assert got["cache"] and any(cache.iterdir())


def test_the_c_compiler_named_by_cc_comes_with_its_whole_installation(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton builds its launchers with $CC. A compiler installed outside /usr (the H200 image's
    CC=/opt/gcc/bin/gcc) keeps its own headers and cc1 beside its bin folder: binding the bin
    folder alone left a launcher build in the sandbox without stddef.h."""
    from judge.sandbox_layout import tool_paths

    prefix = tmp_path / "opt" / "gcc"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "gcc").write_text("#!/bin/sh\n")
    headers = prefix / "lib" / "gcc" / "x86_64-linux-gnu" / "13" / "include"
    headers.mkdir(parents=True)
    (headers / "stddef.h").write_text("/* the compiler's own */\n")
    monkeypatch.setenv("CC", str(prefix / "bin" / "gcc"))
    assert str(prefix) in tool_paths()
    assert in_sandbox(lambda: os.path.exists(headers / "stddef.h")) is True
