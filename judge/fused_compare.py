"""The comparison's summary of one output (judge/comparison.py `compare`) in one fused Triton
kernel on a GPU: per block of elements, the flags and extremes the comparison reads, then one
reduction over the blocks and one read to the host.

Why: the comparison in PyTorch launches about twenty-five small kernels per output (casts,
masks, differences, reductions), and on a GPU each costs a launch; once a hold's calls go to
the candidate process in one request (judge/oracle.py `batches`), the judge's side of each call
can become the slower one. The fused kernel computes the same twelve numbers with the same
float64 operations in the same order (no fused multiply-add, IEEE division), so every summary
is bit-for-bit the one PyTorch gives; a summary that says the output fails is worked out again
by the PyTorch path, which also names the failing element.

Trusted only after a self-check on the device (`_trusted`): both paths on crafted outputs
(finite, NaN, infinities, several dtypes, sizes off the block), and at the first difference or
error the fused path is off for the process, with one line on stderr. `KMC_FUSED_COMPARE=0`
turns it off; on the CPU (and under the interpreter) the PyTorch path runs, except in the tests
that check the kernel against it there.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

import torch
import triton
import triton.language as tl

FUSED_ENV = "KMC_FUSED_COMPARE"
BLOCK = 1024
COLUMNS = 12
"""nonfinite_missing, special_missing, any_bad, e_any_finite, o_any_finite (flags, 0 or 1), then
max_abs, max_rel, e_max, -e_min, o_max, -o_min, e_scale: every column a maximum over blocks
(the minimums negated), in the order `judge.comparison._Summary` reads them."""
_MIN_COLUMNS = (8, 10)


@triton.jit
def _summary_kernel(o_ptr, e_ptr, tol_ptr, out_ptr, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    o = tl.load(o_ptr + at, mask=inside, other=0).to(tl.float64)
    e = tl.load(e_ptr + at, mask=inside, other=0).to(tl.float64)
    atol = tl.load(tol_ptr)
    rtol = tl.load(tol_ptr + 1)
    tiny = tl.load(tol_ptr + 2)  # 1e-12 in float64: a literal would be float32 on a GPU (9.99999996e-13)
    e_fin = inside & (e - e == 0)  # finite: x - x is NaN for NaN and both infinities
    o_fin = inside & (o - o == 0)
    same_special = (o == e) | ((o != o) & (e != e))
    special_missing = inside & ~e_fin & ~same_special
    e_abs = tl.abs(e)
    diff = tl.where(e_fin, tl.abs(o - e), 0.0)
    rel = tl.where(e_fin, diff / tl.maximum(e_abs, tiny), 0.0)  # float64 division is IEEE-rounded
    bad = e_fin & (diff > atol + rtol * e_abs)
    row = out_ptr + tl.program_id(0) * 12
    tl.store(row + 0, tl.max((e_fin & ~o_fin & inside).to(tl.int32), 0).to(tl.float64))
    tl.store(row + 1, tl.max(special_missing.to(tl.int32), 0).to(tl.float64))
    tl.store(row + 2, tl.max(bad.to(tl.int32), 0).to(tl.float64))
    tl.store(row + 3, tl.max(e_fin.to(tl.int32), 0).to(tl.float64))
    tl.store(row + 4, tl.max(o_fin.to(tl.int32), 0).to(tl.float64))
    tl.store(row + 5, tl.max(tl.where(inside, diff, 0.0), 0))
    tl.store(row + 6, tl.max(tl.where(inside, rel, 0.0), 0))
    tl.store(row + 7, tl.max(tl.where(e_fin, e, float("-inf")), 0))
    tl.store(row + 8, tl.max(tl.where(e_fin, -e, float("-inf")), 0))
    tl.store(row + 9, tl.max(tl.where(o_fin, o, float("-inf")), 0))
    tl.store(row + 10, tl.max(tl.where(o_fin, -o, float("-inf")), 0))
    tl.store(row + 11, tl.max(tl.where(e_fin, e_abs, 0.0), 0))


def _flat(t: torch.Tensor) -> torch.Tensor:
    """Contiguous and loadable: booleans as bytes (the values 0 and 1, as float64 sees them)."""
    t = t.detach().reshape(-1)
    return t.to(torch.uint8) if t.dtype == torch.bool else t.contiguous()


def fused_summary(out: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> list[float]:
    """The twelve numbers of `judge.comparison._Summary`, for real outputs of equal shape and at
    least one element (complex ones come as `view_as_real`), from one kernel and one read."""
    o, e = _flat(out), _flat(expected)
    n = o.numel()
    blocks = triton.cdiv(n, BLOCK)
    partial = torch.empty((blocks, COLUMNS), dtype=torch.float64, device=o.device)
    tol = torch.tensor([atol, rtol, 1e-12], dtype=torch.float64, device=o.device)  # judge/comparison.py's floor
    _summary_kernel[(blocks,)](o, e, tol, partial, n, BLOCK=BLOCK, enable_fp_fusion=False)
    values = partial.amax(dim=0).tolist()
    for c in _MIN_COLUMNS:
        values[c] = -values[c]
    return values


_STATE: dict[tuple[str, torch.dtype], bool] = {}  # (device type, dtype) -> passed its self-check there
PREPARED = (torch.float32, torch.float16, torch.bfloat16)
"""The dtypes a GPU worker self-checks ahead, beside its first jobs (`prepare`): the check compiles
the kernel for each, which would otherwise happen at a first comparison, under a GPU ticket."""


_LOCK = threading.Lock()
"""Held around every use of the kernel: `prepare` checks it on a worker's background thread, and
two threads never compile or launch it at once (a comparison meanwhile takes the PyTorch path)."""


def summary(out: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> list[float] | None:
    """`fused_summary` where it may judge this pair (`usable`), else None: the PyTorch path's turn."""
    if not _LOCK.acquire(blocking=False):
        return None
    try:
        return fused_summary(out, expected, atol, rtol) if usable(out, expected) else None
    finally:
        _LOCK.release()


