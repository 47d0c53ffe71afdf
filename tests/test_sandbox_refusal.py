"""Where the candidate sandbox cannot be built, candidate code is refused in one line with exit
status 2, unless `--unsandboxed` accepts the risk. "Cannot be built" is made real here the way
container runtimes make it: the CLI runs under a seccomp filter that refuses `unshare` (Docker's
default profile does this for user namespaces), so the probe's namespaces fail for real.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, cli_env

pyseccomp = pytest.importorskip("pyseccomp")


def _no_namespaces() -> None:
    """In the CLI's process before exec: every unshare refused, as a container's profile does."""
    f = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    f.add_rule(pyseccomp.ERRNO(errno.EPERM), "unshare")
    f.load()


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True, timeout=300,
                          env=cli_env(), cwd=str(ROOT), preexec_fn=_no_namespaces)


CANDIDATE = ROOT / "bench" / "kernels" / "vector_add.py"


@pytest.mark.slow  # seconds: the fast subset stays under two minutes
def test_eval_is_refused_in_one_line_with_exit_2() -> None:
    done = _run("eval", "--task", "vector_add", "--candidate", str(CANDIDATE), "--visible", "--device", "cpu")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: the candidate sandbox cannot be built here (unshare")
    assert "--unsandboxed" in lines[0]


@pytest.mark.slow  # a CLI process under a filter; the eval refusal stays in the fast subset
def test_compare_is_refused_before_any_run_folder_exists(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    done = _run("compare", "--budget", "1", "--tasks", "vector_add", "--methods", "direct", "--device", "cpu",
                "--out", str(out), "--quiet")
    assert done.returncode == 2, done.stderr
    assert "cannot be built here" in done.stderr and "--unsandboxed" in done.stderr
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.slow
def test_unsandboxed_accepts_the_risk_and_the_report_says_so(tmp_path: Path) -> None:
    done = _run("eval", "--task", "vector_add", "--candidate", str(CANDIDATE), "--visible", "--device", "cpu",
                "--unsandboxed", "--json")
    assert done.returncode == 0, done.stderr
    assert '"verdict": "correct"' in done.stdout
    out = tmp_path / "runs"
    done = _run("compare", "--budget", "1", "--tasks", "vector_add", "--methods", "direct", "--device", "cpu",
                "--out", str(out), "--quiet", "--unsandboxed")
    assert done.returncode == 0, done.stderr
    run_dir = next(out.iterdir())
    assert '"unsandboxed": true' in (run_dir / "config.json").read_text()
    report_dir = tmp_path / "report"
    report = subprocess.run([sys.executable, str(ROOT / "cli.py"), "report", str(run_dir), "--out", str(report_dir)],
                            capture_output=True, text=True, timeout=300, env=cli_env(), cwd=str(ROOT))
    assert report.returncode == 0, report.stderr
    text = "".join(p.read_text(errors="replace") for p in report_dir.rglob("*.md"))
    assert "UNSANDBOXED: candidates ran without the sandbox" in text


@pytest.mark.slow  # a CLI process under a filter; the eval refusal stays in the fast subset
def test_the_flag_is_not_taken_from_the_environment() -> None:
    """A KMC_UNSANDBOXED=1 inherited from a shell changes nothing: only the flag accepts the risk."""
    env = {**cli_env(), "KMC_UNSANDBOXED": "1"}
    done = subprocess.run([sys.executable, str(ROOT / "cli.py"), "eval", "--task", "vector_add", "--candidate",
                           str(CANDIDATE), "--visible", "--device", "cpu"], capture_output=True, text=True,
                          timeout=300, env=env, cwd=str(ROOT), preexec_fn=_no_namespaces)
    assert done.returncode == 2, done.stderr
    assert os.environ.get("KMC_UNSANDBOXED") != "1"
