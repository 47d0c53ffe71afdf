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
    values, o, e, bad, bad_nonfinite = _torch_parts(out, expected, tol.atol, tol.rtol)
    s = _Summary(*values)
    if s.nonfinite_missing:
        raise Mismatch(f"{path}: {int(bad_nonfinite.sum())} NaN/Inf values where the reference is finite",
                       float("inf"), float("inf"))
    if s.special_missing:
        raise Mismatch(f"{path}: non-finite reference values not reproduced")
    if s.any_bad:
        idx = int(bad.flatten().nonzero()[0])
        raise Mismatch(  # garbage is described against the answer's magnitude
            f"{path}: {int(bad.sum())}/{bad.numel()} elements outside atol={tol.atol} rtol={tol.rtol}; "
            f"first at flat index {idx}: got {describe_value(float(o.flatten()[idx]), s.e_scale)}, "
            f"expected {float(e.flatten()[idx]):.6g}",
            s.max_abs, s.max_rel,
        )
    return _checked_span(s, o.numel(), tol.atol, lambda: float(o.flatten()[0]), path)


def _torch_parts(out: torch.Tensor, expected: torch.Tensor, atol: float,
                 rtol: float) -> tuple[list[float], torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """`_Summary`'s numbers in PyTorch (float64), with what a failure's message reads: the
    outputs in float64, the mask of elements outside tolerance and of NaN/Inf where the
    reference is finite."""
    o = out.detach().to(torch.float64)
    e = expected.detach().to(torch.float64)
    e_finite = torch.isfinite(e)
    o_finite = torch.isfinite(o)
    bad_nonfinite = e_finite & ~o_finite
    same_special = (~e_finite) & ((o == e) | (torch.isnan(o) & torch.isnan(e)))
    diff = torch.where(e_finite, (o - e).abs(), 0.0)
    rel = torch.where(e_finite, diff / e.abs().clamp_min(1e-12), 0.0)
    bad = e_finite & (diff > atol + rtol * e.abs())
    flags = torch.stack((bad_nonfinite.any(), ((~e_finite) & ~same_special).any(), bad.any(), e_finite.any(),
                         o_finite.any())).to(torch.float64)
    values = torch.stack((diff.max(), rel.max(), _masked(e, e_finite, True), _masked(e, e_finite, False),
                          _masked(o, o_finite, True), _masked(o, o_finite, False),
                          torch.where(e_finite, e.abs(), 0.0).max()))
    return torch.cat((flags, values)).tolist(), o, e, bad, bad_nonfinite  # one device-to-host sync, not twelve


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
