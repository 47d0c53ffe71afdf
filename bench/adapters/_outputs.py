"""What a suite's entry point hands back, in a form the judge can compare: its return value
and the arguments it writes into.

Suites return tensors, tuples with `None` for optional outputs, dicts, Python numbers, or
nothing at all (lightllm-style wrappers write into a buffer they are given). `judged_form`
turns any of these, plus the written arguments, into one flat tuple of tensors, so the
judge compares candidate and reference element by element. Which arguments are written,
and which of them may be poisoned before the call, is learnt by running the suite's own
reference on its own recorded inputs (`learn_output_args`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from bench.sequences import same_kind
from bench.task import OutputArgs


def _leaves(value: Any) -> list[Any]:
    import torch

    if value is None or isinstance(value, str):
        return []  # an absent optional output, or a message: nothing to compare
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [leaf for key in sorted(value, key=str) for leaf in _leaves(value[key])]
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in _leaves(v)]
    if isinstance(value, bool):
        return [torch.tensor(value)]
    if isinstance(value, int):
        return [torch.tensor(value, dtype=torch.int64)]
    if isinstance(value, float):
        return [torch.tensor(value, dtype=torch.float32)]
    return []  # shapes, dtypes, objects: not outputs


def judged_form(returned: Any, args: Sequence[Any], written: tuple[int, ...]) -> tuple:
    """The return value's tensors (flattened; `None` and strings dropped), then each written
    argument, as one tuple. A written argument that is optional (kv_cache_filling.py's
    `k_scales_zeros`, a tensor in the quantised calls and None in the others) is judged where
    the call passes a tensor."""
    import torch

    return tuple(_leaves(returned)) + tuple(args[i] for i in written if isinstance(args[i], torch.Tensor))


def poison(t: Any) -> Any:
    """Fill a tensor in place with NaN (floats) or an integer sentinel: what a buffer holds
    before a kernel writes it, as the judge sees it."""
    import torch

    from bench.poison import poison_tensor

    return poison_tensor(t) if isinstance(t, torch.Tensor) else t


SAME_CHUNK = 1 << 22
"""Elements compared at a time in float64 by `same`: its memory stays a few dozen MB on a GPU
shared with a dozen judge workers, however large the outputs."""


def same(a: Any, b: Any) -> bool:
    """Equal values, NaN equal to NaN; floats within a small tolerance (atomics reorder sums).
    Compared where `a` lies, a chunk at a time: on the host, the copies and the float64
    comparison of a probe's outputs took 5.0 of a TritonBench reference's 12.7-s probing child
    on an H100 (2026-12-06, softmax_triton1)."""
    import torch

    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return bool(a == b) if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor) else False
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    try:
        return _same_tensors(a.detach(), b.detach().to(a.device))
    except torch.OutOfMemoryError:  # a GPU full of other workers' jobs: on the host, as before
        return _same_tensors(a.detach().cpu(), b.detach().cpu())


def _same_tensors(a: Any, b: Any) -> bool:
    import torch

    if not (a.is_floating_point() or a.is_complex()):
        return bool(torch.equal(a, b))
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    a, b = a.reshape(-1), b.reshape(-1)
    return all(bool(torch.allclose(a[i:i + SAME_CHUNK].double(), b[i:i + SAME_CHUNK].double(), rtol=1e-3,
                                   atol=1e-3, equal_nan=True)) for i in range(0, a.numel(), SAME_CHUNK))


@contextlib.contextmanager
def disturbed_memory(device: str) -> Iterator[None]:
    """Memory filled with large values and freed just before the block (so the allocator hands
    it out again inside it), and spacers kept alive through it: tensors allocated inside land
    elsewhere than before, next to other contents. A reference whose answer changes under this
    reads memory it does not own."""
    import torch

    spacers = [torch.full((n,), 3.0e38, device=device) for n in (7, 129, 1031, 8191)]
    scratch = [torch.full((n,), -2.5e38, device=device) for n in (64, 512, 4096, 65536)]
    del scratch
    try:
        yield
    finally:
        del spacers


def clone_call(values: Sequence[Any]) -> tuple:
    """Copies of a call's values for a run of the suite's reference, each tensor followed by
    slack (bench/slack.py), as the judge's answer runs and a candidate's process get them."""
    import torch

    from bench.slack import padded_copy

    def one(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return padded_copy(v)
        if isinstance(v, (list, tuple)):
            return same_kind(v, (one(x) for x in v))
        return v

    return tuple(one(v) for v in values)


def returned_views(returned: Any, args: Sequence[Any], path: str = "output") -> set[tuple[str, int]]:
    """(output path, argument position) where the returned value shares memory with an argument;
    paths name tuple and list positions as the judge's aliasing check does (judge/candidate/call_record.py)."""
    import torch

    if isinstance(returned, (tuple, list)):
        return {pair for i, o in enumerate(returned) for pair in returned_views(o, args, f"{path}[{i}]")}
    if not isinstance(returned, torch.Tensor) or not returned.numel():
        return set()
    mine = (returned.device.type, returned.untyped_storage().data_ptr())
    return {(path, i) for i, a in enumerate(args)
            if isinstance(a, torch.Tensor) and (a.device.type, a.untyped_storage().data_ptr()) == mine}


def learn_output_args(run: Callable[[tuple], Any], calls: Sequence[tuple],
                      failures: list[str] | None = None) -> OutputArgs:
    """Run the reference on each recorded call: arguments whose values it changes are
    outputs, and outputs it returns as views of an argument are declared as such (a candidate
    may return the same view). A floating-point output is poisoned for the candidate only if poisoning it first
    changes nothing the reference hands back in any call (it never reads it and writes all
    of it); integer outputs are never poisoned (the trial itself could index out of bounds).
    `failures` collects what each call the reference could not run raised: a reference that
    runs on none of them learns no output, and its error should say why."""
    import torch

    written: set[int] = set()
    aliases: set[tuple[str, int]] = set()
    runs: list[tuple[tuple, tuple, Any]] = []
    for call in calls:
        args = clone_call(call)
        try:
            returned = run(args)
        except Exception as exc:  # noqa: BLE001 - a call the reference cannot run tells us nothing here
            if failures is not None:
                failures.append(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300])
            continue
        runs.append((call, args, returned))
        aliases |= returned_views(returned, args)
        for i, (before, after) in enumerate(zip(call, args, strict=True)):
            if isinstance(before, torch.Tensor) and not same(before, after):
                written.add(i)
    order = tuple(sorted(written))
    poisoned = []
    for i in order:
        if not all(isinstance(call[i], torch.Tensor) and call[i].is_floating_point() for call, _, _ in runs):
            continue  # integer outputs (indices, counters) keep their values: a sentinel could send the kernel astray
        indifferent = True
        for call, args, returned in runs:
            trial = clone_call(call)
            poison(trial[i])
            try:
                again = run(trial)
            except Exception:  # noqa: BLE001 - it reads the poisoned buffer and fails: not indifferent
                indifferent = False
                break
            if not same(judged_form(again, trial, order), judged_form(returned, args, order)):
                indifferent = False
                break
        if indifferent:
            poisoned.append(i)
    return OutputArgs(written=order, poisoned=tuple(poisoned),
                      aliases=tuple(sorted((p, i) for p, i in aliases if i not in written)))
