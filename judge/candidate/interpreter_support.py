"""What Triton's CPU interpreter lacks that a correct kernel may use, supplied in the process that
runs candidate code (`install`, from judge/candidate/loading.py `prepare_process`, interpreter only).

Why: without it a kernel right on a GPU is rejected on the CPU for the interpreter's gaps, not
its own faults (issue 41): `@triton.autotune` asks for a GPU driver to time its configurations
("0 active drivers"), libdevice functions (`tl.extra.cuda.libdevice.erf`, or the generic
`triton.language.extra.libdevice` stubs a GPU compiler resolves) have no interpreter lowering
(a compile error), and bfloat16 values, which the interpreter holds as their raw 16 bits, are
added, compared and reduced as integers (a wrong result). Here:

- autotune picks, without timing, the first configuration that runs (each configuration runs
  once, as a GPU's tuner runs it; one that fails a compile-time assertion is skipped as a GPU
  skips it), so the choice is deterministic and the kernel is judged as any configuration runs;
- libdevice calls run as numpy functions of the same name (float64 inside, rounded to the
  declared result type; a directed rounding mode `_rz`/`_rd`/`_ru` is taken as round to
  nearest, within any tolerance);
- bfloat16 arithmetic, comparisons, math, casts, dots and reductions convert to float32, compute
  and round back to nearest even, as a GPU's bfloat16 unit rounds each result.

What the interpreter still cannot do raises `InterpreterUnsupported`, which the judge reports as
`unsupported_on_interpreter` (judge/candidate/loading.py `classify_exception`), never as the candidate's
error: a libdevice function without a numpy counterpart here, bfloat16 atomics, inline assembly.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

UNSUPPORTED_MARKER = "not supported in interpreter mode"
"""How the interpreter's own NotImplementedError says a feature is missing (inline_asm, ...)."""


class InterpreterUnsupported(NotImplementedError):
    """A feature the CPU interpreter cannot run: the kernel is judged on a GPU, not here."""


class _State:
    installed = False


def install() -> None:
    """Patch the interpreter once per process, before any candidate is imported (a candidate that
    binds `libdevice.erf` at import gets the working one)."""
    if _State.installed:
        return
    _State.installed = True
    _support_autotune()
    _support_libdevice()
    _support_bfloat16()
    _refuse_in_kind()


# ------------------------------------------------------------------------------ autotune


def _interpreter_bench(kernel_call: Callable[[], Any], quantiles: Any = None, **_: Any) -> list[float]:
    """Run a configuration once: 0.0 when it runs, infinity when it fails a compile-time
    assertion (as a GPU's tuner scores a configuration that cannot compile). Equal scores make
    the tuner keep the first configuration that runs, so the choice never depends on timing."""
    try:
        kernel_call()
    except Exception as exc:  # noqa: BLE001 - only a static assertion is a configuration's own failure
        if _static_assertion(exc):
            return [math.inf, math.inf, math.inf]
        raise
    return [0.0, 0.0, 0.0]


def _static_assertion(exc: BaseException) -> bool:
    """`tl.static_assert` failing in the interpreter: an AssertionError raised by the interpreter's
    replacement, wrapped in an InterpreterError."""
    cause = exc.__cause__ if type(exc).__name__ == "InterpreterError" else exc
    return isinstance(cause, AssertionError)


def _support_autotune() -> None:
    from triton.runtime import autotuner

    def do_bench(self: Any) -> Callable[..., Any]:
        return self._do_bench if self._do_bench is not None else _interpreter_bench

    autotuner.Autotuner.do_bench = property(do_bench)
    # An adapter's stand-in that never runs a config (bench/adapters/_adapted.py, installed
    # where suite references run) gives way to this tuner, and installs no more once it is here.
    original = getattr(autotuner.Autotuner._bench, "_kmc_original", None)
    if original is not None:
        autotuner.Autotuner._bench = original
    autotuner.Autotuner._kmc_interpreter_support = True


# ------------------------------------------------------------------------------ libdevice


def _round_to(mode: str) -> Callable[[np.ndarray], np.ndarray]:
    return {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}[mode]


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _lgamma(x: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda v: math.lgamma(v) if v not in (0.0, -math.inf) and not (v < 0 and v == int(v))
                        else math.inf, otypes=[np.float64])(x)


def _tgamma(x: np.ndarray) -> np.ndarray:
    def one(v: float) -> float:
        try:
            return math.gamma(v)
        except (ValueError, OverflowError):
            return math.nan if v < 0 or math.isnan(v) else math.inf
    return np.vectorize(one, otypes=[np.float64])(x)


