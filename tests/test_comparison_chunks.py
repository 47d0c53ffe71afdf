"""judge/comparison.py's PyTorch path compares a large output in chunks (`COMPARE_CHUNK`) so its
float64 temporaries stay bounded. The chunks must change nothing: the twelve numbers, the counts
and the first failing element, hence every verdict's message, are those of the whole output at
once; here the chunk is forced down to a few elements against outputs the default compares in one."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from bench.registry import get_task
from judge import comparison, fused_compare
from judge.comparison import Mismatch, compare, torch_summary


def _outcome(out: torch.Tensor, expected: torch.Tensor) -> Any:
    try:
        return compare(out, expected, get_task("vector_add"))
    except Mismatch as exc:
        return (str(exc), exc.max_abs, exc.max_rel)


def _cases() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(3)
    e = torch.randn(1000, generator=g)
    cases = [("equal", e.clone(), e), ("close", e + 1e-7, e)]
    late = e.clone()
    late[[611, 900]] += 1.0  # wrong only in later chunks
    cases.append(("wrong late", late, e))
    nan_out = e.clone()
    nan_out[[5, 777]] = float("nan")
    cases.append(("NaN where finite", nan_out, e))
    special = e.clone()
    special[[10, 500]] = float("inf")
    cases.append(("infinity reproduced", special.clone(), special))
    missed = special.clone()
    missed[500] = 1.0
    cases.append(("infinity missed", missed, special))
    ramp = torch.linspace(-1, 1, 999)
    cases.append(("constant where it varies", torch.zeros(999), ramp))
    cases.append(("2-D, strided", (e + 1e-7).reshape(40, 25).t(), e.reshape(40, 25).t()))
    cases.append(("half", e.half() + 1, e.half()))
    cases.append(("int", torch.arange(300), torch.arange(300).flip(0)))
    return cases


@pytest.mark.parametrize("name", [c[0] for c in _cases()])
def test_chunks_give_the_whole_outputs_numbers_and_message(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _, out, expected = next(c for c in _cases() if c[0] == name)
    monkeypatch.setattr(fused_compare, "summary", lambda *a: None)  # the PyTorch path, whatever the device
    whole_summary, whole = torch_summary(out, expected, 1e-5, 1e-5), _outcome(out, expected)
    monkeypatch.setattr(comparison, "COMPARE_CHUNK", 7)
    chunked_summary, chunked = torch_summary(out, expected, 1e-5, 1e-5), _outcome(out, expected)
    assert fused_compare._same(chunked_summary, whole_summary), (chunked_summary, whole_summary)
    assert chunked == whole


@pytest.mark.parametrize("chunk", [7, 1 << 24])
def test_the_first_failure_is_found_in_whichever_chunk_it_lies(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comparison, "COMPARE_CHUNK", chunk)
    e = torch.zeros(100)
    for where in (0, 6, 7, 63, 99):
        o = e.clone()
        o[where] = 1.0
        o[99] = 1.0
        with pytest.raises(Mismatch, match=rf"{2 if where != 99 else 1}/100 elements .* first at flat index {where}:"):
            compare(o, e, get_task("vector_add"))
