"""The correctness oracle. Runs inside a worker process, never in the parent.

Each defence answers a way public harnesses (KernelBench, TritonBench, GEAK-eval) were
fooled: the reference runs in float64; outputs the candidate allocates with
`torch.empty*` are poisoned with NaN (or a sentinel for integers) so stale memory never
passes; inputs are cloned and checked unmodified; the candidate runs again after the
inputs are rewritten *in place* (same data pointers, new values), which defeats caches
keyed by `data_ptr`; NaN where the reference is finite never passes; a constant output
where the reference varies fails; a call that launched no Triton kernel is `no_kernel`, and
so is one whose returned tensor no launched kernel received (a token launch beside a
PyTorch result). Poisoning wraps the allocators for the life of the worker (switched on
only while judging), so a candidate that bound `torch.empty_like` at import is poisoned too.
"""

from __future__ import annotations

import contextlib
import functools
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from bench.modules import import_file
from bench.task import Case, CaseUnavailable, OutputArgs, Task
from judge.value_text import describe_value
from judge.verdict import Verdict

DEVICE_ERROR_MARKERS = (
    "illegal memory access",
    "an illegal instruction",
    "misaligned address",
    "device-side assert",
    "unspecified launch failure",
    "CUDA error",
    "HIP error",
    "hipError",
    "cudaError",
)

class _LaunchLog:
    """Kernel launches seen in this process, and (while recording) the tensors they received.

    Held in an object rather than module globals so a candidate assigning to a module
    attribute cannot fake a launch; the tensors let the judge check that the returned
    output was actually written by a kernel (not computed by PyTorch on the side)."""

    def __init__(self) -> None:
        self.count = 0
        self.recording = False
        self.tensors: list[torch.Tensor] = []

    def saw(self, args: tuple, kwargs: dict[str, Any]) -> None:
        self.count += 1
        if self.recording:
            for a in (*args, *kwargs.values()):
                t = kernel_tensor(a)
                if t is not None:
                    self.tensors.append(t)


_LOG = _LaunchLog()


def install_launch_counter() -> None:
    """Count Triton kernel launches by wrapping the `run` of every kernel class.

    Autotuners and heuristics wrappers end in `JITFunction.run` (or, in the interpreter,
    `InterpretedFunction.run`), so counting there sees every real launch.
    """
    classes: list[Any] = []
    from triton.runtime.jit import JITFunction

    classes.append(JITFunction)
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:  # pragma: no cover - every supported triton has it
        pass
    for cls in classes:
        if getattr(cls.run, "_counted", False):
            continue
        original = cls.run

        def counted(self: Any, *args: Any, __original: Callable = original, **kwargs: Any) -> Any:
            _LOG.saw(args, kwargs)
            return __original(self, *args, **kwargs)

        counted._counted = True  # type: ignore[attr-defined]
        cls.run = counted


def launches() -> int:
    return _LOG.count


def prepare_process() -> None:
    """Install the launch counter and the poisoning allocators *before* any candidate is
    imported, so a candidate that binds `torch.empty_like` at import gets the poisoned one."""
    install_launch_counter()
    install_poisoned_allocations()


class CandidateLoadError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def load_module(path: Path, module_name: str) -> Any:
    """Import a candidate from its own file (Triton's `@jit` refuses source from `exec`)."""
    source = path.read_text()
    try:
        compile(source, str(path), "exec")
    except (SyntaxError, ValueError) as exc:
        raise CandidateLoadError("syntax_error", f"{type(exc).__name__}: {exc}") from None
    try:
        return import_file(path, module_name)
    except BaseException as exc:  # noqa: BLE001 - SystemExit from candidate code is a verdict too
        raise CandidateLoadError(classify_exception(exc), f"import failed: {format_exception(exc)}") from None


def format_exception(exc: BaseException, limit: int = 2000) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return text[-limit:]


def mentions_device_error(text: str) -> bool:
    return any(marker in text for marker in DEVICE_ERROR_MARKERS)


def is_device_error(exc: BaseException) -> bool:
    return mentions_device_error(f"{type(exc).__name__}: {exc}")


# Errors the interpreter raises while tracing a kernel body that the GPU compiler would
# reject before launch (unknown `tl` names, type and shape checks): the same candidate must
# get the same verdict on the CPU interpreter and on a GPU.
_INTERPRETER_COMPILE_CAUSES = (AttributeError, NameError, TypeError, ValueError)


