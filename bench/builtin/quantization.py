"""Row-wise int8 quantisation and its inverse.

Rounding: the reference rounds half to even in float64. A kernel computing x / scale in
float32 (and perhaps rounding half up) can land one step away only where x / scale is a
round-half tie, within float32's error of one: there either neighbour is accepted
(`RoundingTiesTask`); everywhere else q must be exact (int8 compares with atol=0), so a
kernel that truncates instead of rounding fails on about half the elements. Per-row scales
are float32 and compared at the float32 tolerance, which catches a wrong scale even where
the int8 values happen to agree.
"""

from __future__ import annotations

from typing import Any

import torch

from bench.builtin._common import (
    ELEMENT_BYTES,
    TALL_ROWS,
    hidden_grid,
    nbytes,
    randint,
    randn,
    sizes,
    tall_case,
    value_profile,
    wide_dtype,
)
from bench.registry import register_task
from bench.sequences import same_kind
from bench.task import Case, Mutation, Task, case

FLOATS = ("float32", "float16", "bfloat16")
TIE_WINDOW = 1e-3
"""How close to k + 0.5 (in quantisation steps) the exact x / scale must be for either neighbour
to pass: float32 arithmetic (a float32 scale, then a division or a multiply by its inverse)
is off by at most a few 1e-5 steps at |q| <= 127, so this is generous, and it covers about
0.2% of randomly drawn elements."""
TIE_AMAX = 63.5
"""The row maximum of the "ties" profile: scale = 63.5 / 127 = 0.5 exactly in float32 and float64,
so inputs on a grid of 0.25 put x / scale exactly on half-integers, half of them ties."""


