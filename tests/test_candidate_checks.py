"""The two checks the candidate process makes of itself since only output arguments travel
back (judge/candidate.py): inputs a call changed (against copies taken before it), and outputs
changed after their call returned (a buffer reused by a later call). And the page-locked
arenas' round trip on a GPU (judge/wire.py)."""

from __future__ import annotations

import socket

import pytest
import torch

from judge import wire
from judge.candidate import HeldCall, changed_calls, changed_inputs, input_copies


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


def test_an_output_in_memory_the_judge_refills_is_kept_as_a_copy() -> None:
    x = torch.arange(3.0)
    held = [HeldCall.of(x, (x,), (0,))]  # returned its own output argument
    x.fill_(-1.0)  # the judge refills its arguments for the next call
    assert changed_calls(held) == []


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
