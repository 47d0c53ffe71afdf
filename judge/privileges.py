"""Evaluation workers as an unprivileged user (opt-in: `compare --worker-user nobody`).

Why: a worker's environment is scrubbed, but candidate code running as root can still read
the parent's environment (`/proc/<ppid>/environ`, where the API key lives), open the run's
`store.sqlite` and rewrite verdicts already recorded, or read any file on the machine. The
guards in judge/sandbox.py are tripwires, not a boundary; a separate user is one. Only
root can switch users, so the option needs the toolkit to run as root (containers often do).

The parent (still root) hands the worker the folders it must write (its pool folder, a HOME,
a TMPDIR and, unless the user named one, a Triton cache); the worker drops to the user after
its imports and before it reads the first job, then checks that the parent's environment is
out of reach and refuses to start if it is not, so the option never silently does nothing.
"""

from __future__ import annotations

import os
import pwd
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


def drop_privileges_if_asked() -> None:
    """In the worker: become the user the parent named, for good, and prove it worked.

    Raises RuntimeError (the worker then fails to start, and the run stops with the message)
    when the switch did not take, root can be regained, the parent's environment is still
    readable, or the Triton cache cannot be written (every kernel would fail to compile)."""
    uid, gid = os.environ.get(UID_ENV), os.environ.get(GID_ENV)
    if uid is None or gid is None:
        return
    os.setgroups([])
    os.setgid(int(gid))
    os.setuid(int(uid))
    if os.getuid() != int(uid) or os.geteuid() != int(uid):
        raise RuntimeError(f"could not switch to uid {uid}")
    try:
        os.setuid(0)
    except PermissionError:
        pass
    else:
        raise RuntimeError("the worker could switch back to root after dropping privileges")
    if parent_environment_readable():
        raise RuntimeError("the parent's environment is still readable after dropping privileges")
    cache = os.environ.get("TRITON_CACHE_DIR")
    if cache and not os.access(cache, os.W_OK | os.X_OK):
        raise RuntimeError(f"TRITON_CACHE_DIR {cache} is not writable by uid {uid}; unset it or give that user "
                           "a folder of its own")


def parent_environment_readable() -> bool:
    try:
        with open(f"/proc/{os.getppid()}/environ", "rb") as f:
            f.read(1)
    except OSError:
        return False
    return True
