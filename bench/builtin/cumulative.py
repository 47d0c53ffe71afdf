"""Scans beyond cumsum (which lives in scans.py): cumulative product and cumulative max.

Rows are longer than one block in the hidden cases, so the carry between blocks is
tested; visible rows fit one block, as in most public tests.
"""

from __future__ import annotations

import torch

from bench.builtin._common import TALL_ROWS, hidden_grid, nbytes, randn, sizes, tall_case
from bench.registry import register_task
from bench.task import Case, Mutation, Task, Tolerance, case

GPU_ROWS = sizes("rows,cols", [(1, 1), (3, 7), (37, 1025), (64, 4099), (512, 8192)])
CPU_ROWS = sizes("rows,cols", [(1, 1), (3, 7), (4, 1025), (2, 3001)])
GPU_TALL = (tall_case("float32", rows=TALL_ROWS, cols=37),)
VISIBLE = (case("visible-4x256", "float32", 0, rows=4, cols=256), case("visible-8x1024", "float32", 1, rows=8, cols=1024))


def _cumprod_inputs(c: Case, device: str) -> tuple:
    # Factors near 1 keep long products inside float32's range; every fifth seed flips signs too.
    x = 1.0 + randn((c.size("rows"), c.size("cols")), c, device, salt=1, scale=0.05, dtype="float32")
    if c.seed % 5 == 4:
        x = x * torch.where(randn(tuple(x.shape), c, device, salt=2, dtype="float32") > 0, 1.0, -1.0)
    return (x.to(getattr(torch, c.dtype)),)


register_task(Task(
    id="cumprod",
    category="scan",
    instruction=(
        "Write a Triton kernel and a Python wrapper `cumprod(x)` computing the inclusive cumulative product "
        "along the last dimension of a 2-D float32 tensor (rows of any length, possibly longer than one "
        "block); same shape and dtype as x."
    ),
    entry_point="cumprod",
    signature="def cumprod(x: torch.Tensor) -> torch.Tensor",
    reference=lambda x: x.cumprod(dim=-1),
    make_inputs=_cumprod_inputs,
    dtypes=("float32",),
    visible=VISIBLE,
    hidden_gpu=hidden_grid(GPU_ROWS, ("float32",), cpu=False, strided=True) + GPU_TALL,
    hidden_cpu=hidden_grid(CPU_ROWS, ("float32",), cpu=True, strided=True),
    perf=(case("perf-4096x4096", "float32", 0, rows=4096, cols=4096),),
    strided_inputs=True,
    baseline_file="cumprod.py",
    difficulty=3,
    bytes_moved=lambda c: 2 * nbytes(c, c.size("rows") * c.size("cols")),
    flops=lambda c: c.size("rows") * c.size("cols"),
    # Products of thousands of factors carry a relative error that grows with the row length.
    tolerances={"float32": Tolerance(atol=1e-6, rtol=1e-3)},
    mutations=(
        Mutation("missing_carry", "y = p * carry", "y = p",
                 note="forgets earlier blocks: right only for rows that fit one block"),
        Mutation("wrong_carry", "carry = carry * tl.sum(", "carry = 1.0 * tl.sum(",
                 note="carries only the previous block: right for rows of at most two blocks"),
        Mutation("exclusive_scan", "y = p * carry", "y = p / x * carry"),
        Mutation("tuning", "BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))


register_task(Task(
    id="cummax",
    category="scan",
    instruction=(
        "Write a Triton kernel and a Python wrapper `cummax(x)` returning the running maximum along the last "
        "dimension of a 2-D tensor (float32 or float16), i.e. torch.cummax(x, dim=-1).values; rows of any "
        "length, possibly longer than one block; same shape and dtype as x."
    ),
    entry_point="cummax",
    signature="def cummax(x: torch.Tensor) -> torch.Tensor",
    reference=lambda x: torch.cummax(x, dim=-1).values,
    make_inputs=lambda c, device: (randn((c.size("rows"), c.size("cols")), c, device, salt=1),),
    dtypes=("float32", "float16"),
    visible=(case("visible-4x64", "float32", 0, rows=4, cols=64), case("visible-8x128", "float32", 1, rows=8, cols=128)),
    hidden_gpu=hidden_grid(GPU_ROWS, ("float32", "float16"), cpu=False, strided=True) + GPU_TALL,
    # The interpreter runs a scan with a custom combine function element by element in Python:
    # rows of a few blocks of 128 test the carry without minutes of interpretation.
    hidden_cpu=hidden_grid(sizes("rows,cols", [(1, 1), (3, 7), (2, 129), (1, 300)]), ("float32", "float16"), cpu=True, strided=True),
    perf=(case("perf-4096x4096", "float32", 0, rows=4096, cols=4096),),
    strided_inputs=True,
    baseline_file="cummax.py",
    difficulty=3,
    bytes_moved=lambda c: 2 * nbytes(c, c.size("rows") * c.size("cols")),
    flops=lambda c: c.size("rows") * c.size("cols"),
    mutations=(
        Mutation("missing_carry", "y = tl.maximum(tl.associative_scan(x, 0, _max_combine), carry)",
                 "y = tl.associative_scan(x, 0, _max_combine)",
                 note="forgets earlier blocks: right only for rows that fit one block"),
        Mutation("wrong_carry", "carry = tl.maximum(carry, tl.max(x, axis=0))", "carry = tl.max(x, axis=0)",
                 note="carries only the previous block's max"),
        Mutation("wrong_init", 'carry = tl.full((), -float("inf"), tl.float32)', "carry = tl.zeros((), dtype=tl.float32)"),
        Mutation("tuning", "min(triton.next_power_of_2(n_cols), 128)", "min(triton.next_power_of_2(n_cols), 256)", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))
