"""Scan tasks."""

from __future__ import annotations

from bench.builtin._common import TALL_ROWS, hidden_grid, nbytes, randn, tall_case
from bench.registry import register_task
from bench.task import Mutation, Task, Tolerance, case

SEEDS = range(5)

register_task(Task(
    id="cumsum",
    category="scan",
    instruction=(
        "Write a Triton kernel and a Python wrapper `cumsum(x)` computing the inclusive cumulative sum along "
        "the last dimension of a 2-D float32 tensor (rows of any length, possibly longer than one block); "
        "same shape and dtype as x."
    ),
    entry_point="cumsum",
    signature="def cumsum(x: torch.Tensor) -> torch.Tensor",
    reference=lambda x: x.cumsum(dim=-1),
    make_inputs=lambda c, device: (randn((c.size("rows"), c.size("cols")), c, device, salt=1),),
    dtypes=("float32",),
    visible=(case("visible-4x256", "float32", 0, rows=4, cols=256), case("visible-8x1024", "float32", 1, rows=8, cols=1024)),
    hidden_gpu=hidden_grid([{"rows": r, "cols": c} for r, c in [(1, 1), (3, 7), (37, 1025), (64, 4099), (512, 8192)]],
                         ("float32",), cpu=False, strided=True)
               + (tall_case("float32", rows=TALL_ROWS, cols=37),),
    hidden_cpu=hidden_grid([{"rows": r, "cols": c} for r, c in [(1, 1), (3, 7), (5, 1025), (2, 3001), (1, 9001)]],
                         ("float32",), cpu=True, strided=True),
    perf=(case("perf-4096x4096", "float32", 0, rows=4096, cols=4096),),
    strided_inputs=True,
    baseline_file="cumsum.py",
    difficulty=3,
    bytes_moved=lambda c: 2 * nbytes(c, c.size("rows") * c.size("cols")),
    flops=lambda c: c.size("rows") * c.size("cols"),
    suites=("quick", "full"),
    tolerances={"float32": Tolerance(atol=5e-3, rtol=1e-3)},
    mutations=(
        Mutation("missing_carry", "y = tl.cumsum(x, axis=0) + carry", "y = tl.cumsum(x, axis=0)",
                 note="forgets earlier blocks: right only for rows that fit one block"),
        Mutation("wrong_carry", "carry += tl.sum(x, axis=0)", "carry = tl.sum(x, axis=0)"),
        Mutation("exclusive_scan", "y = tl.cumsum(x, axis=0) + carry", "y = tl.cumsum(x, axis=0) - x + carry",
                 note="exclusive instead of inclusive"),
        Mutation("tuning", "BLOCK_SIZE = 1024", "BLOCK_SIZE = 256", breaks=False),
        Mutation("tuning", "BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048", breaks=False),
    ),
))
