"""GEAK-eval files at full fidelity, on fixtures written for this project in the upstream
layouts (tests/fixtures/geak_eval): every way a suite calls its code becomes an entry point
(wrappers with keyword-only arguments, `Cls.apply(...)`, kernels the test launches itself,
wrappers only the performance test calls), output arguments are learnt from the reference,
entry points that draw random numbers are seeded, and hidden cases add new shapes where the
reference runs. Judging runs in-process here (the interpreter, as the workers run it); the
worker path is covered in test_bench_adapters.py.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.adapters import load_source
from bench.adapters._glue import complete, defines
from bench.adapters.geak_eval import difficulty_of, perf_script_for
from bench.adapters.geak_parse import parse_file
from bench.adapters.geak_record import GeakSuite
from bench.task import CaseUnavailable, OutputArgs
from tests.helpers import script_module

GEAK = Path(__file__).resolve().parent / "fixtures" / "geak_eval"
TB = GEAK / "TritonBench" / "data" / "TritonBench_G_v1"
ROCM = GEAK / "ROCm" / "data" / "ROCm_v1"


def _suite(path: Path, kind: str = "tritonbench") -> GeakSuite:
    sf = parse_file(path, kind)
    assert not isinstance(sf, str), sf
    return GeakSuite(sf, interpreter=True, perf_script=perf_script_for(path.parent, path.stem))


@pytest.fixture(scope="module")
def tasks() -> dict[str, Any]:
    return {t.id: t for t in load_source("geak-eval", GEAK, vendor="cpu").tasks}


def _judge(task: Any, source: str) -> Any:
    """The oracle on the interpreter, in-process, on the task's hidden cases."""
    from judge.candidate.loading import load_module, prepare_process
    from judge.oracle import judge_cases
    from judge.runner import LocalRunner

    prepare_process()
    with tempfile.TemporaryDirectory(prefix="kmc-test-cand-") as folder:
        path = Path(folder) / "cand.py"
        path.write_text(task.complete_source(source))
        module = load_module(path, f"kmc_test_cand_{abs(hash(source))}")
        runner = LocalRunner(getattr(module, task.entry_point), "cpu", True, task.allowed_torch_ops)
        return judge_cases(task, runner, task.cases("hidden", True), "cpu", True)


@pytest.mark.interpreter
def test_output_arguments_are_learnt_from_the_reference() -> None:
    """A lightllm-style wrapper writes its whole result into `out` and ignores what was there:
    written and poisoned. A cache update writes some rows and keeps the others: written, and
    handed over with its initial values."""
    assert _suite(TB / "gather_rows_into.py").output_spec() == OutputArgs(written=(2,), poisoned=(2,))
    assert _suite(TB / "cache_rows.py").output_spec() == OutputArgs(written=(2,), poisoned=())
    assert _suite(TB / "add_vectors.py").output_spec() == OutputArgs()


