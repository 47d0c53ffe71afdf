"""Containment of one candidate process, applied in the child right after the template forks it
and before the candidate's source is even written.

By a real mechanism, in this order:
1. its own session and process group (`setsid`), killed with the template (PR_SET_PDEATHSIG),
   while the template is a child subreaper, so nothing it starts can be orphaned out of reach;
2. as root: private mount and network namespaces: every mount read-only (the project, the run
   folder, other workers' folders), a private size-capped tmpfs on /tmp, /dev/shm and the
   candidate's folder (gone with the process; the interpreter's libraries, should they live
   under /tmp, bound back read-only), no network;
3. the unprivileged `--worker-user`, when one is named;
4. no core dumps (file sizes are bounded by the capped tmpfs mounts, not by RLIMIT_FSIZE,
   which would also cap the memfd carrying the candidate's reply);
5. a seccomp filter through libseccomp (`pyseccomp`, else the `seccomp` bindings): no
   exec, no fork (threads are fine), no ptrace, no new sessions or process groups, no
   mounts, namespaces, keyrings, BPF or io_uring, no signals to other processes, no
   sockets but Unix ones. On a GPU exec stays allowed through vfork-style spawns (CLONE_VM),
   since Triton runs ptxas (and the C compiler for its helpers) as subprocesses there; a real
   fork is still refused, and the rest of the filter holds.

What could not be applied is said, not hidden: `apply` returns one line naming what is and is
not enforced, which the worker logs and `statement()` reports.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
from dataclasses import dataclass
from typing import Any

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
CLONE_THREAD = 0x00010000
CLONE_VM = 0x00000100
# mount, cgroup, UTS, IPC, user, PID, network (a new time namespace needs unshare or clone3, both refused)
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
_SKIP_RDONLY = ("/proc", "/sys", "/dev")


@dataclass(frozen=True)
class Plan:
    folder: str  # the candidate's working folder (created here, private)
    tmp_cap_mb: int = 256
    allow_exec: bool = False  # GPU: Triton's compiler subprocesses
    uid: int | None = None
    gid: int | None = None
    writable: tuple[str, ...] = ()  # existing folders that stay writable (this source's own Triton cache)
    sandbox: str = ""  # what judge/sandbox.py built around this process already ("": no sandbox)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> bool:
    return _libc().prctl(option, value, 0, 0, 0) == 0


def undumpable() -> bool:
    """For the judge's own processes (worker, template): no core dump, and their /proc files
    (mem, fd, environ) belong to root and refuse ptrace-style access, whatever a process of the
    same uid outside the sandbox tries."""
    return _prctl(PR_SET_DUMPABLE, 0)


def become_subreaper() -> bool:
    """For the template: orphans of its children re-parent to it, so it can find and kill them."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    libc = _libc()
    rc = libc.mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                    ctypes.c_ulong(flags), data.encode() if data else None)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 4:
                points.append(parts[4].replace("\\040", " "))
    return points


