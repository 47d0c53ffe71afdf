"""judge/candidate/interpreter_support.py: what the CPU interpreter lacks that a correct kernel may use
(autotune, libdevice, bfloat16 arithmetic), and the verdict kind of what it truly cannot run.
Kernels run in this process on CPU tensors: interpreter only."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.cuda import libdevice as cuda_libdevice

from judge.candidate import interpreter_support
from judge.candidate.loading import classify_exception, prepare_process

pytestmark = pytest.mark.interpreter
prepare_process()


@triton.jit
def _bf16_ops(x_ptr, y_ptr, sum_ptr, max_ptr, lt_ptr, int_ptr, row_max_ptr, n, BLOCK: tl.constexpr):
    at = tl.arange(0, BLOCK)
    inside = at < n
    x = tl.load(x_ptr + at, mask=inside, other=0.0)
    y = tl.load(y_ptr + at, mask=inside, other=0.0)
    tl.store(sum_ptr + at, x + y * y - x / 3.0, mask=inside)
    tl.store(max_ptr + at, tl.maximum(x, y), mask=inside)
    tl.store(lt_ptr + at, (x < y).to(tl.int32), mask=inside)
    tl.store(int_ptr + at, x.to(tl.int32), mask=inside)
    tl.store(row_max_ptr, tl.max(tl.where(inside, x, float("-inf")), axis=0))


def test_bfloat16_arithmetic_comparisons_casts_and_reductions_match_torch() -> None:
    """The interpreter holds bfloat16 as raw bits: without the support its add is an integer add."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(100, generator=g) * 4).bfloat16()
    y = (torch.randn(100, generator=g) * 4).bfloat16()
    total, top = torch.empty_like(x), torch.empty_like(x)
    less, whole, row_max = torch.empty(100, dtype=torch.int32), torch.empty(100, dtype=torch.int32), torch.empty(1, dtype=torch.bfloat16)
    _bf16_ops[(1,)](x, y, total, top, less, whole, row_max, 100, BLOCK=128)
    expected = x + y * y - x / 3.0  # torch rounds each bfloat16 operation, as the kernel does
    assert torch.allclose(total.float(), expected.float(), atol=0.0, rtol=2 ** -7)
    assert torch.equal(top, torch.maximum(x, y))
    assert torch.equal(less, (x < y).int())
    assert torch.equal(whole, x.float().trunc().int())
    assert row_max.item() == x.max().item()


def test_float32_rounds_to_bfloat16_to_nearest_even_as_torch_does() -> None:
    values = torch.tensor([1.0, 1.00390625, 1.01171875, -3.3e38, 3.4e38, float("inf"), float("nan"), 1e-40])
    bits = interpreter_support.f32_to_bf16(values.numpy())
    ours = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)
    assert torch.equal(ours[~values.isnan()], values.bfloat16()[~values.isnan()])
    assert ours[values.isnan()].isnan().all()


@triton.jit
def _libdevice_math(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    at = tl.arange(0, BLOCK)
    inside = at < n
    x = tl.load(x_ptr + at, mask=inside, other=0.0)
    y = libdevice.erf(x) + cuda_libdevice.tanh(x) + libdevice.pow(tl.abs(x), 1.5) + libdevice.float2int_rn(x * 3.0).to(tl.float32)
    tl.store(out_ptr + at, y, mask=inside)


def test_libdevice_functions_run_as_numpy_functions() -> None:
    """Both the generic stubs a GPU compiler resolves and the CUDA module's own functions."""
    x = torch.linspace(-3, 3, 100)
    out = torch.empty_like(x)
    _libdevice_math[(1,)](x, out, 100, BLOCK=128)
    expected = torch.erf(x) + torch.tanh(x) + x.abs() ** 1.5 + torch.round(x * 3.0)
    assert torch.allclose(out, expected, atol=1e-5)


@triton.jit
def _bessel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    at = tl.arange(0, BLOCK)
    tl.store(out_ptr + at, libdevice.j0(tl.load(x_ptr + at)))


def test_a_libdevice_function_without_a_counterpart_is_unsupported_not_the_candidates_error() -> None:
    x = torch.ones(16)
    with pytest.raises(Exception) as caught:
        _bessel[(1,)](x, torch.empty_like(x), BLOCK=16)
    assert classify_exception(caught.value) == "unsupported_on_interpreter"
    assert "j0" in str(caught.value.__cause__ or caught.value)


@triton.jit
def _inline_asm(x_ptr, out_ptr, BLOCK: tl.constexpr):
    at = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + at)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(out_ptr + at, y)


def test_the_interpreters_own_not_supported_error_is_unsupported_but_a_candidates_claim_is_not() -> None:
    x = torch.ones(16)
    with pytest.raises(Exception) as caught:
        _inline_asm[(1,)](x, torch.empty_like(x), BLOCK=16)
    assert classify_exception(caught.value) == "unsupported_on_interpreter"
    with pytest.raises(NotImplementedError) as claimed:  # a candidate's own words are its own error
        raise NotImplementedError("tails are not supported in interpreter mode")
    assert classify_exception(claimed.value) == "runtime_error"
    with pytest.raises(interpreter_support.InterpreterUnsupported) as forged:
        raise interpreter_support.InterpreterUnsupported("borrowed class")
    assert classify_exception(forged.value) == "runtime_error"


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 256})], key=["n"])
@triton.jit
def _tuned_double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK >= 128)  # the first configuration cannot compile: a GPU's tuner skips it
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    tl.store(out_ptr + at, tl.load(x_ptr + at, mask=inside) * 2, mask=inside)


def test_autotune_picks_the_first_configuration_that_runs_without_a_gpu() -> None:
    x = torch.randn(1000)
    out = torch.empty_like(x)
    _tuned_double[lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)](x, out, 1000)
    assert torch.equal(out, x * 2)
    assert _tuned_double.best_config.kwargs == {"BLOCK": 256}


@triton.jit
def _bf16_dot_and_scans(a_ptr, b_ptr, c_ptr, sums_ptr, scan_ptr, N: tl.constexpr):
    rows = tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :]
    a = tl.load(a_ptr + rows)
    b = tl.load(b_ptr + rows)
    tl.store(c_ptr + rows, tl.dot(a, b))  # float32 accumulator
    tl.store(sums_ptr + tl.arange(0, N), tl.sum(a, axis=1))
    tl.store(scan_ptr + rows, tl.cumsum(a, axis=1))


def test_bfloat16_dots_sums_and_scans_run_on_values_not_bits() -> None:
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(16, 16, generator=g).bfloat16(), torch.randn(16, 16, generator=g).bfloat16()
    c, sums, scan = torch.empty(16, 16), torch.empty(16, dtype=torch.bfloat16), torch.empty_like(a)
    _bf16_dot_and_scans[(1,)](a, b, c, sums, scan, N=16)
    assert torch.allclose(c, a.float() @ b.float(), atol=1e-4)
    assert torch.allclose(sums.float(), a.float().sum(1), atol=0.05, rtol=2 ** -7)
    assert torch.allclose(scan.float(), a.float().cumsum(1), atol=0.05, rtol=2 ** -7)
