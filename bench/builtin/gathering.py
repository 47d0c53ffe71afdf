"""Indexing tasks beyond flip (indexing.py): gather, embedding lookup, index_select, 2-D transpose.

Index tensors always include the largest valid index, so an off-by-one in the bounds
shows; hidden shapes are non-square and not multiples of the tile, so kernels whose grid
floors the size or that only work on square matrices fail there.
"""

from __future__ import annotations

import torch

from bench.builtin._common import (
    ELEMENT_BYTES,
    TALL_ROWS,
    hidden_grid,
    nbytes,
    randint,
    randn,
    sizes,
    tall_case,
)
from bench.registry import register_task
from bench.task import Case, Mutation, Task, case

FLOATS = ("float32", "float16", "bfloat16")
COPY_DTYPES = ("float32", "float16")


def _gather_inputs(c: Case, device: str) -> tuple:
    rows, cols, k = c.size("rows"), c.size("cols"), c.size("k")
    x = randn((rows, cols), c, device, salt=1)
    index = randint(0, cols, (rows, k), c, device, salt=2)
    index[:, 0] = cols - 1
    return (x, index)


register_task(Task(
    id="gather",
    category="indexing",
    instruction=(
        "Write a Triton kernel and a Python wrapper `gather(x, index)` equal to torch.gather(x, 1, index): x is "
        "2-D (rows, cols) float32 or float16, index is an int64 tensor of shape (rows, k) with values in "
        "[0, cols), and out[i, j] = x[i, index[i, j]]. k <= cols, both arbitrary; output (rows, k) of x's dtype."
    ),
    entry_point="gather",
    signature="def gather(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor",
    reference=lambda x, index: torch.gather(x, 1, index),
    make_inputs=_gather_inputs,
    dtypes=COPY_DTYPES,
    visible=(case("visible-4x2048x1024", "float32", 0, rows=4, cols=2048, k=1024),
             case("visible-8x4096x2048", "float32", 1, rows=8, cols=4096, k=2048)),
    hidden_gpu=hidden_grid(sizes("rows,cols,k", [(1, 1, 1), (3, 7, 5), (37, 1030, 1025), (256, 4099, 4099),
                                                          (4096, 8192, 3001)]), COPY_DTYPES, cpu=False, strided=True)
               + (tall_case("float32", rows=TALL_ROWS, cols=37, k=19),),
    hidden_cpu=hidden_grid(sizes("rows,cols,k", [(1, 1, 1), (3, 7, 5), (4, 1030, 1025), (2, 3001, 2999)]),
                         COPY_DTYPES, cpu=True, strided=True),
    perf=(case("perf-8192x8192x4096", "float32", 0, rows=8192, cols=8192, k=4096),),
    strided_inputs=True,
    baseline_file="gather.py",
    difficulty=2,
    bytes_moved=lambda c: c.size("rows") * c.size("k") * (2 * ELEMENT_BYTES[c.dtype] + ELEMENT_BYTES["int64"]),
    flops=lambda c: 0,
    mutations=(
        Mutation("wrong_grid", "grid = (n_rows, triton.cdiv(k, BLOCK_SIZE))", "grid = (n_rows, k // BLOCK_SIZE)",
                 note="drops the tail block: right only when k is a multiple of the block"),
        Mutation("wrong_stride", "vals = tl.load(x_ptr + row * stride_x + idx", "vals = tl.load(x_ptr + row * stride_i + idx",
                 note="uses the index tensor's row stride for x: right only when k == cols"),
        Mutation("ignores_index", "vals = tl.load(x_ptr + row * stride_x + idx, mask=mask)",
                 "vals = tl.load(x_ptr + row * stride_x + offs, mask=mask)"),
        Mutation("tuning", "BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))


def _embedding_inputs(c: Case, device: str) -> tuple:
    batch, seq, vocab, dim = c.size("batch"), c.size("seq"), c.size("vocab"), c.size("dim")
    ids = randint(0, vocab, (batch, seq), c, device, salt=1)
    ids[0, 0] = vocab - 1
    weight = randn((vocab, dim), c, device, salt=2)
    return (ids, weight)


register_task(Task(
    id="embedding",
    category="indexing",
    instruction=(
        "Write a Triton kernel and a Python wrapper `embedding(ids, weight)` equal to "
        "torch.nn.functional.embedding(ids, weight): ids is an int64 tensor of shape (batch, seq) with values "
        "in [0, vocab), weight is (vocab, dim) in float32, float16 or bfloat16; return (batch, seq, dim) of "
        "weight's dtype. dim is arbitrary (it may exceed one block)."
    ),
    entry_point="embedding",
    signature="def embedding(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor",
    reference=lambda ids, weight: torch.nn.functional.embedding(ids, weight),
    make_inputs=_embedding_inputs,
    dtypes=FLOATS,
    visible=(case("visible-2x8-v64-d128", "float32", 0, batch=2, seq=8, vocab=64, dim=128),
             case("visible-4x16-v100-d256", "float32", 1, batch=4, seq=16, vocab=100, dim=256)),
    hidden_gpu=hidden_grid(sizes("batch,seq,vocab,dim", [(1, 1, 5, 1), (2, 3, 17, 7), (4, 7, 1000, 257),
                                                                  (8, 512, 32000, 4096), (3, 1000, 50257, 768)]),
                         FLOATS, cpu=False, strided=True)
               + (tall_case("float32", batch=1, seq=TALL_ROWS, vocab=1000, dim=37),),
    hidden_cpu=hidden_grid(sizes("batch,seq,vocab,dim", [(1, 1, 5, 1), (2, 3, 17, 7), (2, 5, 50, 300),
                                                                  (1, 4, 23, 1000)]), FLOATS, cpu=True, strided=True),
    perf=(case("perf-16x1024-v32000-d4096", "bfloat16", 0, batch=16, seq=1024, vocab=32000, dim=4096),),
    strided_inputs=True,
    baseline_file="embedding.py",
    difficulty=2,
    bytes_moved=lambda c: c.size("batch") * c.size("seq") * (2 * ELEMENT_BYTES[c.dtype] * c.size("dim") + ELEMENT_BYTES["int64"]),
    flops=lambda c: 0,
    mutations=(
        Mutation("missing_offset", "offs = start + tl.arange(0, BLOCK_D)", "offs = tl.arange(0, BLOCK_D)",
                 note="rewrites the first block of the row: right only when dim fits one block"),
        Mutation("wrong_row", "vals = tl.load(weight_ptr + row * stride_w + offs", "vals = tl.load(weight_ptr + tok * stride_w + offs",
                 note="reads the row of the token's position instead of its id"),
        Mutation("off_by_one", "row = tl.load(ids_ptr + tok)", "row = tl.load(ids_ptr + tok) - 1"),
        Mutation("tuning", "BLOCK_D = 256", "BLOCK_D = 512", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=2", breaks=False),
    ),
))


def _index_select_inputs(c: Case, device: str) -> tuple:
    rows, cols, k = c.size("rows"), c.size("cols"), c.size("k")
    x = randn((rows, cols), c, device, salt=1)
    index = randint(0, cols, (k,), c, device, salt=2)
    index[0] = cols - 1
    return (x, index)


register_task(Task(
    id="index_select",
    category="indexing",
    instruction=(
        "Write a Triton kernel and a Python wrapper `index_select(x, index)` equal to "
        "torch.index_select(x, 1, index): x is 2-D (rows, cols) float32 or float16, index is a 1-D int64 tensor "
        "of length k with values in [0, cols) (repeats allowed); return x[:, index], shape (rows, k)."
    ),
    entry_point="index_select",
    signature="def index_select(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor",
    reference=lambda x, index: torch.index_select(x, 1, index),
    make_inputs=_index_select_inputs,
    dtypes=COPY_DTYPES,
    visible=(case("visible-4x2048x1024", "float32", 0, rows=4, cols=2048, k=1024),
             case("visible-8x4096x2048", "float32", 1, rows=8, cols=4096, k=2048)),
    hidden_gpu=hidden_grid(sizes("rows,cols,k", [(1, 1, 1), (3, 7, 5), (37, 1030, 1025), (256, 4099, 4099),
                                                          (4096, 8192, 3001)]), COPY_DTYPES, cpu=False)
               + (tall_case("float32", rows=TALL_ROWS, cols=37, k=19),),
    hidden_cpu=hidden_grid(sizes("rows,cols,k", [(1, 1, 1), (3, 7, 5), (4, 1030, 1025), (2, 3001, 2999)]),
                         COPY_DTYPES, cpu=True),
    perf=(case("perf-8192x8192x4096", "float16", 0, rows=8192, cols=8192, k=4096),),
    baseline_file="index_select.py",
    difficulty=2,
    bytes_moved=lambda c: 2 * ELEMENT_BYTES[c.dtype] * c.size("rows") * c.size("k") + ELEMENT_BYTES["int64"] * c.size("k"),
    flops=lambda c: 0,
    mutations=(
        Mutation("wrong_grid", "grid = (n_rows, triton.cdiv(k, BLOCK_SIZE))", "grid = (n_rows, k // BLOCK_SIZE)",
                 note="drops the tail block: right only when k is a multiple of the block"),
        Mutation("ignores_index", "vals = tl.load(x_ptr + row * stride_x + idx, mask=mask)",
                 "vals = tl.load(x_ptr + row * stride_x + offs, mask=mask)"),
        Mutation("wrong_stride", "vals = tl.load(x_ptr + row * stride_x + idx", "vals = tl.load(x_ptr + row * stride_o + idx",
                 note="uses the output's row stride for x: right only when k == cols"),
        Mutation("tuning", "BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))


def _transpose_bytes(c: Case) -> int:
    return 2 * nbytes(c, c.size("m") * c.size("n"))


register_task(Task(
    id="transpose",
    category="indexing",
    instruction=(
        "Write a Triton kernel and a Python wrapper `transpose(x)` returning the transpose of a 2-D tensor x "
        "(M x N, float32, float16 or bfloat16) as a new contiguous N x M tensor of the same dtype (like "
        "x.t().contiguous()). M and N are arbitrary and need not be equal."
    ),
    entry_point="transpose",
    signature="def transpose(x: torch.Tensor) -> torch.Tensor",
    reference=lambda x: x.t().contiguous(),
    make_inputs=lambda c, device: (randn((c.size("m"), c.size("n")), c, device, salt=1),),
    dtypes=FLOATS,
    visible=(case("visible-64x64", "float32", 0, m=64, n=64), case("visible-128x128", "float32", 1, m=128, n=128)),
    hidden_gpu=hidden_grid(sizes("m,n", [(1, 1), (3, 7), (65, 33), (1025, 257), (4099, 1000), (8192, 8192)]),
                         FLOATS, cpu=False, strided=True),
    hidden_cpu=hidden_grid(sizes("m,n", [(1, 1), (3, 7), (65, 33), (17, 130)]), FLOATS, cpu=True, strided=True),
    perf=(case("perf-8192x8192", "float32", 0, m=8192, n=8192), case("perf-16384x4096-bf16", "bfloat16", 0, m=16384, n=4096)),
    strided_inputs=True,
    baseline_file="transpose.py",
    difficulty=2,
    bytes_moved=_transpose_bytes,
    flops=lambda c: 0,
    mutations=(
        Mutation("wrong_grid", "grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))", "grid = (M // BLOCK_M, N // BLOCK_N)",
                 note="drops edge tiles: right only for multiples of the tile"),
        Mutation("no_transpose", "tl.trans(tile)", "tile", note="stores the tile untransposed"),
        Mutation("precision_loss", "tl.trans(tile)", "tl.trans(tile).to(tl.float16)",
                 note="rounds through float16: right for float16 inputs only"),
        Mutation("tuning", "BLOCK_M, BLOCK_N = 64, 64", "BLOCK_M, BLOCK_N = 32, 32", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))
