"""The candidate's boundary, built by the kernel: namespaces, no capability, an allow-listed root.

Python-level guards (the import blocker, the launch record) are a second line; this is the
first. A candidate process used to run as the judge's uid, in the judge's PID namespace, with
the host's procfs: it could write the worker's memory through /proc/<pid>/mem, copy the
worker's sockets with pidfd_getfd, read the expert kernels from the project tree, and leave
processes and SysV segments behind. Here each candidate gets, before its source exists and
before any GPU context:

1. a PID namespace of its own, as its PID 1 (`Forker`: the template unshares CLONE_NEWPID, forks
   once and sets its own namespace back; where the toolkit is not root, the template first
   becomes root of a user namespace of its own, `Forker.claim`). Everything the candidate starts
   dies with it, and it cannot name the template, the worker or the judge (getppid() is 0);
2. in the child (`enter`): new mount, network, IPC, UTS and cgroup namespaces, and a root built
   on a small tmpfs from an allow-list (`Layout`, judge/sandbox_layout.py): read-only binds of the interpreter, the Python
   and system libraries, a few files of /etc, the GPU's device nodes and driver folders, /sys; a
   fresh procfs (only the namespace's own processes); size-capped tmpfs mounts for /tmp and
   /dev/shm; on a GPU its own writable Triton cache. The project tree, the run folder, other
   workers, the host's /tmp and the rest of /dev are not in it (a bound folder that holds one of
   them gets an empty tmpfs over it). The old root is detached after pivot_root. These mounts
   are made as the template's root, so the candidate owns no namespace that could undo them;
3. then a user namespace of its own: uid/gid `INSIDE_ID` inside, the toolkit's uid outside (or
   `--worker-user`'s, switched to first); every capability dropped (bounding, ambient,
   permitted, effective, inheritable), the securebits locked so no exec brings one back,
   no_new_privs, and every descriptor closed but its channel (stdin and stdout /dev/null,
   stderr a pipe the template relays, capped, to the worker's log).

What it cannot build raises `SandboxError` with one line saying why (no user namespaces, a
procfs the kernel will not mount, ...); the CLI then refuses candidate code unless the user
accepts the risk with `--unsandboxed` (`refusal`). The seccomp filter (judge/containment.py)
completes it when the source arrives.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import signal
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from judge.containment import (
    CLONE_NEWNET,
    CLONE_NEWNS,
    MS_BIND,
    MS_NODEV,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    PR_SET_DUMPABLE,
    PR_SET_PDEATHSIG,
    _libc,
    _mount_points,
)
from judge.containment import _mount as _mount_or_oserror
from judge.sandbox_layout import PROJECT_ROOT, Bind, Layout, Spec, within

INSIDE_ID = 1000  # the candidate's uid and gid inside its user namespace: not root there either
CANDIDATE_FOLDER = "/tmp/kmc-candidate"  # inside the sandbox, on its capped /tmp
UNSANDBOXED_ENV = "KMC_UNSANDBOXED"  # "1": the user accepted running candidates without the sandbox

CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID = 0x10000000, 0x20000000
MS_NOEXEC = 8
MNT_DETACH = 2
PR_CAPBSET_DROP, PR_SET_SECUREBITS = 24, 28
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
# noroot, no-setuid-fixup, keep-caps and no-ambient-raise, each set (where it restricts) and locked
SECUREBITS = 0b11101111
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 0x1, 0x2
_SYSCALLS = {"x86_64": {"pivot_root": 155, "capset": 126, "mount_setattr": 442},
             "aarch64": {"pivot_root": 41, "capset": 91, "mount_setattr": 442}}

class SandboxError(RuntimeError):
    """The sandbox cannot be built here; the message is one line saying why."""


class SandboxRefused(ValueError):
    """Candidate code refused: no sandbox here and `--unsandboxed` not given (one line, exit 2)."""


# ---------------------------------------------------------------------------------------------
# System calls


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(err)}")


def _syscall(name: str, *args: object) -> int:
    numbers = _SYSCALLS.get(platform.machine())
    if numbers is None:
        raise SandboxError(f"no system call numbers for {platform.machine()}")
    return int(_libc().syscall(numbers[name], *args))


def _prctl(option: int, value: int, arg3: int = 0) -> int:
    return int(_libc().prctl(option, ctypes.c_ulong(value), ctypes.c_ulong(arg3), 0, 0))


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    try:
        _mount_or_oserror(source, target, fstype, flags, data)
    except OSError as exc:
        raise SandboxError(str(exc.strerror)) from None


def _unshare(flags: int, what: str) -> None:
    _check(_libc().unshare(flags), f"unshare ({what})")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


def _read_only_tree(target: str) -> None:
    """`target` and every mount below it read-only and nosuid: mount_setattr(AT_RECURSIVE)
    where the kernel has it (5.12 on), else each mount below remounted on its own."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    with contextlib.suppress(SandboxError):
        if _syscall("mount_setattr", AT_FDCWD, target.encode(), AT_RECURSIVE, ctypes.byref(attr),
                    ctypes.sizeof(attr)) == 0:
            return
    for point in sorted(p for p in _mount_points() if within(p, target)):
        with contextlib.suppress(SandboxError):  # a mount already locked read-only by its owner
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        parts = line.split()
        if len(parts) > 5 and parts[4] == target and "ro" not in parts[5].split(","):
            raise SandboxError(f"{target} could not be made read-only")


