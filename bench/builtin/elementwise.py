"""Elementwise tasks."""

from __future__ import annotations

from bench.builtin._common import hidden_grid, nbytes, randn, stressed
from bench.registry import register_task
from bench.task import Case, Mutation, Task, case


def _vector_add_inputs(c: Case, device: str) -> tuple:
    n = c.size("n")
    return tuple(stressed(randn((n,), c, device, salt=s), c, negative=-3e4, large=2e4) for s in (1, 2))


register_task(Task(
    id="vector_add",
    category="elementwise",
    instruction=(
        "Write a Triton kernel and a Python wrapper `vector_add(x, y)` that returns the elementwise "
        "sum of two 1-D tensors of the same length and dtype (float32, float16 or bfloat16). "
        "The length is arbitrary (not necessarily a multiple of the block size)."
    ),
    entry_point="vector_add",
    signature="def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor",
    reference=lambda x, y: x + y,
    make_inputs=_vector_add_inputs,
    dtypes=("float32", "float16", "bfloat16"),
    visible=(case("visible-n1024", "float32", 0, n=1024), case("visible-n4096", "float32", 1, n=4096)),
    hidden_gpu=hidden_grid([{"n": n} for n in (1, 97, 1025, 131071, 4_000_037)], ("float32", "float16", "bfloat16"),
                           cpu=False),
    hidden_cpu=hidden_grid([{"n": n} for n in (1, 97, 1025, 4099, 10_007)], ("float32", "float16", "bfloat16"),
                           cpu=True),
    perf=(case("perf-n16M", "float32", 0, n=1 << 24), case("perf-n64K", "float32", 0, n=1 << 16)),
    baseline_file="vector_add.py",
    difficulty=1,
    bytes_moved=lambda c: 3 * nbytes(c, c.size("n")),
    flops=lambda c: c.size("n"),
    suites=("quick", "full"),
    mutations=(
        Mutation("wrong_grid", "grid = (triton.cdiv(n_elements, BLOCK_SIZE),)", "grid = (n_elements // BLOCK_SIZE,)",
                 note="drops the tail block: passes power-of-two lengths only"),
        Mutation("wrong_mask", "mask = offsets < n_elements", "mask = offsets < n_elements - 1"),
        Mutation("wrong_op", "tl.store(out_ptr + offsets, x + y, mask=mask)", "tl.store(out_ptr + offsets, x + x, mask=mask)"),
        Mutation("runtime_error", "_add_kernel[grid](x, y, out, n_elements,", "_add_kernel[grid](x, y, out,"),
        Mutation("tuning", "BLOCK_SIZE = 1024", "BLOCK_SIZE = 256", breaks=False),
        Mutation("tuning", "BLOCK_SIZE = 1024", "BLOCK_SIZE = 4096", breaks=False),
        Mutation("tuning", "num_warps=4", "num_warps=8", breaks=False),
    ),
))
