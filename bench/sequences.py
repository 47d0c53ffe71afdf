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
    return of_type(type(like), items)


def of_type(cls: type, items: Iterable[Any]) -> Any:
    """A sequence of class `cls` (list, tuple or a subclass of tuple) holding `items`: a
    namedtuple through `_make`, a struct sequence from one sequence, a tuple subclass that
    takes its fields as arguments from them spread; a plain tuple when none of these works."""
    values = list(items)
    if cls is list or cls is tuple:
        return cls(values)
    make = getattr(cls, "_make", None)
    if make is not None:
        return make(values)
    for build in (lambda: cls(values), lambda: cls(*values)):
        try:
            return build()
        except TypeError:
            continue
    return tuple(values)