_ERF = np.vectorize(math.erf, otypes=[np.float64])
_ERFC = np.vectorize(math.erfc, otypes=[np.float64])

_MATH: dict[str, Callable[..., Any]] = {
    "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "nearbyint": np.rint,
    "round": _round_half_away, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "cbrt": np.cbrt,
    "rcbrt": lambda x: 1.0 / np.cbrt(x), "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x),
    "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "sinpi": lambda x: np.sin(np.pi * x),
    "cospi": lambda x: np.cos(np.pi * x), "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "atan2": np.arctan2, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh, "erf": _ERF, "erfc": _ERFC,
    "normcdf": lambda x: 0.5 * _ERFC(-x / math.sqrt(2.0)), "lgamma": _lgamma, "tgamma": _tgamma,
    "pow": np.power, "fmod": np.fmod, "remainder": lambda x, y: x - np.rint(x / y) * y, "hypot": np.hypot,
    "rhypot": lambda x, y: 1.0 / np.hypot(x, y), "copysign": np.copysign, "fdim": lambda x, y: np.maximum(x - y, 0.0),
    "fma": lambda x, y, z: x * y + z, "fmin": np.fmin, "fmax": np.fmax, "nextafter": np.nextafter,
    "ldexp": lambda x, e: np.ldexp(x, e.astype(np.int32)), "scalbn": lambda x, e: np.ldexp(x, e.astype(np.int32)),
    "isnan": np.isnan, "isinf": np.isinf, "signbit": np.signbit, "finitef": np.isfinite, "isfinited": np.isfinite,
    "saturatef": lambda x: np.clip(x, 0.0, 1.0), "norm3d": lambda a, b, c: np.sqrt(a * a + b * b + c * c),
    "rnorm3d": lambda a, b, c: 1.0 / np.sqrt(a * a + b * b + c * c),
    "norm4d": lambda a, b, c, d: np.sqrt(a * a + b * b + c * c + d * d),
    "rnorm4d": lambda a, b, c, d: 1.0 / np.sqrt(a * a + b * b + c * c + d * d),
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "rcp": lambda x: 1.0 / x,
    "fast_dividef": np.divide, "fast_expf": np.exp, "fast_exp10f": lambda x: np.power(10.0, x), "fast_logf": np.log,
    "fast_log2f": np.log2, "fast_log10f": np.log10, "fast_sinf": np.sin, "fast_cosf": np.cos, "fast_tanf": np.tan,
    "fast_powf": np.power,
}
"""libdevice functions by their Python name in triton.language.extra.cuda/hip.libdevice."""

_BITCASTS = frozenset({"int_as_float", "float_as_int", "uint_as_float", "float_as_uint", "longlong_as_double",
                       "double_as_longlong"})
_CONVERSION = re.compile(r"^(?:float|double|u?int|u?ll)2(?:float|double|u?int|u?ll)_(rn|rz|rd|ru)$")
_ROUNDED = re.compile(r"^(add|sub|mul|div|rcp|sqrt|fma|rsqrt)_(rn|rz|rd|ru)$")


def _numpy_function(name: str, ret_dtype: np.dtype) -> Callable[..., Any] | None:
    """The numpy counterpart of a libdevice function (by its Python name), or None."""
    if name in _MATH:
        return _MATH[name]
    rounded = _ROUNDED.match(name)
    if rounded:
        return _MATH[rounded.group(1)]
    conversion = _CONVERSION.match(name)
    if conversion:
        if ret_dtype.kind in "iu":
            return _round_to(conversion.group(1))
        return lambda x: x
    return None


def _symbols(module: Any) -> dict[str, str]:
    """Each library symbol a libdevice module dispatches to (`__nv_erff`), mapped to the Python
    name of its function (`erf`), read from the module's source."""
    found: dict[str, str] = {}
    source = inspect.getsource(module)
    for block in re.split(r"\n(?=@core\.extern\n)", source):
        name = re.search(r"\ndef (\w+)\(", block)
        if name:
            for symbol in re.findall(r'\("(__\w+)"', block):
                found[symbol] = name.group(1)
    return found


def _libdevice_modules() -> list[Any]:
    import importlib

    modules = []
    for name in ("triton.language.extra.cuda.libdevice", "triton.language.extra.hip.libdevice"):
        try:
            modules.append(importlib.import_module(name))
        except Exception:  # noqa: BLE001 - a Triton without one of the backends
            continue
    return modules


