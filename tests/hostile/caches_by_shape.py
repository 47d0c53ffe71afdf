# Hostile candidate: computes correctly once, then serves results from a cache keyed by the
# inputs' shape and dtype. On the CPU it behaves as caches_data_ptr.py does on a GPU, whose
# caching allocator hands a re-run the same addresses: the memo carries over into the judge's
# re-runs of the failing case (judge/candidate/reruns.py), which must not mistake it for heap garbage.
# Expected verdict: wrong_result after the in-place refill, that text kept.
import torch
import triton
import triton.language as tl

_CACHE: dict = {}


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    key = (tuple(x.shape), x.dtype)
    if key in _CACHE:
        return _CACHE[key]
    out = torch.empty_like(x)
    n = out.numel()
    _add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    _CACHE[key] = out
    return out
