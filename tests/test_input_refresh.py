"""Timing samples run on input values no earlier call saw (judge/candidate/sampling.py `InputRefresher`).

Why: the timing protocol calls a candidate again and again on one set of inputs, so a
candidate that remembers its output by the inputs' contents (tests/hostile/
memo_by_content_hash.py) passes every correctness check and times as fast as its checksum.
On the CPU: what a refresh changes and leaves alone, that reruns refresh alike, that restoring
gives back the exact pristine bits, and that the candidate process builds the same refresher
from the judge's message. The end-to-end check (the memo timed no faster than the expert on an
H200, and much faster with refreshing off) is in tests/test_judge_gpu.py.
"""

from __future__ import annotations

import torch

from judge.candidate.sampling import REFRESH_SCALE, CandidateTimer, InputRefresher
from judge.policy import TimingPolicy


def _inputs() -> tuple:
    torch.manual_seed(0)
    return (torch.randn(4096, dtype=torch.float16), torch.randn(64, 32).t(), torch.randint(0, 9, (100,)),
            torch.empty(4096, dtype=torch.float16), torch.randn(8).expand(4, 8), torch.randn(300, dtype=torch.bfloat16),
            2.5)


def _copies(args: tuple) -> list:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def test_a_refresh_changes_every_floating_input_a_little_and_nothing_else() -> None:
    args = _inputs()
    before = _copies(args)
    InputRefresher(args, skip=(3,), seed=0).refresh()
    half, strided, index, _, expanded, bf16, scalar = args
    assert float((half != before[0]).float().mean()) > 0.9  # nearly every value changed
    assert float((strided != before[1]).float().mean()) > 0.9 and strided.stride() == before[1].stride()
    assert float((bf16 != before[5]).float().mean()) > 0.5  # bfloat16 rounds more of the small changes away
    for new, old in ((half, before[0]), (strided, before[1]), (bf16, before[5])):
        big = old.float().abs() > 1e-2  # away from the subnormals, where rounding dominates
        ratio = new.float()[big] / old.float()[big]
        assert float(ratio.min()) >= 1 - REFRESH_SCALE - 1e-2 and float(ratio.max()) <= 1 + 1e-2, (ratio.min(), ratio.max())
        assert bool((new.float() * old.float() >= 0).all())  # no sign changed
        assert float(new.float().abs().max()) <= float(old.float().abs().max())  # never grows: no overflow
    assert torch.equal(index, before[2])  # integers may be indices: kept
    assert torch.equal(expanded, before[4])  # a view whose elements share memory: left alone
    assert scalar == 2.5


def test_output_arguments_are_left_to_the_call() -> None:
    args = _inputs()
    marker = torch.full((4096,), 7.0, dtype=torch.float16)
    args[3].copy_(marker)
    InputRefresher(args, skip=(3,), seed=0).refresh()
    assert torch.equal(args[3], marker)
    unskipped = _inputs()
    unskipped[3].copy_(marker)
    InputRefresher(unskipped, skip=(), seed=0).refresh()
    assert not torch.equal(unskipped[3], marker)


def test_every_sample_of_a_long_timing_sees_contents_never_seen_before() -> None:
    """What defeats a content memo: 400 refreshes (the full protocol's cap), 400 contents."""
    x = torch.randn(2048, dtype=torch.float16)
    refresher = InputRefresher((x,), seed=3)
    seen = {x.numpy().tobytes()}
    for _ in range(400):
        refresher.refresh()
        seen.add(x.numpy().tobytes())
    assert len(seen) == 401


def test_refreshes_are_the_same_on_a_rerun_and_restore_gives_back_the_pristine_bits() -> None:
    first, second = _inputs(), _inputs()
    pristine = _copies(first)
    a, b = InputRefresher(first, skip=(3,), seed=5), InputRefresher(second, skip=(3,), seed=5)  # 3: torch.empty
    for _ in range(3):
        a.refresh()
        b.refresh()
    for i, (x, y) in enumerate(zip(first, second, strict=True)):
        if i != 3:
            assert torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y
    other = _inputs()
    InputRefresher(other, skip=(3,), seed=6).refresh()
    assert not torch.equal(other[0], first[0])  # another seed, other values
    a.restore()
    for i, (x, p) in enumerate(zip(first, pristine, strict=True)):
        if isinstance(x, torch.Tensor) and i != 3:
            assert torch.equal(x, p)


def test_nan_and_infinite_inputs_stay_what_they_are() -> None:
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, 1.0])
    refresher = InputRefresher((x,))
    refresher.refresh()
    assert torch.isnan(x[0]) and x[1] == float("inf") and x[2] == -float("inf") and x[3] == 0.0
    refresher.restore()
    assert torch.isnan(x[0]) and x[4] == 1.0


def test_inputs_that_require_grad_are_refreshed_and_inference_tensors_left_alone() -> None:
    """A backward task's inputs require grad (an in-place write outside no_grad is refused);
    an inference tensor cannot be written outside inference mode: it keeps its values rather
    than failing the timing."""
    leaf = torch.randn(256, requires_grad=True)
    before = leaf.detach().clone()
    with torch.inference_mode():
        frozen = torch.randn(256)
    kept = frozen.clone()
    refresher = InputRefresher((leaf, frozen))
    refresher.refresh()
    assert not torch.equal(leaf.detach(), before) and leaf.requires_grad and leaf.grad_fn is None
    assert torch.equal(frozen, kept) and len(refresher.targets) == 1
    refresher.restore()
    assert torch.equal(leaf.detach(), before)


def test_the_candidate_process_refreshes_as_the_judge_asked() -> None:
    """The judge sends the refresher's settings with the timing's first step; the candidate's
    timer builds it over its own copies of the inputs and restores them on the `restore` step."""
    args = _inputs()
    pristine = _copies(args)
    spec = {"skip": [3], "seed": 9}
    timer = CandidateTimer(lambda *a: a[0], args, spec)
    refresher = timer.side.refresher
    assert refresher is not None and len(refresher.targets) == 3  # half, strided, bf16
    refresher.refresh()
    judge_side = _inputs()
    InputRefresher(judge_side, skip=(3,), seed=9).refresh()
    assert torch.equal(args[0], judge_side[0])  # the same values as a judge-side refresher makes
    reply, tensors = timer.step({"step": "restore"})
    assert reply == {} and tensors == []
    assert torch.equal(args[0], pristine[0]) and torch.equal(args[1], pristine[1])
    assert CandidateTimer(lambda *a: a[0], _inputs(), None).side.refresher is None


def test_the_policy_turns_refreshing_on_by_default_and_records_it() -> None:
    policy = TimingPolicy()
    assert policy.refresh_inputs is True and policy.to_json()["refresh_inputs"] is True
    assert TimingPolicy.from_json({"min_samples": 10}).refresh_inputs is True  # a record from before the field
    assert TimingPolicy.from_json({"refresh_inputs": False}).refresh_inputs is False
