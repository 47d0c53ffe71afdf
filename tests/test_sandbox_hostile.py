"""Hostile candidates against the sandbox (tests/hostile_sandbox/), judged end to end by a
worker pool on the CPU interpreter, as root in CI: each tampering, containment or leak attempt
of issue 41 gets the verdict of a candidate that reached nothing, and the host shows no trace
(no file written, no segment left, the template alive for the next candidate)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from judge import sandbox, sandbox_layout

PROBLEM = sandbox.probe()
HERE = Path(__file__).parent / "hostile_sandbox"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(PROBLEM is not None, reason=f"no sandbox here: {PROBLEM}")]

# file -> (expected verdict, a phrase its message must hold)
EXPECTED = {
    "writes_judge_memory.py": ("wrong_result", "outside atol"),
    "forges_reply_via_proc_fd.py": ("wrong_result", "outside atol"),
    "signals_template.py": ("correct", ""),
    "steals_control_socket.py": ("correct", ""),
    "escapes_through_proc_root.py": ("correct", ""),
    "leaves_sysv_segment.py": ("correct", ""),
    "reads_expert_kernel.py": ("correct", ""),
    "redraws_hidden_inputs.py": ("wrong_result", "outside atol"),
}


def _segments() -> int:
    return len(Path("/proc/sysvipc/shm").read_text().splitlines())


@pytest.fixture(scope="module", params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def judged(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The corpus judged on the interpreter, and on the GPU where there is one (the sandbox
    then also binds the device nodes and driver files, and the candidate makes a context)."""
    from bench.registry import get_task
    from judge.device import detect_target
    from runners.pool import LocalPool

    segments = _segments()
    task = get_task("vector_add")
    verdicts = {}
    with LocalPool(detect_target(force_cpu=request.param == "cpu"), workers=1) as pool:
        for name in EXPECTED:
            source = task.complete_source((HERE / name).read_text())
            verdicts[name] = pool.evaluate("vector_add", source, "visible").verdict
        # the template and worker still judge the next candidate as usual
        verdicts["expert afterwards"] = pool.evaluate("vector_add", task.baseline_source(), "visible").verdict
        restarts = pool.stats.restarts
    return {"verdicts": verdicts, "restarts": restarts, "segments_before": segments, "segments_after": _segments()}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hostile_candidate_reaches_nothing(name: str, judged: dict[str, Any]) -> None:
    kind, phrase = EXPECTED[name]
    verdict = judged["verdicts"][name]
    assert verdict.kind == kind, f"{name}: {verdict.kind}: {verdict.message}"
    assert phrase in verdict.message
    assert "LEAKED" not in verdict.message and "@triton.jit" not in verdict.message


def test_the_host_shows_no_trace(judged: dict[str, Any]) -> None:
    assert judged["verdicts"]["expert afterwards"].kind == "correct"
    assert judged["restarts"] == 0  # no candidate killed its template or its worker
    assert judged["segments_after"] == judged["segments_before"]
    assert not (Path(tempfile.gettempdir()) / "kmc-sandbox-escape-marker").exists()
    assert not Path("/tmp/kmc-sandbox-escape-marker").exists()
    assert not (Path(sandbox_layout.PROJECT_ROOT) / "sitecustomize.py").exists()
    assert not Path("/dev/kmc-sandbox-escape-marker").exists()
