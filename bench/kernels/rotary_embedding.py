import torch
import triton
import triton.language as tl


@triton.jit
def _rotary_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr,
                   stride_xs, stride_xh, stride_os, stride_oh, stride_cs,
                   n_heads, half, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    pos = tl.program_id(0)
    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < half
    mask = (offs_h[:, None] < n_heads) & mask_d[None, :]
    c = tl.load(cos_ptr + pos * stride_cs + offs_d, mask=mask_d, other=0.0).to(tl.float32)[None, :]
    s = tl.load(sin_ptr + pos * stride_cs + offs_d, mask=mask_d, other=0.0).to(tl.float32)[None, :]
    x_base = x_ptr + pos * stride_xs + offs_h[:, None] * stride_xh + offs_d[None, :]
    x1 = tl.load(x_base, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_base + half, mask=mask, other=0.0).to(tl.float32)
    o_base = out_ptr + pos * stride_os + offs_h[:, None] * stride_oh + offs_d[None, :]
    tl.store(o_base, (x1 * c - x2 * s).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(o_base + half, (x2 * c + x1 * s).to(out_ptr.dtype.element_ty), mask=mask)


def rotary_embedding(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    cos = cos.contiguous()
    sin = sin.contiguous()
    seq, n_heads, dim = x.shape
    half = dim // 2
    out = torch.empty_like(x)
    BLOCK_H = triton.next_power_of_2(n_heads)
    BLOCK_D = triton.next_power_of_2(half)
    _rotary_kernel[(seq,)](x, cos, sin, out, x.stride(0), x.stride(1), out.stride(0), out.stride(1), cos.stride(0),
                           n_heads, half, BLOCK_H=BLOCK_H, BLOCK_D=BLOCK_D, num_warps=4)
    return out
