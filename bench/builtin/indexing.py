"""Indexing tasks."""

from __future__ import annotations

from bench.builtin._common import TALL_ROWS, hidden_grid, nbytes, randn, tall_case
from bench.registry import register_task
from bench.task import Mutation, Task, case

SEEDS = range(5)

register_task(Task(
    id="flip",
    category="indexing",
    instruction=(
        "Write a Triton kernel and a Python wrapper `flip(x)` that reverses the last dimension of a 2-D "
        "tensor (like torch.flip(x, dims=[-1])); rows of any length; same shape and dtype as x."
    ),
    entry_point="flip",
    signature="def flip(x: torch.Tensor) -> torch.Tensor",
    reference=lambda x: x.flip(-1),
    make_inputs=lambda c, device: (randn((c.size("rows"), c.size("cols")), c, device, salt=1),),
    dtypes=("float32", "float16"),
    visible=(case("visible-4x256", "float32", 0, rows=4, cols=256), case("visible-8x2048", "float32", 1, rows=8, cols=2048)),
    hidden_gpu=hidden_grid([{"rows": r, "cols": c} for r, c in [(1, 1), (3, 7), (37, 1025), (256, 4099), (4096, 3000)]],
                         ("float32", "float16"), cpu=False, strided=True)
               + (tall_case("float32", rows=TALL_ROWS, cols=37),),
    hidden_cpu=hidden_grid([{"rows": r, "cols": c} for r, c in [(1, 1), (3, 7), (5, 1025), (2, 3001), (1, 9001)]],
                         ("float32", "float16"), cpu=True, strided=True),
    perf=(case("perf-4096x4096", "float32", 0, rows=4096, cols=4096),),
    strided_inputs=True,
    baseline_file="flip.py",
    difficulty=1,
    bytes_moved=lambda c: 2 * nbytes(c, c.size("rows") * c.size("cols")),
    flops=lambda c: 0,
    suites=("quick", "full"),
    mutations=(
        Mutation("wrong_index", "src = n_cols - 1 - cols", "src = BLOCK_SIZE - 1 - cols",
                 note="mirrors within the block: right only when a row is one whole block"),
        Mutation("off_by_one", "src = n_cols - 1 - cols", "src = n_cols - cols"),
        Mutation("wrong_grid", "grid = (n_rows, triton.cdiv(n_cols, BLOCK_SIZE))", "grid = (n_rows, n_cols // BLOCK_SIZE)"),
        Mutation("block_not_power_of_two", "BLOCK_SIZE = 1024", "BLOCK_SIZE = min(n_cols, 1024)",
                 note="sizes the block to the row: tl.arange needs a power of two, so odd row lengths fail"),
        Mutation("tuning", "BLOCK_SIZE = 1024", "BLOCK_SIZE = 256", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))
