"""Built-in tasks; each module registers its tasks at import (one module per category).

The seven original tasks' modules come first so their order in `all_tasks()` (and in runs)
does not change as the suite grows.
"""

from bench.builtin import elementwise, indexing, matmul, rowwise, scans  # noqa: F401, I001
from bench.builtin import (  # noqa: F401
    fused,
    reductions,
    softmax_family,
    cumulative,
    gathering,
    gemm,
    attention,
    quantization,
    rotary,
)
