"""The two checks the candidate process makes of itself since only output arguments travel
back (judge/candidate/server.py): inputs a call changed (against copies taken before it), and outputs
changed after their call returned (a buffer reused by a later call). And the page-locked
arenas' round trip on a GPU (judge/candidate/wire.py)."""

from __future__ import annotations

import socket

import pytest
import torch

from judge.candidate import wire
from judge.candidate.bit_equality import BitCopy, Digest, flat_tensors
from judge.candidate.server import HeldCall, HeldOutputs, changed_calls, changed_inputs, input_copies


def test_an_input_changed_in_place_is_named_by_its_place_among_the_tensors() -> None:
    x, y, out = torch.arange(4.0), torch.ones(3), torch.zeros(3)
    args = (x, 2.5, y, out)
    before = input_copies(args, written=(3,))
    y[1] = 7.0
    out.fill_(1.0)  # an output argument: written by design
    assert changed_inputs(before, args) == [1]  # y is the second tensor; the scalar is not counted


def test_values_written_back_unchanged_are_not_a_change() -> None:
    x = torch.tensor([1.0, float("nan"), 3.0])
    args = (x,)
    before = input_copies(args, written=())
    x.copy_(x.clone())  # read and written back as it was, NaN included
    assert changed_inputs(before, args) == []
    x[2] = 4.0
    assert changed_inputs(before, args) == [0]


def test_an_output_buffer_reused_by_a_later_call_shows_at_the_end_of_the_set() -> None:
    buffer = torch.zeros(4)
    first = torch.ones(4)
    held = [HeldCall.of(buffer, (first,), ()), HeldCall.of(torch.full((4,), 2.0), (first,), ())]
    assert changed_calls(held) == []
    buffer.fill_(9.0)  # the next call wrote its result into the same tensor
    assert changed_calls(held) == [0]


@pytest.mark.parametrize("budget", [0, 1 << 20])
def test_a_reused_buffer_shows_whether_outputs_are_held_as_copies_or_fingerprints(budget: int) -> None:
    held = HeldOutputs(copy_budget=budget)
    buffer = torch.zeros(4)
    held.add(buffer, (torch.ones(4),), ())
    held.add(torch.full((4,), 2.0), (torch.ones(4),), ())
    kind = BitCopy if budget else Digest
    assert all(isinstance(h.as_returned, kind) for h in held.calls)
    buffer[3] = -0.0  # the sign of a zero is a change too
    assert held.take() == (2, [0])
    assert held.take() == (0, [])  # nothing held after the judge asked


def test_outputs_past_the_copy_budget_are_held_as_fingerprints() -> None:
    held = HeldOutputs(copy_budget=40)  # room for two outputs of 16 bytes, not three
    outs = [torch.full((4,), float(i)) for i in range(3)]
    for out in outs:
        held.add(out, (), ())
    assert [type(h.as_returned) for h in held.calls] == [BitCopy, BitCopy, Digest]
    outs[2][0] = float("nan")
    outs[1].view(torch.int32)[1] += 1  # one bit of one element
    assert held.take() == (3, [1, 2])


def test_a_copied_output_reshaped_or_retyped_in_place_is_a_change() -> None:
    held = HeldOutputs()
    out = torch.zeros(2, 3)
    held.add(out, (), ())
    out.resize_(3, 2)  # same bits, another shape
    assert held.take() == (1, [0])


def test_an_output_in_memory_the_judge_refills_is_kept_as_a_copy() -> None:
    x = torch.arange(3.0)
    held = [HeldCall.of(x, (x,), (0,))]  # returned its own output argument
    x.fill_(-1.0)  # the judge refills its arguments for the next call
    assert changed_calls(held) == []


def test_the_held_fingerprint_keeps_no_tensor() -> None:
    """The end-of-set check keeps the output itself and numbers, no second copy of its memory."""
    out = torch.randn(64)
    held = HeldCall.of(out, (torch.ones(64),), ())
    assert held.output is out
    assert not flat_tensors(held.as_returned.sums) and not flat_tensors(held.as_returned.layout)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8,
                                   torch.uint8, torch.int32, torch.int64, torch.bool, torch.complex64])
