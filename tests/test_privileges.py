"""`--worker-user`: candidate processes as an unprivileged user (judge/privileges.py).

The escape probe is a correct kernel that first tries what a candidate running as root can
do: read its parent's environment and append to a root-owned file (standing in for the run's
store.sqlite). As root, the private read-only mounts already keep the file out of reach,
while the parent's (scrubbed) environment stays readable, which shows the probe works; with
`worker_user="nobody"` neither is reachable and it is judged correct. Tests that switch users
need root and the `nobody` user, and skip cleanly without them.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from judge.privileges import PrivilegeError, resolve_worker_user
from tests.helpers import run_cli

# Appended to the expert vector_add: the same kernel, after the escape attempts.
ESCAPE_PROBE_TAIL = '''

import os as _os

_expert_vector_add = vector_add


def _escapes() -> str:
    found = []
    try:
        with open(f"/proc/{_os.getppid()}/environ", "rb") as f:
            f.read(1)
        found.append("read the parent's environment")
    except OSError:
        pass
    try:
        with open(_os.environ["KMC_TEST_ROOT_FILE"], "a") as f:
            f.write("tampered")
        found.append("wrote a root-owned file")
    except OSError:
        pass
    return "; ".join(found)


def vector_add(x, y):
    escaped = _escapes()
    if escaped:
        raise RuntimeError("escaped: " + escaped)
    return _expert_vector_add(x, y)
'''


def _has_nobody() -> bool:
    try:
        return pwd.getpwnam("nobody").pw_uid != 0
    except KeyError:
        return False


needs_root = pytest.mark.skipif(os.geteuid() != 0 or not _has_nobody(),
                                reason="switching users needs root and a 'nobody' user")


def _target():  # noqa: ANN202
    from judge.device import default_device, detect_target

    return detect_target(force_cpu=default_device() == "cpu")


def _root_file(tmp_path: Path) -> Path:
    path = tmp_path / "store-standin.txt"
    path.write_text("recorded\n")
    path.chmod(0o644)
    return path


@pytest.mark.slow
@needs_root
def test_probe_is_contained_as_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As root, the sandbox keeps both the parent's environment and the run's files out of
    reach (judge/sandbox.py: its own PID namespace, an allow-listed root); without it
    (`unsandboxed`, the user's accepted risk) the probe does reach the parent's environment,
    which shows the probe works."""
    from runners.pool import LocalPool

    root_file = _root_file(tmp_path)
    monkeypatch.setenv("KMC_TEST_ROOT_FILE", str(root_file))  # KMC_ variables reach the workers
    target = _target()
    with LocalPool(target, workers=1) as pool:
        sandboxed = pool.evaluate("vector_add", _probe(), "visible").verdict
    assert sandboxed.kind == "correct", sandboxed.message
    with LocalPool(target, workers=1, unsandboxed=True) as pool:
        unsandboxed = pool.evaluate("vector_add", _probe(), "visible").verdict
    assert unsandboxed.kind == "runtime_error" and "read the parent's environment" in unsandboxed.message
    assert "wrote a root-owned file" not in unsandboxed.message and root_file.read_text() == "recorded\n"


def _interpreter_unreadable_by_nobody() -> list[str]:
    import sys
    import sysconfig

    from judge.privileges import unreadable_by

    nobody = pwd.getpwnam("nobody")
    return unreadable_by(nobody.pw_uid, nobody.pw_gid, [sys.executable, sysconfig.get_paths()["stdlib"]])


@pytest.mark.slow
@needs_root
def test_probe_is_contained_as_nobody_or_the_worker_says_why_not(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Where nobody can read the interpreter, the probe finds nothing and the expert runs; where
    it cannot (an interpreter under /root), the worker refuses to start, naming the path."""
    from runners.pool import LocalPool, WorkerStartError

    root_file = _root_file(tmp_path)
    monkeypatch.setenv("KMC_TEST_ROOT_FILE", str(root_file))
    unreadable = _interpreter_unreadable_by_nobody()
    with LocalPool(_target(), workers=1, worker_user="nobody", startup_timeout=120) as pool:
        if unreadable:
            with pytest.raises(WorkerStartError, match="cannot read"):
                pool.evaluate("vector_add", _probe(), "visible")
            return
        as_nobody = pool.evaluate("vector_add", _probe(), "visible").verdict
        baseline = pool.evaluate("vector_add", _baseline(), "hidden").verdict
        assert "uid" in pool.contained, pool.contained
    assert as_nobody.kind == "correct", as_nobody.message
    assert baseline.kind == "correct", baseline.message  # kernels still run as nobody
    assert root_file.read_text() == "recorded\n"


def _baseline() -> str:
    from bench.registry import get_task

    return get_task("vector_add").baseline_source()


def _probe() -> str:
    return _baseline() + ESCAPE_PROBE_TAIL


@needs_root
def test_paths_the_worker_user_cannot_read_are_named() -> None:
    """The check `--worker-user` runs at start: a child that becomes the user tries each path."""
    import shutil
    import tempfile

    from judge.privileges import unreadable_by

    folder = Path(tempfile.mkdtemp(prefix="kmc-readable-", dir="/tmp"))  # pytest's tmp_path is root-only
    try:
        folder.chmod(0o755)
        private = folder / "root-only"
        private.mkdir(mode=0o700)
        (private / "lib.py").write_text("")
        readable = folder / "readable.py"
        readable.write_text("")
        readable.chmod(0o644)
        nobody = pwd.getpwnam("nobody")
        assert unreadable_by(nobody.pw_uid, nobody.pw_gid, [str(private), str(readable)]) == [str(private)]
    finally:
        shutil.rmtree(folder)


def test_worker_user_is_refused_where_it_cannot_work(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PrivilegeError, match="no user 'no-such-user-kmc'"):
        resolve_worker_user("no-such-user-kmc")
    with pytest.raises(PrivilegeError, match="is root"):
        resolve_worker_user("root")
    if _has_nobody():
        monkeypatch.setattr(os, "geteuid", lambda: 1000)
        with pytest.raises(PrivilegeError, match="needs the toolkit to run as root"):
            resolve_worker_user("nobody")


def test_compare_with_an_unknown_worker_user_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = run_cli("compare", "--budget", "2", "--worker-user", "no-such-user-kmc", "--out", str(tmp_path / "runs"),
                   "--quiet", timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == ["error: --worker-user: no user 'no-such-user-kmc' on this machine"]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
