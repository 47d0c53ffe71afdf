"""Attention forward tasks: (B, H, S, 64) fp16/bf16, softmax in float32, plain and causal.

Sequence lengths that are not multiples of the key block are in the hidden cases only,
so a kernel that forgets to mask padded keys passes the visible cases and fails hidden.
"""

from __future__ import annotations

import torch

from bench.builtin._common import ELEMENT_BYTES, SEEDS, hidden_grid, randn, sizes, wide_dtype
from bench.registry import register_task
from bench.task import Case, Mutation, Task, case, case_grid

HALVES = ("float16", "bfloat16")
HEAD_DIM = 64


def _qkv(c: Case, device: str) -> tuple:
    shape = (c.size("batch"), c.size("heads"), c.size("seq"), HEAD_DIM)
    return tuple(randn(shape, c, device, salt=s) for s in (1, 2, 3))


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    wide = wide_dtype(q)
    qf, kf, vf = q.to(wide), k.to(wide), v.to(wide)
    s = (qf @ kf.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return (torch.softmax(s, dim=-1) @ vf).to(q.dtype)


def _flops(c: Case, causal: bool) -> int:
    full = 4 * c.size("batch") * c.size("heads") * c.size("seq") ** 2 * HEAD_DIM
    return full // 2 if causal else full


def _bytes(c: Case) -> int:
    return 4 * ELEMENT_BYTES[c.dtype] * c.size("batch") * c.size("heads") * c.size("seq") * HEAD_DIM


GPU_SHAPES = sizes("batch,heads,seq", [(1, 1, 1), (2, 3, 17), (1, 4, 129), (1, 2, 777), (2, 8, 1000), (4, 16, 1024)])
CPU_SHAPES = sizes("batch,heads,seq", [(1, 1, 1), (2, 1, 17), (1, 1, 129)])
VISIBLE = (case("visible-1x2x64", "float16", 0, batch=1, heads=2, seq=64),
           case("visible-2x2x128", "float16", 1, batch=2, heads=2, seq=128))
PERF = (case("perf-4x32x1024", "float16", 0, batch=4, heads=32, seq=1024),
        case("perf-bf16-4x32x1024", "bfloat16", 0, batch=4, heads=32, seq=1024))
SHARED_MUTATIONS = (
    Mutation("missing_rescale", "acc = acc * alpha[:, None]", "acc = acc",
             note="the accumulator is not rescaled when the running max grows"),
    Mutation("missing_normalisation", "acc = acc / l_i[:, None]", "acc = acc"),
    Mutation("wrong_scale", "qk_scale = sm_scale * 1.4426950408889634", "qk_scale = 1.4426950408889634",
             note="forgets the 1/sqrt(d) scale"),
    Mutation("tuning", "BLOCK_M, BLOCK_N = 128, 64", "BLOCK_M, BLOCK_N = 64, 64", breaks=False),
    Mutation("tuning", "num_warps=8, num_stages=3", "num_warps=4, num_stages=2", breaks=False),
)

register_task(Task(
    id="attention",
    category="attention",
    instruction=(
        "Write a Triton kernel and a Python wrapper `attention(q, k, v)` computing scaled dot-product attention "
        "softmax(q @ k^T / sqrt(d)) @ v without a mask, for q, k, v of shape (B, H, S, 64) in float16 or "
        "bfloat16 (S up to 1024, arbitrary). Compute the softmax in float32 (e.g. an online softmax over key "
        "blocks); return (B, H, S, 64) in q's dtype."
    ),
    entry_point="attention",
    signature="def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor",
    reference=lambda q, k, v: _attention(q, k, v, causal=False),
    make_inputs=_qkv,
    dtypes=HALVES,
    visible=VISIBLE,
    hidden_gpu=case_grid("hidden", GPU_SHAPES, HALVES, SEEDS),
    hidden_cpu=hidden_grid(CPU_SHAPES, HALVES, cpu=True),
    perf=PERF,
    baseline_file="attention.py",
    difficulty=4,
    bytes_moved=_bytes,
    flops=lambda c: _flops(c, causal=False),
    mutations=(
        Mutation("missing_kv_mask", '        qk = tl.where(cols[None, :] < seq_len, qk, -float("inf"))\n', "",
                 note="padded keys get score 0: right only when S is a multiple of the key block"),
        *SHARED_MUTATIONS,
    ),
))

register_task(Task(
    id="causal_attention",
    category="attention",
    instruction=(
        "Write a Triton kernel and a Python wrapper `causal_attention(q, k, v)` computing causal scaled "
        "dot-product attention (query i attends to keys 0..i), softmax(q @ k^T / sqrt(d) + causal mask) @ v, "
        "for q, k, v of shape (B, H, S, 64) in float16 or bfloat16 (S up to 1024, arbitrary). Compute the "
        "softmax in float32 and skip key blocks that are entirely masked; return (B, H, S, 64) in q's dtype."
    ),
    entry_point="causal_attention",
    signature="def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor",
    reference=lambda q, k, v: _attention(q, k, v, causal=True),
    make_inputs=_qkv,
    dtypes=HALVES,
    # One key block in both visible cases (as in small public tests): a kernel that forgets to
    # rescale its accumulator passes them and fails the longer hidden sequences.
    visible=(case("visible-1x2x64", "float16", 0, batch=1, heads=2, seq=64),
             case("visible-2x2x64", "float16", 1, batch=2, heads=2, seq=64)),
    hidden_gpu=case_grid("hidden", GPU_SHAPES, HALVES, SEEDS),
    hidden_cpu=hidden_grid(CPU_SHAPES, HALVES, cpu=True),
    perf=PERF,
    baseline_file="causal_attention.py",
    difficulty=5,
    bytes_moved=_bytes,
    flops=lambda c: _flops(c, causal=True),
    mutations=(
        Mutation("strict_causal", "(offs_m[:, None] >= cols[None, :])", "(offs_m[:, None] > cols[None, :])",
                 note="a query no longer attends to itself; the first query attends to nothing"),
        Mutation("empty_loop", "hi = tl.minimum((start_m + 1) * BLOCK_M, seq_len)", "hi = tl.minimum(start_m * BLOCK_M, seq_len)",
                 note="the diagonal block is never visited"),
        Mutation("tuning", "hi = tl.minimum((start_m + 1) * BLOCK_M, seq_len)", "hi = seq_len", breaks=False,
                 note="visits fully masked key blocks: still right, slower"),
        *SHARED_MUTATIONS,
    ),
))
