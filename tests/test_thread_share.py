"""The pool's share of the cores reaches torch in every process below it (bench/thread_share.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from bench.thread_share import THREADS_ENV, take_thread_share, thread_share


@pytest.fixture
def restored_threads() -> Iterator[int]:
    before = torch.get_num_threads()
    yield before
    torch.set_num_threads(before)


def test_a_set_share_sizes_torchs_thread_pool(
    monkeypatch: pytest.MonkeyPatch, restored_threads: object
) -> None:
    monkeypatch.setenv(THREADS_ENV, "1")
    torch.set_num_threads(2)  # so the assertion cannot hold by itself
    take_thread_share()
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize("value", ["", "0", "-3", "two"])
def test_no_share_leaves_torchs_default(
    monkeypatch: pytest.MonkeyPatch, restored_threads: object, value: str
) -> None:
    monkeypatch.setenv(THREADS_ENV, value)
    torch.set_num_threads(2)
    take_thread_share()
    assert thread_share() == 0 and torch.get_num_threads() == 2


def test_the_pool_hands_the_share_down_under_the_same_name() -> None:
    from runners import worker_process

    assert worker_process.THREADS_ENV == THREADS_ENV
