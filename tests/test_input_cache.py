"""The judge worker's input cache (judge/case_inputs.py `_InputCache`) evicts whole tasks, least
recently used first: a full-suite run's first tasks no longer hold it while every later task
redraws its inputs and re-runs its float64 reference at every job."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from judge import case_inputs
from judge.candidate.bit_equality import tensor_bytes

KIB = 1024


def _value(kib: int) -> tuple[torch.Tensor]:
    return (torch.zeros(kib * KIB, dtype=torch.uint8),)


def _fill(cache: case_inputs._InputCache, task: str, cases: int, kib: int = 1) -> None:
    for i in range(cases):
        cache.get((task, i), lambda: _value(kib))


def test_a_new_task_evicts_the_least_recently_used_whole() -> None:
    cache = case_inputs._InputCache(6 * KIB)
    _fill(cache, "a", 2)
    _fill(cache, "b", 2)
    _fill(cache, "c", 2)
    assert cache.used == 6 * KIB
    cache.get(("a", 0), lambda: pytest.fail("kept, not made again"))  # a is now the most recent
    _fill(cache, "d", 1)
    assert {k[0] for k in cache.entries} == {"a", "c", "d"}  # b went, both its entries
    assert cache.used == 5 * KIB and cache.task_bytes == {"c": 2 * KIB, "a": 2 * KIB, "d": KIB}


def test_a_task_larger_than_the_bound_keeps_its_first_cases() -> None:
    """Its own entries never evict each other: a set larger than the bound does not push itself
    out case by case (each job would redraw all of it); what fits of it stays."""
    cache = case_inputs._InputCache(4 * KIB)
    _fill(cache, "small", 1)
    _fill(cache, "big", 6)
    assert sorted(cache.entries) == [("big", 0), ("big", 1), ("big", 2), ("big", 3)]  # small went for big's fourth
    _fill(cache, "big", 6)  # the next job of big: its first cases hit, the rest are made again
    assert cache.used == 4 * KIB


def test_an_entry_too_big_even_for_its_task_alone_evicts_nothing() -> None:
    cache = case_inputs._InputCache(4 * KIB)
    _fill(cache, "a", 2)
    _fill(cache, "b", 2)
    made = cache.get(("huge", 0), lambda: _value(5))
    assert made[0].numel() == 5 * KIB  # handed out, not kept
    assert {k[0] for k in cache.entries} == {"a", "b"} and cache.used == 4 * KIB


def test_inputs_drawn_ahead_never_evict() -> None:
    """`prepare_inputs` (a worker drawing the run's inputs before their first jobs) keeps only
    what fits: a task judged now is worth more than one that may come."""
    cache = case_inputs._InputCache(4 * KIB)
    _fill(cache, "judged", 3)
    cache.get(("ahead", 0), lambda: _value(1), evict=False)
    cache.get(("ahead", 1), lambda: _value(1), evict=False)
    assert sorted(cache.entries) == [("ahead", 0), ("judged", 0), ("judged", 1), ("judged", 2)]
    cache.get(("next", 0), lambda: _value(2))  # an evicting get takes the least recently used
    assert {k[0] for k in cache.entries} == {"ahead", "next"}


def test_the_oracle_gets_the_same_values_after_an_eviction(monkeypatch: pytest.MonkeyPatch) -> None:
    """A task evicted and judged again draws the same inputs and expected outputs."""
    from bench.registry import get_task

    task, other = get_task("vector_add"), get_task("softmax")
    case = task.cases("visible", True)[0]
    cache = case_inputs._InputCache(1 << 40)
    monkeypatch.setattr(case_inputs, "_CACHE", cache)
    first = case_inputs.cached_inputs(task, case, "cpu", refill=False)
    other_case = other.cases("visible", True)[0]
    other_size = tensor_bytes(other.inputs(other_case, "cpu"))
    cache.max_bytes = max(cache.used, other_size)  # room for either task, not both
    case_inputs.cached_inputs(other, other_case, "cpu", refill=False)
    assert other.id in cache.task_bytes
    assert not any(k[0] == task.id for k in cache.entries)
    again: Any = case_inputs.cached_inputs(task, case, "cpu", refill=False)
    assert again is not first and all(a.equal(b) for a, b in zip(first, again, strict=True))


def test_a_strided_input_counts_its_whole_buffer_and_shared_storage_counts_once() -> None:
    """Bounds kept in elements let the cache (and a hold's plan, judge/oracle.py) hold up to three
    times their bytes on strided cases (judge/case_inputs.py `storage_bytes`)."""
    from bench.task import strided_view

    plain = torch.zeros(KIB, dtype=torch.float32)
    strided = strided_view(plain)  # every other element of a buffer twice the size
    assert tensor_bytes((strided,)) == 4 * KIB and case_inputs.storage_bytes((strided,)) == 8 * KIB
    assert case_inputs.storage_bytes((plain, plain[: KIB // 2], plain[1:])) == 4 * KIB  # one storage
    cache = case_inputs._InputCache(6 * KIB)
    assert cache.get(("t", 0), lambda: (strided,))[0] is strided
    assert not cache.entries and cache.used == 0  # its 8 KiB would pass the bound: not kept
    cache.get(("t", 1), lambda: (plain,))
    assert cache.used == 4 * KIB


def test_forgetting_a_task_drops_all_it_kept_and_nothing_else() -> None:
    """A run that judges each task once (runners/check.py) drops a task's entries at its job's
    end (judge/worker.py `KEEP_TASK_INPUTS_ENV`), so a dozen workers do not each hold their
    last task's inputs on one GPU for nothing."""
    cache = case_inputs._InputCache(8 * KIB)
    _fill(cache, "a", 2)
    _fill(cache, "b", 3)
    cache.forget("a")
    cache.forget("never kept")
    assert {k[0] for k in cache.entries} == {"b"}
    assert cache.used == 3 * KIB and cache.task_bytes == {"b": 3 * KIB}
