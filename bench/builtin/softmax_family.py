"""Softmax relatives: online (one-pass statistics) softmax for long rows, log-softmax, cross-entropy.

Every fifth seed draws inputs forty times larger, so a kernel that skips the max
subtraction overflows exp() there even when it passes the visible cases.
"""

from __future__ import annotations

import torch

from bench.builtin._common import (
    ELEMENT_BYTES,
    TALL_ROWS,
    hidden_grid,
    nbytes,
    randint,
    randn,
    sizes,
    stressed,
    tall_case,
    wide_dtype,
)
from bench.registry import register_task
from bench.task import Case, Mutation, Task, case

FLOATS = ("float32", "float16", "bfloat16")
GPU_TALL = (tall_case("float32", rows=TALL_ROWS, cols=37),)


def _x(c: Case, device: str) -> tuple:
    x = randn((c.size("rows"), c.size("cols")), c, device, salt=1, scale=3.0)
    return (stressed(x, c, negative=-10000.0, large=13.0),)


register_task(Task(
    id="online_softmax",
    category="softmax",
    instruction=(
        "Write a Triton kernel and a Python wrapper `online_softmax(x)` computing softmax over the last "
        "dimension of a 2-D tensor x whose rows can be far longer than one block (up to ~100k elements). Read "
        "each row once to get the row max and normaliser together (a running max with the sum of exponentials "
        "rescaled as the max grows), then once more to write the output. float32, float16 or bfloat16; "
        "accumulate in float32; the output has x's shape and dtype."
    ),
    entry_point="online_softmax",
    signature="def online_softmax(x: torch.Tensor) -> torch.Tensor",
    reference=lambda x: torch.softmax(x, dim=-1),
    make_inputs=_x,
    dtypes=FLOATS,
    visible=(case("visible-4x1024", "float32", 0, rows=4, cols=1024), case("visible-2x4096", "float32", 1, rows=2, cols=4096)),
    hidden_gpu=hidden_grid(sizes("rows,cols", [(1, 1), (3, 7), (37, 1025), (64, 4099), (8, 32768), (4, 100_003),
                                                (1024, 2048)]), FLOATS, cpu=False, strided=True) + GPU_TALL,
    hidden_cpu=hidden_grid(sizes("rows,cols", [(1, 1), (3, 7), (4, 1025), (2, 3001), (1, 10007)]), FLOATS, cpu=True,
                           strided=True),
    strided_inputs=True,
    perf=(case("perf-64x131072", "float16", 0, rows=64, cols=131072), case("perf-4096x8192", "float32", 0, rows=4096, cols=8192)),
    baseline_file="online_softmax.py",
    difficulty=3,
    bytes_moved=lambda c: 3 * nbytes(c, c.size("rows") * c.size("cols")),
    flops=lambda c: 6 * c.size("rows") * c.size("cols"),
    mutations=(
        Mutation("wrong_mask", 'x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"))',
                 "x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0)",
                 note="padding enters the statistics: right only when the row length is a multiple of the block"),
        Mutation("missing_rescale", "d = d * tl.exp(m - m_new) + tl.sum(", "d = d + tl.sum(",
                 note="the running sum is not rescaled when the max grows"),
        Mutation("missing_normaliser", "y = tl.exp(x - m) / d", "y = tl.exp(x - m)"),
        Mutation("tuning", "BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))


register_task(Task(
    id="log_softmax",
    category="softmax",
    instruction=(
        "Write a Triton kernel and a Python wrapper `log_softmax(x)` computing the numerically stable "
        "log-softmax over the last dimension of a 2-D tensor x (rows of any length up to 16384; float32, "
        "float16 or bfloat16). Compute in float32; the output has x's shape and dtype."
    ),
    entry_point="log_softmax",
    signature="def log_softmax(x: torch.Tensor) -> torch.Tensor",
    reference=lambda x: torch.log_softmax(x, dim=-1),
    make_inputs=_x,
    dtypes=FLOATS,
    visible=(case("visible-4x256", "float32", 0, rows=4, cols=256), case("visible-16x1024", "float32", 1, rows=16, cols=1024)),
    hidden_gpu=hidden_grid(sizes("rows,cols", [(1, 1), (3, 7), (37, 127), (64, 1025), (17, 8191), (1024, 781),
                                                (8, 16384)]), FLOATS, cpu=False, strided=True) + GPU_TALL,
    hidden_cpu=hidden_grid(sizes("rows,cols", [(1, 1), (3, 7), (5, 127), (4, 1025), (2, 3001), (1, 9001)]), FLOATS,
                           cpu=True, strided=True),
    strided_inputs=True,
    perf=(case("perf-8192x4096", "float16", 0, rows=8192, cols=4096),),
    baseline_file="log_softmax.py",
    difficulty=2,
    bytes_moved=lambda c: 2 * nbytes(c, c.size("rows") * c.size("cols")),
    flops=lambda c: 5 * c.size("rows") * c.size("cols"),
    mutations=(
        Mutation("wrong_mask", 'mask=mask, other=-float("inf"))', "mask=mask, other=0.0)",
                 note="pads with zeros: right only when the row length is a power of two"),
        Mutation("no_max_subtraction", "z = x - tl.max(x, axis=0)", "z = x",
                 note="exact maths but exp() overflows on the large inputs of every fifth seed"),
        Mutation("missing_log", "lse = tl.log(tl.sum(tl.exp(z), axis=0))", "lse = tl.sum(tl.exp(z), axis=0)"),
        Mutation("tuning", "num_warps = 4 if BLOCK_SIZE <= 2048 else 8", "num_warps = 8", breaks=False),
        Mutation("tuning", "num_warps = 4 if BLOCK_SIZE <= 2048 else 8", "num_warps = 2 if BLOCK_SIZE <= 1024 else 4",
                 breaks=False),
    ),
))


def _cross_entropy_ref(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(logits.to(wide_dtype(logits)), target)


def _cross_entropy_inputs(c: Case, device: str) -> tuple:
    rows, classes = c.size("rows"), c.size("classes")
    logits = stressed(randn((rows, classes), c, device, salt=1, scale=2.0), c, negative=-100.0, large=15.0)
    target = randint(0, classes, (rows,), c, device, salt=2)
    return (logits, target)


register_task(Task(
    id="cross_entropy",
    category="loss",
    instruction=(
        "Write Triton kernel(s) and a Python wrapper `cross_entropy(logits, target)` returning the mean "
        "cross-entropy loss over rows, like torch.nn.functional.cross_entropy(logits.float(), target): logits is "
        "2-D (rows, classes) in float32, float16 or bfloat16 (classes up to ~128k, any number), target is an "
        "int64 tensor of class indices. Return a 0-dim float32 tensor; compute in float32 and stably."
    ),
    entry_point="cross_entropy",
    signature="def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor",
    reference=_cross_entropy_ref,
    make_inputs=_cross_entropy_inputs,
    dtypes=FLOATS,
    visible=(case("visible-8x256", "float32", 0, rows=8, classes=256), case("visible-16x1024", "float32", 1, rows=16, classes=1024)),
    hidden_gpu=hidden_grid(sizes("rows,classes", [(1, 1), (3, 7), (37, 1025), (64, 32000), (512, 4099),
                                                   (8, 128_256)]), FLOATS, cpu=False)
               + (tall_case("float32", rows=TALL_ROWS, classes=37),),
    hidden_cpu=hidden_grid(sizes("rows,classes", [(1, 1), (3, 7), (4, 1025), (2, 3001), (2, 10007)]), FLOATS,
                           cpu=True),
    perf=(case("perf-4096x32000", "bfloat16", 0, rows=4096, classes=32000),),
    baseline_file="cross_entropy.py",
    difficulty=3,
    bytes_moved=lambda c: nbytes(c, c.size("rows") * c.size("classes")) + ELEMENT_BYTES["int64"] * c.size("rows"),
    flops=lambda c: 4 * c.size("rows") * c.size("classes"),
    mutations=(
        Mutation("missing_rescale", "d = d * tl.exp(m - m_new) + tl.sum(", "d = d + tl.sum(",
                 note="right only when the classes fit one block"),
        Mutation("wrong_mask", 'mask=cols < n_classes, other=-float("inf"))', "mask=cols < n_classes, other=0.0)",
                 note="pads with zeros: right only when the class count is a multiple of the block"),
        Mutation("wrong_target_row", "x_t = tl.load(base + t)", "x_t = tl.load(logits_ptr + t)"),
        Mutation("sum_not_mean", "tl.store(out_ptr, tl.sum(acc, axis=0) / n_rows)", "tl.store(out_ptr, tl.sum(acc, axis=0))"),
        Mutation("tuning", "min(triton.next_power_of_2(n_classes), 1024)", "min(triton.next_power_of_2(n_classes), 4096)",
                 breaks=False),
        Mutation("tuning", "BLOCK_SIZE=BLOCK_SIZE, num_warps=4)\n    _mean", "BLOCK_SIZE=BLOCK_SIZE, num_warps=8)\n    _mean",
                 breaks=False),
    ),
))