# ---------------------------------------------------------------------------------------------
# Building it


@dataclass
class Entered:
    """What the sandboxed child keeps: its channel's descriptor (renumbered) and one line saying
    what holds."""

    channel: int
    statement: str


class Forker:
    """Forks each candidate as PID 1 of a PID namespace of its own, in one fork: unshare
    (CLONE_NEWPID) before it, setns back to the template's own namespace after it. Where the
    template is not root it first enters a user namespace of its own in which it is (`claim`),
    which gives it that power over the namespaces it makes, and nothing outside them."""

    def __init__(self) -> None:
        self.own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)

    @staticmethod
    def claim() -> None:
        """At the template's start, while it has one thread: root of a user namespace of its
        own where it is not root already (its files stay the toolkit user's outside)."""
        if os.geteuid() == 0:
            return
        uid, gid = os.geteuid(), os.getegid()
        _unshare(CLONE_NEWUSER, "a user namespace for the template")
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {uid} 1\n")
        _write("/proc/self/gid_map", f"0 {gid} 1\n")

    def fork(self) -> int:
        _unshare(CLONE_NEWPID, "a PID namespace")
        try:
            pid = os.fork()
        except BaseException:
            self._back()
            raise
        if pid != 0:
            self._back()
        return pid

    def _back(self) -> None:
        _check(_libc().setns(self.own, CLONE_NEWPID), "setns back to the template's PID namespace")


def enter(spec: Spec, channel: int, errors: int, cache: str | None = None, layout: Layout | None = None) -> Entered:
    """Called in a child that `Forker.fork` made (PID 1 of its namespace, one thread), before
    anything of the candidate exists. `errors`: the write end of the pipe its stderr goes to.
    `layout`: the allow-list read once by the template (`Layout.for_spec` without a cache),
    else read here."""
    layout = Layout.for_spec(spec, cache) if layout is None else layout.with_cache(cache)
    # The fork of a non-dumpable template is not dumpable either, and its /proc/self files then
    # belong to a root its user namespace may not map (it could not write its own uid_map).
    _prctl(PR_SET_DUMPABLE, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP,
             "mount, network, IPC, UTS and cgroup namespaces")
    _build_root(layout, spec)  # as the template's root: no namespace the candidate owns holds these mounts
    with contextlib.suppress(OSError):
        socket.sethostname("kmc-sandbox")
    outside = _switch_outside_user(spec)
    parent_uid, parent_gid = os.geteuid(), os.getegid()
    _unshare(CLONE_NEWUSER, "a user namespace")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{INSIDE_ID} {parent_uid} 1\n")
    _write("/proc/self/gid_map", f"{INSIDE_ID} {parent_gid} 1\n")
    channel = _only_descriptors(channel, errors)
    _drop_privileges()
    held = [f"user, PID, mount, network, IPC and UTS namespaces (PID {os.getpid()} of its own)",
            f"uid {INSIDE_ID} inside ({outside} outside), no capabilities, no_new_privs",
            f"an allow-listed read-only root with a {spec.tmp_cap_mb} MiB /tmp and /dev/shm, its own procfs",
            "no descriptor but its channel"]
    return Entered(channel, "; ".join(held))


