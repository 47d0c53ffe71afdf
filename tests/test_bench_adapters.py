"""Adapters for external suites, on fixtures written for this project in their layouts
(tests/fixtures/geak_eval: TritonBench-revised and ROCm; tests/fixtures/kernelbench: level 1).

Loading is checked for counts, modes and skip reasons on each vendor; judging goes through
an interpreter worker that finds the adapted tasks by id through KMC_TASK_SOURCES, as a
real run's workers do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.adapters import AdapterError, load_source
from bench.registry import SOURCES_ENV, TaskSourceError, parse_sources
from tests.helpers import run_cli

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GEAK = FIXTURES / "geak_eval"
KB = FIXTURES / "kernelbench"


def _reasons(report: Any) -> dict[str, str]:
    return {Path(s.path).name: s.reason for s in report.skipped}


@pytest.mark.parametrize("vendor", ["nvidia", "cpu"])
def test_geak_eval_fixtures_load_with_counts_and_skip_reasons(vendor: str) -> None:
    report = load_source("geak-eval", GEAK, vendor=vendor)
    print(json.dumps(report.to_json(), indent=1))
    assert report.counts() == {"loaded": 3, "skipped": 4, "by_suite": {"geak-eval": 3, "tritonbench": 2, "rocm": 1}}
    reasons = _reasons(report)
    assert "draws random numbers itself" in reasons["noise_double.py"]
    assert "tl.extra.hip" in reasons["hip_exp.py"] and f"this machine: {vendor}" in reasons["hip_exp.py"]
    assert "waves_per_eu" in reasons["tuned_copy.py"]
    assert "146" in reasons["no_separator.py"]
    assert any("instructions from" in n and n.startswith("tritonbench") for n in report.notes)


def test_geak_eval_on_amd_keeps_the_amd_only_files() -> None:
    report = load_source("geak-eval", GEAK, vendor="amd")
    ids = {t.id for t in report.tasks}
    assert {"tb-hip_exp", "rocm-tuned_copy"} <= ids
    assert set(_reasons(report)) == {"no_separator.py", "noise_double.py"}


def test_geak_eval_tasks_record_mode_entry_and_cases() -> None:
    tasks = {t.id: t for t in load_source("geak-eval", GEAK, vendor="nvidia").tasks}
    add = tasks["tb-add_vectors"]
    assert add.mode == "instruction" and add.difficulty == 1 and add.instruction.startswith("Write a Triton kernel")
    assert add.entry_point == "add_vectors" and add.signature == "def add_vectors(a, b)"
    assert len(add.visible) == 2 and len({c.seed for c in add.hidden_gpu}) >= 5
    assert {c.size("call") for c in add.hidden_gpu} == {0, 1, 2}, "three calls of the suite's loop"
    scale = tasks["tb-row_scale"]
    assert scale.mode == "code-to-code" and "_row_scale_kernel" in scale.instruction
    relu = tasks["rocm-relu_rows"]
    # The ROCm launcher lives in the test section: the task asks for it and the baseline includes it.
    assert relu.mode == "instruction" and "def relu_rows(x)" in relu.instruction
    assert "def relu_rows(x)" in relu.baseline_source() and "BLOCK = 128" in relu.baseline_source()
    assert "test_performance" not in relu.baseline_source()
    assert relu.triton_baseline and relu.suites == ("geak-eval", "rocm")


def test_kernelbench_fixtures_load_with_counts_and_skip_reasons() -> None:
    report = load_source("kernelbench", KB, vendor="nvidia")
    print(json.dumps(report.to_json(), indent=1))
    assert report.counts()["loaded"] == 3 and report.counts()["skipped"] == 2
    reasons = _reasons(report)
    assert "dropout" in reasons["4_Dropout_Mix.py"]
    assert "no get_init_inputs" in reasons["5_Missing_Init_Inputs.py"]
    tasks = {t.id: t for t in report.tasks}
    lin = tasks["kb-l1-3_Linear_GELU"]
    assert lin.entry_point == "linear_gelu" and "linear_weight" in lin.signature and "linear_bias" in lin.signature
    assert not lin.triton_baseline
    relu = tasks["kb-l1-1_Scaled_ReLU"]
    assert {c.dims["dim"] for c in relu.hidden_cpu} == {17}, "CPU cases use the shrunk sizes"
    assert 4096 in {c.dims["dim"] for c in relu.hidden_gpu}, "GPU cases include the suite's own sizes"
    assert len({c.seed for c in relu.hidden_cpu}) == 5


def test_kernelbench_reference_is_the_module_and_runs_in_float64() -> None:
    lin = next(t for t in load_source("kernelbench", KB, vendor="cpu").tasks if t.id == "kb-l1-3_Linear_GELU")
    args = lin.make_inputs(lin.visible[0], "cpu")
    x, n_in, n_out, weight, bias = args
    assert (n_in, n_out) == (17, 17) and weight.shape == (17, 17)
    expected = torch.nn.functional.gelu(x @ weight.T + bias)
    assert torch.allclose(lin.reference(*args), expected, atol=1e-6)
    wide = tuple(a.double() if isinstance(a, torch.Tensor) else a for a in args)
    assert lin.reference(*wide).dtype == torch.float64


def test_bad_sources_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="unknown adapter"):
        load_source("tritonbench-t", GEAK)
    with pytest.raises(AdapterError, match="GEAK-eval layout"):
        load_source("geak-eval", tmp_path)
    with pytest.raises(AdapterError, match="KernelBench layout"):
        load_source("kernelbench", tmp_path)
    with pytest.raises(TaskSourceError, match="ADAPTER:PATH"):
        parse_sources("geak-eval")
    assert parse_sources(f"geak-eval:{GEAK};kernelbench:{KB}") == [("geak-eval", str(GEAK)), ("kernelbench", str(KB))]


_KB_RELU = """import torch
import triton
import triton.language as tl