def _support_libdevice() -> None:
    from triton.runtime import interpreter as interp

    modules = _libdevice_modules()
    symbols: dict[str, str] = {}
    for module in modules:
        symbols.update(_symbols(module))
        _bind_semantic(module, interp.interpreter_semantic)
    if modules:
        _fill_stubs(modules[0])

    def create_extern_elementwise(self: Any, lib_name: str, lib_path: str, symbol: str, args: list, ret_type: Any,
                                  is_pure: bool) -> Any:
        return _extern_call(interp, symbols.get(symbol, symbol), args, ret_type)

    type(interp.interpreter_builder).create_extern_elementwise = create_extern_elementwise


def _extern_call(interp: Any, name: str, args: list, ret_type: Any) -> Any:
    """One libdevice call on the interpreter's arrays: float inputs widened to float64, the result
    rounded to the declared type."""
    ret_np = interp._get_np_dtype(ret_type)
    if name in _BITCASTS:
        return interp.TensorHandle(args[0].data.view(ret_np), ret_type.scalar)
    fn = _numpy_function(name, ret_np)
    if fn is None:
        raise InterpreterUnsupported(f"libdevice.{name} has no implementation on the Triton interpreter")
    values = [a.data.astype(np.float64) if a.data.dtype.kind == "f" else a.data for a in args]
    with np.errstate(all="ignore"):
        out = np.asarray(fn(*values))
    return interp.TensorHandle(out.astype(ret_np), ret_type.scalar)


def _bind_semantic(module: Any, semantic: Any) -> None:
    """Make a libdevice module's functions callable from interpreted kernels, as the interpreter
    does for `tl` and `tl.math` (it patches those for each launch; these never change)."""
    from triton.language import core

    for name, member in inspect.getmembers(module):
        if core.is_builtin(member):
            setattr(module, name, _with_semantic(member, semantic))


def _with_semantic(member: Callable[..., Any], semantic: Any) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("_semantic", None)
        return member(*args, **kwargs, _semantic=semantic)

    call.__name__ = getattr(member, "__name__", "libdevice")
    return call


def _fill_stubs(backend: Any) -> None:
    """`triton.language.extra.libdevice` holds stubs a GPU compiler swaps for its backend's
    module; the interpreter runs them as written (they return None). Point them at the backend's."""
    from triton.language.extra import libdevice as stubs

    for name in dir(stubs):
        if not name.startswith("_") and callable(getattr(stubs, name)) and hasattr(backend, name):
            setattr(stubs, name, getattr(backend, name))


# ------------------------------------------------------------------------------ bfloat16


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 values held as their 16 bits, as float32 (exact)."""
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even), as 16 bits; NaN stays NaN."""
    f = np.asarray(values, dtype=np.float32)
    bits = f.view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))
    quiet_nan = (bits >> np.uint32(16)) | np.uint32(0x40)
    return np.where(np.isnan(f), quiet_nan, rounded).astype(np.uint16)


def _support_bfloat16() -> None:
    import triton.language as tl
    from triton.runtime import interpreter as interp

    builder = type(interp.interpreter_builder)
    handle = interp.TensorHandle

    def is_bf16(h: Any) -> bool:
        return isinstance(h, handle) and h.dtype.scalar == tl.bfloat16

    def widen(h: Any) -> Any:
        return handle(bf16_to_f32(h.data), tl.float32) if is_bf16(h) else h

    def narrow(out: Any) -> Any:
        if out.data.dtype == np.bool_:  # a comparison: labelled as the boolean it is
            return handle(out.data, tl.int1)
        return handle(f32_to_bf16(out.data), tl.bfloat16)

    def through_f32(original: Callable[..., Any]) -> Callable[..., Any]:
        def op(self: Any, *args: Any) -> Any:
            if not any(is_bf16(a) for a in args):
                return original(self, *args)
            return narrow(original(self, *(widen(a) for a in args)))
        return op

    for name in ("binary_op", "unary_op", "create_erf", "create_rsqrt", "create_fma"):
        setattr(builder, name, through_f32(getattr(builder, name)))
    _bf16_ternary(builder, through_f32)
    _bf16_casts(builder, tl, handle, widen)
    _bf16_dot(builder, is_bf16, widen, narrow)
    _bf16_reductions(interp, tl)


def _bf16_ternary(builder: Any, through_f32: Callable[..., Any]) -> None:
    """`where` moves bits and needs nothing; clamp compares values."""
    original = builder.ternary_op
    converted = through_f32(original)

    def ternary_op(self: Any, lhs: Any, rhs: Any, other: Any, op: Any) -> Any:
        if op is np.where:
            return original(self, lhs, rhs, other, op)
        return converted(self, lhs, rhs, other, op)

    builder.ternary_op = ternary_op


