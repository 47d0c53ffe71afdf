"""Evaluation workers as an unprivileged user (opt-in: `compare --worker-user nobody`).

Why: a worker's environment is scrubbed, but candidate code running as root can still read
the parent's environment (`/proc/<ppid>/environ`, where the API key lives), open the run's
`store.sqlite` and rewrite verdicts already recorded, or read any file on the machine. The
containment in judge/containment.py is one boundary; a separate user adds another. Only
root can switch users, so the option needs the toolkit to run as root (containers often do).

The parent (still root) hands the worker the folders it must write (its pool folder, a HOME,
a TMPDIR and, unless the user named one, a Triton cache); the judge worker stays as it is
(it never runs candidate code) and checks at start that the user can read the interpreter and
the libraries; each candidate process drops to the user before the candidate's source is
written (judge/containment.py), and its seccomp filter refuses every way back to root.
"""

from __future__ import annotations

import os
import pwd
import sys
from dataclasses import dataclass
from pathlib import Path

UID_ENV = "KMC_WORKER_UID"
GID_ENV = "KMC_WORKER_GID"


class PrivilegeError(ValueError):
    """The worker user cannot be used here: reported as one line, exit status 2."""


@dataclass(frozen=True)
class WorkerUser:
    name: str
    uid: int
    gid: int


def resolve_worker_user(name: str) -> WorkerUser:
    """The user named by `--worker-user`, checked before any run folder or worker exists."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise PrivilegeError(f"--worker-user: no user {name!r} on this machine") from None
    if entry.pw_uid == 0:
        raise PrivilegeError(f"--worker-user: {name!r} is root; name an unprivileged user such as 'nobody'")
    if os.geteuid() != 0:
        raise PrivilegeError("--worker-user needs the toolkit to run as root (only root can start a process as "
                             "another user)")
    return WorkerUser(name, entry.pw_uid, entry.pw_gid)


def hand_over(path: Path, user: WorkerUser) -> Path:
    """Create `path` (if needed) and give it to the worker user, private to it."""
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, user.uid, user.gid)
    path.chmod(0o700)
    return path


def worker_environment(workdir: Path, user: WorkerUser) -> dict[str, str]:
    """Variables the worker needs to run as `user`: where to drop to, and folders it can write."""
    env = {UID_ENV: str(user.uid), GID_ENV: str(user.gid),
           "HOME": str(hand_over(workdir / "home", user)), "TMPDIR": str(hand_over(workdir / "tmp", user))}
    if not os.environ.get("TRITON_CACHE_DIR"):
        env["TRITON_CACHE_DIR"] = str(hand_over(workdir / "triton-cache", user))
    return env


def check_worker_user() -> tuple[int, int] | None:
    """In the judge worker: the (uid, gid) candidate processes drop to, after checking that
    this user can read the interpreter and the libraries a candidate imports; otherwise one
    line says which path it cannot read (RuntimeError: the worker does not start)."""
    uid, gid = os.environ.get(UID_ENV), os.environ.get(GID_ENV)
    if uid is None or gid is None:
        return None
    import sysconfig

    import torch
    import triton

    paths = [sys.executable, sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
             str(Path(torch.__file__).parent), str(Path(triton.__file__).parent), str(Path(__file__).parent)]
    unreadable = unreadable_by(int(uid), int(gid), paths)
    if unreadable:
        raise RuntimeError(f"--worker-user: uid {uid} cannot read {unreadable[0]} (the interpreter and the libraries "
                           "a candidate imports must be readable by that user; install them where it can read, or "
                           "choose another user)")
    return int(uid), int(gid)


def unreadable_by(uid: int, gid: int, paths: list[str]) -> list[str]:
    """The paths (files, or folders and their top-level files) `uid` cannot read, checked by a
    child that becomes that user: permissions and ACLs decide, not a guess from mode bits. A
    child that cannot answer makes every path count as unreadable (the check fails closed)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            bad = []
            for p in paths:
                try:
                    path = Path(p)
                    if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
                        bad.append(p)
                    elif path.is_dir():
                        bad += [str(c) for c in sorted(path.iterdir())[:200]
                                if c.is_file() and not os.access(c, os.R_OK)]
                except OSError:
                    bad.append(p)
            os.write(write_fd, "\n".join([*bad, _CHECKED]).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as f:
        lines = f.read().decode().splitlines()
    os.waitpid(pid, 0)
    if _CHECKED not in lines:
        return list(paths)
    return [line for line in lines if line and line != _CHECKED]


_CHECKED = "\0checked"
