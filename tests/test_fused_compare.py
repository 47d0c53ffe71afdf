"""The comparison's fused kernel (judge/fused_compare.py) against its PyTorch path
(judge/comparison.py `torch_summary`), run here through Triton's interpreter: the same twelve
numbers, bit for bit, on crafted and random outputs of every real dtype the judge compares,
NaN and infinities included; `compare` decides alike on either path; and the fused path stays
off wherever its self-check cannot pass (no GPU, a kernel that disagrees)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from judge import comparison, fused_compare
from judge.comparison import Mismatch, torch_summary

# The interpreter runs the kernel in numpy, which warns where the kernel takes inf - inf on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


@pytest.mark.interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64,
                                   torch.int8, torch.bool])
def test_the_kernel_passes_its_own_self_check_on_the_interpreter(dtype: torch.dtype) -> None:
    assert fused_compare.self_check("cpu", dtype) == ""


@pytest.mark.interpreter
@pytest.mark.slow  # seconds: the fast subset stays under two minutes
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32])
def test_random_outputs_give_the_same_numbers_both_ways(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(len(str(dtype)))
    for trial in range(12):
        n = int(torch.randint(1, 5000, (1,), generator=g))
        e = (torch.randn(n, generator=g) * 10 ** float(torch.randint(-3, 4, (1,), generator=g))).to(dtype)
        noise = torch.randn(n, generator=g, dtype=torch.float64) * 10 ** float(torch.randint(-6, 0, (1,), generator=g))
        o = (e.double() + noise).to(dtype)
        if dtype.is_floating_point and trial % 3:
            for t in (e, o):
                where = torch.randint(0, n, (max(1, n // 50),), generator=g)
                t[where] = (float("nan"), float("inf"), float("-inf"))[trial % 3]
        atol, rtol = (1e-3, 1e-3) if dtype.is_floating_point else (0.0, 0.0)
        fused = fused_compare.fused_summary(o, e, atol, rtol)
        plain = torch_summary(o, e, atol, rtol)
        assert fused_compare._same(fused, plain), (dtype, trial, fused, plain)


@pytest.mark.interpreter
def test_a_disagreeing_kernel_or_a_missing_device_keeps_the_pytorch_path(monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: Any) -> None:
    real = fused_compare.fused_summary

    def off_by_a_little(*args: Any) -> list[float]:
        values = real(*args)
        values[5] = values[5] * (1 + 1e-15) + 1e-300  # one ulp-ish change to max_abs
        return values

    monkeypatch.setattr(fused_compare, "fused_summary", off_by_a_little)
    assert "close" in fused_compare.self_check("cpu", torch.float32)  # names the crafted case that differed
    monkeypatch.setattr(fused_compare, "_STATE", {})
    if not torch.cuda.is_available():
        fused_compare.prepare("cuda")  # no device: each check fails, and the path stays off
        assert fused_compare._trusted(torch.device("cuda"), torch.float32) is False
        assert capsys.readouterr().err.count("fused comparison is off") == len(fused_compare.PREPARED)
    cpu = torch.zeros(3)
    assert fused_compare.usable(cpu, cpu) is False  # never on the CPU
    monkeypatch.setenv(fused_compare.FUSED_ENV, "0")
    assert fused_compare.usable(cpu, cpu) is False


def _outcome(out: torch.Tensor, expected: torch.Tensor) -> tuple[Any, ...]:
    from bench.registry import get_task

    task = get_task("vector_add")
    try:
        return ("pass", *comparison.compare(out, expected, task))
    except Mismatch as m:
        return ("fail", str(m), m.max_abs, m.max_rel)


@pytest.mark.interpreter
def test_compare_decides_alike_on_either_path(monkeypatch: pytest.MonkeyPatch) -> None:
    e = torch.linspace(-3, 3, 2500)
    cases = {
        "close": e + 1e-7,
        "outside": e + torch.where(torch.arange(2500) == 1234, 1.0, 0.0),
        "nan": torch.where(torch.arange(2500) == 7, float("nan"), e),
    }
    pairs = {name: (o, e) for name, o in cases.items()}
    # within tolerance everywhere (rtol at 1000 is 0.1), yet constant where the reference varies
    pairs["constant"] = (torch.full((2500,), 1000.05), torch.linspace(1000.0, 1000.1, 2500))
    plain = {name: _outcome(o, x) for name, (o, x) in pairs.items()}
    monkeypatch.setattr(fused_compare, "usable", lambda out, expected: True)
    fused = {name: _outcome(o, x) for name, (o, x) in pairs.items()}
    assert fused == plain
    assert plain["close"][0] == "pass" and plain["outside"][0] == "fail" and "constant" in plain["constant"][1]


@pytest.mark.gpu
def test_on_a_gpu_the_kernel_passes_its_self_check_and_the_judge_uses_it() -> None:
    """Where the judge would use it: compiled for the GPU, the same numbers as PyTorch there."""
    for dtype in (*fused_compare.PREPARED, torch.float64, torch.int32, torch.bool):
        assert fused_compare.self_check("cuda", dtype) == ""
    x = torch.randn(100_003, device="cuda")
    assert fused_compare.usable(x, x)
    assert fused_compare._same(fused_compare.fused_summary(x + 1e-6, x, 1e-5, 1e-5), torch_summary(x + 1e-6, x, 1e-5, 1e-5))
