"""Adapters for external suites, on fixtures written for this project in their layouts
(tests/fixtures/geak_eval: TritonBench-revised and ROCm; tests/fixtures/kernelbench: level 1).
The fixtures mirror shapes found in the upstream files (GEAK-eval's TritonBench_G_v1 and
ROCm_v1 sets, KernelBench's level1): autograd `.apply` entry points, lightllm-style in-place
wrappers, ROCm tests that launch kernels themselves or take `device='cuda'`, sizes written
as expressions and tuples.

Loading is checked for counts, modes and skip reasons on each vendor; judging goes through
an interpreter worker that loads the sources named on its command line (`--task-source`) and
finds the adapted tasks by id, as a real run's workers do.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.adapters import AdapterError, load_source
from bench.registry import TaskSourceError, parse_sources
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
    assert report.counts() == {"loaded": 21, "skipped": 3, "by_suite": {"geak-eval": 21, "tritonbench": 17, "rocm": 4}}
    reasons = _reasons(report)
    assert "tl.extra.hip" in reasons["hip_exp.py"] and f"this machine: {vendor}" in reasons["hip_exp.py"]
    assert "waves_per_eu" in reasons["tuned_copy.py"]
    assert "146" in reasons["no_separator.py"]
    assert any("instructions from" in n and n.startswith("tritonbench") for n in report.notes)


def test_geak_eval_on_amd_keeps_the_amd_only_files() -> None:
    report = load_source("geak-eval", GEAK, vendor="amd")
    ids = {t.id for t in report.tasks}
    assert {"tb-hip_exp", "rocm-tuned_copy"} <= ids
    assert set(_reasons(report)) == {"no_separator.py"}


def test_geak_eval_tasks_record_mode_entry_and_cases() -> None:
    tasks = {t.id: t for t in load_source("geak-eval", GEAK, vendor="nvidia").tasks}
    add = tasks["tb-add_vectors"]
    assert add.mode == "instruction" and add.difficulty == 1 and add.instruction.startswith("Write a Triton kernel")
    assert add.entry_point == "add_vectors" and add.signature == "def add_vectors(a, b)"
    assert len(add.visible) == 2 and len({c.seed for c in add.hidden_gpu}) >= 5
    assert {c.size("call") for c in add.hidden_gpu if "call" in c.dims} == {0, 1, 2}, "three calls of the suite's loop"
    assert sum("shape" in c.dims for c in add.hidden_gpu) == 8 and sum("shape" in c.dims for c in add.hidden_cpu) == 4
    scale = tasks["tb-row_scale"]
    assert scale.mode == "code-to-code" and "_row_scale_kernel" in scale.instruction
    relu = tasks["rocm-relu_rows"]
    # The ROCm launcher lives in the test section: the task asks for it and the baseline includes it.
    assert relu.mode == "instruction" and "def relu_rows(x)" in relu.instruction
    assert "def relu_rows(x)" in relu.baseline_source() and "BLOCK = 128" in relu.baseline_source()
    assert "test_performance" not in relu.baseline_source()
    assert relu.triton_baseline and relu.suites == ("geak-eval", "rocm")


def test_geak_eval_entry_point_leads_to_a_kernel_never_to_a_test_helper(tmp_path: Path) -> None:
    """ROCm tests call `set_seed()` and input helpers, and compute the expected value with
    helpers of their own (test_matmul_MXFP.py's `dot_scale_ref` launches a kernel of the code
    part): where the test launches the kernel itself, that launch is the entry point."""
    from bench.adapters.geak_parse import parse_file

    tasks = {t.id: t for t in load_source("geak-eval", GEAK, vendor="nvidia").tasks}
    assert not {t.entry_point for t in tasks.values()} & {"set_seed", "make_input", "gbps", "run_relu_rows",
                                                           "upcast_ref"}
    assert tasks["rocm-scaled_add_ref_helper"].entry_point == "launch_scaled_add_kernel"
    flip = parse_file(GEAK / "ROCm" / "data" / "ROCm_v1" / "flip_rows.py", "rocm")
    assert not isinstance(flip, str) and flip.entry_kind == "launch" and flip.target == "flip_rows_kernel"
    # A helper defined in the code part (as ROCm files define get_num_sms()) does not qualify either.
    text = (GEAK / "ROCm" / "data" / "ROCm_v1" / "flip_rows.py").read_text()
    text = text.replace("@triton.jit\n", "def get_num_sms():\n    return 4\n\n\n@triton.jit\n", 1)
    text = text.replace("    set_seed()\n    x = torch.from_numpy(make_input((N, M), dtype_str))",
                        "    set_seed()\n    get_num_sms()\n    x = torch.from_numpy(make_input((N, M), dtype_str))")
    assert "get_num_sms()\n    x" in text
    (tmp_path / "flip_rows.py").write_text(text)
    again = parse_file(tmp_path / "flip_rows.py", "rocm")
    assert not isinstance(again, str) and again.entry == "launch_flip_rows_kernel"


def test_geak_eval_autograd_apply_alias_is_the_entry_point() -> None:
    """TritonBench publishes many operators as `name = _Fn.apply`: the alias is the entry point,
    its signature is the Function's forward without ctx, and the suite's two calls are replayed."""
    task = next(t for t in load_source("geak-eval", GEAK, vendor="nvidia").tasks if t.id == "tb-scaled_copy")
    assert task.entry_point == "scaled_copy" and task.signature == "def scaled_copy(x, alpha)"
    assert "scaled_copy = _ScaledCopy.apply" in task.baseline_source()
    assert {c.size("call") for c in task.visible} == {0, 1}
    assert len([c for c in task.hidden_gpu if "call" in c.dims]) == 10


def test_rocm_tests_with_default_parameters_are_run_for_their_inputs() -> None:
    """ROCm tests are `def test_x(M, N, request, device='cuda')`: a defaulted parameter is not a
    missing fixture, so every parameter set is called and its input recorded."""
    from bench.adapters.geak_parse import parse_file
    from bench.adapters.geak_record import GeakSuite

    sf = parse_file(GEAK / "ROCm" / "data" / "ROCm_v1" / "relu_rows.py", "rocm")
    assert not isinstance(sf, str) and sf.test_callers == ("test_relu_rows",) and sf.n_calls == 4
    calls = GeakSuite(sf, interpreter=True).calls()
    assert [tuple(c[0].shape) for c in calls] == [(1, 1), (4, 100), (3, 300), (2, 129)]
    assert all(c[0].device.type == "cpu" for c in calls)


def test_for_interpreter_turns_the_cuda_device_context_into_a_null_one() -> None:
    from bench.adapters._adapted import for_interpreter

    text = for_interpreter("import torch\n\ndef f(x):\n    with torch.cuda.device(x.device):\n        return x + 1\n"
                           "n = torch.cuda.device_count\n")
    assert "torch.cuda.device(" not in text and "torch.cuda.device_count" in text
    namespace: dict[str, Any] = {}
    exec(compile(text, "<adapted>", "exec"), namespace)  # noqa: S102 - our own snippet
    assert torch.equal(namespace["f"](torch.zeros(3)), torch.ones(3))


def test_geak_eval_reads_instructions_from_tritonbench_statistics_json(tmp_path: Path) -> None:
    """TritonBench's own data folder: TritonBench_G_v1.json names files and keeps the text
    under `comp_instru`; its alpaca JSON names no file and matches nothing."""
    folder = tmp_path / "data" / "TritonBench_G_v1"
    folder.mkdir(parents=True)
    for name in ("row_scale.py", "add_vectors.py"):
        shutil.copy(GEAK / "TritonBench" / "data" / "TritonBench_G_v1" / name, folder / name)
    (tmp_path / "data" / "TritonBench_G_v1.json").write_text(json.dumps([
        {"file": "row_scale.py", "repo": "example/repo", "simp_instru": "Scale rows.", "simp_instru_len": 2,
         "comp_instru": "Write `row_scale(x, scale)`: a Triton kernel multiplying each row by scale.",
         "comp_instru_len": 12, "output": "...", "difficulty": "4"}]))
    (tmp_path / "data" / "TritonBench_G_comp_alpac_v1.json").write_text(json.dumps([
        {"instruction": "Write add_vectors.", "input": "", "output": "def add_vectors(a, b): ..."}]))
    report = load_source("geak-eval", tmp_path, vendor="nvidia")
    tasks = {t.id: t for t in report.tasks}
    assert tasks["tb-row_scale"].mode == "instruction"
    assert tasks["tb-row_scale"].instruction.startswith("Write `row_scale(x, scale)`")
    assert tasks["tb-row_scale"].difficulty == 4, "thunlp writes difficulty as a string"
    assert tasks["tb-add_vectors"].mode == "code-to-code"
    assert any(n.endswith("TritonBench_G_v1.json") for n in report.notes)


def test_geak_eval_reads_a_rocm_variant_folder_pointed_at(tmp_path: Path) -> None:
    """GEAK-eval keeps ROCm_v1_autotune/ and ROCm_v1.1/ beside ROCm_v1/; pointed at, they are read."""
    for variant in ("ROCm_v1_autotune", "ROCm_v1.1"):
        shutil.copytree(GEAK / "ROCm" / "data" / "ROCm_v1", tmp_path / variant)
        report = load_source("geak-eval", tmp_path / variant, vendor="nvidia")
        assert [t.id for t in report.tasks] == ["rocm-flip_rows", "rocm-relu_rows", "rocm-scaled_add_ref_helper",
                                                "rocm-sub_compile_only"], variant
        assert {t.suites for t in report.tasks} == {("geak-eval", "rocm")}
    with pytest.raises(AdapterError, match="GEAK-eval layout"):
        load_source("geak-eval", tmp_path, vendor="nvidia")  # searched from above: only ROCm_v1/ itself


def test_kernelbench_fixtures_load_with_counts_and_skip_reasons() -> None:
    report = load_source("kernelbench", KB, vendor="nvidia")
    print(json.dumps(report.to_json(), indent=1))
    assert report.counts()["loaded"] == 5 and report.counts()["skipped"] == 2
    reasons = _reasons(report)
    assert "dropout" in reasons["4_Dropout_Mix.py"]
    assert "no get_init_inputs" in reasons["5_Missing_Init_Inputs.py"]
    tasks = {t.id: t for t in report.tasks}
    lin = tasks["kb-l1-3-linear_gelu"]
    assert lin.entry_point == "linear_gelu" and "linear_weight" in lin.signature and "linear_bias" in lin.signature
    assert not lin.triton_baseline
    relu = tasks["kb-l1-1-scaled_relu"]
    assert {c.dims["dim"] for c in relu.hidden_cpu} == {17}, "CPU cases use the shrunk sizes"
    assert 4096 in {c.dims["dim"] for c in relu.hidden_gpu}, "GPU cases include the suite's own sizes"
    assert len({c.seed for c in relu.hidden_cpu}) == 5


def test_kernelbench_reference_is_the_module_and_runs_in_float64() -> None:
    lin = next(t for t in load_source("kernelbench", KB, vendor="cpu").tasks if t.id == "kb-l1-3-linear_gelu")
    args = lin.make_inputs(lin.visible[0], "cpu")
    x, n_in, n_out, weight, bias = args
    assert (n_in, n_out) == (17, 17) and weight.shape == (17, 17)
    expected = torch.nn.functional.gelu(x @ weight.T + bias)
    assert torch.allclose(lin.reference(*args), expected, atol=1e-6)
    wide = tuple(a.double() if isinstance(a, torch.Tensor) else a for a in args)
    assert lin.reference(*wide).dtype == torch.float64


def test_kernelbench_sizes_written_as_expressions_and_tuples_are_shrunk() -> None:
    """Upstream level-1 files write `N = 2048 * 2` and `input_shape = (32768,)`: both are sizes.
    Missing them would run the CPU cases at the suite's full size."""
    tasks = {t.id: t for t in load_source("kernelbench", KB, vendor="cpu").tasks}
    gap = tasks["kb-l1-6-mean_squared_gap"]
    assert {(c.dims["batch_size"], c.dims["input_shape[0]"]) for c in gap.hidden_cpu} == {(17, 17)}
    assert {(c.dims["batch_size"], c.dims["input_shape[0]"]) for c in gap.perf} == {(2048, 4096)}
    a, b = gap.make_inputs(gap.hidden_cpu[0], "cpu")
    assert a.shape == b.shape == (17, 17)
    assert torch.allclose(gap.reference(a, b), torch.mean((a - b) ** 2))
    # A shape made of another constant follows it: `input_shape = (num_classes,)`.
    logits_task = tasks["kb-l1-7-class_logits_loss"]
    assert "input_shape[0]" not in logits_task.hidden_cpu[0].dims
    logits, labels = logits_task.make_inputs(logits_task.hidden_cpu[0], "cpu")
    assert logits.shape == (17, 17) and labels.shape == (17,) and int(labels.max()) < 17
    expected = torch.nn.functional.cross_entropy(logits, labels)
    assert torch.allclose(logits_task.reference(logits, labels), expected)
    big, _ = logits_task.make_inputs(logits_task.perf[0], "cpu")
    assert big.shape == (1024, 1000)


