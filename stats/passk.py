"""Unbiased pass@k (Chen et al. 2021), vectorised over tasks and k.

Why: with ``n`` samples of which ``c`` pass, the plug-in ``1 - (1 - c/n)^k`` is biased
(and so is sub-sampling *with* replacement, Olausson et al. 2024). The unbiased estimator
is the probability that a size-k subset drawn *without* replacement from the n samples
contains at least one passing sample:

    pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i = n-c+1}^{n} (1 - k / i),

and it is exactly 1.0 when ``n - c < k``. The product form avoids huge binomials; here it
is evaluated as ``-expm1(sum(log1p(-k / i)))`` which is the same product computed without
cancellation (agrees with exact rational arithmetic to ~1e-15).

k > n is *refused* (ValueError), never silently clipped: the estimator is undefined there.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["pass_at_k", "pass_at_k_table"]

# Bound on the (rows x terms) float64 work matrix per chunk (~32 MB).
_MAX_CHUNK_ELEMENTS: int = 4_000_000


def _as_int_array(x: npt.ArrayLike, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype == bool:
        raise ValueError(f"{name} must be integer counts, got booleans")
    if np.issubdtype(a.dtype, np.integer):
        return a.astype(np.int64)
    if np.issubdtype(a.dtype, np.floating):
        if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            raise ValueError(f"{name} must hold integer values, got non-integer or NaN")
        return a.astype(np.int64)
    raise ValueError(f"{name} must be numeric, got dtype {a.dtype}")


def _unique_pass_at_k(n: np.ndarray, c: np.ndarray, k: np.ndarray) -> np.ndarray:
    """pass@k for validated 1-D int arrays where n - c >= k (the product is non-trivial).

    Row r multiplies ``c[r]`` factors ``1 - k/i`` for ``i = n, n-1, ..., n-c+1`` (all
    ``i >= k + 1``, so every factor is in (0, 1)). Rows are sorted by ``c`` and processed
    in chunks whose (rows x widest row) work matrix stays under a fixed element budget.
    """
    out = np.zeros(n.shape[0], dtype=float)  # c == 0: empty product, pass@k = 0
    order = np.argsort(c, kind="stable")
    order = order[c[order] > 0]
    start = 0
    while start < order.size:
        step = max(1, _MAX_CHUNK_ELEMENTS // int(c[order[start]]))
        stop = min(order.size, start + step)
        while stop - start > 1 and (stop - start) * int(c[order[stop - 1]]) > _MAX_CHUNK_ELEMENTS:
            stop = start + (stop - start) // 2
        idx = order[start:stop]
        nn, cc, kk = n[idx], c[idx], k[idx]
        j = np.arange(int(cc.max()))
        mask = j[None, :] < cc[:, None]
        i = np.where(mask, nn[:, None] - j[None, :], 1)
        ratio = np.where(mask, kk[:, None] / i, 0.0)
        out[idx] = -np.expm1(np.log1p(-ratio).sum(axis=1))
        start = stop
    return out


def pass_at_k(n: npt.ArrayLike, c: npt.ArrayLike, k: npt.ArrayLike) -> np.ndarray | float:
    """Unbiased pass@k per task: ``1 - C(n-c, k) / C(n, k)``.

    Why: the estimand is the per-task probability that at least one of k fresh samples
    passes; this is its minimum-variance unbiased estimator from n samples with c passes.

    Computed: ``1 - prod(1 - k / arange(n-c+1, n+1))`` (via log1p/expm1), 1.0 where
    ``n - c < k``. ``n``, ``c``, ``k`` broadcast against each other (tasks, and optionally k).

    Raises ValueError when any value is negative, ``c > n``, ``k < 1`` or ``k > n``.
    Returns a float when all inputs are scalars, else an array of the broadcast shape.
    """
    n_a, c_a, k_a = (_as_int_array(v, name) for v, name in ((n, "n"), (c, "c"), (k, "k")))
    scalar = n_a.ndim == 0 and c_a.ndim == 0 and k_a.ndim == 0
    n_b, c_b, k_b = np.broadcast_arrays(n_a, c_a, k_a)
    shape = n_b.shape
    nf, cf, kf = n_b.ravel(), c_b.ravel(), k_b.ravel()
    if np.any(nf < 0) or np.any(cf < 0):
        raise ValueError("n and c must be non-negative")
    if np.any(cf > nf):
        bad = int(np.argmax(cf > nf))
        raise ValueError(f"c > n for a task (c={cf[bad]}, n={nf[bad]})")
    if np.any(kf < 1):
        raise ValueError("k must be >= 1")
    if np.any(kf > nf):
        bad = int(np.argmax(kf > nf))
        raise ValueError(
            f"k > n for a task (k={kf[bad]}, n={nf[bad]}): pass@k is not estimable; "
            "refusing rather than substituting a smaller k"
        )
    out = np.ones(nf.shape[0], dtype=float)
    need = (nf - cf) >= kf
    if np.any(need):
        trip = np.stack([nf[need], cf[need], kf[need]], axis=1)
        uniq, inverse = np.unique(trip, axis=0, return_inverse=True)
        vals = _unique_pass_at_k(uniq[:, 0], uniq[:, 1], uniq[:, 2])
        out[need] = vals[inverse.ravel()]
    if scalar:
        return float(out[0])
    return out.reshape(shape)


def pass_at_k_table(n: npt.ArrayLike, c: npt.ArrayLike, ks: npt.ArrayLike) -> np.ndarray:
    """pass@k for every task and every k: array of shape (len(ks), n_tasks).

    Why: pass@k curves (k = 1..K) for many tasks in one vectorised call.
    Computed: ``pass_at_k(n[None, :], c[None, :], ks[:, None])``; same refusals.
    """
    n_a = np.atleast_1d(np.asarray(n))
    c_a = np.atleast_1d(np.asarray(c))
    k_a = np.atleast_1d(np.asarray(ks))
    if k_a.ndim != 1 or n_a.ndim != 1 or c_a.ndim != 1:
        raise ValueError("n, c and ks must be 1-D")
    res = pass_at_k(n_a[None, :], c_a[None, :], k_a[:, None])
    return np.asarray(res, dtype=float)
