"""Sequences rebuilt with new items keep their type (bench/sequences.py): a suite's namedtuple
output once ended the candidate's process on an H200 (GEAK-eval max_reduction: `type(out)(gen)`
called a namedtuple with one argument)."""

from __future__ import annotations

from collections import namedtuple

import torch

from bench.sequences import same_kind
from judge.candidate.server import held_output
from judge.comparison import to_device

Max = namedtuple("Max", ["values", "indices"])


def test_every_kind_of_sequence_is_rebuilt_as_itself() -> None:
    assert same_kind([1, 2], (x * 2 for x in (1, 2))) == [2, 4]
    assert same_kind((1, 2), iter([3, 4])) == (3, 4)
    got = same_kind(Max(1, 2), [5, 6])
    assert type(got) is Max and got.values == 5 and got.indices == 6
    found = torch.max(torch.tensor([[1.0, 5.0], [7.0, 2.0]]), dim=1)
    again = same_kind(found, [found.values + 1, found.indices])
    assert type(again) is type(found) and torch.equal(again.values, found.values + 1)


def test_a_namedtuple_output_is_held_and_moved_whole() -> None:
    """The candidate process keeps each call's output (`held_output`, copying the parts that
    are the judge's own memory) and the judge moves outputs between devices (`to_device`)."""
    x = torch.arange(6.0).reshape(2, 3)
    out = Max(x, torch.zeros(2, dtype=torch.int64))  # `values` is the input itself: held as a copy
    held = held_output(out, (x,), ())
    assert type(held) is Max and torch.equal(held.values, x) and held.values.data_ptr() != x.data_ptr()
    assert held.indices is out.indices
    moved = to_device(out, "cpu")
    assert type(moved) is Max