@triton.jit
def _scaled_relu_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) * scale, mask=mask)


def scaled_relu(x, scale):
    y = torch.empty_like(x)
    n = x.numel()
    _scaled_relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, scale, BLOCK=1024)
    return y
"""


@pytest.fixture(scope="module")
def adapted_pool() -> Any:
    """One interpreter worker that loads the fixture sources from KMC_TASK_SOURCES."""
    import os

    from runners.device import Target
    from runners.pool import LocalPool

    previous = os.environ.get(SOURCES_ENV)
    os.environ[SOURCES_ENV] = f"geak-eval:{GEAK};kernelbench:{KB}"
    try:
        with LocalPool(Target("cpu", True, "Triton CPU interpreter", 0), workers=1, job_timeout=300) as pool:
            yield pool
    finally:
        if previous is None:
            os.environ.pop(SOURCES_ENV, None)
        else:
            os.environ[SOURCES_ENV] = previous


def test_geak_eval_baselines_pass_their_differential_cases_in_a_worker(adapted_pool: Any) -> None:
    for task in load_source("geak-eval", GEAK, vendor="cpu").tasks:
        v = adapted_pool.evaluate(task.id, task.baseline_source(), "hidden").verdict
        assert v.correct, f"{task.id}: {v.one_line()}"
        assert v.cases_run == len(task.visible) + len(task.hidden_cpu)


def test_geak_eval_catches_a_wrong_candidate(adapted_pool: Any) -> None:
    task = next(t for t in load_source("geak-eval", GEAK, vendor="cpu").tasks if t.id == "tb-add_vectors")
    wrong = task.baseline_source().replace("a + b, mask=mask", "a - b, mask=mask")
    assert wrong != task.baseline_source()
    v = adapted_pool.evaluate(task.id, wrong, "hidden").verdict
    assert v.kind == "wrong_result" and v.failing_case.startswith("visible-call0")
    # A launcher that drops the masked tail passes the suite's 256-long call only: caught on the others.
    relu = next(t for t in load_source("geak-eval", GEAK, vendor="cpu").tasks if t.id == "rocm-relu_rows")
    tail = relu.baseline_source().replace("for start in range(0, n_cols, BLOCK_SIZE):",
                                          "for start in range(0, n_cols - BLOCK_SIZE + 1, BLOCK_SIZE):")
    v = adapted_pool.evaluate(relu.id, tail, "hidden").verdict
    assert v.kind == "wrong_result", v.one_line()


def test_kernelbench_task_judges_a_triton_candidate(adapted_pool: Any) -> None:
    good = adapted_pool.evaluate("kb-l1-1_Scaled_ReLU", _KB_RELU, "hidden").verdict
    assert good.correct and good.cases_run == 7, good.one_line()
    unscaled = adapted_pool.evaluate("kb-l1-1_Scaled_ReLU", _KB_RELU.replace(" * scale, mask", ", mask"), "hidden").verdict
    assert unscaled.kind == "wrong_result"
    eager = adapted_pool.evaluate("kb-l1-1_Scaled_ReLU", "def scaled_relu(x, s):\n    return x.relu() * s\n", "hidden")
    assert eager.verdict.kind == "no_kernel", "the suite's own PyTorch is not a Triton answer"


def test_bench_list_with_sources_reports_counts_and_reasons() -> None:
    r = run_cli("bench", "list", "--json", "--source", f"geak-eval:{GEAK}", "--source", f"kernelbench:{KB}",
                timeout=120)
    assert r.returncode == 0, r.stderr
    ids = {row["id"] for row in json.loads(r.stdout)}
    assert {"tb-add_vectors", "rocm-relu_rows", "kb-l1-2_Row_Softmax", "softmax"} <= ids
    sources = json.loads(r.stderr.strip().splitlines()[-1])["sources"]
    counts = {s["adapter"]: (s["loaded"], s["skipped"]) for s in sources}
    assert counts == {"geak-eval": (3, 4), "kernelbench": (3, 2)}
    r = run_cli("bench", "list", "--source", f"geak-eval:{GEAK / 'nope'}", timeout=60)
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_relative_source_paths_reach_the_workers() -> None:
    """Workers start in another directory: the exported source path must be absolute."""
    rel = GEAK.relative_to(Path(__file__).resolve().parent.parent)
    r = run_cli("bench", "check", "--device", "cpu", "--source", f"geak-eval:{rel}", "--tasks", "tb-row_scale",
                "--json", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["tasks"][0]["verdict"] == "correct"
    r = run_cli("bench", "list", "--source", f"geak-eval:{GEAK / 'nope'}", timeout=60)
    assert r.returncode == 2 and "does not exist" in r.stderr
