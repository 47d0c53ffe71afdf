"""A perf script's inputs over the adapter's size cap are never made (bench/adapters/_oversize.py):
TritonBench's scripts make their whole size sweep on the CPU before any input is used, and
most of what they made was thrown away. The inputs kept are the same shapes as a plain run's,
always real tensors, and a script that cannot run so is run the plain way."""

from __future__ import annotations

from typing import Any

import torch

from bench.adapters._oversize import holds_meta, skipping_oversize
from bench.adapters.geak_calls import _made_inputs, _perf_elements

CAP = 1 << 15


class _Sweep:
    """dropout_triton's pattern: every size of the sweep made at once, a mask derived from each."""

    def __init__(self) -> None:
        self.input_tensors: list[Any] = []
        self.made_real_over_cap = 0

    def get_input_tensors(self) -> None:
        self.input_tensors = []
        for i in range(10, 18):
            x = torch.rand(2 ** i, dtype=torch.float16)
            keep = torch.rand(2 ** i) > 0.5
            self.made_real_over_cap += int(not x.is_meta and x.numel() > CAP)
            self.input_tensors.append((x, keep))


def _shapes(inputs: list[Any]) -> list[list[tuple[int, ...]]]:
    return [[tuple(t.shape) for t in x] for x in inputs if _perf_elements(x) <= CAP]


def test_inputs_over_the_cap_are_never_made_and_the_kept_ones_are_a_plain_runs_shapes() -> None:
    plain = _Sweep()
    plain.get_input_tensors()
    assert plain.made_real_over_cap == 2

    sweep = _Sweep()
    kept = _made_inputs(sweep, CAP)
    assert sweep.made_real_over_cap == 0, "no tensor over the cap got storage"
    assert _shapes(kept) == _shapes(plain.input_tensors) and len(_shapes(kept)) == 5
    assert not any(holds_meta(x) for x in kept if _perf_elements(x) <= CAP)
    assert [holds_meta(x) for x in kept] == [max(t.numel() for t in x) > CAP for x in kept]


def test_a_small_input_cut_from_a_large_tensor_is_made_the_plain_way() -> None:
    class Sliced:
        def get_input_tensors(self) -> None:
            whole = torch.rand(CAP * 4)
            self.input_tensors = [(whole[:64],), (torch.rand(8),)]

    mode = skipping_oversize(CAP)
    with mode:
        Sliced().get_input_tensors()
    assert mode.skipped == 1, "the mode alone would leave the cut input without storage"
    kept = _made_inputs(Sliced(), CAP)
    assert [tuple(x[0].shape) for x in kept] == [(64,), (8,)]
    assert not any(holds_meta(x) for x in kept)


def test_a_script_that_mixes_a_skipped_tensor_with_real_ones_is_run_the_plain_way() -> None:
    class Mixing:
        def get_input_tensors(self) -> None:
            big = torch.rand(CAP * 2)
            total = float((big + torch.ones(CAP * 2, device="cpu").numpy().sum()).sum())  # needs real data
            self.input_tensors = [(torch.full((4,), total),)]

    kept = _made_inputs(Mixing(), CAP)
    assert len(kept) == 1 and not holds_meta(kept) and float(kept[0][0][0]) > CAP
