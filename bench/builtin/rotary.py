"""Rotary position embedding (the rotate-half / GPT-NeoX layout).

The cos and sin tables are inputs, drawn per seed with another base and for other positions
(an offset into a long context, and position interpolation's fractional positions), so a kernel
that ignores them and recomputes the classic table (base 10000, positions 0..seq-1) fails on
every seed but the first.
"""

from __future__ import annotations

import torch

from bench.builtin._common import ELEMENT_BYTES, TALL_ROWS, hidden_grid, randn, sizes, tall_case
from bench.registry import register_task
from bench.task import Case, Mutation, Task, case

FLOATS = ("float32", "float16", "bfloat16")
# Per seed: the frequency base, the first position and the position scale (1/4: positions
# interpolated four times more finely, as for a context stretched fourfold). Seed 0 is the
# classic table; the others are tables real models use (Llama 3's base 500000, Code Llama's 1e6)
# or are far from it.
TABLES = ((10_000.0, 0, 1.0), (500_000.0, 4093, 1.0), (100.0, 0, 0.25), (1_000_000.0, 131_071, 1.0),
          (10_000.0, 65_537, 0.25))


def _rotary_ref(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


def rotary_tables(c: Case, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 cos and sin of shape (seq, dim // 2) for the case's seed (`TABLES`), computed in float64."""
    seq, half = c.size("seq"), c.size("dim") // 2
    base, start, step = TABLES[c.seed % len(TABLES)]
    inv_freq = 1.0 / (base ** (torch.arange(half, dtype=torch.float64) / half))
    positions = (start + torch.arange(seq, dtype=torch.float64)) * step
    angles = positions[:, None] * inv_freq[None, :]
    return (angles.cos().to(device=device, dtype=torch.float32), angles.sin().to(device=device, dtype=torch.float32))


def _rotary_inputs(c: Case, device: str) -> tuple:
    x = randn((c.size("seq"), c.size("heads"), c.size("dim")), c, device, salt=1)
    cos, sin = rotary_tables(c, device)
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
                         FLOATS, cpu=False, strided=True) + (tall_case("float32", seq=TALL_ROWS, heads=2, dim=8),),
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
