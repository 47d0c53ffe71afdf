"""`--worker-user`: evaluation workers as an unprivileged user (judge/privileges.py).

The escape probe is a correct kernel that first tries what a candidate running as root can
do: read the parent's environment (where the API key lives) and append to a root-owned
file (standing in for the run's store.sqlite). Run as root it escapes (so the probe is
shown to work); with `worker_user="nobody"` it cannot, and is judged correct. Tests that
switch users need root and the `nobody` user, and skip cleanly without them.
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
def test_probe_escapes_as_root_and_not_as_nobody(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runners.pool import LocalPool

    root_file = _root_file(tmp_path)
    monkeypatch.setenv("KMC_TEST_ROOT_FILE", str(root_file))  # KMC_ variables reach the workers
    target = _target()
    with LocalPool(target, workers=1) as pool:
        as_root = pool.evaluate("vector_add", _probe(), "visible").verdict
    assert as_root.kind == "runtime_error" and "read the parent's environment" in as_root.message
    assert "wrote a root-owned file" in as_root.message and root_file.read_text().endswith("tampered")

    root_file.write_text("recorded\n")
    with LocalPool(target, workers=1, worker_user="nobody") as pool:
        as_nobody = pool.evaluate("vector_add", _probe(), "visible").verdict
        baseline = pool.evaluate("vector_add", _baseline(), "hidden").verdict
    assert as_nobody.kind == "correct", as_nobody.message
    assert baseline.kind == "correct", baseline.message  # kernels still compile and run as nobody
    assert root_file.read_text() == "recorded\n"


def _baseline() -> str:
    from bench.registry import get_task

    return get_task("vector_add").baseline_source()


def _probe() -> str:
    return _baseline() + ESCAPE_PROBE_TAIL


@pytest.mark.slow
@needs_root
def test_unwritable_triton_cache_stops_the_worker_with_the_reason(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Every kernel would fail to compile: the worker refuses to start instead."""
    from runners.pool import LocalPool, WorkerStartError

    cache = tmp_path / "root-only-cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    with LocalPool(_target(), workers=1, worker_user="nobody", startup_timeout=120) as pool:
        with pytest.raises(WorkerStartError, match="TRITON_CACHE_DIR .* is not writable"):
            pool.evaluate("vector_add", _baseline(), "visible")


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
