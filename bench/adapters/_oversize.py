"""A perf script's inputs made without the ones the judge would throw away.

TritonBench's perf scripts make every input of their size sweep at once, on the CPU, before
any is used (`get_input_tensors`: dropout_triton's `torch.rand(2**i)` for i up to 29), and the
adapter keeps only inputs of at most `GPU_PERF_ELEMENTS` (geak_calls.py). Over the 184 scripts
of GEAK-eval's TritonBench-revised that is 172 G elements made for 27 G kept; dropout_triton's
alone took 10.6 s of `torch.rand` on an H100 host, once in the probing child and once in the
judge worker (2026-12-06, scripts/reference_diagnose.py --cprofile), in every run.

`skipping_oversize(cap)`, a torch function mode, makes a tensor constructor whose result would
hold more than `cap` elements give a `meta` tensor instead (its shape and dtype, no storage),
and every operation on it then gives meta tensors too. An input holding one has more than `cap`
elements, so it was out anyway. Where that does not hold (a script cutting a small input from a large tensor,
or mixing such a tensor with real ones), the caller makes the inputs again the plain way
(`holds_meta` says so), so the inputs kept are always real. The values may differ from a plain
run's (a skipped constructor draws nothing from the generator), and both the probing child and
the worker take this same path, so they agree on the inputs and on the decisions keyed by them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def _constructors() -> set[Any]:
    try:
        from torch.utils._device import _device_constructors
    except ImportError:  # a torch without the list: nothing is skipped, the script runs as written
        return set()
    return set(_device_constructors())


def skipping_oversize(cap: int) -> Any:
    """A torch function mode (a context manager, like `torch.device`): within it constructors of
    more than `cap` elements give meta tensors; its `skipped` counts them. Built on first use, so
    importing this module does not import torch."""
    from torch.overrides import TorchFunctionMode

    constructors = _constructors()

    class SkippingOversize(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.skipped = 0

        def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            kwargs = kwargs or {}
            if func in constructors:
                try:
                    shaped = func(*args, **{**kwargs, "device": "meta"})
                except Exception:  # noqa: BLE001 - no meta form of this call (a generator, numpy data): made as written
                    shaped = None
                if shaped is not None and getattr(shaped, "numel", lambda: 0)() > cap:
                    self.skipped += 1
                    return shaped
            return func(*args, **kwargs)

    return SkippingOversize()


def tensors_in(value: Any) -> Iterator[Any]:
    """Every tensor inside `value` (tuples, lists, dicts): what a perf input holds."""
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from tensors_in(v)


def holds_meta(value: Any) -> bool:
    """Whether a tensor inside `value` has no storage (a skipped one)."""
    return any(t.is_meta for t in tensors_in(value))
