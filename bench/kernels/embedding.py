import torch
import triton
import triton.language as tl


@triton.jit
def _embedding_kernel(ids_ptr, weight_ptr, out_ptr, stride_w, stride_o, dim, BLOCK_D: tl.constexpr):
    tok = tl.program_id(0)
    row = tl.load(ids_ptr + tok)
    for start in range(0, dim, BLOCK_D):
        offs = start + tl.arange(0, BLOCK_D)
        mask = offs < dim
        vals = tl.load(weight_ptr + row * stride_w + offs, mask=mask)
        tl.store(out_ptr + tok * stride_o + offs, vals, mask=mask)


def embedding(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    flat = ids.contiguous().view(-1)
    n_tokens = flat.numel()
    weight = weight.contiguous()
    dim = weight.shape[1]
    out = torch.empty((n_tokens, dim), device=weight.device, dtype=weight.dtype)
    BLOCK_D = 256
    _embedding_kernel[(n_tokens,)](flat, weight, out, weight.stride(0), out.stride(0), dim, BLOCK_D=BLOCK_D, num_warps=4)
    return out.view(*ids.shape, dim)
