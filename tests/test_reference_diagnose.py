"""scripts/reference_diagnose.py, the diagnostic behind session 32's item-7 figures: each task in
a process of its own, every step timed, with `--cprofile` the costliest functions, and a Triton
cache of the run's own (removed after) in which the judge's autotuning switch is on, as the
pool's workers have it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GEAK = ROOT / "tests" / "fixtures" / "geak_eval"


@pytest.mark.slow  # a child process on the interpreter: ~5 s on 2 cores
@pytest.mark.interpreter
def test_a_task_is_walked_step_by_step_and_profiled(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1", "HOME": str(tmp_path), "TMPDIR": str(tmp_path),
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "reference_diagnose.py"), "--source",
                           f"geak-eval:{GEAK}", "--cprofile", "5", "tb-add_vectors"],
                          capture_output=True, text=True, timeout=240, env=env, cwd=str(ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "===== tb-add_vectors: exit 0" in out
    assert "judge's answer made" in out and "] done" in out
    assert "Ordered by: cumulative time" in out and "Ordered by: internal time" in out
    assert not list(tmp_path.glob("kmc-diagnose-triton-*")), "the run's Triton cache is removed"