def _switch_outside_user(spec: Spec) -> str:
    """Who the candidate is outside its namespace: `--worker-user` when one is named (as root),
    else the toolkit's own user."""
    if spec.outside_uid is not None and spec.outside_gid is not None and _host_root():
        os.setgroups([])
        os.setresgid(spec.outside_gid, spec.outside_gid, spec.outside_gid)
        os.setresuid(spec.outside_uid, spec.outside_uid, spec.outside_uid)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # cleared by the change of credentials
        _prctl(PR_SET_DUMPABLE, 1)  # likewise
        return f"uid {spec.outside_uid}"
    return "the toolkit's uid" + (", root" if _host_root() else "")


def _host_root() -> bool:
    """Root of the host (not of a user namespace the template made for itself)."""
    with contextlib.suppress(OSError):
        return os.geteuid() == 0 and Path("/proc/self/uid_map").read_text().split()[:3] == ["0", "0", "4294967295"]
    return False


def _build_root(layout: Layout, spec: Spec) -> None:
    """The allow-listed root, pivoted into; the host's root detached."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Every source opened before anything is covered: a library or the cache may live under
    # /tmp, where the new root is built.
    opened = []
    for bind in layout.binds:
        try:
            opened.append((bind, os.open(bind.source, os.O_PATH | os.O_CLOEXEC)))
        except OSError as exc:
            if not bind.optional:
                raise SandboxError(f"{bind.source}: {exc.strerror}") from None
    root = "/tmp"
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    try:
        for path, text in layout.symlinks.items():
            os.symlink(text, root + path)
        # The fresh mounts first: a library bound under /tmp (a checkout and its virtual
        # environment there) then lands on the private /tmp instead of being covered by it.
        _mount_fresh(root, spec)
        for bind, fd in sorted(opened, key=lambda item: item[0].target.count("/")):
            try:
                _bind(root, bind, fd, layout)
            except (SandboxError, OSError):
                if not bind.optional:
                    raise
                _unbind(root + bind.target)  # never left half made (mounted but writable)
        for path in layout.hidden:  # made read-only once what lies below them is bound
            _mount(None, root + path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
    finally:
        for _, fd in opened:
            os.close(fd)
    os.chdir(root)
    _check(_syscall("pivot_root", b".", b"."), "pivot_root")
    _check(_libc().umount2(b".", MNT_DETACH), "detaching the host's root")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _bind(root: str, bind: Bind, fd: int, layout: Layout) -> None:
    target = root + bind.target
    is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
    parent = os.path.dirname(target) if not is_dir else target
    os.makedirs(parent, exist_ok=True)
    if not is_dir and not os.path.exists(target):
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
    _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
    if bind.writable:
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV)
    elif not bind.device:
        _read_only_tree(target)
    else:
        with contextlib.suppress(SandboxError):  # a device node's mount: read-only where it can be
            _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_NOSUID | (0 if is_dir else MS_RDONLY))
    for hidden in layout.hidden:
        if within(hidden, bind.target) and hidden != bind.target:
            _hide(root + hidden)


def _unbind(target: str) -> None:
    """An optional bind that could not be completed, taken away whole (or the sandbox fails)."""
    if target in _mount_points():
        _check(_libc().umount2(target.encode(), MNT_DETACH), f"removing the half-made bind {target}")


def _hide(target: str) -> None:
    """An empty tmpfs over `target` (a project tree inside a bound folder); read-only once
    the binds below it are made (`_build_root`)."""
    if os.path.isdir(target) and target not in _mount_points():
        _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")


def _mount_fresh(root: str, spec: Spec) -> None:
    """A procfs of the new PID namespace, capped tmpfs mounts, /dev's links."""
    os.makedirs(root + "/proc", exist_ok=True)
    try:
        _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except SandboxError as exc:
        raise SandboxError(f"{exc} (the kernel refused a procfs for the candidate's PID namespace; "
                           "a container that masks parts of /proc does this)") from None
    cap = f"size={spec.tmp_cap_mb}m,mode=1777"
    for path in ("/tmp", "/dev/shm"):
        os.makedirs(root + path, exist_ok=True)
        _mount("tmpfs", root + path, "tmpfs", MS_NOSUID | MS_NODEV, cap)
    os.makedirs(root + CANDIDATE_FOLDER, mode=0o700, exist_ok=True)
    for name, text in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                       ("stderr", "/proc/self/fd/2")):
        with contextlib.suppress(FileExistsError):
            os.symlink(text, f"{root}/dev/{name}")


