"""Where a built-in task's inputs are drawn: on the CPU for a CPU judge (unchanged values, so
recorded CPU runs replay), on the GPU itself for a GPU judge (hidden inputs run to gigabytes
per task; the CPU's generator took most of a correct candidate's hidden judging on an H200)."""

from __future__ import annotations

import pytest
import torch

from bench.builtin._common import randint, randn
from bench.registry import get_task
from bench.task import case


def test_cpu_draws_are_the_seeded_cpu_generator_values() -> None:
    c = case("c", "float16", 3, n=64)
    g = torch.Generator().manual_seed(3 * 1_000_003 + 7)
    want = (torch.randn((8, 8), generator=g, dtype=torch.float32) * 2.0).to(torch.float16)
    got = randn((8, 8), c, "cpu", salt=7, scale=2.0)
    assert got.device.type == "cpu" and got.dtype == torch.float16
    assert torch.equal(got, want)
    g = torch.Generator().manual_seed(3 * 1_000_003)
    assert torch.equal(randint(0, 100, (50,), c, "cpu"), torch.randint(0, 100, (50,), generator=g))


def test_seeds_and_salts_give_different_draws_on_the_cpu() -> None:
    c0, c1 = case("a", "float32", 0, n=4), case("b", "float32", 1, n=4)
    assert not torch.equal(randn((64,), c0, "cpu"), randn((64,), c1, "cpu"))
    assert not torch.equal(randn((64,), c0, "cpu"), randn((64,), c0, "cpu", salt=1))


@pytest.mark.gpu
def test_gpu_draws_happen_on_the_gpu_and_repeat_exactly() -> None:
    c = case("c", "bfloat16", 2, n=64)
    first = randn((1000, 257), c, "cuda", salt=5)
    again = randn((1000, 257), c, "cuda", salt=5)
    assert first.device.type == "cuda" and first.dtype == torch.bfloat16
    assert torch.equal(first, again)
    assert not torch.equal(first, randn((1000, 257), c, "cuda", salt=6))
    idx = randint(0, 17, (4096,), c, "cuda")
    assert idx.device.type == "cuda" and int(idx.min()) >= 0 and int(idx.max()) < 17
    assert torch.equal(idx, randint(0, 17, (4096,), c, "cuda"))


@pytest.mark.gpu
def test_a_gpu_judge_draws_a_whole_task_identically_twice() -> None:
    task = get_task("embedding")
    for c in task.cases("hidden", False)[:6]:
        a, b = task.inputs(c, "cuda"), task.inputs(c, "cuda")
        for x, y in zip(a, b, strict=True):
            if isinstance(x, torch.Tensor):
                assert x.device.type == "cuda" and torch.equal(x, y)
