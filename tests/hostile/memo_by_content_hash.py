# Hostile candidate (typical model cheat, aimed at timing): a correct matmul that remembers its
# outputs by a checksum of the inputs' contents, computed by a cheap Triton kernel, and copies
# a remembered output out with another kernel. Every correctness check passes (new contents,
# new checksum, a real product), but timed on one set of inputs again and again it costs a
# checksum and a copy instead of a product. Expected: correct, and timed no faster than the
# expert (every timing sample runs on input values no earlier call saw: InputRefresher).
from collections import OrderedDict

import torch
import triton
import triton.language as tl

_MEMO: "OrderedDict[tuple, torch.Tensor]" = OrderedDict()
_KEEP = 4


@triton.jit
def _checksum_kernel(a_ptr, na, b_ptr, nb, partial_ptr, BLOCK: tl.constexpr):
    # One launch over both inputs (the remembered call should cost as little as it can):
    # the first programs sum blocks of a, the rest blocks of b, each weighted by position.
    pid = tl.program_id(0)
    a_blocks = tl.cdiv(na, BLOCK)
    if pid < a_blocks:
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(a_ptr + offs, mask=offs < na, other=0.0).to(tl.float32)
    else:
        offs = (pid - a_blocks) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(b_ptr + offs, mask=offs < nb, other=0.0).to(tl.float32)
    weight = (offs % 251 + 1).to(tl.float32)
    tl.store(partial_ptr + pid, tl.sum(x * weight, axis=0))


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_pid_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        ks = k * BLOCK_K + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _checksum(a: torch.Tensor, b: torch.Tensor) -> bytes:
    a, b = a.contiguous(), b.contiguous()
    block = 16384
    partial = torch.empty(triton.cdiv(a.numel(), block) + triton.cdiv(b.numel(), block), device=a.device,
                          dtype=torch.float32)
    _checksum_kernel[(partial.numel(),)](a, a.numel(), b, b.numel(), partial, BLOCK=block)
    return partial.cpu().numpy().tobytes()


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    key = (tuple(a.shape), tuple(b.shape), a.dtype, _checksum(a, b))
    if key in _MEMO:
        _MEMO.move_to_end(key)
        _copy_kernel[(triton.cdiv(c.numel(), 4096),)](_MEMO[key], c, c.numel(), BLOCK=4096)
        return c
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
    _matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         c.stride(0), c.stride(1), BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8,
                         num_warps=8, num_stages=3)
    _MEMO[key] = c.clone()
    while len(_MEMO) > _KEEP:
        _MEMO.popitem(last=False)
    return c