def test_kernelbench_reads_the_upstream_repository_layout(tmp_path: Path) -> None:
    """A KernelBench checkout keeps the problems in KernelBench/level1/ under the repository root."""
    (tmp_path / "KernelBench" / "level1").mkdir(parents=True)
    (tmp_path / "setup.py").write_text("# the repository's own scripts sit at the root\n")
    shutil.copy(KB / "level1" / "1_Scaled_ReLU.py", tmp_path / "KernelBench" / "level1")
    report = load_source("kernelbench", tmp_path, vendor="cpu")
    assert [t.id for t in report.tasks] == ["kb-l1-1-scaled_relu"] and not report.skipped


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
    """One interpreter worker that loads the fixture sources named on its command line."""
    from judge.device import Target
    from runners.pool import LocalPool

    with LocalPool(Target("cpu", True, "Triton CPU interpreter", 0), workers=1, job_timeout=300,
                   task_sources=(f"geak-eval:{GEAK}", f"kernelbench:{KB}")) as pool:
        yield pool


@pytest.mark.slow
def test_geak_eval_baselines_pass_their_differential_cases_in_a_worker(adapted_pool: Any) -> None:
    for task in load_source("geak-eval", GEAK, vendor="cpu").tasks:
        v = adapted_pool.evaluate(task.id, task.baseline_source(), "hidden").verdict
        assert v.correct, f"{task.id}: {v.one_line()}"
        assert v.cases_run + v.cases_skipped == len(task.visible) + len(task.hidden_cpu)
        from judge.reference_habits import NO_ANSWER

        unanswered = sum(NO_ANSWER in reason for reason in v.skip_reasons)
        assert v.cases_skipped - unanswered <= 4, "only new-shape slots the reference rejects are skipped"
        assert bool(unanswered) == (task.id == "tb-mean_past_end"), v.skip_reasons  # and cases it gives no answer on


