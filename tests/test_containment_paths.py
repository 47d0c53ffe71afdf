"""A checkout (and its virtual environment) under /tmp: the candidate process's private /tmp
must not hide the interpreter's libraries, or a candidate importing any module the template
had not loaded yet (the suites' files import pytest) failed with ModuleNotFoundError; and what
is bound back stays read-only."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from judge.containment import _under_private_tmpfs

CHILD = textwrap.dedent('''
    import os, sys
    sys.path.append({lib!r})
    from judge import containment
    line = containment.apply(containment.Plan(folder={folder!r}))
    assert "private read-only mounts" in line, line
    import probe_module_under_tmp
    assert probe_module_under_tmp.VALUE == 42
    try:
        open(os.path.join({lib!r}, "written.py"), "w").close()
    except OSError:
        print("READ-ONLY")
    else:
        print("WRITABLE")
''')


def test_the_outermost_library_folders_under_tmp_are_found(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "lib" / "site-packages").mkdir(parents=True)
    found = _under_private_tmpfs([str(venv / "lib" / "site-packages"), str(venv), "/usr/lib", "", "/tmp"])
    if str(tmp_path).startswith("/tmp/"):
        assert found == [os.path.realpath(venv)]
    else:
        assert found == []


def test_a_folder_holding_the_candidates_own_folder_is_not_bound_read_only(tmp_path: Path) -> None:
    """A worker started in a folder under /tmp: that folder (an import path entry of the
    template) holds the candidate's folder, which must stay writable."""
    work = tmp_path / "pool-tmp"
    (work / "cand-1").mkdir(parents=True)
    (work / "lib" / "site-packages").mkdir(parents=True)
    found = _under_private_tmpfs([str(work), str(work / "lib" / "site-packages")],
                                 keep_clear=(str(work / "cand-1"),))
    if str(tmp_path).startswith("/tmp/"):
        assert found == [os.path.realpath(work / "lib" / "site-packages")]
    else:
        assert found == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the private mounts need root")
def test_a_library_under_tmp_stays_importable_and_read_only_in_a_contained_process(tmp_path: Path) -> None:
    base = Path("/tmp") / f"kmc-lib-probe-{os.getpid()}"
    lib = base / "site-packages"
    lib.mkdir(parents=True, exist_ok=True)
    (lib / "probe_module_under_tmp.py").write_text("VALUE = 42\n")
    try:
        out = subprocess.run([sys.executable, "-c", CHILD.format(lib=str(lib), folder=str(tmp_path / "cand"))],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip().endswith("READ-ONLY"), out.stdout
    finally:
        import shutil

        shutil.rmtree(base, ignore_errors=True)