def _bf16_casts(builder: Any, tl: Any, handle: Any, widen: Callable[..., Any]) -> None:
    """Casts between bfloat16 and anything but float32 (which the interpreter converts) go
    through float32: from its bits as an integer before."""
    original = builder.cast_impl

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        src_ty, dst_ty = src.dtype.scalar, dst_type.scalar
        if src_ty == dst_ty or tl.float32 in (src_ty, dst_ty):
            return original(self, src, dst_type)
        if src_ty == tl.bfloat16:
            return original(self, widen(src), dst_type)
        if dst_ty == tl.bfloat16:
            return handle(f32_to_bf16(src.data.astype(np.float32)), tl.bfloat16)
        return original(self, src, dst_type)

    builder.cast_impl = cast_impl


def _bf16_dot(builder: Any, is_bf16: Callable[..., bool], widen: Callable[..., Any],
              narrow: Callable[..., Any]) -> None:
    original = builder.create_dot

    def create_dot(self: Any, a: Any, b: Any, d: Any, *rest: Any) -> Any:
        if not (is_bf16(a) or is_bf16(b) or is_bf16(d)):
            return original(self, a, b, d, *rest)
        out = original(self, widen(a), widen(b), widen(d), *rest)
        return narrow(out) if is_bf16(d) else out

    builder.create_dot = create_dot


def _bf16_reductions(interp: Any, tl: Any) -> None:
    """The interpreter's numpy fast paths (sum, min, max, argmin/argmax, cumsum, cumprod) on
    bfloat16 run on float32 and round back; combine functions of a user's own go through the
    converted builder operations already."""

    def widened(t: Any) -> Any:
        data = bf16_to_f32(t.handle.data)
        ty = tl.block_type(tl.float32, list(t.shape)) if t.type.is_block() else tl.float32
        return tl.core.tensor(interp.TensorHandle(data, tl.float32), ty)

    def narrowed(t: Any) -> Any:
        if not isinstance(t, tl.core.tensor) or t.dtype != tl.float32:
            return t
        ty = tl.block_type(tl.bfloat16, list(t.shape)) if t.type.is_block() else tl.bfloat16
        return tl.core.tensor(interp.TensorHandle(f32_to_bf16(t.handle.data), tl.bfloat16), ty)

    def through_f32(original: Callable[..., Any]) -> Callable[..., Any]:
        def op(self: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
            first = input[0] if isinstance(input, tuple) else input
            if not (isinstance(first, tl.core.tensor) and first.dtype == tl.bfloat16):
                return original(self, input, *args, **kwargs)
            out = original(self, widened(first), *args, **kwargs)
            if isinstance(out, (tuple, list)):
                return type(out)(narrowed(o) for o in out)
            return narrowed(out)
        return op

    for cls, names in ((interp.ReduceOps, ("min_max", "sum")), (interp.ScanOps, ("cumsum", "cumprod"))):
        for name in names:
            setattr(cls, name, through_f32(getattr(cls, name)))


def _refuse_in_kind() -> None:
    """bfloat16 atomics would update raw bits as integers: refused as unsupported, not wrong."""
    import triton.language as tl
    from triton.runtime import interpreter as interp

    builder = type(interp.interpreter_builder)
    for name in ("create_atomic_rmw", "create_atomic_cas"):
        original = getattr(builder, name, None)
        if original is None:
            continue

        def atomic(self: Any, *args: Any, __original: Callable[..., Any] = original, __name: str = name) -> Any:
            values = args[2:3] if __name == "create_atomic_rmw" else args[1:3]
            if any(getattr(getattr(v, "dtype", None), "scalar", None) == tl.bfloat16 for v in values):
                raise InterpreterUnsupported("bfloat16 atomics are not supported on the Triton interpreter")
            return __original(self, *args)

        setattr(builder, name, atomic)


def is_unsupported(exc: BaseException) -> bool:
    """Whether `exc` (or what an InterpreterError wraps) says the interpreter lacks a feature:
    raised here or by the interpreter itself, not by a candidate's own code claiming it."""
    cause = exc.__cause__ if type(exc).__name__ == "InterpreterError" and exc.__cause__ is not None else exc
    if not isinstance(cause, NotImplementedError):
        return False
    origin = _raised_in(cause)
    if isinstance(cause, InterpreterUnsupported):
        return origin == __file__
    return UNSUPPORTED_MARKER in str(cause) and origin.replace("\\", "/").endswith("triton/runtime/interpreter.py")


def _raised_in(exc: BaseException) -> str:
    """The file of the frame that raised `exc` ("" without a traceback)."""
    tb = exc.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename
