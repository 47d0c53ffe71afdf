"""Reduction tasks: row sum, row max, full-tensor sum, row argmax.

The row kernels loop over blocks of a row; the visible cases fit one block without
padding, so a kernel that forgets to carry across blocks, or pads with the wrong neutral
element, passes visible and fails hidden. Odd seeds shift inputs negative, so padding
with zeros (instead of -inf) changes a max.
"""

from __future__ import annotations

import torch

from bench.builtin._common import (
    ELEMENT_BYTES,
    TALL_ROWS,
    hidden_grid,
    nbytes,
    randn,
    sizes,
    stressed,
    tall_case,
    wide_dtype,
)
from bench.registry import register_task
from bench.task import Case, Mutation, Task, Tolerance, case

FLOATS = ("float32", "float16", "bfloat16")
# Wide rows that are multiples of 256 above 4096 (8448, 4352) too: a float32 fast path taken only
# there, wrong on all-negative rows, passed every other shape. (Four rows on the CPU: two bfloat16 row
# sums 4352 long rounded to one value, which the constant-output check takes for a constant.)
GPU_ROWS = sizes("rows,cols", [(1, 1), (3, 7), (37, 127), (64, 1025), (128, 4096), (17, 8191), (1024, 781), (4, 16411),
                               (48, 8448)])
# Few rows per CPU case (the interpreter's cost is per program), one row past common block caps.
CPU_ROWS = sizes("rows,cols", [(1, 1), (3, 7), (5, 127), (4, 1025), (2, 3001), (2, 10007), (4, 4352)])
GPU_TALL = (tall_case("float32", rows=TALL_ROWS, cols=37),)
SEEDS = range(5)
VISIBLE_ROWS = (case("visible-4x256", "float32", 0, rows=4, cols=256), case("visible-16x1024", "float32", 1, rows=16, cols=1024))


def _rows(c: Case, device: str) -> tuple:
    """Odd seeds all-negative rows (a max padded or started at 0.0 instead of -inf is caught;
    shifted by -6 alone, a row of 10k draws had a dozen positive values); the value profile adds
    ties, far-negative and large rows (bench/builtin/_common.py)."""
    x = randn((c.size("rows"), c.size("cols")), c, device, salt=1, scale=2.0)
    if c.seed % 2 == 1:
        x = -x.abs() - 0.5
    return (stressed(x, c, negative=-10000.0, large=1000.0),)


def _sum_rows(c: Case, device: str) -> tuple:
    """As `_rows`, with shifts a float32 sum of 10k elements still resolves to the tolerance."""
    x = randn((c.size("rows"), c.size("cols")), c, device, salt=1, scale=2.0)
    if c.seed % 2 == 1:
        x = x - 6.0
    return (stressed(x, c, negative=-40.0, large=40.0),)


def _row_bytes(c: Case) -> int:
    return nbytes(c, c.size("rows") * c.size("cols") + c.size("rows"))


