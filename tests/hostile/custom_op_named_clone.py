# Hostile candidate (a cheat aimed at the op record's allow-list): the sum is a `torch.library`
# custom op of the candidate's own namespace named `clone`, so an allow-list matched by bare
# name takes it for `aten::clone` (a copy of known memory); a Triton kernel then copies its
# result into the output. Expected verdict: torch_fallback naming kmc_hostile::clone.
import torch
import triton
import triton.language as tl


@torch.library.custom_op("kmc_hostile::clone", mutates_args=())
def clone(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


@triton.jit
def _relay(src_ptr, dst_ptr, count, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < count
    tl.store(dst_ptr + at, tl.load(src_ptr + at, mask=inside), mask=inside)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    summed = torch.ops.kmc_hostile.clone(x, y)
    out = torch.empty_like(x)
    _relay[(triton.cdiv(x.numel(), 1024),)](summed, out, x.numel(), BLOCK=1024)
    return out
