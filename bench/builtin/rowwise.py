"""Row-wise tasks over the last dim of a 2-D tensor: softmax, layer norm, RMS norm."""

from __future__ import annotations

import torch

from bench.builtin._common import TALL_ROWS, hidden_grid, nbytes, randn, stressed, tall_case
from bench.registry import register_task
from bench.task import Case, Mutation, Task, case

SEEDS = range(5)
FLOATS = ("float32", "float16", "bfloat16")
GPU_SHAPES = [(1, 1), (3, 7), (37, 127), (64, 1025), (128, 4096), (17, 8191), (1024, 781), (4, 16411)]
# Few rows per CPU case: the interpreter's cost is per program (row), not per element.
CPU_SHAPES = [(1, 1), (3, 7), (5, 127), (4, 1025), (2, 2049), (1, 10007)]
GPU_TALL = (tall_case("float32", rows=TALL_ROWS, cols=37),)
# Every seed its own epsilon: a kernel that hard-codes 1e-5 fails the others.
EPS_BY_SEED = (1e-5, 1e-6, 1e-3, 0.1, 1e-5)
EPS = EPS_BY_SEED[0]


def _shape_dicts(shapes: list[tuple[int, int]]) -> list[dict[str, int]]:
    return [{"rows": r, "cols": c} for r, c in shapes]


def _x(c: Case, device: str, scale: float = 1.0) -> torch.Tensor:
    return randn((c.size("rows"), c.size("cols")), c, device, salt=1, scale=scale)


def _rowwise_bytes(c: Case) -> int:
    return 2 * nbytes(c, c.size("rows") * c.size("cols"))


def _visible(dtype: str = "float32") -> tuple[Case, ...]:
    return (case("visible-4x256", dtype, 0, rows=4, cols=256), case("visible-16x1024", dtype, 1, rows=16, cols=1024))


register_task(Task(
    id="softmax",
    category="softmax",
    instruction=(
        "Write a Triton kernel and a Python wrapper `softmax(x)` computing the numerically stable softmax "
        "of a 2-D tensor row-wise over its last dimension. Rows can have any length; the output has x's "
        "shape and dtype (float32, float16 or bfloat16); accumulate in float32."
    ),
    entry_point="softmax",
    signature="def softmax(x: torch.Tensor) -> torch.Tensor",
    reference=lambda x: torch.softmax(x, dim=-1),
    make_inputs=lambda c, device: (stressed(_x(c, device, scale=3.0), c, negative=-10000.0, large=13.0),),
    dtypes=FLOATS,
    visible=_visible(),
    hidden_gpu=hidden_grid(_shape_dicts(GPU_SHAPES), FLOATS, cpu=False, strided=True) + GPU_TALL,
    hidden_cpu=hidden_grid(_shape_dicts(CPU_SHAPES), FLOATS, cpu=True, strided=True),
    strided_inputs=True,
    perf=(case("perf-4096x4096", "float16", 0, rows=4096, cols=4096), case("perf-8192x1024", "float32", 0, rows=8192, cols=1024)),
    baseline_file="softmax.py",
    difficulty=2,
    bytes_moved=_rowwise_bytes,
    flops=lambda c: 5 * c.size("rows") * c.size("cols"),
    suites=("quick", "full"),
    mutations=(
        Mutation("wrong_mask", "mask=mask, other=-float(\"inf\")", "mask=mask, other=0.0",
                 note="pads with zeros: right only when the row length is a power of two"),
        Mutation("no_max_subtraction", "x = x - tl.max(x, axis=0)", "x = x - 0.0",
                 note="exp overflows on large inputs (hidden seed 4 draws them)"),
        Mutation("wrong_reduction", "den = tl.sum(num, axis=0)", "den = tl.max(num, axis=0)"),
        Mutation("runtime_error", "_softmax_kernel[(n_rows,)](out, x, x.stride(0), x.stride(1), out.stride(0), out.stride(1), n_cols,",
                 "_softmax_kernel[(n_rows,)](out, x, x.stride(0), n_cols,"),
        Mutation("tuning", "num_warps = 4 if BLOCK_SIZE <= 2048 else 8", "num_warps = 8", breaks=False),
        Mutation("tuning", "num_warps = 4 if BLOCK_SIZE <= 2048 else 8", "num_warps = 2 if BLOCK_SIZE <= 1024 else 4", breaks=False),
    ),
))