register_task(Task(
    id="row_sum",
    category="reduction",
    instruction=(
        "Write a Triton kernel and a Python wrapper `row_sum(x)` returning the sum over the last dimension of a "
        "2-D tensor x (float32, float16 or bfloat16): a 1-D tensor of length rows and x's dtype. Rows may be "
        "longer than one block; accumulate in float32."
    ),
    entry_point="row_sum",
    signature="def row_sum(x: torch.Tensor) -> torch.Tensor",
    reference=lambda x: x.sum(dim=-1),
    make_inputs=_sum_rows,
    dtypes=FLOATS,
    visible=VISIBLE_ROWS,
    hidden_gpu=hidden_grid(GPU_ROWS, FLOATS, cpu=False, strided=True) + GPU_TALL,
    hidden_cpu=hidden_grid(CPU_ROWS, FLOATS, cpu=True, strided=True),
    strided_inputs=True,
    perf=(case("perf-8192x8192", "float16", 0, rows=8192, cols=8192), case("perf-32x1M", "float32", 0, rows=32, cols=1 << 20)),
    baseline_file="row_sum.py",
    difficulty=2,
    bytes_moved=_row_bytes,
    flops=lambda c: c.size("rows") * c.size("cols"),
    tolerances={"float32": Tolerance(atol=1e-3, rtol=1e-4), "float16": Tolerance(atol=1e-2, rtol=1e-2),
                "bfloat16": Tolerance(atol=2e-2, rtol=2e-2)},
    mutations=(
        Mutation("wrong_mask", "mask=cols < n_cols, other=0.0)", "mask=cols < n_cols, other=1.0)",
                 note="pads with ones: right only when the row length is a multiple of the block"),
        Mutation("missing_accumulate", "acc += x.to(tl.float32)", "acc = x.to(tl.float32)",
                 note="keeps only the last block: right only for rows that fit one block"),
        Mutation("wrong_reduction", "total = tl.sum(acc, axis=0)", "total = tl.max(acc, axis=0)"),
        Mutation("tuning", "min(triton.next_power_of_2(n_cols), 1024)", "min(triton.next_power_of_2(n_cols), 2048)", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))


register_task(Task(
    id="row_max",
    category="reduction",
    instruction=(
        "Write a Triton kernel and a Python wrapper `row_max(x)` returning the maximum over the last dimension "
        "of a 2-D tensor x (float32, float16 or bfloat16): a 1-D tensor of length rows and x's dtype. Rows may "
        "be longer than one block and may be entirely negative."
    ),
    entry_point="row_max",
    signature="def row_max(x: torch.Tensor) -> torch.Tensor",
    reference=lambda x: x.amax(dim=-1),
    make_inputs=_rows,
    dtypes=FLOATS,
    visible=VISIBLE_ROWS,
    hidden_gpu=hidden_grid(GPU_ROWS, FLOATS, cpu=False, strided=True) + GPU_TALL,
    hidden_cpu=hidden_grid(CPU_ROWS, FLOATS, cpu=True, strided=True),
    strided_inputs=True,
    perf=(case("perf-8192x8192", "float16", 0, rows=8192, cols=8192),),
    baseline_file="row_max.py",
    difficulty=2,
    bytes_moved=_row_bytes,
    flops=lambda c: c.size("rows") * c.size("cols"),
    mutations=(
        Mutation("wrong_mask", 'mask=cols < n_cols, other=-float("inf"))', "mask=cols < n_cols, other=0.0)",
                 note="pads with zeros: wrong on all-negative rows whose length is not a multiple of the block"),
        Mutation("missing_carry", "acc = tl.maximum(acc, x.to(tl.float32))", "acc = x.to(tl.float32)",
                 note="keeps only the last block: right only for rows that fit one block"),
        Mutation("wrong_init", 'acc = tl.full((BLOCK_SIZE,), -float("inf"), tl.float32)',
                 "acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)"),
        Mutation("wrong_reduction", "best = tl.max(acc, axis=0)", "best = tl.min(acc, axis=0)"),
        Mutation("tuning", "min(triton.next_power_of_2(n_cols), 1024)", "min(triton.next_power_of_2(n_cols), 2048)", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))


def _total_sum_ref(x: torch.Tensor) -> torch.Tensor:
    return x.sum(dtype=wide_dtype(x))


register_task(Task(
    id="total_sum",
    category="reduction",
    instruction=(
        "Write Triton kernel(s) and a Python wrapper `total_sum(x)` returning the sum of all elements of a 1-D "
        "tensor x of any length (float32, float16 or bfloat16) as a 0-dim float32 tensor. Accumulate in "
        "float32; the result must be deterministic (e.g. per-block partial sums, then a second pass)."
    ),
    entry_point="total_sum",
    signature="def total_sum(x: torch.Tensor) -> torch.Tensor",
    reference=_total_sum_ref,
    make_inputs=lambda c, device: (stressed(randn((c.size("n"),), c, device, salt=1), c, negative=-20.0, large=20.0),),
    dtypes=FLOATS,
    visible=(case("visible-n4096", "float32", 0, n=4096), case("visible-n16384", "float32", 1, n=16384)),
    hidden_gpu=hidden_grid([{"n": n} for n in (1, 97, 4097, 131_071, 4_000_037)], FLOATS, cpu=False, strided=True),
    hidden_cpu=hidden_grid([{"n": n} for n in (1, 97, 4097, 10_007)], FLOATS, cpu=True, strided=True),
    strided_inputs=True,
    perf=(case("perf-n64M", "float32", 0, n=1 << 26), case("perf-n64M-bf16", "bfloat16", 0, n=1 << 26)),
    baseline_file="total_sum.py",
    difficulty=2,
    bytes_moved=lambda c: nbytes(c, c.size("n")) + 4,
    flops=lambda c: c.size("n"),
    # The output is float32 whatever the input; summing millions of values in float32 in any order
    # differs from the float64 sum by more than 1e-4 absolute.
    tolerances={"float32": Tolerance(atol=1e-3, rtol=1e-4)},
    # The "deterministic second pass" may be a PyTorch sum over the kernel's per-block partials.
    allowed_torch_ops=("sum",),
    mutations=(
        Mutation("wrong_grid", "n_partials = triton.cdiv(n_elements, BLOCK_SIZE)", "n_partials = n_elements // BLOCK_SIZE",
                 note="drops the tail block: right only for lengths that are multiples of the block"),
        Mutation("wrong_mask", "mask=offsets < n_elements, other=0.0)", "mask=offsets < n_elements, other=1.0)",
                 note="pads with ones: right only for lengths that are multiples of the block"),
        Mutation("wrong_reduction", "tl.store(partial_ptr + pid, tl.sum(x, axis=0))", "tl.store(partial_ptr + pid, tl.max(x, axis=0))"),
        Mutation("tuning", "BLOCK_SIZE = 4096", "BLOCK_SIZE = 8192", breaks=False),
        Mutation("tuning", "BLOCK_SIZE=BLOCK_SIZE, num_warps=8)", "BLOCK_SIZE=BLOCK_SIZE, num_warps=4)", breaks=False),
    ),
))


register_task(Task(
    id="argmax",
    category="reduction",
    instruction=(
        "Write a Triton kernel and a Python wrapper `argmax(x)` returning, for each row of a 2-D tensor x "
        "(float32, float16 or bfloat16), the index of its maximum over the last dimension as an int64 tensor "
        "of length rows. On ties return the first index (as torch.argmax does). Rows may be longer than one "
        "block and may be entirely negative."
    ),
    entry_point="argmax",
    signature="def argmax(x: torch.Tensor) -> torch.Tensor",
    reference=lambda x: x.argmax(dim=-1),
    make_inputs=_rows,
    dtypes=FLOATS,
    visible=VISIBLE_ROWS,
    hidden_gpu=hidden_grid(GPU_ROWS, FLOATS, cpu=False, strided=True) + GPU_TALL,
    hidden_cpu=hidden_grid(CPU_ROWS, FLOATS, cpu=True, strided=True),
    strided_inputs=True,
    perf=(case("perf-8192x8192", "float16", 0, rows=8192, cols=8192),),
    baseline_file="argmax.py",
    difficulty=3,
    bytes_moved=lambda c: nbytes(c, c.size("rows") * c.size("cols")) + ELEMENT_BYTES["int64"] * c.size("rows"),
    flops=lambda c: c.size("rows") * c.size("cols"),
    mutations=(
        Mutation("missing_offset", "best_idx = tl.where(better, start + i, best_idx)", "best_idx = tl.where(better, i, best_idx)",
                 note="index within the block, not the row: right only for rows that fit one block"),
        Mutation("wrong_mask", 'mask=cols < n_cols, other=-float("inf"))', "mask=cols < n_cols, other=0.0)",
                 note="pads with zeros: wrong on all-negative rows whose length is not a multiple of the block"),
        Mutation("wrong_reduction", "i = tl.argmax(x, axis=0)", "i = tl.argmin(x, axis=0)"),
        Mutation("tuning", "min(triton.next_power_of_2(n_cols), 1024)", "min(triton.next_power_of_2(n_cols), 2048)", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))