@pytest.mark.interpreter
def test_the_reference_is_probed_on_the_device_the_cases_run_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recorded calls are kept on the CPU; a compiled kernel refuses CPU tensors, so on a GPU
    every probe (which arguments it writes, which new shapes it runs on) must first move the
    call to the GPU, or the probes fail and the adapter learns nothing (seen on an H200: 21
    TritonBench references rejected as 'input N was modified in place')."""
    from bench.adapters import geak_calls, geak_record

    devices: list[str] = []

    def record_device(value: Any, device: str) -> Any:
        devices.append(device)
        return geak_calls.to_cpu(value).clone() if hasattr(value, "clone") else value

    monkeypatch.setattr(geak_record, "_to_device", record_device)
    monkeypatch.setattr(GeakSuite, "run_device", lambda self: "cuda")  # as on a GPU
    suite = _suite(TB / "gather_rows_into.py")
    assert suite.output_spec() == OutputArgs(written=(2,), poisoned=(2,))
    assert devices and set(devices) == {"cuda"}


@pytest.mark.gpu
def test_references_learn_their_outputs_and_new_shapes_on_a_gpu() -> None:
    """On a GPU, not the interpreter: the same output arguments as on the CPU, and new shapes."""
    import torch

    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs a GPU without the interpreter")
    sf = parse_file(TB / "gather_rows_into.py", "tritonbench")
    assert not isinstance(sf, str), sf
    suite = GeakSuite(sf, interpreter=False)
    assert suite.output_spec() == OutputArgs(written=(2,), poisoned=(2,))
    assert suite.shape_calls(), "the reference runs on some perturbed shapes on the GPU"


@pytest.mark.interpreter
def test_keyword_only_arguments_are_replayed_by_keyword(tasks: dict[str, Any]) -> None:
    task = tasks["tb-rms_norm_kwonly"]
    assert task.entry_point == "call_rms_norm" and task.signature == "def call_rms_norm(x, weight, eps)"
    suite = task.make_inputs.__self__
    x, w, eps = suite.calls()[0]
    assert eps == 0.5, "the test passes eps=0.5 by keyword"
    (y,) = task.reference(*task.make_inputs(task.visible[0], "cpu"))
    expected = x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 0.5) * w
    assert torch.allclose(y, expected, atol=1e-5)
    # A candidate that defines only the suite's function gets the glue; one that defines the entry keeps its own.
    own = "def rms_norm(x, weight, *, eps=1e-6):\n    return x\n"
    assert "def call_rms_norm(x, weight, eps)" in task.complete_source(own)
    assert task.complete_source(own + "\ndef call_rms_norm(x, weight, eps):\n    return x\n").count("call_rms_norm") == 1


@pytest.mark.slow  # judges a suite's reference and candidates end to end: seconds on 2 cores
@pytest.mark.interpreter
def test_autograd_function_called_directly_gets_a_plain_entry(tasks: dict[str, Any]) -> None:
    task = tasks["tb-scale_apply"]
    assert (task.entry_point, task.entry_kind) == ("scale_function", "class_apply")
    assert task.signature == "def scale_function(x, alpha=2.0)"
    calls = task.make_inputs.__self__.calls()
    assert [len(c) for c in calls] == [1, 2] and calls[1][1] == 0.5
    assert _judge(task, task.baseline_source()).correct


@pytest.mark.slow  # judges a suite's reference and candidates end to end: seconds on 2 cores
@pytest.mark.interpreter
def test_a_kernel_the_test_launches_itself_is_replayed_with_its_grid(tasks: dict[str, Any]) -> None:
    """ROCm tests launch `kernel[grid](...)` themselves: the entry is that launch, the tensor the
    kernel writes is an output argument, and a candidate defining only the kernel is judged."""
    task = tasks["rocm-flip_rows"]
    assert task.entry_point == "launch_flip_rows_kernel" and task.signature.endswith("(X, Z, N, M, grid)")
    suite = task.make_inputs.__self__
    assert suite.output_spec() == OutputArgs(written=(1,), poisoned=(1,))
    x, z, n, m, grid = suite.calls()[0]
    assert grid == (1,) and (n, m) == (2, 16) and x.shape == (2, 16)
    (flipped,) = task.reference(*task.make_inputs(task.visible[0], "cpu"))
    assert torch.equal(flipped, torch.flip(x, dims=(1,)))
    kernel_only = task.baseline_source().split("# the suite's own call")[0]
    assert "def launch_flip_rows_kernel" not in kernel_only
    assert _judge(task, kernel_only).correct
    wrong = kernel_only.replace("tl.flip(tl.load(X + offs), 1)", "tl.load(X + offs)")
    assert _judge(task, wrong).kind == "wrong_result"


@pytest.mark.interpreter
def test_launch_options_and_keywords_travel_with_the_launch(tasks: dict[str, Any]) -> None:
    task = tasks["rocm-scaled_add_ref_helper"]
    assert task.signature == ("def launch_scaled_add_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK_SIZE, "
                              "options, grid)")
    call = task.make_inputs.__self__.calls()[0]
    # The test's `grid(meta)` is evaluated on the launch's own arguments (300 / 256 -> 2 programs):
    # a replayed launch crosses to the candidate's process as data.
    assert call[5] == 256 and call[6] == {"num_warps": 4} and call[7] == (2,)
    assert _judge(task, task.baseline_source()).correct


@pytest.mark.interpreter
def test_a_wrapper_only_the_performance_test_calls_is_the_entry(tasks: dict[str, Any]) -> None:
    """Like test_kernel_sub.py: the correctness test only compiles the kernel."""
    task = tasks["rocm-sub_compile_only"]
    assert task.entry_point == "kernel_sub_triton_wrapper"
    calls = task.make_inputs.__self__.calls()
    assert sorted((c[3], c[4]) for c in calls) == [(32, 1), (32, 4), (128, 1), (128, 4)]
    assert _judge(task, task.baseline_source()).correct


@pytest.mark.interpreter
def test_entry_points_that_draw_random_numbers_are_seeded(tasks: dict[str, Any]) -> None:
    task = tasks["tb-noise_double"]
    assert task.seeded_rng
    v = _judge(task, task.baseline_source())
    assert v.correct, v.one_line()
    other = task.baseline_source().replace("x = torch.randn(n, device='cpu')", "x = torch.rand(n, device='cpu')")
    assert other != task.baseline_source()
    assert _judge(task, other).kind == "wrong_result", "different draws are a different answer"


@pytest.mark.interpreter
def test_new_shapes_grow_each_size_and_are_kept_where_the_reference_runs(tmp_path: Path) -> None:
    relu = _suite(TB / "relu_small.py")
    sizes = sorted(call[0].numel() for call in (s.values for s in relu.shape_calls()))
    assert sizes == [7, 3001], "just above the recorded 5 elements, and above the common block sizes"
    noise = _suite(TB / "noise_double.py")
    assert {s.values for s in noise.shape_calls()} == {(3001,), (9,), (301,)}, "sizes given as integers grow too"
    # A reference that refuses larger inputs keeps no new shape; the slots are skipped with the reason.
    text = (TB / "relu_small.py").read_text().replace("    N = out.numel()\n", "    N = out.numel()\n    assert N <= 5\n")
    (tmp_path / "relu_small.py").write_text(text)
    strict = _suite(tmp_path / "relu_small.py")
    assert strict.shape_calls() == []
    with pytest.raises(CaseUnavailable, match="no new shape"):
        strict.make_inputs(next(c for c in load_source("geak-eval", GEAK, vendor="cpu").tasks[0].hidden_cpu
                                if "shape" in c.dims), "cpu")


def test_a_square_matrix_stays_square_and_integer_sizes_follow() -> None:
    from bench.adapters._shapes import Perturbation, perturb

    a = torch.arange(16.0).reshape(4, 4)
    grown = perturb((a, torch.tensor([3, 0]), 4, 16, 7), Perturbation(4, 9, "odd", True), seed=0)
    assert grown[0].shape == (9, 9) and torch.equal(grown[0][:4, :4], a), "recorded data kept as a prefix"
    assert grown[1].shape == (2,) and grown[2:] == (9, 81, 7), "n and numel follow; other integers stay"


@pytest.mark.slow  # judges a suite's reference and candidates end to end: seconds on 2 cores
@pytest.mark.interpreter
def test_the_first_block_candidate_and_upstream_relu_fail_on_new_shapes(tasks: dict[str, Any]) -> None:
    """Both pass every call the suite records (five elements) and fail at 3001 elements."""
    task = tasks["tb-relu_small"]
    assert _judge(task, task.baseline_source()).correct
    first_block = (
        "import torch, triton, triton.language as tl\n\n"
        "@triton.jit\ndef relu_kernel(x_ptr, out_ptr, N, block_size: tl.constexpr):\n"
        "    offsets = tl.arange(0, block_size)\n    mask = offsets < N\n"
        "    x = tl.load(x_ptr + offsets, mask=mask)\n"
        "    tl.store(out_ptr + offsets, tl.where(x >= 0, x, 0.0), mask=mask)\n\n"
        "def relu(x):\n    out = torch.empty_like(x, dtype=torch.float32)\n"
        "    relu_kernel[(1,)](x, out, x.numel(), 1024)\n    return out\n")
    upstream = task.baseline_source().replace(
        "    tl.store(out_ptr + offsets, tl.where(x >= 0, x, 0.0), mask=mask)",
        "    if pid == 0:\n        tl.store(out_ptr + offsets, tl.where(x >= 0, x, 0.0), mask=mask)")
    assert "if pid == 0" in upstream
    for source in (first_block, upstream):
        v = _judge(task, source)
        assert v.kind == "wrong_result" and v.failing_case.startswith("hidden-shape"), v.one_line()
        assert "1977 NaN/Inf values" in v.message
    recorded_only = _judge_on(task, first_block, lambda c: "shape" not in c.dims)
    assert recorded_only.correct, "on the suite's own shapes alone it passes: the narrow-tests objection"


def _judge_on(task: Any, source: str, keep: Any) -> Any:
    from dataclasses import replace

    narrowed = replace(task, hidden_cpu=tuple(c for c in task.hidden_cpu if keep(c)))
    return _judge(narrowed, source)


@pytest.mark.slow  # judges a suite's reference and candidates end to end: seconds on 2 cores
@pytest.mark.interpreter
def test_output_arguments_are_judged_after_the_call(tasks: dict[str, Any]) -> None:
    gather = tasks["tb-gather_rows_into"]
    assert _judge(gather, gather.baseline_source()).correct
    half = gather.baseline_source().replace("tl.store(out_ptr + row * stride_out + cols, v, mask=mask)",
                                            "tl.store(out_ptr + row * stride_out + cols, v, mask=mask & (cols < 8))")
    assert half != gather.baseline_source()
    v = _judge(gather, half)
    assert v.kind == "wrong_result" and "NaN" in v.message, "the unwritten part of a poisoned output is caught"
    cache = tasks["tb-cache_rows"]
    assert _judge(cache, cache.baseline_source()).correct
    zeroing = cache.baseline_source().replace(
        "    n_rows, n_cols = src.shape\n", "    n_rows, n_cols = src.shape\n    cache.zero_()\n")
    assert zeroing != cache.baseline_source()
    assert _judge(cache, zeroing).kind == "wrong_result", "rows the suite keeps must be kept"


def test_perf_inputs_come_from_the_suites_perf_script() -> None:
    suite = _suite(TB / "add_vectors.py")
    assert suite.perf_script is not None and suite.perf_script.name == "add_vectors_perf.py"
    assert [c[0].numel() for c in suite.perf_script_calls(1 << 17)] == [65536, 32768, 8192]
    # a cap that leaves most of the sweep unmade (bench/adapters/_oversize.py): the same pick a plain run makes
    assert [c[0].numel() for c in suite.perf_script_calls(1 << 13)] == [4096]


@pytest.mark.interpreter
def test_perf_cases_never_fall_back_to_a_tiny_call_when_larger_shapes_exist(tasks: dict[str, Any]) -> None:
    task = tasks["tb-relu_small"]
    perf = [task.inputs(c, "cpu")[0].numel() for c in task.perf]
    assert perf == [3001] * 3, "the five-element calls the suite records are not timed"


def test_difficulty_labels_are_mapped() -> None:
    assert [difficulty_of({"difficulty": d}) for d in (2, "4", " 5 ", "hard", "easy", "9", None, "?")] == \
        [2, 4, 5, 5, 1, 3, 3, 3]
    assert difficulty_of(None) == 3


def test_glue_is_appended_only_when_the_entry_is_missing() -> None:
    glue = "def launch_k(x, grid):\n    k[grid](x)\n"
    assert complete("k = 1\n", "launch_k", glue).endswith(glue)
    assert complete("launch_k = other\n", "launch_k", glue) == "launch_k = other\n"
    assert defines("from mod import launch_k\n", "launch_k") and not defines("def f(:\n", "f")


def test_interpreter_rewrites_cuda_only_spellings() -> None:
    from bench.adapters._adapted import for_interpreter

    text = for_interpreter("assert x.is_cuda\ny = x.cuda(0)\nz = x.cuda(device=1)\nd = torch.cuda.current_device()\n"
                           "TESLA = 'Tesla' in torch.cuda.get_device_name(0)\n")
    assert text == "assert x.is_cpu\ny = x.cpu()\nz = x.cpu()\nd = 'cpu'\nTESLA = 'Tesla' in 'cpu'\n"


# ---------------------------------------------------------------- re-scoring published outputs

OUTPUTS = Path(__file__).resolve().parent / "fixtures" / "geak_eval_outputs"


def test_answers_are_read_in_geak_evals_layouts() -> None:
    from runners.score import extract_code, read_outputs

    sep = "#" * 146
    assert extract_code(f"import x\n{sep}\ndef test_x():\n    pass\n") == "import x\n"
    assert extract_code("Sure:\n```python\na = 1\n```\nand\n```\nb = 2\n```\n") == "a = 1\n\nb = 2\n"
    answer = "import torch\n\ndef f(x):\n    return x\n\n@dec\ndef test_f():\n    f(1)\n\nresult_gold = test_f()\ntest_f()\n"
    assert extract_code(answer) == "import torch\n\ndef f(x):\n    return x\n\n\n", "the answer's own tests are cut"
    relu_code = (TB / "relu_small.py").read_text().split(sep)[0].strip()
    outputs, notes = read_outputs(OUTPUTS, {relu_code: "relu_small.py"})
    assert sorted((o.pass_index, o.file) for o in outputs) == [
        (0, "add_vectors.py"), (0, "not_a_task.py"), (0, "relu_small.py"), (0, "row_scale.py"), (0, "scaled_copy.py"),
        (1, "relu_small.py")]
    assert "test_add_vectors" not in next(o.code for o in outputs if o.file == "add_vectors.py"), "the test is cut"
    assert notes == ["pass_1.json[1]: names no task file ('file' missing, 'label' matches no reference)"]


def test_score_metrics_put_geak_evals_accuracies_beside_the_strict_pass() -> None:
    from runners.score import Scored, ScoreReport

    report = ScoreReport("out", "tritonbench", ["a", "b", "c", "d"], "cpu-interpreter")
    report.rows = [Scored(0, "a.py", "a", True, True, True, "correct", "correct", "", 1.5),
                   Scored(0, "b.py", "b", True, True, False, "correct", "wrong_result", "tail", None),
                   Scored(0, "c.py", "c", True, False, False, "wrong_result", "wrong_result", "", None),
                   Scored(1, "a.py", "a", True, True, True, "correct", "correct", "", 12.0),
                   Scored(1, "d.py", "d", False, False, False, "syntax_error", "syntax_error", "", None)]
    assert report.per_pass() == [
        {"pass": 0, "answers": 3, "call_accuracy": 0.75, "exec_accuracy": 0.5, "strict_pass": 0.25},
        {"pass": 1, "answers": 2, "call_accuracy": 0.25, "exec_accuracy": 0.25, "strict_pass": 0.25}]
    pk = report.pass_at_k()
    assert pk["strict"] == {1: 0.25, 2: 0.25} and pk["call"][2] == 0.75 and pk["exec"][1] == 0.375
    s = report.speedup()
    assert s["timed"] == 2 and s["geomean"] == pytest.approx((1.5 * 12.0) ** 0.5) and s["geak_eval_mean"] == 1.5


@pytest.mark.slow
def test_score_re_scores_a_folder_of_answers() -> None:
    """The fixture folder: a correct answer, one that handles only the first block (passes
    GEAK-eval's check, fails the new shapes), one whose entry point is missing, one that is
    wrong, one for no task, and a JSON pass with a correct answer."""
    import json

    from tests.helpers import run_cli

    r = run_cli("score", str(OUTPUTS), "--suite", "tritonbench", "--source", f"geak-eval:{GEAK}", "--device", "cpu",
                "--workers", "2", "--json", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    rows = {(row["pass_index"], row["file"]): row for row in out["rows"]}
    assert {k: (v["call"], v["exec"], v["strict"]) for k, v in rows.items()} == {
        (0, "add_vectors.py"): (True, True, True),
        (0, "relu_small.py"): (True, True, False),
        (0, "row_scale.py"): (False, False, False),
        (0, "scaled_copy.py"): (True, False, False),
        (1, "relu_small.py"): (True, True, True)}
    assert "hidden-shape" in rows[(0, "relu_small.py")]["message"] or "NaN" in rows[(0, "relu_small.py")]["message"]
    assert out["tasks"] == 17 and out["per_pass"][0]["exec_accuracy"] == pytest.approx(2 / 17)
    assert out["unmatched"] == [f"{OUTPUTS / 'not_a_task.py'}: not_a_task.py is not a task of this suite"]
    r = run_cli("score", str(OUTPUTS / "nope"), "--suite", "tritonbench", "--source", f"geak-eval:{GEAK}",
                "--device", "cpu", timeout=120)
    assert r.returncode == 2 and "is not a folder" in r.stderr


@pytest.mark.interpreter
def test_output_the_reference_never_writes_is_not_judged(tasks: dict[str, Any]) -> None:
    """Like attn_fwd_causal.py: the reference stores 24 of 32 columns into torch.empty_like's
    memory. It passes its own cases; a candidate writing every column passes too; one that
    gets a written column wrong still fails."""
    task = tasks["tb-partial_store"]
    assert _judge(task, task.baseline_source()).correct
    full = task.baseline_source().replace("mask=cols < 24)", "mask=cols < 32)")
    assert full != task.baseline_source() and _judge(task, full).correct
    wrong = task.baseline_source().replace("2.0 * x", "3.0 * x")
    assert _judge(task, wrong).kind == "wrong_result"


def test_the_adapted_skipped_table_gives_one_reason_per_skipped_file() -> None:
    script = script_module("geak_eval_table")
    result = script.table(GEAK)
    nvidia, amd = result["vendors"]["nvidia"]["sets"], result["vendors"]["amd"]["sets"]
    assert (nvidia["tritonbench"]["adapted"], nvidia["tritonbench"]["total"]) == (17, 19)
    assert (amd["tritonbench"]["adapted"], amd["rocm"]["adapted"], amd["rocm"]["total"]) == (18, 5, 5)
    assert nvidia["rocm"]["entry_points"] == {"launch": 2, "function": 2}
    text = script.render(result)
    assert "skipped hip_exp.py: AMD-only construct(s): tl.extra.hip" in text
    assert "skipped no_separator.py: no separator line" in text
    assert text.count("skipped ") == 3 + 1, "each skipped file once per vendor"


def test_check_shards_merge_into_the_pass_figure(tmp_path: Path) -> None:
    import json

    script = script_module("check_summary")
    rows = [{"task": "tb-a", "verdict": "correct", "new_shapes": 8}, {"task": "tb-b", "verdict": "correct", "new_shapes": 0},
            {"task": "tb-c", "verdict": "timeout", "message": "no verdict within 180 s\nmore", "failing_case": None},
            {"task": "kb-d", "verdict": "skipped"}, {"task": "tb-e", "verdict": "unscorable"}]
    (tmp_path / "s1.json").write_text(json.dumps({"device": "NVIDIA H200", "tasks": rows[:2]}))
    (tmp_path / "s2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[2:]))  # a shard cut off: --jsonl
    m = script.merge([tmp_path / "s1.json", tmp_path / "s2.jsonl"])
    assert (m["checked"], m["passed"], m["skipped"]) == (3, 2, 1) and m["pass_rate"] == pytest.approx(2 / 3)
    assert m["failures"] == {"timeout": ["tb-c [-]: no verdict within 180 s"]}
    assert m["new_shapes"] == {"tasks_with_any": 1, "tasks": 2, "median": 4.0, "histogram": {0: 1, 8: 1}}
    assert m["unscorable"] == ["tb-e"]  # neither checked nor a failure: no candidate can be judged there
    assert script.render(m).startswith("NVIDIA H200: 2/3 references pass their own hidden cases (66.7%); 1 skipped; "
                                       "1 unscorable (nothing returned or written: tb-e)")


@pytest.mark.slow
def test_a_compare_run_reports_geak_evals_metrics_beside_the_strict_pass(tmp_path: Path) -> None:
    """Every final submission on an adapted task is judged by the suite's own check too; the
    report puts call accuracy, GEAK-eval execution accuracy and strict pass side by side, and
    says how many hidden cases per task are new shapes."""
    from tests.helpers import cli_env, run_cli

    env = cli_env(KMC_TASK_SOURCES=f"geak-eval:{GEAK}", KMC_FORCE_CPU="1")
    r = run_cli("compare", "--budget", "2", "--tasks", "tb-add_vectors,tb-relu_small", "--methods", "direct",
                "--device", "cpu", "--out", str(tmp_path), "--quiet", timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    r = run_cli("report", str(run_dir), "--resamples", "200", timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    report = (run_dir.parent / f"{run_dir.name}-report" / "report.md").read_text()  # beside the run, not in it
    assert "| method | tasks | units | call accuracy | GEAK-eval exec accuracy | strict pass |" in report
    assert "| tb-add_vectors | 4 |" in report and "| tb-relu_small | 4 |" in report


def test_a_parameter_set_the_test_skips_is_passed_over(tmp_path: Path) -> None:
    """ROCm tests call pytest.skip (a BaseException) for parameters a device does not support
    (test_matmul_MXFP.py: `if scale and not is_cuda(): pytest.skip(...)`); the others are recorded."""
    text = (ROCM / "relu_rows.py").read_text().replace(
        "    set_seed()\n    x = torch.randn(M, N, device=device)",
        "    set_seed()\n    if M == 1:\n        pytest.skip('NYI')\n    x = torch.randn(M, N, device=device)")
    assert "pytest.skip('NYI')" in text
    (tmp_path / "relu_rows.py").write_text(text)
    suite = _suite(tmp_path / "relu_rows.py", "rocm")
    assert [tuple(c[0].shape) for c in suite.calls()] == [(4, 100), (3, 300), (2, 129)]
    assert suite.failure == "Skipped: NYI"


@pytest.mark.slow  # judges a suite's reference and candidates end to end: seconds on 2 cores
@pytest.mark.interpreter
def test_a_reference_that_finishes_in_pytorch_is_its_own_interface(tasks: dict[str, Any]) -> None:
    """A suite wrapper that sums per-block partials in PyTorch passes its own cases; on a task
    whose reference writes its output with a kernel, a token launch beside a PyTorch result is
    still refused."""
    sums = tasks["tb-block_sums"]
    assert _judge(sums, sums.baseline_source()).correct
    add = tasks["tb-add_vectors"]
    token = add.baseline_source().replace("    return c\n", "    return a + b\n").replace("](a, b, c, n", "](a, a, c, n")
    # The PyTorch addition itself is what the judge sees (judge/candidate/launches.py): `torch_fallback`.
    assert token != add.baseline_source() and _judge(add, token).kind == "torch_fallback"


def test_an_id_two_sources_define_is_a_one_line_error_naming_both(tmp_path: Path) -> None:
    """thunlp's TritonBench and GEAK-eval's TritonBench-revised name their files alike."""
    import shutil

    from bench.registry import TaskSourceError, get_task, load_sources

    load_sources([f"geak-eval:{GEAK}"], "cpu")
    other = tmp_path / "data" / "TritonBench_G_v1"
    other.mkdir(parents=True)
    shutil.copy(TB / "add_vectors.py", other / "add_vectors.py")
    shutil.copy(TB / "row_scale.py", other / "zz_only_here.py")
    with pytest.raises(TaskSourceError) as err:
        load_sources([f"geak-eval:{tmp_path}"], "cpu")
    message = str(err.value)
    assert "\n" not in message and "'tb-add_vectors' comes from two sources" in message
    assert str(TB / "add_vectors.py") in message and str(other / "add_vectors.py") in message
    with pytest.raises(KeyError):
        get_task("tb-zz_only_here")  # nothing of the refused source was registered


def test_hip_libdevice_imported_by_its_full_module_path_is_amd_only() -> None:
    """`from triton.language.extra.hip.libdevice import pow` imports on NVIDIA too (Triton ships
    both backends' modules) and then fails in ptxas on `__ocml_pow_f32`: AMD-only either way."""
    from bench.adapters.geak_eval import amd_only_constructs

    assert amd_only_constructs("from triton.language.extra.hip.libdevice import pow as _pow\n")
    assert amd_only_constructs("y = tl.extra.hip.libdevice.exp(x)\n")
    assert not amd_only_constructs("from triton.language.extra.cuda.libdevice import pow\n")


@pytest.mark.slow  # judges a suite's reference and candidates end to end: seconds on 2 cores
@pytest.mark.interpreter
def test_a_module_passed_beside_the_input_grows_with_it_in_new_shapes(tasks: dict[str, Any]) -> None:
    """Like fast_rms_layernorm.py: the wrapper reads `norm.weight` of a module the test passes.
    A new shape that grew the input but not the module would send the reference past the
    weight's end; the module's weight grows with the size, and the reference is kept only where
    it answers the same twice."""
    task = tasks["tb-module_rms"]
    suite = task.output_args.__self__
    shapes = suite.shape_calls()
    assert shapes, "the module argument does not prevent new shapes"
    for shape in shapes:
        norm, x = shape.values[0], shape.values[1]
        assert isinstance(norm, torch.nn.LayerNorm) and norm.weight.shape[0] == x.shape[1]
        assert norm.normalized_shape == (x.shape[1],)
    assert suite.calls()[0][0].weight.shape[0] == 24, "the recorded module itself is left as it was"
    assert _judge(task, task.baseline_source()).correct
    unweighted = task.baseline_source().replace("y = x / tl.sqrt(mean_sq + eps) * w", "y = x / tl.sqrt(mean_sq + eps)")
    assert unweighted != task.baseline_source()
    assert _judge(task, unweighted).kind == "wrong_result"


@pytest.mark.interpreter
def test_an_input_the_reference_hands_back_may_be_handed_back(tasks: dict[str, Any]) -> None:
    """Like layer_norm_fwd.py returning its residual input: the aliasing is learnt from the
    reference and allowed exactly there (the output position and the input it aliases)."""
    from judge.oracle import allowed_aliases

    task = tasks["tb-residual_passthrough"]
    outputs = task.output_args(task.visible[0])
    assert outputs.aliases == (("output[1]", 1),)
    assert allowed_aliases(outputs) == {"output[1] shares memory with input 1"}
    assert _judge(task, task.baseline_source()).correct
    other = task.baseline_source().replace("return out, residual", "return out, x")
    v = _judge(task, other)
    assert v.kind == "wrong_result"
    swapped = task.baseline_source().replace("return out, residual", "return residual, out")
    v = _judge(task, swapped)
    assert v.kind == "wrong_result"


@pytest.mark.slow  # judges a suite's reference and candidates end to end: seconds on 2 cores
@pytest.mark.interpreter
def test_output_a_reference_computes_from_past_its_input_is_not_judged(tasks: dict[str, Any]) -> None:
    """Like apply_penalty.py and flash_decode2_llama.py: the reference's last element reads one
    past the input. The judge runs it with zeros and then NaN after each input; the
    element that changes is nobody's answer. The suite's own code and a masked rewrite pass; a
    candidate wrong on the other elements still fails."""
    task = tasks["tb-reads_past_end"]
    assert _judge(task, task.baseline_source()).correct
    for other in ("0.0", "1.0"):  # the last element is undefined upstream: any value there is accepted
        masked = task.baseline_source().replace("nxt = tl.load(x_ptr + offs + 1, mask=mask)",
                                                f"nxt = tl.load(x_ptr + offs + 1, mask=offs + 1 < n, other={other})")
        assert masked != task.baseline_source() and _judge(task, masked).correct
    wrong = task.baseline_source().replace("x + nxt", "x + 2.0 * nxt")
    assert _judge(task, wrong).kind == "wrong_result"


def test_an_optional_output_argument_left_out_of_a_call_is_not_judged_there() -> None:
    """Like kv_cache_filling.py: `k_scales_zeros` is written in the quantised calls and None in
    the others; the judged form of a call without it has the tensors the call has (it used to
    end in `None.detach()` in the judge)."""
    from bench.adapters._outputs import judged_form

    out, scales = torch.ones(3), torch.zeros(2)
    assert judged_form(None, (out, scales), (0, 1)) == (out, scales)
    form = judged_form(None, (out, None), (0, 1))
    assert len(form) == 1 and form[0] is out


@pytest.mark.interpreter
def test_imports_of_the_test_section_are_in_scope_as_in_geak_eval(tasks: dict[str, Any]) -> None:
    """Like block_sparse_attn.py: the code section uses `torch` that only the test section
    imports (GEAK-eval runs both in one module). The judge appends the imports a candidate
    lacks, so the suite's own code passes and a candidate that imports torch itself is left as
    it wrote it."""
    task = tasks["tb-torch_in_test_only"]
    assert task.baseline_source().rstrip().endswith("import torch")
    assert _judge(task, task.baseline_source()).correct
    bare = task.baseline_source().split("# imports of the suite's test section")[0]
    assert "import torch" not in bare and task.complete_source(bare).rstrip().endswith("import torch")
    assert _judge(task, bare).correct
    own = "import torch\n" + bare
    assert task.complete_source(own) == own


def test_large_permuted_inputs_are_reordered_without_a_full_shuffle() -> None:
    """Above SHUFFLE_LIMIT a permuted case reorders by a seeded affine map: the same values, a
    different order, the same order on every call (randperm of 50M elements took seconds)."""
    from bench.adapters import geak_record

    t = torch.randn(geak_record.SHUFFLE_LIMIT * 2 + 3)
    first = geak_record._permuted(t, seed=2, pos=1)
    assert torch.equal(first, geak_record._permuted(t, seed=2, pos=1))
    assert torch.equal(first.sort().values, t.sort().values)
    assert (first != t).float().mean() > 0.99
    assert not torch.equal(first, geak_record._permuted(t, seed=3, pos=1))
    small = torch.randn(100)
    assert torch.equal(geak_record._permuted(small, seed=0, pos=0), small)


def test_the_adapters_probes_run_the_reference_on_copies_followed_by_slack() -> None:
    """What the reference reads past an input's end while the adapter probes it (new shapes,
    output arguments) is zeros, as in the judge's answer runs and the candidate's process: on
    a GPU an unpadded copy let TritonBench references fault and end the judge's context."""
    from bench.adapters._outputs import clone_call
    from bench.slack import front_bytes, slack_bytes

    x = torch.randn(5, 7)
    copied, scalar = clone_call((x, 3))
    assert scalar == 3 and torch.equal(copied, x) and copied.data_ptr() != x.data_ptr()
    front = copied.storage_offset() * copied.element_size()
    assert front == front_bytes(x.nbytes)
    raw = torch.empty(0, dtype=torch.uint8).set_(copied.untyped_storage())
    assert raw.numel() == front + x.nbytes + slack_bytes(x.nbytes)
    assert int(raw[:front].count_nonzero()) == 0 and int(raw[front + x.nbytes:].count_nonzero()) == 0


def test_a_probe_that_ends_the_gpu_context_says_so_instead_of_skipping_the_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shape the reference rejects (an exception) is not a case; a device fault while probing
    is not a rejection: the context is gone, and the task's verdict names the probe."""
    from bench.adapters.geak_record import ReferenceFault

    suite = _suite(TB / "add_vectors.py")
    calls = suite.calls()
    run = suite._run
    suite.output_spec()

    def rejecting(values: tuple, seed: int = 0) -> Any:
        if values[0].shape != calls[0][0].shape:
            raise ValueError("this reference only takes its own shapes")
        return run(values, seed)

    monkeypatch.setattr(suite, "_run", rejecting)
    assert suite._find_shapes() == []

    def faulting(values: tuple, seed: int = 0) -> Any:
        if values[0].shape != calls[0][0].shape:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return run(values, seed)

    monkeypatch.setattr(suite, "_run", faulting)
    with pytest.raises(ReferenceFault, match="faulted on the GPU while the adapter probed it"):
        suite._find_shapes()


@pytest.mark.interpreter
def test_a_handed_back_input_is_not_checked_for_a_kernels_writes(tasks: dict[str, Any],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU the judge did not see layer_norm_fwd's reference finish in PyTorch (its
    recorder took the input the kernel received as written by it), so its own code got
    `no_kernel` for the residual it hands back (5 GEAK-eval TritonBench references). An output
    where the reference hands back an input is exempt from that check when the candidate's
    is the same input; a torch-computed tensor there is still caught."""
    from judge import oracle

    monkeypatch.setattr(oracle, "reference_finishes_in_torch", lambda task: False)  # as the GPU judge saw it
    task = tasks["tb-residual_passthrough"]
    assert _judge(task, task.baseline_source()).correct
    computed = task.baseline_source().replace("return out, residual", "return out, residual * 1.0")
    v = _judge(task, computed)
    assert v.kind in ("no_kernel", "torch_fallback"), v


def test_the_judges_copies_of_a_references_inputs_are_its_inputs() -> None:
    """Recorded on a GPU (no store addresses), a launch taking a tensor marks it written unless
    it is one of the call's inputs; the judge's copies for the reference count as inputs."""
    from judge.candidate import launches
    from judge.candidate.call_record import storage_key

    x = torch.randn(8)
    out = torch.empty(8)
    with launches.recording((x,)) as rec:
        copy = x.clone()
        launches.add_inputs((copy,))
        launches._after_launch(rec, [copy, out], 0, interpreter=False)
    assert storage_key(out) in rec.derived
    assert storage_key(copy) not in rec.derived
    launches.add_inputs((out,))  # outside a recording: nothing to note, no error


@pytest.mark.slow  # judges a suite's reference and candidates end to end: seconds on 2 cores
@pytest.mark.interpreter
def test_a_call_the_suite_makes_in_float64_is_judged_in_float64() -> None:
    """A suite test that passes float64 itself (FlagGems' uniform_, softmax, masked_select): the
    reference's answer there is float64. The judge once took such inputs for its own widened
    run and cast them to the previous call's float32, so the reference 'answered' float32 and
    failed its own hidden cases."""
    from judge.comparison import expected_output

    task = {t.id: t for t in load_source("geak-eval", GEAK.parent / "geak_eval_extra", vendor="cpu").tasks}[
        "tb-twice_any_float"]
    wide = [c for c in task.cases("hidden", True)
            if any(isinstance(a, torch.Tensor) and a.dtype == torch.float64 for a in task.inputs(c, "cpu"))]
    assert wide
    for c in task.cases("hidden", True):  # each case in turn: a float32 call comes before the float64 one
        args = task.inputs(c, "cpu")
        out = expected_output(task, args, c)
        got = out[0] if isinstance(out, tuple) else out
        assert got.dtype == args[0].dtype, (c.name, got.dtype, args[0].dtype)
    v = _judge(task, task.baseline_source())
    assert v.correct, v.one_line()


@pytest.mark.interpreter
def test_a_call_passing_an_object_with_its_own_address_is_not_replayed() -> None:
    """FlagGems' StridedBuffer hands Triton an address of the test's own tensor: a copy of the
    call, or the call in a candidate's process, would still point there. Such calls are left
    out; the task is judged on the suite's other calls."""
    path = GEAK.parent / "geak_eval_extra" / "TritonBench" / "data" / "TritonBench_G_v1" / "relu_wrapped_buffer.py"
    suite = _suite(path)
    calls = suite.calls()
    assert [tuple(c[0].shape) for c in calls] == [(100,), (300,)]
    assert all(isinstance(v, torch.Tensor) for c in calls for v in c)
    task = {t.id: t for t in load_source("geak-eval", GEAK.parent / "geak_eval_extra", vendor="cpu").tasks}[
        "tb-relu_wrapped_buffer"]
    v = _judge(task, task.baseline_source())
    assert v.correct, v.one_line()


def test_a_reference_that_runs_on_no_recorded_call_says_what_it_raised() -> None:
    """Learning a reference's outputs skips the calls it cannot run; when it runs on none, its
    'nothing to compare' error now carries what it raised instead of hiding it."""
    from bench.adapters._outputs import learn_output_args

    def run(args: tuple) -> None:
        raise ValueError("Pointer argument (at 0) cannot be accessed from Triton\nmore")

    failures: list[str] = []
    spec = learn_output_args(run, [(torch.zeros(3),), (torch.ones(2),)], failures)
    assert spec.written == () and failures == ["ValueError: Pointer argument (at 0) cannot be accessed from Triton"] * 2


@pytest.mark.interpreter
def test_a_test_that_redefines_the_code_under_test_calls_the_code() -> None:
    """A test section with its own copy of the kernel and wrapper (TritonBench-revised
    quantize_kv_copy) called that copy, so the adapter recorded no call of the code's entry
    point ("the suite's test recorded no call"); the copy is dropped and the code is called."""
    path = GEAK.parent / "geak_eval_extra" / "TritonBench" / "data" / "TritonBench_G_v1" / "code_redefined.py"
    suite = _suite(path)
    assert "def triple" not in suite.sf.test and "def test_triple" in suite.sf.test
    assert [tuple(c[0].shape) for c in suite.calls()] == [(200,), (7,)]
    task = {t.id: t for t in load_source("geak-eval", GEAK.parent / "geak_eval_extra", vendor="cpu").tasks}[
        "tb-code_redefined"]
    v = _judge(task, task.baseline_source())
    assert v.correct, v.one_line()


@pytest.mark.interpreter
def test_a_case_the_reference_answers_without_a_kernel_asks_for_none() -> None:
    """The reference returns early in PyTorch for a single element: the same candidate is not
    `no_kernel` there, while one that never launches is still `no_kernel` where the reference
    launches (TritonBench-revised multinomial_sampling failed its own single-token case)."""
    task = {t.id: t for t in load_source("geak-eval", GEAK.parent / "geak_eval_extra", vendor="cpu").tasks}[
        "tb-single_in_torch"]
    v = _judge(task, task.baseline_source())
    assert v.correct, v.one_line()
    torch_only = task.baseline_source().replace("    if x.numel() == 1:\n        return x * x\n",
                                                "    return x * x\n")
    assert torch_only != task.baseline_source()
    assert _judge(task, torch_only).kind == "no_kernel"


@pytest.mark.interpreter
def test_a_case_the_reference_answers_differently_each_run_is_skipped_with_why(tasks: dict[str, Any]) -> None:
    """Like layer_norm_welfold.py on its 1x1 call: a one-element result computed from memory past
    the input differs between the judge's runs of the reference on the same values. Such a case
    has no answer: it is skipped, with the reason, instead of failing every candidate (the
    reference included, as it did on an H200); the cases the reference answers still judge."""
    from judge.reference_habits import NO_ANSWER

    task = tasks["tb-mean_past_end"]
    verdict = _judge(task, task.baseline_source())
    assert verdict.correct, verdict.one_line()
    assert verdict.cases_skipped >= 1 and any(NO_ANSWER in r for r in verdict.skip_reasons)
    assert verdict.cases_run >= 1  # the even lengths: answered, and judged
    masked = task.baseline_source().replace("mask=offs < n + n % 2", "mask=offs < n")
    assert masked != task.baseline_source() and _judge(task, masked).correct
    wrong = task.baseline_source().replace("/ n)", "/ (n + 1))")
    assert _judge(task, wrong).kind == "wrong_result"


@pytest.mark.slow  # judges a suite's reference and candidates end to end: seconds on 2 cores
@pytest.mark.interpreter
def test_output_computed_from_scratch_the_reference_never_wrote_is_not_judged(
        tasks: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A reference whose scratch buffer (torch.empty) is read where it was never written: those
    outputs differ between the judge's poisoned and marked runs of it, so they are nobody's
    answer, even when its disturbed run gets the marked run's memory back (a GPU's caching
    allocator handing out the block just freed: on an H200 such references failed their own
    upstream call). The reference and a rewrite that writes all of it pass; a wrong one fails."""
    from judge import reference_habits
    from judge.candidate.allocations import allocations
    from judge.comparison import expected_output

    def as_marked(task: Any, args: tuple, case: Any) -> Any:
        with allocations("marker"):
            return expected_output(task, args, case, slack="zero")

    monkeypatch.setattr(reference_habits, "_disturbed_reference", as_marked)
    task = tasks["tb-scratch_reader"]
    expected, masks = reference_habits.expected_and_unwritten(task, task.inputs(task.visible[0], "cpu"), task.visible[0])
    (mask,) = masks
    assert mask.tolist() == [False] * 96 + [True] * 4
    assert _judge(task, task.baseline_source()).correct
    full = task.baseline_source().replace("mask=offs < n - 4)", "mask=offs < n)")
    assert full != task.baseline_source() and _judge(task, full).correct
    assert _judge(task, task.baseline_source().replace("x + s, mask=mask)", "x - s, mask=mask)")).kind == "wrong_result"


@pytest.mark.interpreter
def test_elements_the_reference_never_writes_do_not_count_towards_no_answer(
        tasks: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """partial_store.py's reference on a 4x64 input writes 96 of 256 elements (its rows stride 32):
    the other 160 hold whatever memory held, so its disturbed run differs from its marked run
    there whenever the allocator hands it other memory. Those elements are unwritten outright,
    excluded from judging already, and not a disagreement about the answer: the case is
    answered, whatever the disturbed run got (before, it was skipped as unanswered or not by the
    luck of the allocator, and the suite's own check flaked)."""
    from judge import reference_habits
    from judge.candidate.allocations import allocations
    from judge.comparison import expected_output

    def elsewhere(task: Any, args: tuple, case: Any) -> Any:
        with allocations("poison"):  # other memory than the marked run's
            return expected_output(task, args, case, slack="nan")

    monkeypatch.setattr(reference_habits, "_disturbed_reference", elsewhere)
    task = tasks["tb-partial_store"]
    x = torch.randn(4, 64)
    expected, masks = reference_habits.expected_and_unwritten(task, (x,), task.visible[0])
    (answer,), (mask,) = expected, masks
    assert int(mask.sum()) == 256 - 96
    assert torch.equal(answer[~mask], (2 * x.flatten()[:128].reshape(4, 32)[:, :24]).flatten())


def test_perf_inputs_are_the_same_whatever_the_process_drew_before() -> None:
    suite = _suite(TB / "add_vectors.py")
    first = suite.perf_script_calls(1 << 17)
    torch.rand(1000)  # another task's draws in the same worker
    again = _suite(TB / "add_vectors.py").perf_script_calls(1 << 17)
    assert len(first) == len(again) == 3
    assert all(a.equal(b) for x, y in zip(first, again, strict=True) for a, b in zip(x, y, strict=True))


def test_two_runs_are_the_same_chunk_by_chunk_as_in_one_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """`same` compares a chunk at a time where the outputs lie (on a GPU, not through host
    copies): the answer is the whole comparison's, a difference in the last chunk included."""
    import bench.adapters._outputs as outputs

    monkeypatch.setattr(outputs, "SAME_CHUNK", 7)
    g = torch.Generator().manual_seed(3)
    a = torch.randn(5, 9, generator=g)
    a[1, 2] = float("nan")
    b = a.clone() + 5e-4  # within 1e-3
    assert outputs.same(a, b) and outputs.same(a.t(), b.t())  # strided views too
    b[4, 8] += 0.5  # the last element: the last, partial chunk
    assert not outputs.same(a, b)
    b = a.clone()
    b[1, 2] = 0.0  # NaN where the other has a value
    assert not outputs.same(a, b)
    c = torch.randn(10, dtype=torch.complex64, generator=g)
    assert outputs.same(c, c.clone()) and not outputs.same(c, c * 1j)
    assert outputs.same(torch.arange(20), torch.arange(20)) and not outputs.same(torch.arange(20), torch.arange(20) * 2)
    assert outputs.same(torch.empty(0), torch.empty(0)) and not outputs.same(a, a.double())
    assert outputs.same([a, (torch.arange(3), 2)], [a.clone(), (torch.arange(3), 2)])


def test_two_runs_compared_on_the_host_when_the_device_has_no_room(monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.adapters._outputs as outputs

    real, calls = outputs._same_tensors, []

    def full_then_real(a: torch.Tensor, b: torch.Tensor) -> bool:
        calls.append(a.device.type)
        if len(calls) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 32.00 MiB")
        return real(a, b)

    monkeypatch.setattr(outputs, "_same_tensors", full_then_real)
    a = torch.randn(100)
    assert outputs.same(a, a.clone()) and len(calls) == 2
    assert not outputs.same(a, a + 1.0)
