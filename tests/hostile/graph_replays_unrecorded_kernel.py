# Hostile candidate (issue 41, "Triton did the work" on a GPU): a CUDA graph of a Triton add
# kernel, captured on static buffers the first time, is replayed on every call (the inputs
# copied in, the result copied out): the graph's kernels run without passing the launch
# recorder, and one token launch, recorded, vouches for the output. The device's trace shows
# the candidate's kernel running more often than the record says: torch_fallback.
import torch
import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    tl.store(out_ptr + at, tl.load(x_ptr + at, mask=inside) + tl.load(y_ptr + at, mask=inside), mask=inside)


@triton.jit
def _touch(out_ptr, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + at, tl.load(out_ptr + at, mask=at < n), mask=at < n)


_GRAPHS: dict = {}


def _graph(x: torch.Tensor) -> tuple:
    key = (x.shape, x.dtype)
    if key not in _GRAPHS:
        sx, sy, so = (torch.zeros_like(x).contiguous() for _ in range(3))
        n = x.numel()
        _add[(triton.cdiv(n, 1024),)](sx, sy, so, n, BLOCK=1024)  # compiled before capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            _add[(triton.cdiv(n, 1024),)](sx, sy, so, n, BLOCK=1024)
        _GRAPHS[key] = (graph, sx, sy, so)
    return _GRAPHS[key]


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    graph, sx, sy, so = _graph(x)
    sx.copy_(x.reshape(sx.shape))
    sy.copy_(y.reshape(sy.shape))
    graph.replay()
    out = torch.empty_like(x)
    out.copy_(so.reshape(out.shape))
    _touch[(triton.cdiv(x.numel(), 1024),)](out, x.numel(), BLOCK=1024)
    return out
