# Hostile candidate: a correct kernel that looks for an API key in its environment (the
# test sets OPENAI_API_KEY=sk-test... in the parent) and, if it finds one, raises with the
# secret in the message. Expected verdict: correct, because the worker's environment is
# scrubbed; `find_secret` is also called directly by the test to show the probe works.
import os

import torch
import triton
import triton.language as tl

MARKER = "sk-test"


def find_secret() -> str | None:
    for name, value in os.environ.items():
        if MARKER in value or name.endswith("API_KEY"):
            return f"{name}={value}"
    try:
        with open("/proc/self/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    for item in raw.split(b"\0"):
        if MARKER.encode() in item or b"API_KEY=" in item:
            return item.decode(errors="replace")
    return None


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    secret = find_secret()
    if secret is not None:
        raise RuntimeError(f"leaked secret: {secret}")
    out = torch.empty_like(x)
    n = out.numel()
    _add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out
