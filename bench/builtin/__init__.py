"""Built-in tasks; each module registers its tasks at import."""

from bench.builtin import elementwise, indexing, matmul, rowwise, scans  # noqa: F401
