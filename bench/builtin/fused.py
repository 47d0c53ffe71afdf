"""Fused elementwise tasks: add+ReLU, exact GELU, SwiGLU, axpby.

Visible cases use lengths that are multiples of the block size, as public suites tend to;
the hidden cases add length 1, primes and block+1, so a kernel that drops the tail block
(`n // BLOCK` grids) passes visible and fails hidden, which is the gap the report measures.
"""

from __future__ import annotations

import torch

from bench.builtin._common import TALL_ROWS, hidden_grid, nbytes, randn, sizes, stressed, tall_case
from bench.registry import register_task
from bench.task import Case, Mutation, Task, case

FLOATS = ("float32", "float16", "bfloat16")
GPU_N = (1, 97, 1025, 131_071, 4_000_037)
CPU_N = (1, 97, 1025, 4099, 10_007)
PERF_N = 1 << 26

_VISIBLE_1D = (case("visible-n1024", "float32", 0, n=1024), case("visible-n4096", "float32", 1, n=4096))


def _n_grid(ns: tuple[int, ...], dtypes: tuple[str, ...], cpu: bool) -> tuple[Case, ...]:
    return hidden_grid([{"n": n} for n in ns], dtypes, cpu=cpu)


def _tail_grid_mutation() -> Mutation:
    return Mutation("wrong_grid", "grid = (triton.cdiv(n_elements, BLOCK_SIZE),)", "grid = (n_elements // BLOCK_SIZE,)",
                    note="drops the tail block: passes lengths that are multiples of the block only")


def _add_relu_inputs(c: Case, device: str) -> tuple:
    n = c.size("n")
    return tuple(stressed(randn((n,), c, device, salt=s), c, negative=-3e4, large=2e4) for s in (1, 2))