def test_the_fingerprint_sees_any_one_element_changed_and_any_swap(dtype: torch.dtype, device: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Every single-element change (a sign of zero, a NaN's payload, one bit) and every swap of two
    unequal elements changes `bits_digest`, also across the chunks it sums in and on views."""
    from judge.candidate import bit_equality

    monkeypatch.setattr(bit_equality, "_DIGEST_CHUNK", 7)  # several chunks, one of them partial
    gen = torch.Generator().manual_seed(3)
    base = (torch.randn(5, 9, generator=gen) * 50).to(dtype) if dtype != torch.bool else \
        torch.rand(5, 9, generator=gen) > 0.5
    base = base.to(device)
    words = bit_equality.as_bits(torch.view_as_real(base) if base.is_complex() else base).reshape(-1)
    for value in (base, base.t()):  # contiguous, and a transposed view
        digest = bit_equality.bits_digest(value)
        assert bit_equality.same_digest(digest, value.clone())
        flat = bit_equality.as_bits(torch.view_as_real(value) if value.is_complex() else value).reshape(-1)
        for i in range(0, flat.numel(), 5):
            changed = value.clone(memory_format=torch.contiguous_format)  # the same fingerprint
            view = bit_equality.as_bits(torch.view_as_real(changed) if changed.is_complex() else changed)
            if dtype == torch.bool:
                changed.view(-1)[i % changed.numel()] ^= True
            else:
                view.view(-1)[i] ^= 1  # the lowest bit of one element
            assert not bit_equality.same_digest(digest, changed), (dtype, i)
        j = next(k for k in range(1, flat.numel()) if flat[k] != flat[0])
        swapped = value.clone(memory_format=torch.contiguous_format)
        view = bit_equality.as_bits(torch.view_as_real(swapped) if swapped.is_complex() else swapped).reshape(-1) \
            if dtype != torch.bool else swapped.view(-1)
        first, other = view[0].clone(), view[j].clone()
        view[0], view[j] = other, first
        assert not bit_equality.same_digest(digest, swapped), dtype
    assert words.numel() > 7


def test_the_fingerprint_tells_shapes_dtypes_and_signs_of_zero_apart() -> None:
    from judge.candidate.bit_equality import bits_digest

    assert bits_digest(torch.zeros(4)) != bits_digest(torch.zeros(2, 2))
    assert bits_digest(torch.zeros(4)) != bits_digest(torch.zeros(4, dtype=torch.int32))
    assert bits_digest(torch.tensor([0.0])) != bits_digest(torch.tensor([-0.0]))
    nan = torch.tensor([float("nan")])
    other_nan = nan.view(torch.int32).add(1).view(torch.float32)
    assert bits_digest(nan) != bits_digest(other_nan)
    assert bits_digest((torch.ones(2), torch.zeros(2))) != bits_digest((torch.zeros(2), torch.ones(2)))


@pytest.mark.gpu
def test_page_locked_arenas_carry_gpu_tensors_both_ways() -> None:
    torch.cuda.init()  # skipped without a GPU by the `gpu` mark (tests/conftest.py)
    a, b = socket.socketpair()
    left, right = wire.Link(a, pin=True), wire.Link(b, pin=True)
    try:
        sent = torch.randn(1 << 20, device="cuda")
        left.send({"op": "x"}, [sent, sent[::2]])
        header, got = right.recv("cuda")
        assert header["op"] == "x" and torch.equal(got[0], sent) and torch.equal(got[1], sent[::2])
        assert left._out is not None and left._out.pinned, "the sender's arena was not page-locked"
        assert right._in is not None and right._in.pinned, "the receiver's mapping was not page-locked"
        right.send({"op": "y"}, [got[0] * 2])
        _, back = left.recv("cuda")
        assert torch.equal(back[0], sent * 2)
    finally:
        left.close()
        right.close()
        a.close()
        b.close()


def test_a_steps_slow_calls_are_counted_apart_from_its_steady_ones() -> None:
    """judge/candidate/server.py `steady_and_slow` (scripts/judge_profile.py --spans): the median call
    times the calls, and the sum of the calls over `SLOW_CALL` medians (first loads)."""
    from judge.candidate.server import SLOW_CALL, steady_and_slow

    seconds = [0.001] * 9 + [0.001 * SLOW_CALL * 2, 0.001 * SLOW_CALL]  # one slow call; one at the bound is not
    split = steady_and_slow({"call:run": seconds})
    assert split["call:run:steady"] == pytest.approx(0.001 * 11)
    assert split["call:run:slow"] == pytest.approx(0.001 * SLOW_CALL * 2)