def _only_descriptors(channel: int, errors_w: int) -> int:
    """Every descriptor closed but the channel (renumbered 3) and stdio: stdin and stdout
    /dev/null, stderr the pipe the template relays. Returns the channel's number."""
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(errors_w, 2)
    if channel != 3:
        os.dup2(channel, 3, inheritable=False)
    os.closerange(4, _descriptor_limit())  # `null` and `errors_w` among them, now that they are copied
    return 3


def _descriptor_limit() -> int:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft > 0 else 1 << 16


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_privileges() -> None:
    """No capability left, none to regain: bounding set emptied, securebits locked, ambient
    cleared, the sets zeroed, no_new_privs."""
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for cap in range(last + 1):
        _check(_prctl(PR_CAPBSET_DROP, cap), f"dropping capability {cap} from the bounding set")
    _check(_prctl(PR_SET_SECUREBITS, SECUREBITS), "locking the securebits")
    _check(_prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL), "clearing the ambient capabilities")
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    _check(_syscall("capset", ctypes.byref(header), ctypes.byref(data)), "capset")
    _check(_prctl(PR_SET_NO_NEW_PRIVS, 1), "no_new_privs")
    # Readable to itself (a fork of the non-dumpable template is not, and its own /proc/self
    # files then belong to a root it cannot map).
    _prctl(PR_SET_DUMPABLE, 1)
    status = Path("/proc/self/status").read_text()
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb") and int(value.strip(), 16) != 0:
            raise SandboxError(f"{key} is {value.strip()} after dropping every capability")


# ---------------------------------------------------------------------------------------------
# Before a run: can it be built here?


def unsandboxed() -> bool:
    return os.environ.get(UNSANDBOXED_ENV) == "1"


_PROBED: list[str | None] = []
_ACCEPTED: list[bool] = []


def accept_risk() -> None:
    """`--unsandboxed` on a command without a run config (eval, verify, bench check, score):
    this process's pools run candidates without the sandbox."""
    _ACCEPTED.append(True)


def risk_accepted() -> bool:
    return bool(_ACCEPTED)


def require(accepted_risk: bool) -> None:
    """Before anything runs candidate code: SandboxRefused where the sandbox cannot be built,
    unless the user accepted the risk (`--unsandboxed`). Probed once per process."""
    if accepted_risk:
        return
    if not _PROBED:
        _PROBED.append(probe())
    if _PROBED[0] is not None:
        raise SandboxRefused(refusal(_PROBED[0]))


def probe(gpu: bool = False) -> str | None:
    """Builds a sandbox as the template does, in a throwaway child, and checks what it sees:
    None where it works, else one line saying why not (tens of milliseconds)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(read_fd)
            Forker.claim()
            child = Forker().fork()
            if child == 0:
                entered = enter(Spec.from_environment(gpu, hidden=[PROJECT_ROOT]), write_fd, write_fd)
                os.write(entered.channel, b"ok " + _self_check().encode())
            else:
                os.waitpid(child, 0)
        except BaseException as exc:  # noqa: BLE001 - reported through the pipe
            with contextlib.suppress(OSError):
                os.write(write_fd, f"no {exc}".encode()[:2000])
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as f:
        answer = f.read().decode(errors="replace")
    os.waitpid(pid, 0)
    if answer.startswith("ok "):
        return answer[3:] or None
    return answer[3:].strip() or "the sandbox's probe ended without a word"


def _self_check() -> str:
    """'' when the sandboxed process is PID 1, sees no other process and no project file."""
    others = [p for p in os.listdir("/proc") if p.isdigit() and p != str(os.getpid())]
    if os.getpid() != 1 or others:
        return f"the sandbox's PID namespace is not its own (pid {os.getpid()}, others {others[:5]})"
    if os.path.exists(os.path.dirname(os.path.abspath(__file__))):
        return "the project tree is visible inside the sandbox"
    return ""


def refusal(reason: str) -> str:
    """The one line the CLI prints (exit 2) when candidates would run without the boundary."""
    return (f"the candidate sandbox cannot be built here ({reason}); candidate code would run with "
            "the toolkit's own privileges. Pass --unsandboxed to accept that risk (recorded in the run's "
            "config and printed on its report).")
