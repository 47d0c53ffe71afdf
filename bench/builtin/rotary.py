"""Rotary position embedding (the rotate-half / GPT-NeoX layout)."""

from __future__ import annotations

import torch

from bench.builtin._common import ELEMENT_BYTES, hidden_grid, randn, sizes
from bench.registry import register_task
from bench.task import Case, Mutation, Task, case

FLOATS = ("float32", "float16", "bfloat16")


def _rotary_ref(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


def _rotary_inputs(c: Case, device: str) -> tuple:
    seq, heads, dim = c.size("seq"), c.size("heads"), c.size("dim")
    x = randn((seq, heads, dim), c, device, salt=1)
    half = dim // 2
    inv_freq = 1.0 / (10000.0 ** (torch.arange(half, dtype=torch.float64) / half))
    angles = torch.arange(seq, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos = angles.cos().to(device=device, dtype=torch.float32)
    sin = angles.sin().to(device=device, dtype=torch.float32)
    return (x, cos, sin)


register_task(Task(
    id="rotary_embedding",
    category="position",
    instruction=(
        "Write a Triton kernel and a Python wrapper `rotary_embedding(x, cos, sin)` applying rotary position "
        "embeddings in the rotate-half layout: x is (seq, heads, dim) in float32, float16 or bfloat16 with dim "
        "even (not necessarily a power of two); cos and sin are float32 tables of shape (seq, dim // 2). With "
        "x1 = x[..., :dim//2] and x2 = x[..., dim//2:], return cat(x1*cos - x2*sin, x2*cos + x1*sin) along the "
        "last dim (cos and sin broadcast over heads), computed in float32, in x's shape and dtype."
    ),
    entry_point="rotary_embedding",
    signature="def rotary_embedding(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor",
    reference=_rotary_ref,
    make_inputs=_rotary_inputs,
    dtypes=FLOATS,
    visible=(case("visible-4x2x64", "float32", 0, seq=4, heads=2, dim=64), case("visible-8x4x128", "float32", 1, seq=8, heads=4, dim=128)),
    hidden_gpu=hidden_grid(sizes("seq,heads,dim", [(1, 1, 2), (3, 3, 6), (17, 5, 96), (1000, 8, 128), (4096, 32, 128)]),
                         FLOATS, cpu=False, strided=True),
    hidden_cpu=hidden_grid(sizes("seq,heads,dim", [(1, 1, 2), (3, 3, 6), (5, 4, 96), (7, 2, 128)]),
                         FLOATS, cpu=True, strided=True),
    perf=(case("perf-8192x32x128", "bfloat16", 0, seq=8192, heads=32, dim=128),),
    strided_inputs=True,
    baseline_file="rotary_embedding.py",
    difficulty=2,
    bytes_moved=lambda c: (2 * ELEMENT_BYTES[c.dtype] * c.size("seq") * c.size("heads") * c.size("dim")
                           + 4 * c.size("seq") * c.size("dim")),
    flops=lambda c: 3 * c.size("seq") * c.size("heads") * c.size("dim"),
    mutations=(
        Mutation("wrong_sign", "(x2 * c + x1 * s)", "(x2 * c - x1 * s)"),
        Mutation("non_power_of_two_block", "BLOCK_D = triton.next_power_of_2(half)", "BLOCK_D = half",
                 note="tl.arange needs a power of two: fails for head dims like 96 only"),
        Mutation("wrong_position", "c = tl.load(cos_ptr + pos * stride_cs + offs_d", "c = tl.load(cos_ptr + offs_d"),
        Mutation("tuning", "num_warps=4", "num_warps=2", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))
