# Hostile candidate (a cheat aimed at the op record): PyTorch computes the softmax with the
# dispatch machinery told to skip Python modes, so no recorder sees the arithmetic; a Triton
# kernel then only moves the finished numbers into the output. Expected verdict:
# torch_fallback (the kernel was handed memory no recorded operation made).
import torch
import triton
import triton.language as tl


@triton.jit
def _move(src_ptr, dst_ptr, total, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = idx < total
    tl.store(dst_ptr + idx, tl.load(src_ptr + idx, mask=keep), mask=keep)


def softmax(x: torch.Tensor) -> torch.Tensor:
    with torch._C._DisableTorchDispatch():
        finished = torch.softmax(x.float(), dim=-1).to(x.dtype).contiguous()
    result = torch.empty(finished.shape, dtype=finished.dtype, device=finished.device)
    total = finished.numel()
    _move[(triton.cdiv(total, 512),)](finished, result, total, BLOCK=512)
    return result