def _quantize_ref(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.to(wide_dtype(x))
    scale = xf.abs().amax(dim=-1).clamp_min(1e-8) / 127.0
    q = torch.round(xf / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


def rounding_ties(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(tie mask, exact q) for a 2-D `x`: where x / scale, computed in float64, lies within
    `TIE_WINDOW` of a half-integer, and the reference's q (round half to even) everywhere."""
    xf = x.to(torch.float64)
    scale = xf.abs().amax(dim=-1).clamp_min(1e-8) / 127.0
    v = xf / scale[:, None]
    frac = v.abs() - v.abs().floor()
    return (frac - 0.5).abs() <= TIE_WINDOW, torch.round(v).clamp(-127, 127)


class RoundingTiesTask(Task):
    """quantize_int8 judged exactly except at round-half ties: a candidate's q one step from the
    reference's only where the exact x / scale is a tie (`rounding_ties`) is taken for the
    reference's value before the comparison. Why not a tolerance: atol=1 on every element let a
    quantiser that truncates pass with half its values off; the rounding rule is only ambiguous
    at ties, so only they get slack."""

    def judged_output(self, returned: Any, args: tuple, case: Case) -> Any:
        if not (isinstance(returned, (tuple, list)) and len(returned) == 2 and args
                and isinstance(returned[0], torch.Tensor) and isinstance(args[0], torch.Tensor)):
            return returned  # the comparison reports what is wrong with it
        q, x = returned[0], args[0]
        if q.dtype != torch.int8 or q.shape != x.shape or x.dim() != 2 or q.device != x.device:
            return returned
        ties, exact = rounding_ties(x)
        q64 = q.to(torch.float64)
        snapped = torch.where(ties & ((q64 - exact).abs() <= 1), exact, q64).to(torch.int8)
        return same_kind(returned, (snapped, returned[1]))


def _quantize_inputs(c: Case, device: str) -> tuple:
    """Plain draws; the "ties" seed on a grid where x / scale is exactly a half-integer (either
    rounding of a tie passes, nothing else does); every fifth seed an outlier at the end of each
    row (the row max must see the last block)."""
    x = randn((c.size("rows"), c.size("cols")), c, device, salt=1, scale=2.0)
    if value_profile(c) == "ties":
        x = (torch.round(x.float() * 4.0) / 4.0).clamp(-TIE_AMAX, TIE_AMAX)
        x[:, -1] = TIE_AMAX
        x = x.to(getattr(torch, c.dtype))
    if c.seed % 5 == 4:
        x[:, -1] = x[:, -1] * 50.0
    return (x,)


register_task(RoundingTiesTask(
    id="quantize_int8",
    category="quantization",
    instruction=(
        "Write a Triton kernel and a Python wrapper `quantize_int8(x)` quantising each row of a 2-D tensor x "
        "(float32, float16 or bfloat16; rows of any length, possibly longer than one block) to int8: "
        "scale = max(|x[row]|, 1e-8) / 127 in float32, q = round(x / scale) clamped to [-127, 127]. Return "
        "(q, scale): q int8 of x's shape, scale float32 of length rows. q must equal round(x / scale) "
        "exactly, except that where x / scale is half-way between two integers either of them is accepted."
    ),
    entry_point="quantize_int8",
    signature="def quantize_int8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]",
    reference=_quantize_ref,
    make_inputs=_quantize_inputs,
    dtypes=FLOATS,
    visible=(case("visible-4x256", "float32", 0, rows=4, cols=256), case("visible-16x1024", "float32", 1, rows=16, cols=1024)),
    hidden_gpu=hidden_grid(sizes("rows,cols", [(1, 1), (3, 7), (37, 1025), (64, 4099), (128, 14336), (4096, 4096)]),
                         FLOATS, cpu=False, strided=True) + (tall_case("float32", rows=TALL_ROWS, cols=37),),
    hidden_cpu=hidden_grid(sizes("rows,cols", [(1, 1), (3, 7), (4, 1025), (2, 3001)]), FLOATS, cpu=True, strided=True),
    perf=(case("perf-8192x8192", "bfloat16", 0, rows=8192, cols=8192),),
    strided_inputs=True,
    baseline_file="quantize_int8.py",
    difficulty=2,
    bytes_moved=lambda c: nbytes(c, c.size("rows") * c.size("cols")) + c.size("rows") * (c.size("cols") + 4),
    flops=lambda c: 4 * c.size("rows") * c.size("cols"),
    mutations=(
        Mutation("missing_carry", "amax = tl.maximum(amax, tl.max(tl.abs(x), axis=0))", "amax = tl.max(tl.abs(x), axis=0)",
                 note="the row max of the last block only: right only for rows that fit one block"),
        Mutation("wrong_divisor", "scale = tl.maximum(amax, 1e-8) / 127.0", "scale = tl.maximum(amax, 1e-8) / 128.0",
                 note="the scales are off by 0.8%, and q by one step wherever that moves x / scale past a half"),
        Mutation("wrong_clamp", "q = tl.minimum(tl.maximum(q, -127.0), 127.0)", "q = tl.minimum(tl.maximum(q, 0.0), 127.0)"),
        Mutation("wrong_scale_output", "tl.store(scale_ptr + row, scale)", "tl.store(scale_ptr + row, amax)"),
        Mutation("tuning", "BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))


def _dequantize_inputs(c: Case, device: str) -> tuple:
    rows, cols = c.size("rows"), c.size("cols")
    q = randint(-127, 128, (rows, cols), c, device, salt=1, dtype=torch.int8)
    scale = randn((rows,), c, device, salt=2, dtype="float32").abs() * 0.02 + 1e-3
    return (q, scale.to(getattr(torch, c.dtype)))


register_task(Task(
    id="dequantize_int8",
    category="quantization",
    instruction=(
        "Write a Triton kernel and a Python wrapper `dequantize_int8(q, scale)` returning q * scale[:, None] for "
        "an int8 tensor q of shape (rows, cols) and per-row scales of length rows in float32, float16 or "
        "bfloat16; the output has q's shape and scale's dtype. cols is arbitrary."
    ),
    entry_point="dequantize_int8",
    signature="def dequantize_int8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor",
    reference=lambda q, scale: q.to(scale.dtype) * scale[:, None],
    make_inputs=_dequantize_inputs,
    dtypes=FLOATS,
    visible=(case("visible-4x1024", "float32", 0, rows=4, cols=1024), case("visible-16x2048", "float32", 1, rows=16, cols=2048)),
    hidden_gpu=hidden_grid(sizes("rows,cols", [(1, 1), (3, 7), (37, 1025), (64, 4099), (4096, 14336)]), FLOATS, cpu=False)
               + (tall_case("float32", rows=TALL_ROWS, cols=37),),
    hidden_cpu=hidden_grid(sizes("rows,cols", [(1, 1), (3, 7), (4, 1025), (2, 3001)]), FLOATS, cpu=True),
    perf=(case("perf-8192x8192", "bfloat16", 0, rows=8192, cols=8192),),
    baseline_file="dequantize_int8.py",
    difficulty=1,
    bytes_moved=lambda c: c.size("rows") * c.size("cols") * (1 + ELEMENT_BYTES[c.dtype]) + nbytes(c, c.size("rows")),
    flops=lambda c: c.size("rows") * c.size("cols"),
    mutations=(
        Mutation("wrong_grid", "grid = (n_rows, triton.cdiv(n_cols, BLOCK_SIZE))", "grid = (n_rows, n_cols // BLOCK_SIZE)",
                 note="drops the tail block: right only when cols is a multiple of the block"),
        Mutation("unsigned_load", "other=0).to(tl.float32)", "other=0).to(tl.uint8).to(tl.float32)",
                 note="reads int8 as unsigned: negative values become 256 - |q|"),
        Mutation("wrong_scale_row", "s = tl.load(scale_ptr + row)", "s = tl.load(scale_ptr)"),
        Mutation("missing_scale", "y = q * s", "y = q"),
        Mutation("tuning", "BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))
