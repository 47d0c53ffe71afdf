"""The judge's runs of a suite's Triton reference allocate every tensor with zeroed slack before
and after it (judge/candidate/allocations.py `_padded`), so a reference that writes past its own
output writes into that slack, never into the judge's other tensors.

Why: on an H100 (2026-12-06), TritonBench-revised references failed their own hidden cases with
the wrong values in the *expected* output: f16_to_f8 masks its stores by its input's storage size,
which the input's slack makes larger than its output, so it wrote up to a block past its output,
into whatever the judge had allocated next (an earlier case's answer in the cache among them).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from bench.adapters import load_source
from bench.slack import front_bytes, raw_bytes, slack_bytes
from judge.candidate.allocations import MARK_FLOAT, _PoisonState, allocations

STORAGE_MASKED = '''# ruff: noqa
import torch
import triton
import triton.language as tl


@triton.jit
def _double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, 2.0 * x + 1.0, mask=mask)


def storage_masked(x):
    y = torch.empty_like(x)
    n = x.untyped_storage().size() // x.element_size()  # the storage's size, not x's
    _double_kernel[(triton.cdiv(x.numel(), 64),)](x, y, n, BLOCK=64)
    return y


##################################################################################################################################################


def test_storage_masked():
    return {"test_case_1": storage_masked(torch.randn(100, device='cuda'))}


result_gold = test_storage_masked()
'''


def _slack_of(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The bytes of `t`'s storage before its first element and after its last."""
    raw = raw_bytes(t)
    start = t.storage_offset() * t.element_size()
    return raw[:start], raw[start + t.numel() * t.element_size():]


@pytest.mark.parametrize("mode", ["marker", "poison", "plain"])
def test_padded_allocations_keep_shape_strides_and_fill_with_zeroed_slack_around(mode: str) -> None:
    guards_before = len(_PoisonState.guards)
    with allocations(mode, padded=True):
        plain = torch.empty(10, 3)
        strided = torch.empty_strided((4, 5), (1, 4))
        like = torch.empty_like(torch.zeros(3, 4).t())
        new = torch.zeros(2).new_empty((6,), dtype=torch.int32)
    for t in (plain, strided, like, new):
        nbytes = t.numel() * t.element_size()
        front, after = _slack_of(t)
        assert front.numel() == front_bytes(nbytes) and not bool(front.any())
        assert after.numel() >= slack_bytes(nbytes) and not bool(after.any())
    assert strided.stride() == (1, 4) and like.shape == (4, 3) and like.stride() == (1, 4)
    assert new.dtype == torch.int32 and new.shape == (6,)
    if mode == "marker":
        assert bool((plain == MARK_FLOAT).all())
    elif mode == "poison":
        assert bool(plain.isnan().all())
        assert len(_PoisonState.guards) == guards_before  # the slack stands in for the guard
    after_context = torch.empty(10, 3)
    assert after_context.storage_offset() == 0 and raw_bytes(after_context).numel() == 120


@pytest.mark.interpreter
def test_a_kernel_writing_past_its_output_writes_into_the_slack_only() -> None:
    @triton.jit
    def _fill(y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.full((BLOCK,), 7.0, tl.float32), mask=offs < n)

    with allocations("plain", padded=True):
        y = torch.empty(100)
        _fill[(2,)](y, 128, BLOCK=64)  # 28 elements past y's end
    assert bool((y == 7.0).all())
    front, after = _slack_of(y)
    assert not bool(front.any())
    tail = after[: after.numel() // 4 * 4].view(torch.float32)
    assert bool((tail[:28] == 7.0).all()) and not bool(tail[28:].any())


@pytest.mark.slow  # the reference's three runs on the interpreter
@pytest.mark.interpreter
def test_a_reference_masking_by_its_inputs_storage_keeps_every_answer_right(tmp_path: Path) -> None:
    """A reference that sizes its store mask from its input's storage writes past its output
    (the input's slack makes the storage larger); its answers stay 2x + 1, an earlier case's
    kept answer is unchanged by the later runs, and the overrun lands in the answer's slack."""
    from judge.reference_habits import expected_and_unwritten

    folder = tmp_path / "TritonBench" / "data" / "TritonBench_G_v1"
    folder.mkdir(parents=True)
    path = folder / "storage_masked.py"
    path.write_text(STORAGE_MASKED)
    (task,) = load_source("geak-eval", tmp_path, vendor="cpu").tasks
    assert task.triton_reference
    answers = []
    for n in (100, 37):
        x = torch.randn(n)
        expected, unwritten = expected_and_unwritten(task, (x,))
        answer = expected[0] if isinstance(expected, (tuple, list)) else expected
        assert unwritten is None
        assert torch.equal(answer, 2.0 * x + 1.0)
        answers.append((answer, answer.clone()))
        _, after = _slack_of(answer)
        written = after[: after.numel() // 4 * 4].view(torch.float32)
        overrun = -(-n // 64) * 64 - n  # to the end of the grid's last block of 64
        assert bool((written[:overrun] == 1.0).all())  # 2 * 0 + 1 past the end
    first, kept = answers[0]
    assert torch.equal(first, kept)