def classify_exception(exc: BaseException) -> str:
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    if name == "InterpreterError":
        cause = exc.__cause__
        if isinstance(cause, _INTERPRETER_COMPILE_CAUSES) and not mentions_device_error(str(cause)):
            return "compile_error"
        return "runtime_error"
    if name == "CompilationError" or "triton.compiler" in module:
        return "compile_error"
    if isinstance(exc, SyntaxError):
        return "syntax_error"
    if isinstance(exc, AttributeError) and "triton.language" in str(exc):
        return "compile_error"
    return "runtime_error"


# ---------------------------------------------------------------- poisoned allocations

_POISON_INT = -0x5A5A


def _poison(t: torch.Tensor) -> torch.Tensor:
    if t.numel() == 0:
        return t
    if t.is_floating_point() or t.is_complex():
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        info = torch.iinfo(t.dtype)
        t.fill_(max(info.min, min(info.max, _POISON_INT)) if info.min < 0 else info.max // 3)
    return t


class _PoisonState:
    installed = False
    on = False
    marker = False  # fill with a finite marker instead (finding what a reference leaves unwritten)


def install_poisoned_allocations() -> None:
    """Wrap `torch.empty*` and `Tensor.new_empty` once, for the life of the process; the
    wrappers poison only while `poisoned_allocations()` is active (judging, not timing)."""
    if _PoisonState.installed:
        return
    _PoisonState.installed = True

    def wrap(fn: Callable) -> Callable:
        def maybe_poisoned(*args: Any, **kwargs: Any) -> Any:
            t = fn(*args, **kwargs)
            if _PoisonState.marker:
                return _mark(t)
            return _poison(t) if _PoisonState.on else t

        maybe_poisoned.__wrapped__ = fn  # type: ignore[attr-defined]
        return maybe_poisoned

    for name in ("empty", "empty_like", "empty_strided"):
        setattr(torch, name, wrap(getattr(torch, name)))
    torch.Tensor.new_empty = wrap(torch.Tensor.new_empty)  # type: ignore[method-assign]


@contextlib.contextmanager
def poisoned_allocations() -> Iterator[None]:
    """Make every `torch.empty*` the candidate calls return poisoned memory."""
    install_poisoned_allocations()
    _PoisonState.on = True
    try:
        yield
    finally:
        _PoisonState.on = False


# ---------------------------------------------------------------- comparison


def _tensors(args: tuple) -> list[torch.Tensor]:
    return [a for a in args if isinstance(a, torch.Tensor)]


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


def expected_output(task: Task, args: tuple, case: Case | None = None) -> Any:
    """Reference in float64, cast back to the dtype the reference gives on native inputs."""
    native = call_seeded(task, case, task.reference, _clone_args(args))
    precise = call_seeded(task, case, task.reference, _to_float64(_clone_args(args)))
    return _cast_like(precise, native)


def _cast_like(precise: Any, native: Any) -> Any:
    if isinstance(native, torch.Tensor):
        return precise.to(native.dtype)
    if isinstance(native, (tuple, list)):
        return type(native)(_cast_like(p, n) for p, n in zip(precise, native, strict=True))
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
    o = out.detach().to(torch.float64)
    e = expected.detach().to(torch.float64)
    e_finite = torch.isfinite(e)
    o_finite = torch.isfinite(o)
    bad_nonfinite = e_finite & ~o_finite
    if bool(bad_nonfinite.any()):
        raise Mismatch(f"{path}: {int(bad_nonfinite.sum())} NaN/Inf values where the reference is finite",
                       float("inf"), float("inf"))
    same_special = (~e_finite) & ((o == e) | (torch.isnan(o) & torch.isnan(e)))
    if bool(((~e_finite) & ~same_special).any()):
        raise Mismatch(f"{path}: non-finite reference values not reproduced")
    diff = torch.where(e_finite, (o - e).abs(), torch.zeros_like(o))
    rel = diff / e.abs().clamp_min(1e-12)
    max_abs = float(diff.max())
    max_rel = float(torch.where(e_finite, rel, torch.zeros_like(rel)).max())
    allowed = tol.atol + tol.rtol * e.abs()
    bad = e_finite & (diff > allowed)
    if bool(bad.any()):
        scale = float(e[e_finite].abs().max())  # garbage is described against the answer's magnitude
        idx = int(bad.flatten().nonzero()[0])
        raise Mismatch(
            f"{path}: {int(bad.sum())}/{bad.numel()} elements outside atol={tol.atol} rtol={tol.rtol}; "
            f"first at flat index {idx}: got {describe_value(float(o.flatten()[idx]), scale)}, "
            f"expected {float(e.flatten()[idx]):.6g}",
            max_abs, max_rel,
        )
    if o.numel() > 1:
        e_span = float(e[e_finite].max() - e[e_finite].min()) if bool(e_finite.any()) else 0.0
        o_span = float(o[o_finite].max() - o[o_finite].min()) if bool(o_finite.any()) else 0.0
        if o_span == 0.0 and e_span > tol.atol:
            constant = describe_value(float(o.flatten()[0]), float(e[e_finite].abs().max()))
            raise Mismatch(f"{path}: output is constant ({constant}) where the reference varies",
                           max_abs, max_rel)
    return max_abs, max_rel


class _InputCache:
    """Pristine inputs and float64-reference outputs per (task, case, run), kept on the device.

    A persistent worker judges many candidates on the same cases; drawing a 4M-element
    input on the CPU and computing the float64 reference cost more than the candidate's
    own run on a GPU. Every candidate gets fresh clones, so none can see another's
    buffers. Bounded by bytes; past the bound, entries are simply not kept."""

    def __init__(self, max_bytes: int = 0) -> None:
        self.max_bytes = max_bytes
        self.used = 0
        self.entries: dict[tuple[Any, ...], Any] = {}

    @staticmethod
    def _nbytes(value: Any) -> int:
        return sum(t.numel() * t.element_size() for _, t in _flatten(value))

    def get(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        if key in self.entries:
            return self.entries[key]
        value = make()
        size = self._nbytes(value)
        if self.used + size <= self.max_bytes:
            self.entries[key] = value
            self.used += size
        return value


_CACHE = _InputCache()


def set_input_cache_bytes(max_bytes: int) -> None:
    """Called by the worker; a one-off judge (the naive harness, tests) keeps no cache."""
    _CACHE.max_bytes = max_bytes


def _inputs(task: Task, case: Case, device: str, refill: bool) -> tuple:
    def make() -> tuple:
        c = case
        if refill:
            c = Case(name=case.name + "+refill", sizes=case.sizes, dtype=case.dtype, seed=case.seed + 7919)
        return task.make_inputs(c, device)

    return _CACHE.get((task.id, case, device, refill), make)


def _refill_in_place(args: tuple, case: Case, task: Task, device: str) -> None:
    """New values in the *same* storage: a result cached by data_ptr is now stale."""
    fresh = _inputs(task, case, device, refill=True)
    for old, new in zip(args, fresh, strict=True):
        if isinstance(old, torch.Tensor):
            old.copy_(new)


def _unchanged(before: torch.Tensor, after: torch.Tensor) -> bool:
    if before.is_floating_point():
        return bool(torch.equal(torch.nan_to_num(before, nan=0.0), torch.nan_to_num(after, nan=0.0)))
    return bool(torch.equal(before, after))


def _sync(device: str) -> None:
    if device != "cpu" and torch.cuda.is_available():
        torch.cuda.synchronize()


def _flatten(out: Any, path: str = "output") -> list[tuple[str, torch.Tensor]]:
    if isinstance(out, torch.Tensor):
        return [(path, out)]
    if isinstance(out, (tuple, list)):
        return [item for i, o in enumerate(out) for item in _flatten(o, f"{path}[{i}]")]
    return []


def _storage_key(t: torch.Tensor) -> tuple[str, int]:
    return t.device.type, t.untyped_storage().data_ptr()


def _same_values(kernel_tensor: torch.Tensor, out: torch.Tensor) -> bool:
    if kernel_tensor.numel() != out.numel() or kernel_tensor.device.type != out.device.type:
        return False
    try:
        cast = kernel_tensor.detach().reshape(out.shape).to(out.dtype)
    except (RuntimeError, TypeError):
        return False
    return bool(torch.equal(cast, out)) or bool(torch.equal(torch.nan_to_num(cast), torch.nan_to_num(out)))


def not_written_by_kernel(out: Any, kernel_tensors: list[torch.Tensor]) -> list[str]:
    """Output tensors that no launched kernel received (by storage), and whose values are not
    a copy or cast of a tensor one did. A wrapper that launches a token kernel and returns
    a PyTorch result computed on the side is caught here; `out.to(x.dtype)` after a kernel
    wrote a float32 buffer is not."""
    keys = {_storage_key(k) for k in kernel_tensors}
    missing = []
    for path, t in _flatten(out):
        if t.numel() == 0 or _storage_key(t) in keys:
            continue
        if not any(_same_values(k, t) for k in kernel_tensors):
            missing.append(path)
    return missing


def judge_cases(task: Task, entry: Callable[..., Any], cases: tuple[Case, ...], device: str, interpreter: bool,
          integrity: Callable[[], str] | None = None) -> Verdict:
    """Run `entry` on every case; first failure decides the verdict.

    Per case the candidate runs twice: first on fresh inputs (before the reference has run
    on them), then again after the inputs are rewritten in place (after the reference): a
    result cached by data pointer, or read from memory the reference left behind, is stale
    on the second run. `integrity`, if given, is called after every candidate call and
    returns a non-empty message when the candidate tampered with the judge.
    """
    run = skipped = 0
    reasons: list[str] = []
    worst_abs = worst_rel = 0.0
    launched_any = False
    for c in cases:
        if interpreter and c.dtype in task.interpreter_skips:
            skipped += 1
            reason = f"{c.dtype}: {task.interpreter_skips[c.dtype]}"
            if reason not in reasons:
                reasons.append(reason)
            continue
        try:
            args = _clone_args(_inputs(task, c, device, refill=False))
        except CaseUnavailable as exc:
            skipped += 1
            reasons.append(str(exc))
            continue
        outputs = task.output_args(c)
        for attempt in ("first", "after in-place refill"):
            if attempt != "first":
                _refill_in_place(args, c, task, device)
            poison_outputs(args, outputs)
            before = _clone_args(args)
            start = launches()
            _LOG.tensors = []
            _LOG.recording = True
            try:
                with poisoned_allocations():
                    out = call_seeded(task, c, entry, args)
                _sync(device)
            except BaseException as exc:  # noqa: BLE001 - any candidate failure, even sys.exit, is a verdict
                kind = classify_exception(exc)
                return Verdict(kind, format_exception(exc), c.name, cases_run=run, kernel_launched=launches() > start)
            finally:
                _LOG.recording = False
            kernel_tensors, _LOG.tensors = _LOG.tensors, []
            if integrity is not None:
                tampered = integrity()
                if tampered:
                    return Verdict("runtime_error", tampered, c.name, cases_run=run)
            launched = launches() > start
            launched_any = launched_any or launched
            modified = modified_inputs(before, args, outputs)
            if modified:
                return Verdict("wrong_result", f"input {modified[0]} was modified in place ({attempt} run)", c.name,
                               cases_run=run, kernel_launched=launched)
            out = task.judged_output(out, args, c)
            # `before` is the cached pristine (or refill) input, unmodified: checked just above.
            expected, never_written = _CACHE.get((task.id, c, device, attempt, "expected"),
                                                 functools.partial(expected_and_unwritten, task, before, c))
            try:
                a_err, r_err = compare(accept_unwritten(out, expected, never_written), expected, task)
            except Mismatch as m:
                return Verdict("wrong_result", f"{m} ({attempt} run)", c.name, m.max_abs, m.max_rel,
                               cases_run=run, kernel_launched=launched)
            if not launched:
                return Verdict("no_kernel", "the entry point returned without launching a Triton kernel", c.name,
                               a_err, r_err, cases_run=run)
            unwritten = not_written_by_kernel(out, kernel_tensors)
            if unwritten and not reference_finishes_in_torch(task):
                return Verdict("no_kernel", f"{', '.join(unwritten)} was not written by any launched Triton kernel "
                               "(a kernel ran, but the returned tensor was computed elsewhere)", c.name,
                               a_err, r_err, cases_run=run, kernel_launched=True)
            del kernel_tensors
            worst_abs, worst_rel = max(worst_abs, a_err), max(worst_rel, r_err)
        run += 1
    if run == 0:
        # Never a pass by default: a candidate nobody could judge here has not shown it is right.
        why = "; ".join(reasons) if reasons else "the case set is empty"
        return Verdict("runtime_error", f"no case could be judged here: {why}", cases_run=0, cases_skipped=skipped,
                       skip_reasons=tuple(reasons), kernel_launched=launched_any)
    return Verdict("correct", "", None, worst_abs, worst_rel, cases_run=run, cases_skipped=skipped,
                   skip_reasons=tuple(reasons), kernel_launched=launched_any)


# ---------------------------------------------------------------- output arguments, seeded entry points, skipped cases
# What adapted suites need of the judge (issue 16), kept in one place: an entry point that
# writes its result into arguments (`Task.output_args`: poisoned before the call when the
# reference ignores their contents, exempt from the inputs-unchanged check, compared through
# `Task.judged_output`), one that draws random numbers (`Task.seeded_rng`: candidate and
# reference get the same seed before every call), a case that cannot be built here
# (`CaseUnavailable`: skipped with its reason), and kernels given a `triton.reinterpret`
# view of a tensor (the tensor counts as received by the kernel).


def kernel_tensor(arg: Any) -> torch.Tensor | None:
    """The tensor a kernel argument carries: the tensor itself, or the `.base` of the wrapper
    `triton.reinterpret` makes."""
    if isinstance(arg, torch.Tensor):
        return arg
    base = getattr(arg, "base", None)
    return base if isinstance(base, torch.Tensor) and hasattr(arg, "dtype") else None


def call_seeded(task: Task, case: Case | None, fn: Callable[..., Any], args: tuple) -> Any:
    if task.seeded_rng and case is not None:
        torch.manual_seed(case.seed)
    return fn(*args)


def poison_outputs(args: tuple, outputs: OutputArgs) -> None:
    for i in outputs.poisoned:
        if isinstance(args[i], torch.Tensor):
            _poison(args[i])


def modified_inputs(before: tuple, after: tuple, outputs: OutputArgs) -> list[int]:
    """Positions (among the tensor arguments, as the message numbers them) of inputs the call
    changed, output arguments excepted."""
    changed = []
    k = 0
    for i, (b, a) in enumerate(zip(before, after, strict=True)):
        if not isinstance(b, torch.Tensor):
            continue
        if i not in outputs.written and not _unchanged(b, a):
            changed.append(k)
        k += 1
    return changed


# ---------------------------------------------------------------- output a reference never writes
# Some suite references leave part of their output unwritten (an attention kernel that stores
# 96 of 128 head columns into `torch.empty_like(q)`): what is there is whatever the allocator
# returned, zeros in a fresh process, so the suite's own check passes by luck. Those elements
# are nobody's answer: the reference runs once with its allocations poisoned and once with a
# finite marker, elements that differ are unwritten, and a candidate is not judged on them
# (for tasks whose reference is Triton code; a PyTorch reference writes everything). The same
# run tells whether the reference itself finishes its output in PyTorch.

_MARK_FLOAT = 7.25e3
_MARK_INT = 0x3C3C


def _mark(t: torch.Tensor) -> torch.Tensor:
    if t.numel() == 0:
        return t
    if t.is_floating_point() or t.is_complex():
        t.fill_(_MARK_FLOAT)
    elif t.dtype == torch.bool:
        t.fill_(False)
    else:
        info = torch.iinfo(t.dtype)
        t.fill_(min(info.max, _MARK_INT))
    return t


@contextlib.contextmanager
def _allocations(mode: str) -> Iterator[None]:
    install_poisoned_allocations()
    _PoisonState.on, _PoisonState.marker = mode == "poison", mode == "marker"
    try:
        yield
    finally:
        _PoisonState.on = _PoisonState.marker = False


def expected_and_unwritten(task: Task, args: tuple, case: Case | None = None) -> tuple[Any, Any]:
    """The expected output, and a matching structure of masks of the elements the reference
    leaves unwritten (None where nothing is)."""
    if not getattr(task, "triton_reference", False):
        return expected_output(task, args, case), None
    with _allocations("poison"):
        poisoned = expected_output(task, args, case)
    with _allocations("marker"):
        _LOG.tensors, _LOG.recording = [], True
        try:
            marked = expected_output(task, args, case)
        finally:
            _LOG.recording = False
        kernel_tensors, _LOG.tensors = _LOG.tensors, []
    if not_written_by_kernel(marked, kernel_tensors):
        _FINISHED_IN_TORCH.add(task.id)
    return marked, _unwritten_masks(poisoned, marked)


_FINISHED_IN_TORCH: set[str] = set()


def reference_finishes_in_torch(task: Task) -> bool:
    """Whether the task's own Triton reference returns a tensor no kernel wrote (a suite wrapper
    that finishes its result in PyTorch, e.g. a sum over per-block partials). The check that
    a candidate's output was written by a kernel is then the suite's interface, not a hack, and
    is not applied to that task."""
    return task.id in _FINISHED_IN_TORCH


def _unwritten_masks(a: Any, b: Any) -> Any:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape:
        if a.is_complex():
            a, b = torch.view_as_real(a), torch.view_as_real(b)
        differ = ~((a == b) | (torch.isnan(a) & torch.isnan(b))) if a.is_floating_point() else a != b
        if a.is_floating_point() and b.dtype == a.dtype:
            differ = differ & (b == torch.tensor(_MARK_FLOAT, dtype=b.dtype))
        return differ if bool(differ.any()) else None
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b):
        masks = [_unwritten_masks(x, y) for x, y in zip(a, b, strict=True)]
        return masks if any(m is not None for m in masks) else None
    return None


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
        return type(out)(accept_unwritten(o, e, m) for o, e, m in zip(out, expected, unwritten, strict=True))
    return out
