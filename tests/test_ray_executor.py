"""The Ray executor on a local Ray instance, CPU interpreter only. Skipped when Ray is not
installed (CI does not install the `cluster` extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from bench.registry import get_task  # noqa: E402
from judge.device import Target  # noqa: E402
from runners.pool import LocalPool  # noqa: E402
from runners.ray_executor import RayExecutor  # noqa: E402

HOSTILE = Path(__file__).resolve().parent / "hostile"
CPU = Target("cpu", True, "Triton CPU interpreter", 0)


@pytest.fixture(scope="module")
def executor():
    ex = RayExecutor(CPU, actors=1, job_timeout=120, ray_init_kwargs={"num_cpus": 2})
    yield ex
    ex.close()


def test_same_verdicts_as_the_local_pool(executor: RayExecutor) -> None:
    baseline = get_task("vector_add").baseline_source()
    jobs = [("vector_add", baseline, "visible"),
            ("vector_add", (HOSTILE / "off_by_one.py").read_text(), "visible"),
            ("cumsum", (HOSTILE / "cumsum_no_carry.py").read_text(), "hidden"),
            ("vector_add", (HOSTILE / "returns_torch.py").read_text(), "visible")]
    via_ray = [executor.evaluate(*job).verdict for job in jobs]
    with LocalPool(CPU, workers=1, job_timeout=120) as pool:
        local = [pool.evaluate(*job).verdict for job in jobs]
    assert [v.kind for v in via_ray] == ["correct", "wrong_result", "wrong_result", "no_kernel"]
    assert [(v.kind, v.failing_case, v.message) for v in via_ray] == [(v.kind, v.failing_case, v.message) for v in local]


def test_crash_and_hang_cost_one_verdict(executor: RayExecutor) -> None:
    crash = executor.evaluate("vector_add", (HOSTILE / "segfault_ctypes.py").read_text(), "visible")
    hang = executor.evaluate("vector_add", (HOSTILE / "infinite_loop.py").read_text(), "visible", timeout=10)
    after = executor.evaluate("vector_add", get_task("vector_add").baseline_source(), "visible")
    assert crash.verdict.kind == "crash" and crash.verdict.worker_restarted
    assert hang.verdict.kind == "timeout"
    assert after.verdict.kind == "correct"
    stats = executor.stats()
    assert stats[0]["crashes"] >= 1 and stats[0]["timeouts"] >= 1