register_task(Task(
    id="add_relu",
    category="fused_elementwise",
    instruction=(
        "Write a Triton kernel and a Python wrapper `add_relu(x, y)` that returns relu(x + y) for two 1-D "
        "tensors of the same length and dtype (float32, float16 or bfloat16), fused in one kernel. The length "
        "is arbitrary (not necessarily a multiple of the block size); the output has x's dtype."
    ),
    entry_point="add_relu",
    signature="def add_relu(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor",
    reference=lambda x, y: torch.relu(x + y),
    make_inputs=_add_relu_inputs,
    dtypes=FLOATS,
    visible=_VISIBLE_1D,
    hidden_gpu=_n_grid(GPU_N, FLOATS, cpu=False),
    hidden_cpu=_n_grid(CPU_N, FLOATS, cpu=True),
    perf=(case("perf-n64M", "float16", 0, n=PERF_N), case("perf-n64K", "float32", 0, n=1 << 16)),
    baseline_file="add_relu.py",
    difficulty=1,
    bytes_moved=lambda c: 3 * nbytes(c, c.size("n")),
    flops=lambda c: 2 * c.size("n"),
    mutations=(
        _tail_grid_mutation(),
        Mutation("wrong_mask", "mask = offsets < n_elements", "mask = offsets < n_elements - 1"),
        Mutation("wrong_op", "z = tl.maximum(x + y, 0.0)", "z = tl.maximum(x, 0.0) + y"),
        Mutation("wrong_activation", "z = tl.maximum(x + y, 0.0)", "z = tl.abs(x + y)"),
        Mutation("tuning", "BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))


register_task(Task(
    id="gelu",
    category="fused_elementwise",
    instruction=(
        "Write a Triton kernel and a Python wrapper `gelu(x)` applying the exact (erf-based) GELU, "
        "0.5 * x * (1 + erf(x / sqrt(2))), elementwise to a 1-D tensor of any length (float32, float16 or "
        "bfloat16). Compute in float32; the output has x's dtype."
    ),
    entry_point="gelu",
    signature="def gelu(x: torch.Tensor) -> torch.Tensor",
    reference=lambda x: torch.nn.functional.gelu(x),
    make_inputs=lambda c, device: (stressed(randn((c.size("n"),), c, device, salt=1, scale=2.0), c, large=100.0),),
    dtypes=FLOATS,
    visible=_VISIBLE_1D,
    hidden_gpu=_n_grid(GPU_N, FLOATS, cpu=False),
    hidden_cpu=_n_grid(CPU_N, FLOATS, cpu=True),
    perf=(case("perf-n64M", "float16", 0, n=PERF_N),),
    baseline_file="gelu.py",
    difficulty=1,
    bytes_moved=lambda c: 2 * nbytes(c, c.size("n")),
    flops=lambda c: 8 * c.size("n"),
    mutations=(
        _tail_grid_mutation(),
        Mutation("wrong_constant", "erf(x * 0.7071067811865476)", "erf(x * 1.4142135623730951)"),
        Mutation("approximation", "y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))",
                 "y = x * tl.sigmoid(1.702 * x)", note="sigmoid approximation: off by up to 2e-2"),
        Mutation("wrong_mask", "mask = offsets < n_elements", "mask = offsets < n_elements - 1"),
        Mutation("tuning", "BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))


def _swiglu_ref(x: torch.Tensor) -> torch.Tensor:
    gate, up = x.chunk(2, dim=-1)
    return torch.nn.functional.silu(gate) * up


register_task(Task(
    id="swiglu",
    category="fused_elementwise",
    instruction=(
        "Write a Triton kernel and a Python wrapper `swiglu(x)` for a 2-D tensor x of shape (rows, 2*d): "
        "split the last dimension into halves gate = x[:, :d] and up = x[:, d:] and return "
        "silu(gate) * up = gate * sigmoid(gate) * up, of shape (rows, d) and x's dtype (float32, float16 or "
        "bfloat16). d is arbitrary; compute in float32."
    ),
    entry_point="swiglu",
    signature="def swiglu(x: torch.Tensor) -> torch.Tensor",
    reference=_swiglu_ref,
    make_inputs=lambda c, device: (stressed(randn((c.size("rows"), 2 * c.size("cols")), c, device, salt=1, scale=2.0),
                                            c, negative=-50.0, large=20.0),),
    dtypes=FLOATS,
    visible=(case("visible-4x1024", "float32", 0, rows=4, cols=1024),
             case("visible-8x1024", "float32", 1, rows=8, cols=1024)),
    hidden_gpu=hidden_grid(sizes("rows,cols", [(1, 1), (3, 7), (37, 1025), (129, 4099), (4096, 11008), (2, 16411)]),
                           FLOATS, cpu=False, strided=True) + (tall_case("float32", rows=TALL_ROWS, cols=37),),
    hidden_cpu=hidden_grid(sizes("rows,cols", [(1, 1), (3, 7), (4, 1025), (2, 3001), (1, 8221)]), FLOATS, cpu=True,
                           strided=True),
    strided_inputs=True,
    perf=(case("perf-8192x11008", "bfloat16", 0, rows=8192, cols=11008),),
    baseline_file="swiglu.py",
    difficulty=2,
    bytes_moved=lambda c: 3 * nbytes(c, c.size("rows") * c.size("cols")),
    flops=lambda c: 6 * c.size("rows") * c.size("cols"),
    mutations=(
        Mutation("wrong_grid", "grid = (n_rows, triton.cdiv(n_cols, BLOCK_SIZE))", "grid = (n_rows, n_cols // BLOCK_SIZE)",
                 note="drops the tail block: right only when d is a multiple of the block"),
        Mutation("swapped_halves", "y = gate * tl.sigmoid(gate) * up", "y = up * tl.sigmoid(up) * gate"),
        Mutation("wrong_stride", "(x, out, x.stride(0), out.stride(0), n_cols,", "(x, out, out.stride(0), out.stride(0), n_cols,",
                 note="uses the output's row stride (d) for the input (2d)"),
        Mutation("tuning", "BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))


def _axpby_inputs(c: Case, device: str) -> tuple:
    n = c.size("n")
    # alpha and beta never coincide (swapping them is always caught); zero, negative and large
    # values each appear, so a kernel that drops or clamps a scalar fails somewhere.
    alpha = (0.5, -2.75, 0.0, 1e3, 1.37)[c.seed % 5]
    beta = (-1.25, 0.0, 3.5, -1e-3, -0.81)[c.seed % 5]
    return (alpha, randn((n,), c, device, salt=1), beta, randn((n,), c, device, salt=2))


register_task(Task(
    id="axpby",
    category="fused_elementwise",
    instruction=(
        "Write a Triton kernel and a Python wrapper `axpby(alpha, x, beta, y)` returning alpha * x + beta * y "
        "for Python floats alpha, beta and two 1-D tensors of the same length and dtype (float32, float16 or "
        "bfloat16). The length is arbitrary; compute in float32; the output has x's dtype."
    ),
    entry_point="axpby",
    signature="def axpby(alpha: float, x: torch.Tensor, beta: float, y: torch.Tensor) -> torch.Tensor",
    reference=lambda alpha, x, beta, y: alpha * x + beta * y,
    make_inputs=_axpby_inputs,
    dtypes=FLOATS,
    visible=_VISIBLE_1D,
    hidden_gpu=_n_grid(GPU_N, FLOATS, cpu=False),
    hidden_cpu=_n_grid(CPU_N, FLOATS, cpu=True),
    perf=(case("perf-n64M", "float32", 0, n=PERF_N),),
    baseline_file="axpby.py",
    difficulty=1,
    bytes_moved=lambda c: 3 * nbytes(c, c.size("n")),
    flops=lambda c: 3 * c.size("n"),
    mutations=(
        _tail_grid_mutation(),
        Mutation("swapped_scalars", "z = alpha * x + beta * y", "z = beta * x + alpha * y"),
        Mutation("wrong_sign", "z = alpha * x + beta * y", "z = alpha * x - beta * y"),
        Mutation("wrong_mask", "mask = offsets < n_elements", "mask = offsets < n_elements - 1"),
        Mutation("tuning", "BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))
