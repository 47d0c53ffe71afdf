# Subtly wrong kernel (issue 44's surviving mutant): the store's mask lets one lane past the end
# (`<=` for `<`), so wherever the size is not a multiple of the block it writes one element past
# the output it allocated. The values compared are right; on the interpreter the write lands in
# the heap, unseen or only sometimes fatal. Expected verdict: wrong_result, from the guard bytes
# after every CPU tensor a judged call allocates (judge/candidate/allocations.py `overruns`).
import torch
import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets <= n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    _add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out