def _norm_inputs(c: Case, device: str, with_bias: bool) -> tuple:
    cols = c.size("cols")
    x = stressed(_x(c, device, scale=2.0) + 0.5, c, negative=-300.0, large=300.0)
    w = randn((cols,), c, device, salt=2) * 0.5 + 1.0
    eps = EPS_BY_SEED[c.seed % len(EPS_BY_SEED)]
    if with_bias:
        return (x, w, randn((cols,), c, device, salt=3), eps)
    return (x, w, eps)


register_task(Task(
    id="layer_norm",
    category="norm",
    instruction=(
        "Write a Triton kernel and a Python wrapper `layer_norm(x, weight, bias, eps)` applying layer "
        "normalisation over the last dimension of a 2-D tensor x (rows of any length), then scaling by "
        "weight and adding bias (1-D, length = row length). Biased variance; compute statistics in float32; "
        "the output has x's shape and dtype."
    ),
    entry_point="layer_norm",
    signature="def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor",
    reference=lambda x, w, b, eps: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps),
    make_inputs=lambda c, device: _norm_inputs(c, device, with_bias=True),
    dtypes=FLOATS,
    visible=_visible(),
    hidden_gpu=hidden_grid(_shape_dicts(GPU_SHAPES), FLOATS, cpu=False) + GPU_TALL,
    hidden_cpu=hidden_grid(_shape_dicts(CPU_SHAPES), FLOATS, cpu=True),
    perf=(case("perf-4096x4096", "float16", 0, rows=4096, cols=4096),),
    baseline_file="layer_norm.py",
    difficulty=2,
    bytes_moved=_rowwise_bytes,
    flops=lambda c: 8 * c.size("rows") * c.size("cols"),
    suites=("full",),
    mutations=(
        Mutation("wrong_mask", "diff = tl.where(mask, x - mean, 0.0)", "diff = x - mean",
                 note="padding enters the variance: right only for power-of-two rows"),
        Mutation("wrong_reduction", "mean = tl.sum(x, axis=0) / n_cols", "mean = tl.sum(x, axis=0) / BLOCK_SIZE"),
        Mutation("wrong_formula", "rstd = 1.0 / tl.sqrt(var + eps)", "rstd = tl.sqrt(var + eps)"),
        Mutation("missing_bias", "y = diff * rstd * w + b", "y = diff * rstd * w"),
        Mutation("tuning", "num_warps = min(max(BLOCK_SIZE // 256, 1), 8)", "num_warps = 4", breaks=False),
    ),
))


register_task(Task(
    id="rms_norm",
    category="norm",
    instruction=(
        "Write a Triton kernel and a Python wrapper `rms_norm(x, weight, eps)` applying RMS normalisation "
        "over the last dimension of a 2-D tensor x: y = x / sqrt(mean(x^2) + eps) * weight, statistics in "
        "float32; the output has x's shape and dtype."
    ),
    entry_point="rms_norm",
    signature="def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor",
    reference=lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * w,
    make_inputs=lambda c, device: _norm_inputs(c, device, with_bias=False),
    dtypes=FLOATS,
    visible=_visible(),
    hidden_gpu=hidden_grid(_shape_dicts(GPU_SHAPES), FLOATS, cpu=False) + GPU_TALL,
    hidden_cpu=hidden_grid(_shape_dicts(CPU_SHAPES), FLOATS, cpu=True),
    perf=(case("perf-4096x4096", "float16", 0, rows=4096, cols=4096),),
    baseline_file="rms_norm.py",
    difficulty=2,
    bytes_moved=_rowwise_bytes,
    flops=lambda c: 4 * c.size("rows") * c.size("cols"),
    suites=("quick", "full"),
    mutations=(
        Mutation("wrong_reduction", "mean_sq = tl.sum(x * x, axis=0) / n_cols", "mean_sq = tl.sum(x * x, axis=0) / BLOCK_SIZE",
                 note="divides by the padded length: right only for power-of-two rows"),
        Mutation("wrong_formula", "rstd = 1.0 / tl.sqrt(mean_sq + eps)", "rstd = 1.0 / (mean_sq + eps)"),
        Mutation("missing_weight", "y = x * rstd * w", "y = x * rstd"),
        Mutation("tuning", "num_warps = min(max(BLOCK_SIZE // 256, 1), 8)", "num_warps = 8", breaks=False),
    ),
))
