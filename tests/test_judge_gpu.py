"""The judge's GPU paths on a device machine: inputs and outputs crossing to the candidate's
process as host bytes, timing rounds driven by the judge with the candidate sampled in its own
process, and the race re-run of a final submission. Skipped without a GPU."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


@pytest.fixture(scope="module")
def pool() -> Any:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from judge.device import detect_target
    from runners.pool import LocalPool

    with LocalPool(detect_target(), workers=1, job_timeout=300) as p:
        yield p


def test_expert_is_correct_on_hidden_cases_with_strided_inputs(pool: Any) -> None:
    from bench.registry import get_task

    task = get_task("softmax")
    v = pool.evaluate("softmax", task.baseline_source(), "hidden").verdict
    assert v.correct, v.one_line()
    assert any(c.layout == "strided" for c in task.hidden_gpu)


def test_timing_interleaves_the_candidate_process_with_the_judges_baseline(pool: Any) -> None:
    from bench.registry import get_task
    from judge.policy import TimingPolicy

    src = get_task("vector_add").baseline_source()
    ev = pool.evaluate("vector_add", src, "hidden", timing=True,
                       timing_policy=TimingPolicy(min_samples=10, max_samples=40, max_seconds_per_case=5))
    assert ev.verdict.correct, ev.verdict.one_line()
    assert ev.timing is not None and ev.timing.speedup_vs_baseline is not None
    # The expert against itself: the same kernel in two processes, sampled in alternation.
    assert 0.7 < ev.timing.speedup_vs_baseline < 1.4, ev.timing.speedup_vs_baseline
    for ct in ev.timing.cases:
        assert len(ct.candidate_ms) == len(ct.baseline_ms) >= 10


def test_containment_line_is_reported(pool: Any) -> None:
    from bench.registry import get_task

    pool.evaluate("vector_add", get_task("vector_add").baseline_source(), "visible")
    assert pool.contained.startswith("enforced:"), pool.contained
