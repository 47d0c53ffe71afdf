# Hostile candidate (issue 41, "Triton did the work" on a GPU): the sum is computed by a CuPy
# kernel (NVRTC-compiled, launched outside Triton and outside any PyTorch operation) straight
# into the output, and a token Triton kernel is then launched on that output, so the launch
# record shows a launch that "wrote" it and its values match the snapshot taken after it.
# Only the device's own trace shows a kernel that is not the candidate's: torch_fallback.
import cupy
import torch
import triton
import triton.language as tl

_ADD = cupy.RawKernel(r"""
extern "C" __global__ void kmc_hostile_add(const float* x, const float* y, float* out, long long n) {
    long long i = (long long) blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}
""", "kmc_hostile_add")


@triton.jit
def _touch(out_ptr, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + at, tl.load(out_ptr + at, mask=at < n), mask=at < n)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    if x.dtype == torch.float32:
        xs, ys, os_ = (cupy.from_dlpack(t.contiguous()) for t in (x, y, out))
        _ADD(((n + 255) // 256,), (256,), (xs, ys, os_, cupy.int64(n)))
        cupy.cuda.get_current_stream().synchronize()
    else:
        out.copy_(x + y)
    _touch[(triton.cdiv(n, 1024),)](out, n, BLOCK=1024)
    return out
