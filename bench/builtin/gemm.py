"""Matrix-multiply tasks beyond plain matmul (matmul.py): fused bias+ReLU epilogue, batched matmul.

fp16/bf16 inputs with float32 accumulation. CPU shapes stay tiny because interpreted
tl.dot is slow, and bf16 runs there at two seeds (the interpreter emulates bf16, `hidden_grid`).
"""

from __future__ import annotations

import torch

from bench.builtin._common import ELEMENT_BYTES, SEEDS, hidden_grid, randn, sizes, wide_dtype
from bench.registry import register_task
from bench.task import Case, Mutation, Task, case, case_grid

HALVES = ("float16", "bfloat16")


def _bias_inputs(c: Case, device: str) -> tuple:
    m, n, k = c.size("m"), c.size("n"), c.size("k")
    return (randn((m, k), c, device, salt=1), randn((k, n), c, device, salt=2), randn((n,), c, device, salt=3))


def _matmul_bias_relu_ref(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    # Computed wide and cast back: the oracle only takes the output dtype from the native run,
    # and fp16 matmuls on a CPU are slow.
    w = wide_dtype(a)
    return torch.relu(a.to(w) @ b.to(w) + bias.to(w)).to(a.dtype)


def _mnk_bytes(c: Case) -> int:
    m, n, k = c.size("m"), c.size("n"), c.size("k")
    return ELEMENT_BYTES[c.dtype] * (m * k + k * n + m * n + n)


register_task(Task(
    id="matmul_bias_relu",
    category="matmul",
    instruction=(
        "Write a Triton kernel and a Python wrapper `matmul_bias_relu(a, b, bias)` returning relu(a @ b + bias) "
        "for a (M x K), b (K x N) and bias (N,) in float16 or bfloat16, accumulating in float32 and applying the "
        "bias and ReLU in the kernel's epilogue; the result is M x N in a's dtype. M, N and K are arbitrary."
    ),
    entry_point="matmul_bias_relu",
    signature="def matmul_bias_relu(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor",
    reference=_matmul_bias_relu_ref,
    make_inputs=_bias_inputs,
    dtypes=HALVES,
    visible=(case("visible-128x128x128", "float16", 0, m=128, n=128, k=128),
             case("visible-256x256x64", "float16", 1, m=256, n=256, k=64)),
    hidden_gpu=case_grid("hidden", sizes("m,n,k", [(1, 1, 1), (17, 31, 13), (129, 257, 65), (512, 1024, 768),
                                                    (1000, 999, 1001)]), HALVES, SEEDS),
    hidden_cpu=hidden_grid(sizes("m,n,k", [(1, 1, 1), (17, 31, 13), (129, 65, 33)]), HALVES, cpu=True),
    perf=(case("perf-4096", "float16", 0, m=4096, n=4096, k=4096), case("perf-bf16-8192x4096x4096", "bfloat16", 0,
                                                                        m=8192, n=4096, k=4096)),
    baseline_file="matmul_bias_relu.py",
    difficulty=3,
    bytes_moved=_mnk_bytes,
    flops=lambda c: 2 * c.size("m") * c.size("n") * c.size("k") + 2 * c.size("m") * c.size("n"),
    mutations=(
        Mutation("wrong_grid", "grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)",
                 "grid = ((M // BLOCK_M) * (N // BLOCK_N),)", note="drops edge tiles: right only for multiples of the tile"),
        Mutation("wrong_loop", "for k in range(0, tl.cdiv(K, BLOCK_K)):", "for k in range(0, K // BLOCK_K):",
                 note="drops the K tail: right only when K is a multiple of BLOCK_K"),
        Mutation("missing_bias", "    acc = acc + bias[None, :]\n", ""),
        Mutation("relu_before_bias", "acc = acc + bias[None, :]\n    acc = tl.maximum(acc, 0.0)",
                 "acc = tl.maximum(acc, 0.0)\n    acc = acc + bias[None, :]"),
        Mutation("tuning", "BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64", "BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32", breaks=False),
        Mutation("tuning", "num_warps=8, num_stages=3", "num_warps=4, num_stages=4", breaks=False),
    ),
))


def _bmm_inputs(c: Case, device: str) -> tuple:
    b, m, n, k = c.size("batch"), c.size("m"), c.size("n"), c.size("k")
    return (randn((b, m, k), c, device, salt=1), randn((b, k, n), c, device, salt=2))


register_task(Task(
    id="bmm",
    category="matmul",
    instruction=(
        "Write a Triton kernel and a Python wrapper `bmm(a, b)` computing the batched matrix product of "
        "a (B x M x K) and b (B x K x N) in float16 or bfloat16, accumulating in float32 and returning "
        "B x M x N in a's dtype. B, M, N and K are arbitrary."
    ),
    entry_point="bmm",
    signature="def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor",
    reference=lambda a, b: torch.bmm(a.to(wide_dtype(a)), b.to(wide_dtype(a))).to(a.dtype),
    make_inputs=_bmm_inputs,
    dtypes=HALVES,
    visible=(case("visible-2x128x128x128", "float16", 0, batch=2, m=128, n=128, k=128),
             case("visible-3x256x128x64", "float16", 1, batch=3, m=256, n=128, k=64)),
    hidden_gpu=case_grid("hidden", sizes("batch,m,n,k", [(1, 1, 1, 1), (3, 17, 31, 13), (4, 129, 257, 65),
                                                          (8, 512, 512, 512), (16, 1000, 999, 129)]), HALVES, SEEDS),
    hidden_cpu=hidden_grid(sizes("batch,m,n,k", [(1, 1, 1, 1), (3, 17, 31, 13), (2, 129, 65, 33)]), HALVES,
                           cpu=True),
    perf=(case("perf-32x1024", "float16", 0, batch=32, m=1024, n=1024, k=1024),
          case("perf-bf16-8x2048", "bfloat16", 0, batch=8, m=2048, n=2048, k=2048)),
    baseline_file="bmm.py",
    difficulty=3,
    bytes_moved=lambda c: ELEMENT_BYTES[c.dtype] * c.size("batch") * (c.size("m") * c.size("k") + c.size("k") * c.size("n")
                                                                      + c.size("m") * c.size("n")),
    flops=lambda c: 2 * c.size("batch") * c.size("m") * c.size("n") * c.size("k"),
    mutations=(
        Mutation("wrong_grid", "grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N), B)",
                 "grid = ((M // BLOCK_M) * (N // BLOCK_N), B)", note="drops edge tiles: right only for multiples of the tile"),
        Mutation("wrong_loop", "for k in range(0, tl.cdiv(K, BLOCK_K)):", "for k in range(0, K // BLOCK_K):",
                 note="drops the K tail: right only when K is a multiple of BLOCK_K"),
        Mutation("missing_batch_offset", "    c_ptr += batch * stride_cb\n", "",
                 note="every batch writes into the first output matrix"),
        Mutation("tuning", "BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64", "BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32", breaks=False),
        Mutation("tuning", "num_warps=8, num_stages=3", "num_warps=4, num_stages=4", breaks=False),
    ),
))
