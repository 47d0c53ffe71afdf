"""One sequence rebuilt with new items, keeping its type: a list, a tuple, a namedtuple (a
suite's `namedtuple("max", ["values", "indices"])` output) or a struct sequence
(`torch.return_types.max`). `type(seq)(items)` is right only for the first two: a namedtuple
takes its fields as separate arguments (an H200 check of GEAK-eval's max_reduction ended the
candidate's process that way). Shared by the judge, the candidate's process and the adapters."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def same_kind(like: list | tuple, items: Iterable[Any]) -> Any:
    """A sequence of `like`'s type holding `items` (a plain tuple when that type cannot be
    built from them)."""
    values = list(items)
    cls = type(like)
    if cls is list or cls is tuple:
        return cls(values)
    make = getattr(cls, "_make", None)
    try:
        if make is not None:
            return make(values)
        return cls(values)
    except TypeError:
        return tuple(values)
