"""The Ray executor on a local Ray instance (2 CPUs, no GPU), CPU interpreter, with its lanes
asked for on the CPU: one judging actor and one timing actor sharing the node's gate. CI
installs the `cluster` extra (.ci/run), so these run there rather than being skipped (only a machine
without it, such as a GPU image with no Ray, skips them)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from bench.registry import get_task
from judge.device import Target
from judge.gate import FairGate
from runners.pool import LocalPool
from runners.ray_executor import RayExecutor

ray = pytest.importorskip("ray", reason="the cluster extra is not installed (CI installs it)")

pytestmark = pytest.mark.slow  # a Ray instance and its actors' workers start in ~30 s on 2 cores

HOSTILE = Path(__file__).resolve().parent / "hostile"
CPU = Target("cpu", True, "Triton CPU interpreter", 0)


@pytest.fixture(scope="module")
def executor():
    assert not ray.is_initialized()
    ex = RayExecutor(CPU, actors=1, job_timeout=120, lanes_on_cpu=True,
                     ray_init_kwargs={"num_cpus": 2, "include_dashboard": False})
    yield ex
    ex.close()
    assert not ray.is_initialized()  # the executor started Ray, so it stops it


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
    """A crash or a hang costs the candidate its process and its verdict (judge/remote.py);
    the actor's judge worker goes on and judges the next candidate."""
    crash = executor.evaluate("vector_add", (HOSTILE / "segfault_ctypes.py").read_text(), "visible")
    hang = executor.evaluate("vector_add", (HOSTILE / "infinite_loop.py").read_text(), "visible", timeout=10)
    after = executor.evaluate("vector_add", get_task("vector_add").baseline_source(), "visible")
    assert crash.verdict.kind == "crash"
    assert hang.verdict.kind == "timeout"
    assert after.verdict.kind == "correct"
    judging = executor.stats()[0]
    assert judging["role"] == "judging" and judging["crashes"] >= 1 and judging["timeouts"] >= 1


def test_lanes_timed_jobs_go_to_the_timing_actor_and_both_share_the_gate(executor: RayExecutor) -> None:
    layout = executor.layout()
    assert (layout["kind"], layout["workers"], layout["timing_lanes"], layout["chosen"]) == ("ray", 1, 1, "given")
    expert = get_task("vector_add").baseline_source()
    before = {s["role"]: s["jobs"] for s in executor.stats()}
    assert executor.evaluate("vector_add", expert, "visible", timing=True).verdict.kind == "correct"
    tests = executor.run_tests("vector_add", expert, "def test_adds():\n    import torch\n"
                               "    x = torch.arange(100.0, device=DEVICE)\n"
                               "    assert torch.equal(vector_add(x, x), 2 * x)\n")
    assert tests.verdict.kind == "correct"
    after = {s["role"]: s["jobs"] for s in executor.stats()}
    assert after["timing"] == before["timing"] + 1 and after["judging"] == before["judging"] + 1
    gates = {s["gate"] for s in executor.stats()}
    assert len(gates) == 1 and "" not in gates  # one gate for the node's one "device"

    # A fake timer holds the gate: a judging job on the judging actor waits for it.
    gate, held = FairGate(gates.pop()), threading.Event()

    def timer() -> None:
        with gate.enter(exclusive=True):
            held.set()
            time.sleep(3.0)

    thread = threading.Thread(target=timer)
    thread.start()
    held.wait(5)
    evaluation = executor.evaluate("vector_add", expert, "visible")
    thread.join()
    assert evaluation.verdict.kind == "correct"
    assert evaluation.phases is not None and evaluation.phases["gate"] >= 1.0
