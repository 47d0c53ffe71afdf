# Correct control for the seals on known memory: a table made at import and filled there through
# numpy (no op recorded), and a scratch buffer kept across calls that the kernel rewrites each
# call, are both read by later launches. Writes at import and by kernel stores are the records'
# own, so nothing here may be taken for unrecorded memory. Expected verdict: correct.
import numpy as np
import torch
import triton
import triton.language as tl

_ZEROS = torch.empty(1024)
_ZEROS.numpy()[:] = np.zeros(1024, dtype=np.float32)  # filled through numpy, at import
# On a GPU the table goes to the device at import too: a copy of more than a few elements from
# the host inside the call is host-side work brought in (host_to_device_copy), not what this
# control is about.
_ON_DEVICE = {"cpu": _ZEROS, **({"cuda": _ZEROS.to("cuda")} if torch.cuda.is_available() else {})}
_SCRATCH: dict = {}


@triton.jit
def _add_bias(x_ptr, y_ptr, bias_ptr, out_ptr, count, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < count
    bias = tl.load(bias_ptr + tl.arange(0, BLOCK))
    x = tl.load(x_ptr + at, mask=inside).to(tl.float32)
    y = tl.load(y_ptr + at, mask=inside).to(tl.float32)
    tl.store(out_ptr + at, (x + y + bias).to(out_ptr.dtype.element_ty), mask=inside)


@triton.jit
def _copy(src_ptr, dst_ptr, count, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < count
    tl.store(dst_ptr + at, tl.load(src_ptr + at, mask=inside), mask=inside)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    key = (x.device, x.dtype)
    if key not in _SCRATCH or _SCRATCH[key].numel() < n:
        _SCRATCH[key] = torch.empty(max(n, 1), dtype=x.dtype, device=x.device)
    scratch = _SCRATCH[key]  # rewritten by the kernel below on every call
    bias = _ON_DEVICE[x.device.type]
    grid = (triton.cdiv(n, 1024),)
    _add_bias[grid](x, y, bias, scratch, n, BLOCK=1024)
    out = torch.empty_like(x)
    _copy[grid](scratch, out, n, BLOCK=1024)
    return out