@pytest.mark.slow
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


@pytest.mark.slow
def test_adapted_judging_reaches_the_candidate_process(adapted_pool: Any) -> None:
    """What adapted suites need of the judge, with the candidate in its own process (the same
    checks in-process are in test_geak_eval_adapter.py): a poisoned output argument left half
    unwritten, an entry point's random draws seeded as the reference's are, and a suite wrapper
    that finishes in PyTorch (its own torch ops allowed, no `torch_fallback`)."""
    tasks = {t.id: t for t in load_source("geak-eval", GEAK, vendor="cpu").tasks}
    gather = tasks["tb-gather_rows_into"].baseline_source()
    half = gather.replace("tl.store(out_ptr + row * stride_out + cols, v, mask=mask)",
                          "tl.store(out_ptr + row * stride_out + cols, v, mask=mask & (cols < 8))")
    assert half != gather
    v = adapted_pool.evaluate("tb-gather_rows_into", half, "hidden").verdict
    assert v.kind == "wrong_result" and "NaN" in v.message, v.one_line()
    noise = tasks["tb-noise_double"].baseline_source()
    other = noise.replace("x = torch.randn(n, device='cpu')", "x = torch.rand(n, device='cpu')")
    assert other != noise
    assert adapted_pool.evaluate("tb-noise_double", other, "hidden").verdict.kind == "wrong_result"
    sums = adapted_pool.evaluate("tb-block_sums", tasks["tb-block_sums"].baseline_source(), "visible").verdict
    assert sums.correct, sums.one_line()
    add = tasks["tb-add_vectors"].baseline_source()
    token = add.replace("    return c\n", "    return a + b\n").replace("](a, b, c, n", "](a, a, c, n")
    assert token != add
    assert adapted_pool.evaluate("tb-add_vectors", token, "visible").verdict.kind == "torch_fallback"


