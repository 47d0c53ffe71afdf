# Hostile candidate (tampering): returns a torch.Tensor subclass whose comparison operators and
# torch functions claim equality with anything. Expected verdict: wrong_result (only plain
# tensors are accepted).
import torch
import triton
import triton.language as tl


class _Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.equal, torch.allclose):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})

    def __eq__(self, other):  # noqa: D105
        return torch.ones(self.shape, dtype=torch.bool)


@triton.jit
def _zero_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros((BLOCK,), tl.float32), mask=offs < n)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    _zero_kernel[(triton.cdiv(x.numel(), 1024),)](out, x.numel(), BLOCK=1024)
    return out.as_subclass(_Agreeable)
