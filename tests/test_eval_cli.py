"""`python cli.py eval`: one candidate file judged as a user would run it, on the CPU
interpreter (forced with KMC_FORCE_CPU=1, so the expectations hold on GPU machines too)."""

from __future__ import annotations

import json

import pytest

from tests.helpers import ROOT, cli_env, run_cli

KEYS = {"verdict", "failing_case", "max_abs_err", "max_rel_err", "message", "timing"}


def _eval(*args: str):
    return run_cli("eval", *args, env=cli_env(KMC_FORCE_CPU="1"), timeout=600)


@pytest.mark.slow
def test_correct_candidate_json() -> None:
    out = _eval("--task", "vector_add", "--candidate", str(ROOT / "bench/kernels/vector_add.py"), "--visible", "--json")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, out.stdout
    data = json.loads(lines[0])
    assert KEYS <= set(data)
    assert data["verdict"] == "correct"
    assert data["failing_case"] is None
    assert data["message"] == ""
    assert data["max_abs_err"] == 0.0 and data["max_rel_err"] == 0.0
    assert data["timing"] is None  # no timing on the CPU interpreter
    assert data["cases_run"] == 2


@pytest.mark.slow
def test_wrong_candidate_json() -> None:
    out = _eval("--task", "vector_add", "--candidate", str(ROOT / "tests/hostile/off_by_one.py"), "--json")
    assert out.returncode == 1, out.stderr
    data = json.loads(out.stdout)
    assert KEYS <= set(data)
    assert data["verdict"] == "wrong_result"
    assert data["failing_case"] == "visible-n1024"
    assert data["max_abs_err"] > 0.1 and data["max_rel_err"] > 0.01
    assert "outside atol" in data["message"]
    assert data["timing"] is None


@pytest.mark.slow
def test_human_output_on_hidden_cases() -> None:
    out = _eval("--task", "cumsum", "--candidate", str(ROOT / "bench/kernels/cumsum.py"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["correct", "timing: unavailable on the CPU interpreter"]


@pytest.mark.slow
def test_unknown_task_is_one_line_and_exit_2() -> None:
    out = _eval("--task", "no_such_task", "--candidate", str(ROOT / "bench/kernels/vector_add.py"), "--json")
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "no_such_task" in lines[0]


def test_missing_candidate_file_is_exit_2() -> None:
    out = _eval("--task", "vector_add", "--candidate", str(ROOT / "does_not_exist.py"))
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1
