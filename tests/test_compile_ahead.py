"""The compile-ahead lane (runners/compile_ahead.py, judge/compile_ahead.py): workers that judge
nothing and compile the kernels of evaluations waiting for a judging worker."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from judge.compile_ahead import NOTHING_JUDGED, REFUSED, compiled_only
from judge.job import COMPILE_AHEAD, EVALUATION, INTERNAL_TESTS, Job, JobError
from runners.compile_ahead import Ahead, lane_workers_per_device, worth_compiling_ahead


def test_the_setting_reads_a_count_per_device_and_anything_else_is_off() -> None:
    assert lane_workers_per_device("") == 0
    assert lane_workers_per_device("2") == 2
    assert lane_workers_per_device(" 4 ") == 4
    for bad in ("5", "-1", "two", "1.5"):
        assert lane_workers_per_device(bad) == 0, bad


def test_only_evaluations_that_are_not_retries_alone_go_to_the_lane() -> None:
    assert worth_compiling_ahead(Job("vector_add", "src", kind=EVALUATION))
    assert not worth_compiling_ahead(Job("vector_add", "src", kind=EVALUATION, alone=True))
    assert not worth_compiling_ahead(Job("vector_add", "src", kind=INTERNAL_TESTS, tests="def test_x(): pass"))
    assert not worth_compiling_ahead(Job("vector_add", "src", kind=COMPILE_AHEAD))
    assert Job.from_json(Job("vector_add", "src", kind=COMPILE_AHEAD).to_json()).compile_only
    with pytest.raises(JobError):
        Job("vector_add", "src", kind="compile")


def test_a_compile_ahead_job_says_it_judged_nothing() -> None:
    verdict, timing = compiled_only(None, None, None)
    assert verdict.message == NOTHING_JUDGED and not verdict.correct and timing is None


def test_an_entry_is_taken_by_the_lane_or_dropped_by_its_caller_never_both() -> None:
    taken = Ahead(Job("vector_add", "src"))
    assert taken.claim() and taken.state == "compiling"
    taken.drop()  # the judging worker took the job meanwhile: the lane's pass goes on
    assert taken.state == "compiling" and taken.overlapped and not taken.claim()
    dropped = Ahead(Job("vector_add", "src"))
    dropped.drop()
    assert dropped.state == "dropped" and not dropped.overlapped and not dropped.claim()


@pytest.mark.slow
def test_waiting_evaluations_are_compiled_ahead_and_judged_as_without_the_lane(tmp_path: Path) -> None:
    """One judging worker and a lane of one (the interpreter, the compile pass forced on): four
    hidden evaluations asked at once, so three wait. The lane runs the pass of waiting ones (job
    lines of kind compile_ahead, with the pass's cases), never judges (an evaluation sent to a
    lane worker is refused), and every verdict is the one a pool without the lane gives."""
    from bench.registry import get_task
    from judge.candidate import precompile
    from judge.device import detect_target
    from runners.pool import LocalPool

    expert = get_task("vector_add").baseline_source()
    sources = [expert, expert.replace("x + y", "tl.where(offsets < 2048, x + y, x - y)"),
               expert.replace("x + y", "x - y"), expert + "\n# the same kernel, another source\n"]
    steps = tmp_path / "steps"
    steps.mkdir()
    saved = {k: os.environ.get(k) for k in (precompile.PRECOMPILE_ENV, "KMC_JOB_STEPS")}
    os.environ.update({precompile.PRECOMPILE_ENV: "force", "KMC_JOB_STEPS": str(steps)})
    try:
        target = detect_target(force_cpu=True)
        with LocalPool(target, workers=1, job_timeout=300, compile_ahead=1) as pool:
            assert pool.ahead is not None and pool.layout()["compile_ahead_workers"] == 1
            lane_worker = pool.ahead.workers[0]
            assert not lane_worker.alive()  # nothing starts before a job or the warm-up
            pool.warm_up()
            lane_worker.ensure_started()
            with ThreadPoolExecutor(len(sources)) as threads:
                with_lane = list(threads.map(lambda s: pool.evaluate("vector_add", s, "hidden").verdict, sources))
            refused = lane_worker.run(Job("vector_add", expert), 300).evaluation["verdict"]
        stats = pool.ahead.stats
        with LocalPool(target, workers=1, job_timeout=300) as plain:
            assert plain.ahead is None and "compile_ahead_workers" not in plain.layout()
            without = [plain.evaluate("vector_add", s, "hidden").verdict for s in sources]
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    assert [v.to_json() for v in with_lane] == [v.to_json() for v in without]
    assert [v.kind for v in without] == ["correct", "wrong_result", "wrong_result", "correct"]
    assert refused["kind"] == "runtime_error" and refused["message"] == REFUSED
    lines = [json.loads(line) for f in steps.iterdir() for line in f.read_text().splitlines()]
    ahead = [line for line in lines if line.get("kind") == COMPILE_AHEAD]
    assert stats.submitted >= 2 and stats.compiled >= 1 and stats.failed == 0
    assert stats.compiled + stats.dropped <= stats.submitted and stats.overlapped <= stats.compiled
    assert "compiled ahead" in stats.line()
    assert len(ahead) == stats.compiled
    assert all(int(line["compile_pass"]["cases"]) > 0 for line in ahead), ahead


@pytest.mark.gpu
def test_on_a_gpu_the_lane_compiles_into_the_cache_the_judged_job_then_finds(tmp_path: Path) -> None:
    """A lane of one beside one judging worker, on a GPU: a hidden job handed to the lane is
    compiled there (its pass writes kernels into the source's cache and loads none: its process
    has no GPU context), then the same source's hidden evaluation writes fewer in its own pass
    than the lane did, and is judged correct."""
    import time

    import torch

    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs a GPU and Triton's compiler")
    from bench.registry import get_task
    from judge.device import detect_target
    from runners.pool import LocalPool

    source = get_task("softmax").baseline_source() + f"\n# compiled ahead on a GPU {time.time_ns()}\n"
    steps = tmp_path / "steps"
    steps.mkdir()
    saved = os.environ.get("KMC_JOB_STEPS")
    os.environ["KMC_JOB_STEPS"] = str(steps)
    try:
        with LocalPool(detect_target(), workers=1, job_timeout=300, compile_ahead=1, prepare=("softmax",)) as pool:
            assert pool.ahead is not None
            pool.warm_up()
            pool.ahead.workers[0].ensure_started()
            ahead = pool.ahead.submit(Job("softmax", source, case_set="hidden"))
            assert ahead is not None
            deadline = time.monotonic() + 240
            while ahead.state != "done" and time.monotonic() < deadline:
                time.sleep(0.2)
            verdict = pool.evaluate("softmax", source, "hidden").verdict
    finally:
        os.environ.pop("KMC_JOB_STEPS", None) if saved is None else os.environ.__setitem__("KMC_JOB_STEPS", saved)
    lines = [json.loads(line) for f in steps.iterdir() for line in f.read_text().splitlines()]
    [lane] = [line["compile_pass"] for line in lines if line.get("kind") == COMPILE_AHEAD]
    judged = [line["compile_pass"] for line in lines if line.get("kind") == EVALUATION]
    assert verdict.correct, verdict.one_line()
    assert lane["written"] > 0 and lane["kernels"] == 0 and lane["cases"] > 0, lane
    assert judged and judged[-1]["written"] < lane["written"], (lane, judged)