def usable(out: torch.Tensor, expected: torch.Tensor) -> bool:
    """Whether `fused_summary` judges this pair: on a GPU, switched on, self-checked there for
    this dtype (the first time here, where `prepare` has not)."""
    if os.environ.get(FUSED_ENV, "1") == "0" or out.device.type == "cpu" or out.device != expected.device:
        return False
    if out.dtype.is_complex or out.dtype != expected.dtype:
        return False
    return _trusted(out.device, out.dtype)


def prepare(device: str, dtypes: tuple[torch.dtype, ...] = PREPARED) -> None:
    """Self-check `dtypes` now (judge/worker.py, in its background preparation on a GPU)."""
    if os.environ.get(FUSED_ENV, "1") != "0":
        for dtype in dtypes:
            with _LOCK:
                _trusted(torch.device(device), dtype)


def _trusted(device: torch.device, dtype: torch.dtype) -> bool:
    key = (device.type, dtype)
    if key not in _STATE:
        _STATE[key] = False  # meanwhile (another thread checking it), the PyTorch path
        problem = self_check(str(device), dtype)
        if problem:
            print(f"kmc judge: the fused comparison is off for {dtype} in this process: {problem}",
                  file=sys.stderr, flush=True)
        _STATE[key] = not problem
    return _STATE[key]


def self_check(device: str, dtype: torch.dtype, reference: Callable[..., list[float]] | None = None) -> str:
    """"" when `fused_summary` gives, on crafted outputs of `dtype`, exactly the numbers of the
    PyTorch path (`reference`: judge/comparison.py `torch_summary`); else what differed or failed."""
    if reference is None:
        from judge.comparison import torch_summary

        reference = torch_summary
    try:
        for name, out, expected, atol, rtol in _crafted(device, dtype):
            fused = fused_summary(out, expected, atol, rtol)
            plain = reference(out, expected, atol, rtol)
            if not _same(fused, plain):
                return f"{name}: {fused} != {plain}"
    except Exception as exc:  # noqa: BLE001 - any failure means the PyTorch path judges
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    return ""


def _same(a: list[float], b: list[float]) -> bool:
    """Equal numbers, NaN equal to NaN; the largest errors are left out where NaN or Inf stands
    where the reference is finite (PyTorch's maximum keeps a NaN there, the kernel's need not,
    and that failure is worked out again by the PyTorch path)."""
    if len(a) != COLUMNS or len(b) != COLUMNS:
        return False
    skip = {5, 6} if a[0] and b[0] else set()
    return all(x == y or (x != x and y != y) for i, (x, y) in enumerate(zip(a, b, strict=True)) if i not in skip)


def _crafted(device: str, dtype: torch.dtype) -> list[tuple[str, torch.Tensor, torch.Tensor, float, float]]:
    """Outputs of `dtype` close to, matching the NaN and infinities of, missing them in, and all
    off from a random expected output, at sizes on and off the block and at addresses off
    Triton's 16-byte alignment (a view one element in, made on the device: Triton compiles such
    pointers apart); integers and booleans equal and unequal."""
    g = torch.Generator(device="cpu").manual_seed(0)
    cases: list[tuple[str, torch.Tensor, torch.Tensor, float, float, int]] = []  # ..., elements cut off the front
    if not dtype.is_floating_point:
        values = torch.randint(-50, 50, (BLOCK + 9,), generator=g)
        e = values > 0 if dtype == torch.bool else values.to(dtype)
        cases += [("equal", e.clone(), e, 0.0, 0.0, 0), ("unequal", e.flip(0), e, 0.0, 0.0, 0),
                  ("off the alignment", e.clone(), e, 0.0, 0.0, 1)]
    for n in () if not dtype.is_floating_point else (1, 7, BLOCK, BLOCK + 3, 3 * BLOCK + 517):
        atol = rtol = {torch.float16: 1e-3, torch.bfloat16: 1e-2, torch.float64: 1e-7}.get(dtype, 1e-5)
        e = torch.randn(n, generator=g).to(dtype)
        e[::5] = 0.0  # where the relative error divides by the floor (1e-12)
        o = (e.double() + 1e-4 * torch.randn(n, generator=g, dtype=torch.float64)).to(dtype)
        cases.append((f"n={n} close", o, e, atol, rtol, 0))
        if n > 3:
            special, matched = e.clone(), o.clone()
            for t in (special, matched):
                t[0], t[1], t[2] = float("nan"), float("inf"), float("-inf")
            wrong = matched.clone()
            wrong[1], wrong[3] = float("-inf"), float("nan")
            cases += [(f"n={n} specials matched", matched, special, atol, rtol, 0),
                      (f"n={n} specials wrong", wrong, special, atol, rtol, 0),
                      (f"n={n} all off", o + 1, e, atol, rtol, 0), (f"n={n} off the alignment", o, e, atol, rtol, 1)]
    return [(f"{dtype} {name}", o.to(device)[cut:], e.to(device)[cut:], atol, rtol)
            for name, o, e, atol, rtol, cut in cases]