def _namespaces(plan: Plan) -> list[str]:
    """Private mounts (everything read-only, capped tmpfs where it must write) and no network."""
    libc = _libc()
    if libc.unshare(CLONE_NEWNS | CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Held open before anything is covered: the folders that stay writable may live under /tmp
    # (the worker's own Triton cache), which the private tmpfs below hides; they are bound back
    # from these descriptors, which still reach the (writable) mounts they were opened on.
    keep = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY)) for path in plan.writable]
    # The interpreter's own libraries may live under /tmp too (a virtual environment in a
    # checkout there): bound back read-only, or the candidate could import nothing new.
    libraries = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY))
                 for path in _under_private_tmpfs(_python_paths(), keep_clear=(plan.folder, *plan.writable))]
    for point in sorted(set(_mount_points()), key=len):
        if point.startswith(_SKIP_RDONLY) or point in ("/tmp", "/dev/shm"):
            continue
        try:
            _mount(point, point, None, MS_BIND | MS_REC)
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
        except OSError:
            pass  # a mount we cannot see through (a file bind); the ones that matter are checked below
    cap = f"size={plan.tmp_cap_mb}m,mode=1777"
    for target in ("/tmp", "/dev/shm"):
        if os.path.isdir(target):
            _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, cap)
    for path, fd in keep:  # a Triton cache of this source's own: bound writable, kept
        os.makedirs(path, exist_ok=True)  # under /tmp it is gone from the new tmpfs: a mount point again
        try:
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND)
            # A bind copies its source's flags, and the read-only remount above may have reached
            # that very mount (the process's root): this one is made writable on its own.
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_NOSUID)
        finally:
            os.close(fd)
    for path, fd in libraries:
        try:
            os.makedirs(path, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
        finally:
            os.close(fd)
    os.makedirs(plan.folder, exist_ok=True)
    if not plan.folder.startswith("/tmp/"):
        _mount("tmpfs", plan.folder, "tmpfs", MS_NOSUID | MS_NODEV, cap)
    return [f"private read-only mounts with a {plan.tmp_cap_mb} MiB tmpfs for /tmp, /dev/shm and its folder",
            "no network"]


def _python_paths() -> list[str]:
    """Where the interpreter's libraries are: its prefixes and the import path's package folders
    (not every import path entry: the working folder a process was started in is one, and it
    may hold the candidate's own folder)."""
    import sys

    packages = [p for p in sys.path if os.path.isabs(p) and ("site-packages" in p or "dist-packages" in p)]
    return [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, *packages]


def _under_private_tmpfs(paths: list[str], keep_clear: tuple[str, ...] = ()) -> list[str]:
    """The outermost existing folders among `paths` that the private /tmp or /dev/shm would
    hide, leaving out any that holds a folder in `keep_clear` (bound back read-only, it would
    make that folder read-only too)."""
    clear = [os.path.realpath(c) for c in keep_clear]

    def hidden(p: str) -> bool:
        return any(p.startswith(t + "/") for t in ("/tmp", "/dev/shm"))

    found = sorted({os.path.realpath(p) for p in paths if p and os.path.isdir(p)}, key=len)
    outermost: list[str] = []
    for path in found:
        if not hidden(path) or any(c == path or c.startswith(path + "/") for c in clear):
            continue
        if not any(path.startswith(kept + "/") for kept in outermost):
            outermost.append(path)
    return outermost


def seccomp_bindings() -> Any:
    """libseccomp's Python bindings: the project's own (`seccomp`) where the system has them,
    else `pyseccomp` (the same API over ctypes, PyPI). The template imports them before it
    takes the project off the import path and forks (a wheel dropped beside the project is
    then found, and no candidate process loads the library again); ImportError without them."""
    try:
        import seccomp

        return seccomp
    except ImportError:
        import pyseccomp

        return pyseccomp


def _seccomp(plan: Plan) -> str:
    sc = seccomp_bindings()
    deny = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)
    names = ["ptrace", "process_vm_readv", "process_vm_writev", "setsid", "setpgid", "mount", "umount2",
             "pivot_root", "chroot", "unshare", "setns", "bpf", "perf_event_open", "keyctl", "add_key",
             "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd",
             "init_module", "finit_module", "delete_module", "kexec_load", "reboot", "swapon", "swapoff",
             "acct", "personality", "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
             "setgroups", "seccomp", "pidfd_getfd", "pidfd_send_signal", "process_madvise", "kcmp",
             "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
             "name_to_handle_at", "open_by_handle_at", "quotactl", "syslog", "vhangup", "lookup_dcookie",
             "fanotify_init", "iopl", "ioperm", "create_module", "get_kernel_syms", "nfsservctl"]
    if not plan.allow_exec:
        names += ["execve", "execveat", "fork", "vfork"]
        f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    else:
        # Exec stays (Triton's compilers), through vfork-style spawns (CLONE_VM: what
        # subprocess, posix_spawn and system() use); a real fork, which would copy the candidate
        # process with its connection to the judge, is refused, and so is every fork a shell it
        # starts would need.
        names += ["fork"]
        f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_VM, 0))
    for name in names:
        try:
            f.add_rule(deny, name)
        except (ValueError, RuntimeError, OSError):
            pass  # not a system call on this architecture
    for flag in NAMESPACE_FLAGS:  # a clone that would leave its namespaces (or make new ones)
        f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # its flags sit behind a pointer: glibc falls back to clone
    me = os.getpid()
    f.add_rule(deny, "tkill")
    for name in ("kill", "tgkill"):
        f.add_rule(deny, name, sc.Arg(0, sc.NE, me))
    f.add_rule(deny, "prctl", sc.Arg(0, sc.EQ, PR_SET_PDEATHSIG))
    f.add_rule(deny, "socket", sc.Arg(0, sc.NE, 1))  # AF_UNIX only
    synced = _load_everywhere(sc, f)
    return "seccomp (" + ("exec through vfork-style spawns allowed for Triton's compilers, no fork" if plan.allow_exec
                          else "no fork or exec") + (", every thread" if synced else ", this thread and its new ones") \
        + ")"


def _load_everywhere(sc: Any, f: Any) -> bool:
    """The filter on every thread of the process (TSYNC): on a GPU the driver's threads exist
    before the source arrives, and a filter on the calling thread alone would leave them out.
    Where the kernel or libseccomp cannot synchronise, it holds for this thread and the threads
    it starts (False)."""
    try:
        f.set_attr(sc.Attr.CTL_TSYNC, 1)
    except (AttributeError, OSError, RuntimeError, ValueError):
        f.load()
        return False
    try:
        f.load()
    except OSError:
        f.set_attr(sc.Attr.CTL_TSYNC, 0)
        f.load()
        return False
    return True


def detach() -> None:
    """Right after the fork: a process group of its own, killed if the template dies."""
    os.setsid()
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def apply(plan: Plan) -> str:
    """Contain the calling process, when the candidate's source arrives (the spare made its GPU
    context before, unconfined but before any candidate code); one line saying what holds."""
    held: list[str] = ["own process group, killed with the template"]
    missing: list[str] = []
    if plan.sandbox:
        held = [f"sandbox: {plan.sandbox}"]
    elif os.geteuid() == 0:
        try:
            held += _namespaces(plan)
        except OSError as exc:
            missing.append(f"mount/network namespaces ({exc.strerror or exc})")
    else:
        missing.append("mount/network namespaces (not root)")
    os.makedirs(plan.folder, exist_ok=True)
    if plan.uid is not None and plan.gid is not None and not plan.sandbox:
        os.chown(plan.folder, plan.uid, plan.gid)
        os.setgroups([])
        os.setgid(plan.gid)
        os.setuid(plan.uid)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # cleared by the change of credentials
        held.append(f"uid {plan.uid}")
    os.chdir(plan.folder)
    # No RLIMIT_FSIZE: it caps every file the process writes, the sealed memfd of its own reply
    # too, and so made correct kernels with outputs past the cap crash (seen on the H200). What
    # it writes is bounded by the size-capped tmpfs mounts instead (as root).
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    held.append("no core dumps")
    try:
        held.append(_seccomp(plan))
    except (ImportError, OSError, RuntimeError, ValueError) as exc:
        missing.append(f"seccomp ({type(exc).__name__}: {exc}; pip install pyseccomp, needs libseccomp)")
    line = "enforced: " + "; ".join(held)
    return line + (" | NOT enforced: " + "; ".join(missing) if missing else "")
