"""False-positive rate of visible (feedback) tests relative to hidden (scoring) tests.

Why: methods that iterate on visible or self-written tests stop when those pass; if the
visible tests are weaker than the hidden ones, a "pass" is often wrong (Reflexion's MBPP
drop came from such false positives). This rate says how often that happens.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["visible_false_positive_rate"]


def _as_bool(x: npt.ArrayLike, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype != bool:
        if not np.all(np.isin(a, (0, 1))):
            raise ValueError(f"{name} must be boolean (or 0/1)")
        a = a.astype(bool)
    return a


def visible_false_positive_rate(visible_pass: npt.ArrayLike, hidden_pass: npt.ArrayLike) -> float:
    """P(hidden fail | visible pass) = #{visible pass and hidden fail} / #{visible pass}.

    One entry per candidate (or per submission). NaN when nothing passed the visible tests
    (the conditional probability is undefined, not zero).
    """
    v = _as_bool(visible_pass, "visible_pass")
    h = _as_bool(hidden_pass, "hidden_pass")
    if v.ndim != 1 or v.shape != h.shape:
        raise ValueError("visible_pass and hidden_pass must be 1-D and aligned")
    n_vis = int(v.sum())
    if n_vis == 0:
        return float("nan")
    return float(np.sum(v & ~h) / n_vis)