@pytest.mark.slow  # starts processes: a few seconds on 2 cores
def test_kernelbench_task_judges_a_triton_candidate(adapted_pool: Any) -> None:
    good = adapted_pool.evaluate("kb-l1-1-scaled_relu", _KB_RELU, "hidden").verdict
    assert good.correct and good.cases_run == 7, good.one_line()
    unscaled = adapted_pool.evaluate("kb-l1-1-scaled_relu", _KB_RELU.replace(" * scale, mask", ", mask"), "hidden").verdict
    assert unscaled.kind == "wrong_result"
    eager = adapted_pool.evaluate("kb-l1-1-scaled_relu", "def scaled_relu(x, s):\n    return x.relu() * s\n", "hidden")
    assert eager.verdict.kind == "no_kernel", "the suite's own PyTorch is not a Triton answer"


@pytest.mark.slow
def test_bench_list_with_sources_reports_counts_and_reasons() -> None:
    r = run_cli("bench", "list", "--json", "--source", f"geak-eval:{GEAK}", "--source", f"kernelbench:{KB}",
                timeout=120)
    assert r.returncode == 0, r.stderr
    ids = {row["id"] for row in json.loads(r.stdout)}
    assert {"tb-add_vectors", "rocm-relu_rows", "kb-l1-2-row_softmax", "softmax"} <= ids
    sources = json.loads(r.stderr.strip().splitlines()[-1])["sources"]
    counts = {s["adapter"]: (s["loaded"], s["skipped"]) for s in sources}
    assert counts == {"geak-eval": (21, 3), "kernelbench": (5, 2)}
    r = run_cli("bench", "list", "--source", f"geak-eval:{GEAK / 'nope'}", timeout=60)
    assert r.returncode == 2 and "does not exist" in r.stderr


