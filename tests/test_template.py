"""The warm template's promise to candidate processes: every candidate-side module is already
loaded when a candidate runs (the project is off the import path by then, so a module first
imported inside a candidate process, as the timing step's judge.candidate.sampling once was, ended the
process), and the judge's own modules stay out of reach."""

from __future__ import annotations

import pytest

from bench.registry import get_task
from judge.device import detect_target
from judge.template import _CANDIDATE_SIDE
from runners.pool import LocalPool

PROBE = '''
import sys
_missing = [m for m in {modules!r} if m not in sys.modules]
if _missing:
    raise RuntimeError("candidate-side modules not loaded: " + ", ".join(_missing))
try:
    import bench.registry  # noqa: F401
except ModuleNotFoundError:
    pass
else:
    raise RuntimeError("the task registry was importable")
'''


@pytest.mark.slow
def test_candidate_side_modules_are_loaded_and_the_registry_is_not() -> None:
    source = PROBE.format(modules=list(_CANDIDATE_SIDE)) + get_task("vector_add").baseline_source()
    with LocalPool(detect_target(), workers=1) as pool:
        verdict = pool.evaluate("vector_add", source, "visible").verdict
    assert verdict.correct, verdict.one_line()


@pytest.mark.slow
def test_the_template_says_what_its_start_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seconds per start-up step with the ready message, and with KMC_PROFILE_TEMPLATE its
    warm-up under cProfile: a worker's start-up is mostly the template's, and scripts/judge_profile.py --cold prints both."""
    import os

    from judge.remote import TemplateProcess
    from judge.template import PROFILE_STARTUP_ENV

    env = {**os.environ, "TRITON_INTERPRET": "1", PROFILE_STARTUP_ENV: "1"}
    template = TemplateProcess("cpu", env=env)
    try:
        assert {"import torch", "warm-up", "containment"} <= set(template.startup)
        assert all(seconds >= 0 for seconds in template.startup.values())
        # A cProfile listing of the warm-up, both orders. Which entries make its top lines
        # depends on the host: on an H200 host whose image has no bytecode, importing torch's
        # lazily loaded modules fills them and warm_up itself is not among them.
        profile = template.startup_profile
        assert "function calls" in profile and "Ordered by: cumulative time" in profile, profile[:300]
    finally:
        template.close()


@pytest.mark.slow  # starts processes: a few seconds on 2 cores
def test_triton_modules_imported_at_the_first_launch_are_imported_in_the_template() -> None:
    """`lazy_triton_imports`: Triton's Gluon front end (imported at a process's first launch by
    Triton 3.6) is loaded before the template forks; a module this Triton lacks is skipped. In a
    fresh interpreter, as in the template: re-importing a package this process already imported
    depends on what the tests before it left behind."""
    import importlib.util
    import subprocess
    import sys
    from pathlib import Path

    script = ("from judge import warmup\n"
              "warmup.LAZY_TRITON_MODULES = ('triton.experimental.gluon', 'triton.no_such_module')\n"
              "import sys\n"
              "print(warmup.lazy_triton_imports(), 'triton.experimental.gluon' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    has_gluon = importlib.util.find_spec("triton.experimental.gluon") is not None
    expected = "['triton.experimental.gluon'] True" if has_gluon else "[] False"
    assert done.stdout.strip().splitlines()[-1] == expected, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.slow
def test_a_template_launched_early_is_used_and_one_for_another_device_is_replaced() -> None:
    """A judge worker launches its template before it imports torch itself (judge/worker.py
    `main`), guessing the candidates' device from its environment; the guess is checked when
    the worker knows: a template launched for another device is ended, and one for this device
    starts instead."""
    import os

    from judge.remote import TemplateProcess
    from judge.template import launch

    env = {**os.environ, "TRITON_INTERPRET": "1"}
    early = launch("cpu", env)
    template = TemplateProcess("cpu", env=env, launched=early)
    try:
        assert template.proc is early.proc and "import torch" in template.startup
    finally:
        template.close()
    assert early.proc.poll() is not None

    wrong = launch("cuda", env)
    template = TemplateProcess("cpu", env=env, launched=wrong)
    try:
        assert template.proc is not wrong.proc and template.device == "cpu"
        assert wrong.proc.poll() is not None  # ended, not left to start beside the right one
    finally:
        template.close()


def test_triton_host_lookups_are_answered_once_in_the_template() -> None:
    """`triton_host_lookups`: a cached lookup is answered (and then not asked again), one that
    is not cached per process is left alone, and a missing module or a lookup that fails here
    is skipped without stopping the others."""
    import functools
    import sys
    import types

    from judge import warmup

    asked: list[str] = []

    @functools.lru_cache
    def cached() -> str:
        asked.append("cached")
        return "x86_64,Linux"

    def uncached() -> str:
        asked.append("uncached")
        return ""

    @functools.lru_cache
    def failing() -> str:
        asked.append("failing")
        raise AssertionError("libcuda.so cannot found!")

    module = types.ModuleType("kmc_fake_triton_build")
    module.cached, module.uncached, module.failing = cached, uncached, failing  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    try:
        lookups = ((module.__name__, "failing"), ("kmc_no_such_module", "x"), (module.__name__, "uncached"),
                   (module.__name__, "cached"))
        assert warmup.triton_host_lookups(lookups) == [f"{module.__name__}.cached"]
        assert asked == ["failing", "cached"]
        cached()
        assert asked == ["failing", "cached"], "a cached answer was asked for again"
    finally:
        sys.modules.pop(module.__name__, None)


@pytest.mark.parametrize(("hip", "driver"), [(None, "triton.backends.nvidia.driver"),
                                             ("6.2", "triton.backends.amd.driver")])
def test_the_host_lookups_follow_the_gpu_runtime_torch_was_built_for(monkeypatch: pytest.MonkeyPatch,
                                                                      hip: str | None, driver: str) -> None:
    import torch

    from judge import warmup

    monkeypatch.setattr(torch.version, "hip", hip, raising=False)
    modules = [module for module, _ in warmup.host_lookups_here()]
    assert modules == ["triton.runtime.build", driver]
