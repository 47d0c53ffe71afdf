"""In-process checks of the oracle's and sandbox's building blocks (fast; the end-to-end
behaviour through real workers is in test_hostile.py)."""

from __future__ import annotations

import pytest
import torch

from judge.candidate.allocations import poisoned_allocations
from judge.candidate.loading import classify_exception
from judge.comparison import Mismatch, compare
from runners.worker_process import scrubbed_env


def test_scrubbed_env_keeps_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "TRITON_API_KEY", "GITHUB_TOKEN",
                 "DB_PASSWORD", "KMC_AUTH"):
        monkeypatch.setenv(name, "sk-test-unit")
    monkeypatch.setenv("TRITON_CACHE_DIR", "/tmp/tc")
    env = scrubbed_env({"CUDA_VISIBLE_DEVICES": "1"})
    assert "sk-test-unit" not in env.values()
    assert env["TRITON_CACHE_DIR"] == "/tmp/tc" and env["CUDA_VISIBLE_DEVICES"] == "1"


def test_workers_import_from_the_project_then_the_callers_python_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A package on the caller's PYTHONPATH (pyseccomp, which contains every candidate) reaches
    the workers; the project comes first, and nothing else of the caller's environment does."""
    import os

    from runners.worker_process import PROJECT_ROOT

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/opt/site", "", str(PROJECT_ROOT), "/opt/more"]))
    assert scrubbed_env()["PYTHONPATH"].split(os.pathsep) == [str(PROJECT_ROOT), "/opt/site", "/opt/more"]
    monkeypatch.delenv("PYTHONPATH")
    assert scrubbed_env()["PYTHONPATH"] == str(PROJECT_ROOT)


def test_poisoning_reaches_an_allocator_bound_before_it_started() -> None:
    from judge.candidate.allocations import install_poisoned_allocations

    install_poisoned_allocations()
    bound = torch.empty_like  # what `from torch import empty_like` at a candidate's import gets
    x = torch.ones(8)
    with poisoned_allocations():
        assert torch.isnan(bound(x)).all()
        assert torch.isnan(x.new_empty(3)).all()
        assert (torch.empty(4, dtype=torch.int32) != 0).all()
    assert not torch.isnan(bound(x).fill_(1.0)).any()  # off outside judging: timing pays nothing


def test_compare_rejects_nan_constant_and_shape() -> None:
    from bench.registry import get_task

    task = get_task("vector_add")
    expected = torch.linspace(-1, 1, 50)
    assert compare(expected.clone(), expected, task) == (0.0, 0.0)
    with pytest.raises(Mismatch, match="NaN"):
        compare(torch.full_like(expected, float("nan")), expected, task)
    with pytest.raises(Mismatch, match="shape"):
        compare(expected[:-1], expected, task)
    with pytest.raises(Mismatch, match="dtype"):
        compare(expected.double(), expected, task)


def test_compare_judges_complex_components_and_exact_dtypes() -> None:
    from bench.registry import get_task

    task = get_task("vector_add")
    expected = torch.complex(torch.linspace(-1, 1, 50), torch.linspace(2, 3, 50))
    assert compare(expected.clone(), expected, task) == (0.0, 0.0)
    with pytest.raises(Mismatch, match="outside atol=0.0001"):  # float32 tolerance per component
        compare(torch.complex(expected.real, -expected.imag), expected, task)  # only the imaginary part is wrong
    mask = torch.arange(10) % 3 == 0
    assert compare(mask.clone(), mask, task) == (0.0, 0.0)
    with pytest.raises(Mismatch, match="atol=0 rtol=0"):
        compare(~mask, mask, task)


def test_compare_says_each_kind_of_mismatch_from_one_read_of_the_device() -> None:
    """`compare` reads everything it decides on in one copy from the device (`_Summary`); each
    branch still says what it said when it read them one by one."""
    from bench.registry import get_task

    task = get_task("vector_add")
    expected = torch.tensor([1.0, float("inf"), -2.0, float("nan")])
    assert compare(expected.clone(), expected, task) == (0.0, 0.0)  # specials reproduced, NaN included
    with pytest.raises(Mismatch, match="1 NaN/Inf values where the reference is finite"):
        compare(torch.tensor([float("nan"), float("inf"), -2.0, float("nan")]), expected, task)
    with pytest.raises(Mismatch, match="non-finite reference values not reproduced"):
        compare(torch.tensor([1.0, float("-inf"), -2.0, float("nan")]), expected, task)
    with pytest.raises(Mismatch, match=r"1/4 elements outside atol=0.0001 rtol=0.0001; first at flat index 2: "
                                       r"got -2.5, expected -2") as wrong:
        compare(torch.tensor([1.0, float("inf"), -2.5, float("nan")]), expected, task)
    assert (wrong.value.max_abs, wrong.value.max_rel) == (0.5, 0.25)
    # Every element within atol + rtol * |expected|, yet the answer varies by more than atol
    # and the output not at all: a constant is no answer.
    with pytest.raises(Mismatch, match=r"output is constant \(0.0001\) where the reference varies"):
        compare(torch.tensor([1e-4, 1e-4]), torch.tensor([0.0, 1.5e-4]), task)
    assert compare(torch.tensor([1e-4, 1e-4]), torch.tensor([0.6e-4, 1.4e-4]), task)[0] <= 1e-4  # varies by under atol


def test_interpreter_errors_are_classified_like_the_gpu_compiler() -> None:
    from triton.runtime.errors import InterpreterError

    def wrapped(cause: BaseException) -> InterpreterError:
        try:
            raise InterpreterError(repr(cause)) from cause
        except InterpreterError as exc:
            return exc

    assert classify_exception(wrapped(AttributeError("module 'triton.language' has no attribute 'x'"))) == "compile_error"
    assert classify_exception(wrapped(ValueError("arange's range must be a power of 2"))) == "compile_error"
    assert classify_exception(wrapped(RuntimeError("boom"))) == "runtime_error"
    assert classify_exception(ZeroDivisionError()) == "runtime_error"
