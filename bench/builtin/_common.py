"""Shared helpers for built-in task definitions: seeded inputs and size/byte arithmetic."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from bench.task import STRIDED_LAYOUTS, Case, case_grid

ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "int32": 4, "int64": 8}

SEEDS = range(5)


def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def generator(case: Case, salt: int = 0, device: str = "cpu") -> torch.Generator:
    """A seeded generator on `device`, where the inputs are drawn (`_draw_device`).

    Why on the target device: the CPU draws about 0.5 GB/s per thread, and a GPU judge's
    hidden inputs run to gigabytes per task (embedding 7.8 GiB, swiglu 4.4 GiB); drawn on the
    CPU they took most of a correct candidate's hidden judging, about twenty times as long as it
    took once drawn on the GPU. The values are a deterministic function of the case, the salt and where they
    are drawn: reruns on one machine see the same inputs, but a CPU and a GPU judge of the same
    case see different draws of the same distribution (and GPU models may differ: torch's
    counter offsets follow the launch grid)."""
    g = torch.Generator(device=device)
    g.manual_seed(case.seed * 1_000_003 + salt)
    return g


def _draw_device(device: str) -> str:
    """Where a case's values are drawn: on the GPU the judge runs on; on the CPU for any other
    device (the CPU interpreter, or `meta` when a case is only sized)."""
    return device if torch.device(device).type == "cuda" else "cpu"


def randn(shape: tuple[int, ...], case: Case, device: str, salt: int = 0, scale: float = 1.0,
          dtype: str | None = None) -> torch.Tensor:
    where = _draw_device(device)
    t = torch.randn(shape, generator=generator(case, salt, where), dtype=torch.float32, device=where) * scale
    return t.to(device=device, dtype=torch_dtype(dtype or case.dtype))


def randint(low: int, high: int, shape: tuple[int, ...], case: Case, device: str, salt: int = 0,
            dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """Integers in [low, high), e.g. indices; int64 unless asked otherwise."""
    where = _draw_device(device)
    t = torch.randint(low, high, shape, generator=generator(case, salt, where), dtype=torch.int64, device=where)
    return t.to(device=device, dtype=dtype)


def wide_dtype(x: torch.Tensor) -> torch.dtype:
    """The accumulation dtype a reference should use: float64 stays float64 (so the oracle's
    float64 run is really float64), anything narrower is widened to float32."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def nbytes(case: Case, n_elements: int) -> int:
    return ELEMENT_BYTES[case.dtype] * n_elements


def sizes(keys: str, shapes: Iterable[tuple[int, ...]]) -> list[dict[str, int]]:
    """`sizes("rows,cols", [(3, 7)])` -> `[{"rows": 3, "cols": 7}]`: shape lists stay readable."""
    names = [k.strip() for k in keys.split(",")]
    out = []
    for shape in shapes:
        if len(shape) != len(names):
            raise ValueError(f"shape {shape} does not match keys {names}")
        out.append(dict(zip(names, shape, strict=True)))
    return out


# ---------------------------------------------------------------- hidden cases that vary everything

BF16_CPU_SEEDS = (1, 4)  # the interpreter emulates bfloat16: two seeds keep CPU judging quick
STRIDED_SEEDS = (2, 3)


def hidden_grid(shapes: list[dict[str, int]], dtypes: Iterable[str], *, cpu: bool, strided: bool = False,
                strided_shapes: list[dict[str, int]] | None = None) -> tuple[Case, ...]:
    """Every shape x dtype x seed (on the CPU, bfloat16 at two seeds only), plus, for tasks
    whose contract allows non-contiguous inputs, the same values in strided memory on a few shapes:
    padded rows, and padded rows whose last dimension also steps by 2 (bench/task.py
    `STRIDED_LAYOUTS`: a softmax that ignores the inner stride passed padded rows alone)."""
    dtypes = tuple(dtypes)
    half_seeds = BF16_CPU_SEEDS if cpu else SEEDS
    cases = case_grid("hidden", shapes, [d for d in dtypes if d != "bfloat16"], SEEDS)
    if "bfloat16" in dtypes:
        cases += case_grid("hidden", shapes, ("bfloat16",), half_seeds)
    if strided:
        for layout in STRIDED_LAYOUTS:
            cases += case_grid("hidden", strided_shapes or shapes[-2:], dtypes[:1], STRIDED_SEEDS, layout=layout)
    return cases


def value_profile(c: Case) -> str:
    """What a seed stresses besides the sizes: seed 2 ties (values on a coarse grid), seed 3
    very negative values, seed 4 large magnitudes; 0 and 1 plain draws."""
    return ("plain", "plain", "ties", "negative", "large")[c.seed % 5]


def stressed(x: torch.Tensor, c: Case, negative: float = -1000.0, large: float = 300.0) -> torch.Tensor:
    """`x` moved into the case's value profile (computed in float32, returned in x's dtype):
    ties round to a grid of 0.5 (many equal maxima in a row), negative shifts far below zero
    (a max padded with 0.0, or an exp without max subtraction, fails), large scales up (x*x
    overflows float16, so statistics computed in half precision fail). Values stay within x's
    dtype's finite range: scaled past it they were infinities, and inf - inf is a NaN whose
    handling no instruction specifies (on an H200, add_relu's expert turned relu(NaN) into 0
    where torch keeps NaN, on 4M-element float16 inputs scaled by 2e4)."""
    profile = value_profile(c)
    if profile == "plain":
        return x
    xf = x.to(torch.float32)
    if profile == "ties":
        xf = torch.round(xf * 2.0).clamp(-4.0, 4.0) / 2.0
    elif profile == "negative":
        xf = xf + negative
    else:
        xf = xf * large
    if x.dtype.is_floating_point:
        finite = torch.finfo(x.dtype).max
        xf = xf.clamp(-finite, finite)
    return xf.to(x.dtype)


# ---------------------------------------------------------------- tall cases: GPU only

TALL_ROWS = 70_001
"""Rows of a tall case: past 65,535, the most programs CUDA launches along grid axis 1 or 2, so a
kernel that puts one row per program on one of those axes fails to launch (axis 0 takes 2^31 - 1)."""


def tall_case(dtype: str, **dims: int) -> Case:
    """One hidden case of a row-wise task with `TALL_ROWS` rows (the caller names which size is
    the rows), for `hidden_gpu` only: the interpreter runs one program per row, so on the CPU it
    would take minutes, and the CPU has no grid limit to catch. Its name says it is GPU only."""
    return case_grid("hidden-gpu-only-tall", [dims], (dtype,), (0,))[0]
