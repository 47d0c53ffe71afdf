"""Built-in tasks; each module registers its tasks at import (one module per category)."""

from bench.builtin import (  # noqa: F401
    attention,
    cumulative,
    elementwise,
    fused,
    gathering,
    gemm,
    indexing,
    matmul,
    quantization,
    reductions,
    rotary,
    rowwise,
    scans,
    softmax_family,
)
