"""What a call's output is judged against, and how: the expected output (the reference in
float64, cast back to the dtype it gives on native inputs) and the comparison that raises
`Mismatch` unless an output is within the task's tolerances of it. Runs in the judge process
(judge/oracle.py decides with it; judge/timing.py re-checks a timed output with it).

The rules each answer a way public harnesses were fooled (judge/oracle.py): the reference runs in
float64; NaN where the reference is finite never passes; a constant output where the reference
varies fails; complex outputs are judged per component. Elements a suite's reference never
writes are not judged (`accept_unwritten`; judge/reference_habits.py finds them).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from bench.sequences import same_kind
from bench.slack import padded_copy
from bench.task import Case, Task
from judge import fused_compare
from judge.candidate.launches import add_inputs
from judge.candidate.value_text import describe_value


def _clone_args(args: tuple) -> tuple:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def _to_float64(args: tuple) -> tuple:
    def precise(a: Any) -> Any:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            return a.to(torch.float64)
        if isinstance(a, torch.Tensor) and a.is_complex():
            return a.to(torch.complex128)
        return a

    return tuple(precise(a) for a in args)


def expected_output(task: Task, args: tuple, case: Case | None = None, slack: str = "") -> Any:
    """Reference in float64, cast back to the dtype the reference gives on native inputs (a
    suite's Triton reference: its native run alone).
    `slack` (a suite's Triton reference), "zero" or "nan": every copy it gets is followed in
    memory by slack (bench/slack.py `padded_copy`), so what it reads past an input's end is
    known, and what it writes there lands in the slack."""
    written = task.output_args(case).written if case is not None else ()

    def copies(values: tuple) -> tuple:
        copied = values if not slack else tuple(padded_copy(a, nan_slack=slack == "nan") for a in values)
        # Inside the judge's recording of the reference (`expected_and_unwritten`), these copies
        # are the call's inputs: a launch that receives one has not thereby written it.
        add_inputs(tuple(a for i, a in enumerate(copied) if i not in written))
        return copied

    native = call_seeded(task, case, task.reference, copies(_clone_args(args)))
    if task.triton_reference:
        # A suite's Triton kernel is the specification in the dtypes it is given: widened inputs
        # change what it computes, or cannot compile. Guessing which float64 inputs the judge
        # widened cast back the ones a suite's test passes as float64 itself (FlagGems' uniform_,
        # softmax and masked_select: every such reference "returned" float32 on an H200).
        return native
    precise = call_seeded(task, case, task.reference, copies(_to_float64(_clone_args(args))))
    return _cast_like(precise, native)


def _cast_like(precise: Any, native: Any) -> Any:
    if isinstance(native, torch.Tensor):
        return precise.to(native.dtype)
    if isinstance(native, (tuple, list)):
        return same_kind(native, (_cast_like(p, n) for p, n in zip(precise, native, strict=True)))
    return precise


class Mismatch(Exception):
    def __init__(self, message: str, max_abs: float | None = None, max_rel: float | None = None):
        super().__init__(message)
        self.max_abs = max_abs
        self.max_rel = max_rel


def compare(out: Any, expected: Any, task: Task, path: str = "output") -> tuple[float, float]:
    """Raise `Mismatch` unless `out` matches `expected`; return (max abs err, max rel err)."""
    if isinstance(expected, (tuple, list)):
        if not isinstance(out, (tuple, list)) or len(out) != len(expected):
            raise Mismatch(f"{path}: expected a sequence of {len(expected)} tensors, got {type(out).__name__}")
        worst = (0.0, 0.0)
        for i, (o, e) in enumerate(zip(out, expected, strict=True)):
            a, r = compare(o, e, task, f"{path}[{i}]")
            worst = (max(worst[0], a), max(worst[1], r))
        return worst
    if not isinstance(out, torch.Tensor):
        raise Mismatch(f"{path}: expected a tensor, got {type(out).__name__}")
    if tuple(out.shape) != tuple(expected.shape):
        raise Mismatch(f"{path}: shape {tuple(out.shape)} != expected {tuple(expected.shape)}")
    if out.dtype != expected.dtype:
        raise Mismatch(f"{path}: dtype {out.dtype} != expected {expected.dtype}")
    if out.device.type != expected.device.type:
        raise Mismatch(f"{path}: on {out.device}, expected {expected.device}")
    if out.numel() == 0:
        return 0.0, 0.0
    if expected.is_complex():
        # Judged per component: a cast to float64 would silently drop the imaginary part.
        out, expected = torch.view_as_real(out.detach()), torch.view_as_real(expected.detach())
    tol = task.tolerance(str(expected.dtype).removeprefix("torch."))
    fused = fused_compare.summary(out, expected, tol.atol, tol.rtol)  # on a GPU: one kernel, one read
    if fused is not None and not any(fused[:3]):  # no element fails (a failure is worked out below)
        return _checked_span(_Summary(*fused), out.numel(), tol.atol, lambda: float(out.reshape(-1)[0]), path)
    values, failures = _torch_parts(out, expected, tol.atol, tol.rtol)
    s = _Summary(*values)
    if s.nonfinite_missing:
        raise Mismatch(f"{path}: {failures.nonfinite_missing} NaN/Inf values where the reference is finite",
                       float("inf"), float("inf"))
    if s.special_missing:
        raise Mismatch(f"{path}: non-finite reference values not reproduced")
    if s.any_bad and failures.first_bad is not None:
        idx = failures.first_bad
        raise Mismatch(  # garbage is described against the answer's magnitude
            f"{path}: {failures.bad}/{out.numel()} elements outside atol={tol.atol} rtol={tol.rtol}; "
            f"first at flat index {idx}: got {describe_value(_element(out, idx), s.e_scale)}, "
            f"expected {_element(expected, idx):.6g}",
            s.max_abs, s.max_rel,
        )
    return _checked_span(s, out.numel(), tol.atol, lambda: _element(out, 0), path)


def _element(t: torch.Tensor, flat_index: int) -> float:
    """Element `flat_index` (row-major) of `t` as a float, as its float64 copy would read it,
    without copying `t`."""
    return float(t.detach()[torch.unravel_index(torch.tensor(flat_index), t.shape)].to(torch.float64))


COMPARE_CHUNK = 1 << 24
"""Elements the PyTorch path compares at once. Why: it makes about eight float64 temporaries of
what it compares, and on a GPU's perf cases one output of 90M elements took 4 GiB of the judge's
memory at once (an H100, 2026-12-05, scripts/judge_memory_probe.py --history); in chunks they
stay near a GiB. Maxima, minima and flags are exact in any order, so the numbers are the same."""


@dataclass(frozen=True)
class _Failures:
    """Where an output fails, for a failure's message: the elements outside tolerance, those
    NaN/Inf where the reference is finite, and the first element outside tolerance (row-major)."""

    bad: int
    nonfinite_missing: int
    first_bad: int | None


def _torch_parts(out: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> tuple[list[float], _Failures]:
    """`_Summary`'s numbers in PyTorch (float64), chunk by chunk (`COMPARE_CHUNK`), and where the
    output fails; read from the device in one copy."""
    o_all, e_all = out.detach().reshape(-1), expected.detach().reshape(-1)
    parts = [_chunk_parts(o_all[i:i + COMPARE_CHUNK], e_all[i:i + COMPARE_CHUNK], atol, rtol, i)
             for i in range(0, max(o_all.numel(), 1), COMPARE_CHUNK)]
    if len(parts) == 1:
        flags, values, counts, first = parts[0]
        combined = torch.cat((flags, values))
    else:
        flag_rows, value_rows, count_rows, firsts = (torch.stack([p[k] for p in parts]) for k in range(4))
        maxima = value_rows[:, (0, 1, 2, 4, 6)].amax(dim=0)  # NaN where any chunk's is, as one max would give
        minima = value_rows[:, (3, 5)].amin(dim=0)
        combined = torch.cat((flag_rows.amax(dim=0), maxima[:3], minima[:1], maxima[3:4], minima[1:], maxima[4:]))
        counts = count_rows.sum(dim=0)
        first = torch.where(firsts >= 0, firsts, torch.inf).amin()
    read = torch.cat((combined, counts.to(torch.float64), first.reshape(1))).tolist()  # one device-to-host sync
    return read[:12], _Failures(int(read[12]), int(read[13]), int(read[14]) if 0 <= read[14] < math.inf else None)


def _chunk_parts(o: torch.Tensor, e: torch.Tensor, atol: float, rtol: float,
                 offset: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One chunk's flags, numbers (`_Summary`'s order), counts of bad and non-finite-missing
    elements, and its first bad element's index in the whole output (-1: none)."""
    o = o.to(torch.float64)
    e = e.to(torch.float64)
    e_finite = torch.isfinite(e)
    o_finite = torch.isfinite(o)
    bad_nonfinite = e_finite & ~o_finite
    same_special = (~e_finite) & ((o == e) | (torch.isnan(o) & torch.isnan(e)))
    diff = torch.where(e_finite, (o - e).abs(), 0.0)
    rel = torch.where(e_finite, diff / e.abs().clamp_min(1e-12), 0.0)
    bad = e_finite & (diff > atol + rtol * e.abs())
    flags = torch.stack((bad_nonfinite.any(), ((~e_finite) & ~same_special).any(), bad.any(), e_finite.any(),
                         o_finite.any())).to(torch.float64)
    values = torch.stack((_max(diff), _max(rel), _masked(e, e_finite, True), _masked(e, e_finite, False),
                          _masked(o, o_finite, True), _masked(o, o_finite, False),
                          _max(torch.where(e_finite, e.abs(), 0.0))))
    counts = torch.stack((bad.sum(), bad_nonfinite.sum()))
    first = (torch.where(bad.any(), torch.argmax(bad.to(torch.uint8)) + offset, -1) if bad.numel()
             else torch.tensor(-1, device=o.device)).to(torch.float64)  # exact below 2**53 elements
    return flags, values, counts, first


def _max(t: torch.Tensor) -> torch.Tensor:
    """The largest element (NaN where any is NaN, as `Tensor.max`), 0 for an empty chunk (the
    caller reads nothing of an empty output)."""
    return t.max() if t.numel() else torch.zeros((), dtype=t.dtype, device=t.device)


def torch_summary(out: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> list[float]:
    """`_Summary`'s numbers, in its order, by the PyTorch path (judge/fused_compare.py checks
    its kernel against this)."""
    return _torch_parts(out, expected, atol, rtol)[0]


def _checked_span(s: _Summary, numel: int, atol: float, first: Callable[[], float], path: str) -> tuple[float, float]:
    """(max abs err, max rel err) of an output whose every element is within tolerance, unless it
    is constant where the reference varies."""
    if numel > 1:
        e_span = s.e_max - s.e_min if s.e_any_finite else 0.0
        o_span = s.o_max - s.o_min if s.o_any_finite else 0.0
        if o_span == 0.0 and e_span > atol:
            constant = describe_value(first(), s.e_scale)
            raise Mismatch(f"{path}: output is constant ({constant}) where the reference varies",
                           s.max_abs, s.max_rel)
    return s.max_abs, s.max_rel


@dataclass(frozen=True)
class _Summary:
    """What `compare` reads of one output, fetched from the device in one copy: each `.any()`,
    `.max()` or boolean-mask index read on its own waits for the GPU, and a hidden case set
    compares hundreds of outputs (measured, about ten such waits per compare added up to a sixth of
    a warm evaluation). Fields in the order both paths give them (`_torch_parts`,
    judge/fused_compare.py `COLUMNS`): the flags (0 or 1), then the numbers."""

    nonfinite_missing: float
    special_missing: float
    any_bad: float
    e_any_finite: float
    o_any_finite: float
    max_abs: float
    max_rel: float
    e_max: float
    e_min: float
    o_max: float
    o_min: float
    e_scale: float  # the largest finite |expected| (0 when none is finite)


def _masked(t: torch.Tensor, mask: torch.Tensor, largest: bool) -> torch.Tensor:
    """The largest (or smallest) of `t`'s elements where `mask` holds, without indexing by the
    mask (which waits for the device); -inf (+inf) when none does, which the caller never reads."""
    masked = torch.where(mask, t, float("-inf") if largest else float("inf"))
    if not masked.numel():
        return torch.tensor(float("-inf") if largest else float("inf"), dtype=t.dtype, device=t.device)
    return masked.max() if largest else masked.min()


def call_seeded(task: Task, case: Case | None, fn: Callable[..., Any], args: tuple) -> Any:
    """`fn(*args)`, torch's generators seeded with the case's seed first where the task draws
    random numbers (`Task.seeded_rng`: candidate and reference get it right before every call,
    the candidate in its own process)."""
    if task.seeded_rng and case is not None:
        torch.manual_seed(case.seed)
    return fn(*args)


def accept_unwritten(out: Any, expected: Any, unwritten: Any) -> Any:
    """`out` with the elements the reference never writes replaced by the expected ones, so the
    comparison ignores them."""
    if unwritten is None:
        return out
    if isinstance(unwritten, torch.Tensor):
        if isinstance(out, torch.Tensor) and out.shape == unwritten.shape and out.dtype == expected.dtype \
                and out.device == expected.device and not out.is_complex():
            return torch.where(unwritten, expected, out)
        return out
    if isinstance(out, (tuple, list)) and isinstance(expected, (tuple, list)) and len(out) == len(unwritten):
        return same_kind(out, (accept_unwritten(o, e, m) for o, e, m in zip(out, expected, unwritten, strict=True)))
    return out


def to_device(out: Any, device: str) -> Any:
    if isinstance(out, torch.Tensor):
        return out.to(device) if out.device.type != torch.device(device).type else out
    if isinstance(out, (tuple, list)):
        return same_kind(out, (to_device(o, device) for o in out))
    return out