@pytest.mark.slow
def test_relative_source_paths_reach_the_workers() -> None:
    """Workers start in another directory: the exported source path must be absolute."""
    rel = GEAK.relative_to(Path(__file__).resolve().parent.parent)
    r = run_cli("bench", "check", "--device", "cpu", "--source", f"geak-eval:{rel}", "--tasks", "tb-row_scale",
                "--json", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["tasks"][0]["verdict"] == "correct"
    r = run_cli("bench", "list", "--source", f"geak-eval:{GEAK / 'nope'}", timeout=60)
    assert r.returncode == 2 and "does not exist" in r.stderr


@pytest.mark.slow
def test_suite_objects_and_returned_inputs_cross_to_the_candidate_process(tmp_path: Path) -> None:
    """Through real workers: a module, a suite settings class, a device and a dtype passed by the
    suite's test reach the candidate process as working objects (module_rms.py, like
    fast_rms_layernorm.py and int_scaled_matmul.py), and a reference that hands back its own
    input (residual_passthrough.py, like layer_norm_fwd.py) lets a candidate do the same. The
    --jsonl file has each task's line as it was judged, with the job's seconds by phase."""
    progress = tmp_path / "progress.jsonl"
    r = run_cli("bench", "check", "--device", "cpu", "--source", f"geak-eval:{GEAK}", "--workers", "1",
                "--tasks", "tb-module_rms,tb-residual_passthrough", "--jsonl", str(progress), "--json", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    verdicts = {t["task"]: t["verdict"] for t in json.loads(r.stdout)["tasks"]}
    assert verdicts == {"tb-module_rms": "correct", "tb-residual_passthrough": "correct"}
    lines = [json.loads(line) for line in progress.read_text().splitlines()]
    assert sorted((x["task"], x["verdict"]) for x in lines) == sorted(verdicts.items())
    for line in lines:  # where each job's seconds went, by phase
        assert line["phases"]["correctness"] > 0 and line["phases"]["compile"] > 0
        assert sum(line["phases"].values()) <= line["seconds"] + 0.05
