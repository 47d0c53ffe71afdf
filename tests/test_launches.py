"""judge/candidate/launches.py: what counts as Triton doing the work, on the GPU where there is one, else on
the CPU interpreter (the numpy fixtures need host memory: interpreter only)."""

from __future__ import annotations

import importlib

import pytest
import torch

from judge.candidate import call_record, known_memory, launches
from judge.candidate.loading import prepare_process
from judge.candidate.server import run_call
from tests.conftest import HAS_GPU

prepare_process()
K = importlib.import_module("tests.fixtures.provenance_kernels")
DEVICE = "cuda" if HAS_GPU else "cpu"


def _run(name: str, allowed: tuple[str, ...] = ()) -> dict:
    launches.set_allowed_ops(allowed)
    try:
        report, _ = run_call(getattr(K, name), (torch.randn(100, device=DEVICE),), DEVICE, not HAS_GPU)
    finally:
        launches.set_allowed_ops(())
    assert report["ok"], report
    return report


def test_a_kernel_writing_every_element_is_the_work() -> None:
    report = _run("honest")
    assert report["launched"] == 1 and report["fallback"] == {} and report["unwritten"] == []


def test_a_cast_of_a_kernel_written_buffer_is_still_the_work() -> None:
    report = _run("cast_after_kernel")
    assert report["fallback"] == {} and report["unwritten"] == []


@pytest.mark.interpreter  # numpy writes host memory
@pytest.mark.parametrize("name, why", [("masked_decoy_then_numpy", "no kernel wrote it"),
                                       ("overwritten_by_numpy", "changed after the kernel")])
def test_numpy_results_beside_a_kernel_are_not_the_work(name: str, why: str) -> None:
    report = _run(name)
    assert report["launched"] == 1
    assert report["unwritten"] and why in report["unwritten"][0]


def test_torch_arithmetic_is_recorded_by_name() -> None:
    assert _run("torch_beside_token_kernel")["fallback"] == {"add": 1}


def test_a_task_allow_list_admits_its_final_step() -> None:
    assert _run("partial_sums_then_torch_sum")["fallback"] == {"sum": 1}
    allowed = _run("partial_sums_then_torch_sum", allowed=("sum",))
    assert allowed["fallback"] == {} and allowed["unwritten"] == []


def test_an_output_sharing_memory_with_an_input_is_reported() -> None:
    x = torch.randn(100, device=DEVICE)
    report, _ = run_call(K.view_of_input, (x,), DEVICE, not HAS_GPU)
    assert report["aliased"] == ["output shares memory with input 0"]


def _memory_fixture() -> object:
    from pathlib import Path

    from judge.candidate.loading import load_module

    return load_module(Path(__file__).resolve().parent / "fixtures" / "memory_provenance.py",
                       "kmc_test_memory_provenance")


@pytest.mark.parametrize("name", ["import_time_tensor", "import_time_table", "cached_across_calls", "small_constant"])
def test_memory_made_at_import_in_an_earlier_call_or_from_a_constant_is_known(name: str) -> None:
    entry = getattr(_memory_fixture(), name)
    for _ in range(2):  # the second call reuses what the first (or the import) made
        x = torch.randn(100, device=DEVICE)
        report, out = run_call(entry, (x,), DEVICE, not HAS_GPU)
        assert report["ok"] and report["fallback"] == {} and report["unwritten"] == [], report
        assert torch.equal(out, x + 1.0)


@pytest.mark.parametrize("name", ["modes_off", "thread_then_clone"])
def test_a_kernel_given_memory_pytorch_filled_out_of_the_recorders_sight_is_a_fallback(name: str) -> None:
    """PyTorch with the dispatch modes switched off, or on another thread (modes are per thread),
    then a copy kernel: the op record sees no arithmetic, the launch's provenance check does."""
    entry = getattr(_memory_fixture(), name)
    x = torch.randn(100, device=DEVICE)
    report, out = run_call(entry, (x,), DEVICE, not HAS_GPU)
    assert report["ok"] and report["fallback"] == {known_memory.UNRECORDED: 1}, report
    assert torch.equal(out, x + 1.0)  # the values are right: only who computed them is wrong


@pytest.mark.interpreter  # the seals are on host memory; numpy writes it
@pytest.mark.parametrize("name", ["modes_off_into_known_buffer", "numpy_into_known_buffer",
                                  "thread_through_data_alias", "launders_by_set_", "launders_by_partial_copy"])
def test_known_memory_written_out_of_the_records_sight_loses_its_standing(name: str) -> None:
    """A buffer a recorded op made, filled by PyTorch with the modes off, by numpy, or by another
    thread through an alias with a version counter of its own: its seal no longer matches. And
    unknown memory stays unknown through a recorded `set_` or a copy into part of it."""
    entry = getattr(_memory_fixture(), name)
    x = torch.randn(100)
    report, out = run_call(entry, (x,), "cpu", True)
    assert report["ok"] and report["fallback"] == {known_memory.UNRECORDED: 1}, report
    assert torch.equal(out, x + 1.0)


def test_a_custom_op_named_like_an_allowed_one_is_not_the_aten_op() -> None:
    """`kmc_test::clone` is not `aten::clone`: matched by qualified name, it is a fallback."""
    import torch.library

    if not hasattr(torch.ops.kmc_test, "clone"):
        torch.library.custom_op("kmc_test::clone", mutates_args=())(_plus_one)
    x = torch.randn(100, device=DEVICE)
    report, out = run_call(lambda t: K.honest(torch.ops.kmc_test.clone(t)), (x,), DEVICE, not HAS_GPU)
    assert report["ok"] and report["fallback"] == {"kmc_test::clone": 1}, report
    launches.set_allowed_ops(("kmc_test::clone", "aten::sum"))  # a task may allow one by its qualified name
    try:
        report, _ = run_call(lambda t: K.honest(torch.ops.kmc_test.clone(t)), (x,), DEVICE, not HAS_GPU)
    finally:
        launches.set_allowed_ops(())
    assert report["ok"] and "kmc_test::clone" not in report["fallback"], report


def _plus_one(t: torch.Tensor) -> torch.Tensor:
    return t + 1.0


def test_given_storages_reach_into_sequences_mappings_and_modules() -> None:
    a, b, c = torch.ones(2), torch.ones(3), torch.ones(4)
    module = torch.nn.Linear(2, 2)
    found = known_memory.given_storages(([a], {"k": b}, module, 3, "s"))
    assert {call_record.storage_key(t) for t in (a, b, module.weight, module.bias)} <= found
    assert call_record.storage_key(c) not in found


@pytest.mark.slow  # starts processes: a few seconds on 2 cores
def test_recording_a_call_imports_no_dynamo_in_a_fresh_process() -> None:
    """The recorder's dispatch mode is not wrapped in `torch._disable_dynamo` (launches.py
    `_OpRecorder._should_skip_dynamo`): a fresh process that records a call (a template's
    warm-up, a naive harness's candidate process) does not pay for importing `torch._dynamo`."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = ("import sys\n"
              "from judge.candidate.loading import prepare_process\n"
              "prepare_process()\n"
              "from judge.warmup import warm_up\n"
              "warm_up(True)\n"
              "print('torch._dynamo' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parent.parent, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False", done.stdout[-2000:]


def test_a_compiled_function_called_under_the_recorder_runs_and_is_recorded() -> None:
    x = torch.arange(8.0)
    compiled = torch.compile(lambda a: (a * 2).sum(), backend="eager")
    with launches.recording((x,)) as rec:
        y = compiled(x)
    assert y.item() == 56.0
    assert rec.fallback == {"mul": 1, "sum": 1}
