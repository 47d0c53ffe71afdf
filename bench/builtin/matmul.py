"""Matrix multiplication tasks."""

from __future__ import annotations

from bench.builtin._common import ELEMENT_BYTES, hidden_grid, randn
from bench.registry import register_task
from bench.task import Case, Mutation, Task, case, case_grid

SEEDS = range(5)


def _inputs(c: Case, device: str) -> tuple:
    m, n, k = c.size("m"), c.size("n"), c.size("k")
    return (randn((m, k), c, device, salt=1), randn((k, n), c, device, salt=2))


def _mnk(shapes: list[tuple[int, int, int]]) -> list[dict[str, int]]:
    return [{"m": m, "n": n, "k": k} for m, n, k in shapes]


register_task(Task(
    id="matmul",
    category="matmul",
    instruction=(
        "Write a Triton kernel and a Python wrapper `matmul(a, b)` multiplying 2-D matrices a (M x K) and "
        "b (K x N) in float16 or bfloat16, accumulating in float32 and returning an M x N tensor of a's dtype. "
        "M, N and K are arbitrary (not necessarily multiples of the tile sizes)."
    ),
    entry_point="matmul",
    signature="def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor",
    reference=lambda a, b: a @ b,
    make_inputs=_inputs,
    dtypes=("float16", "bfloat16"),
    visible=(case("visible-128x128x128", "float16", 0, m=128, n=128, k=128),
             case("visible-256x256x64", "float16", 1, m=256, n=256, k=64)),
    hidden_gpu=case_grid("hidden", _mnk([(1, 1, 1), (17, 31, 13), (129, 257, 65), (512, 1024, 768), (1000, 999, 1001)]),
                         ("float16", "bfloat16"), SEEDS),
    hidden_cpu=hidden_grid(_mnk([(1, 1, 1), (17, 31, 13), (64, 64, 64), (129, 65, 33)]), ("float16", "bfloat16"),
                           cpu=True),
    perf=(case("perf-4096", "float16", 0, m=4096, n=4096, k=4096), case("perf-bf16-2048", "bfloat16", 0, m=2048, n=2048, k=2048)),
    baseline_file="matmul.py",
    difficulty=3,
    bytes_moved=lambda c: ELEMENT_BYTES[c.dtype] * (c.size("m") * c.size("k") + c.size("k") * c.size("n") + c.size("m") * c.size("n")),
    flops=lambda c: 2 * c.size("m") * c.size("n") * c.size("k"),
    suites=("full",),
    mutations=(
        Mutation("wrong_grid", "grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)",
                 "grid = ((M // BLOCK_M) * (N // BLOCK_N),)", note="drops edge tiles: right only for multiples of the tile"),
        Mutation("wrong_loop", "for k in range(0, tl.cdiv(K, BLOCK_K)):", "for k in range(0, K // BLOCK_K):",
                 note="drops the K tail: right only when K is a multiple of BLOCK_K"),
        Mutation("wrong_accum", "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
                 "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)"),
        Mutation("wrong_index", "pid_n = (pid % num_pid_in_group) // group_size_m", "pid_n = (pid % num_pid_in_group) % group_size_m"),
        Mutation("missing_advance", "        b_ptrs += BLOCK_K * stride_bk\n", "\n"),
        Mutation("tuning", "BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64", "BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32", breaks=False),
        Mutation("tuning", "num_warps=8, num_stages=3", "num_warps=4, num_stages=4", breaks=False),
        Mutation("tuning", "BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64", "BLOCK_M, BLOCK_N, BLOCK_K = 128, 256, 64", breaks=False),
    ),
))
