"""A spare candidate process makes Triton's driver and asks its device-properties query before
its job (judge/candidate/server.py `warm_triton_driver`), so the job's compile pass does not pay
for them. No GPU here: Triton's query and torch's device are stand-ins; what is checked is that
the query is asked for the current device, in the process's own cache, once Triton's answer is
kept, and that any failure is left to the compile pass."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
import torch

from judge.candidate import server


@pytest.fixture
def fake_query(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    asked: list[Any] = []
    module = types.ModuleType("triton.compiler.compiler")

    def max_shared_mem(device: int) -> int:
        asked.append(device)
        return 232448

    module.max_shared_mem = max_shared_mem  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "triton.compiler.compiler", module)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    return asked


def test_the_query_is_asked_for_the_current_device_in_the_process_cache(
        fake_query: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    caches: list[str] = []
    monkeypatch.setattr(server, "use_triton_cache", caches.append)
    started = server.warm_triton_driver("/var/cache/kmc-triton")
    assert fake_query == [3]
    assert caches == ["/var/cache/kmc-triton"]
    assert started > 0


def test_a_failing_query_is_left_to_the_compile_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("triton.compiler.compiler")

    def broken(device: int) -> int:
        raise RuntimeError("no driver")

    module.max_shared_mem = broken  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "triton.compiler.compiler", module)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(server, "use_triton_cache", lambda folder: True)
    server.warm_triton_driver("")  # does not raise


@pytest.mark.parametrize(("value", "on"), [("", True), ("1", True), ("0", False), ("off", False)])
def test_the_switch(monkeypatch: pytest.MonkeyPatch, value: str, on: bool) -> None:
    if value:
        monkeypatch.setenv(server.DRIVER_WARMUP_ENV, value)
    else:
        monkeypatch.delenv(server.DRIVER_WARMUP_ENV, raising=False)
    assert server.driver_warmup_enabled() is on


def test_every_process_a_worker_forks_is_prepared_before_it_starts() -> None:
    """Spares and fresh processes alike go through `prepare` (the worker's helper seeding) at
    the fork, before anything starts them."""
    from judge.spares import Spares

    prepared: list[int] = []

    class Proc:
        def __init__(self, pid: int) -> None:
            self.pid = pid

    class Template:
        forked = 0

        def spawn(self) -> Proc:
            Template.forked += 1
            return Proc(Template.forked)

    spares = Spares(Template(), "cpu", interpreter=True, prepare=lambda proc: prepared.append(proc.pid))
    spares.count = 2
    spares.refill()
    assert prepared == [1, 2]
    assert spares._spawn().pid == 3 and prepared == [1, 2, 3]
