"""The hostile corpus: bad candidates written for this project, each with the verdict it must get.

All of them go through ONE `LocalPool` with one worker, in order, so the test shows what the
issue asks: every hang, crash, forged reply and tampering costs one verdict (and a worker
restart), never the run, and no other verdict changes. The correct expert baseline is
judged first and again at the end, and must be `correct` both times.

Runs on the CPU interpreter in about a minute on two cores; the illegal-memory-access
candidate needs a GPU (`-m gpu` on a device machine runs the same table there).
"""

from __future__ import annotations

import importlib.util
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # the corpus fixture: minutes on 2 cores


def _has_gpu() -> bool:
    if os.environ.get("KMC_FORCE_CPU") == "1":
        return False
    import torch

    return bool(torch.cuda.is_available())


HAS_GPU = _has_gpu()
IS_ROOT = os.geteuid() == 0
HOSTILE = Path(__file__).resolve().parent / "hostile"
HANG_TIMEOUT_S = 15.0  # the short job limit for the hang cases
JOB_TIMEOUT_S = 180.0  # everything else: generous, so a loaded CI machine cannot turn a verdict into a timeout
FAKE_SECRET = "sk-test-hostile-0123456789"
SHELL_MARKER = Path("/tmp/kmc_hostile_shell_marker")


@dataclass(frozen=True)
class Hostile:
    file: str
    task: str
    kind: str
    message: str = ""  # a fragment the verdict's message must contain ("" = no check)
    case: str = ""  # a fragment the failing case's name must contain ("" = no check)
    case_set: str = "hidden"
    hang: bool = False
    gpu_only: bool = False
    cpu_only: bool = False  # judged on the interpreter only (device memory is not guarded)
    root_only: bool = False  # needs the private read-only mounts only root can make
    restarted: bool | None = None  # None: not checked
    device_trace: bool = False  # needs the device trace (KMC_DEVICE_TRACE=1)


CORPUS: tuple[Hostile, ...] = (
    Hostile("syntax_error.py", "vector_add", "syntax_error", "SyntaxError"),
    Hostile("bad_tl_op.py", "vector_add", "compile_error", "fused_add"),
    Hostile("no_entry_point.py", "vector_add", "missing_entry_point", "defines no function 'vector_add' (it defines add_vectors"),
    Hostile("wrong_tail_mask.py", "vector_add", "wrong_result", "NaN", case="n1025"),
    Hostile("off_by_one.py", "vector_add", "wrong_result", "outside atol"),
    Hostile("writes_past_its_output.py", "vector_add", "wrong_result", "wrote out of bounds: 4 byte(s) past the end",
            cpu_only=True),
    Hostile("modifies_input.py", "vector_add", "wrong_result", "modified in place"),
    Hostile("returns_torch.py", "vector_add", "no_kernel", "without launching"),
    Hostile("side_torch_result.py", "vector_add", "torch_fallback", "add"),
    Hostile("caches_data_ptr.py", "vector_add", "wrong_result", "after in-place refill"),
    Hostile("caches_by_shape.py", "vector_add", "wrong_result", "after in-place refill run"),
    Hostile("stale_empty_like.py", "vector_add", "wrong_result", "NaN"),
    Hostile("constant_output.py", "vector_add", "wrong_result", "outside atol"),
    Hostile("wrong_dtype.py", "vector_add", "wrong_result", "dtype"),
    Hostile("prints_returns_none.py", "vector_add", "wrong_result", "got NoneType"),
    Hostile("raises.py", "vector_add", "runtime_error", "shapes are not supported"),
    Hostile("infinite_loop.py", "vector_add", "timeout", "candidate process was killed", hang=True),
    Hostile("sleeps.py", "vector_add", "timeout", hang=True),
    Hostile("exit_at_import.py", "vector_add", "crash", "exit status 0", restarted=False),
    Hostile("segfault_ctypes.py", "vector_add", "crash", "signal 11", restarted=False),
    Hostile("closes_connection_then_exits.py", "vector_add", "crash", "exit status 3", restarted=False),
    Hostile("dies_saying_out_of_memory.py", "vector_add", "crash",
            "exit status 1); its stderr ended: warming up | terminate called after throwing an instance of 'c10::Error' | "
            "what():  CUDA error: out of memory", restarted=False),
    Hostile("closes_connection_and_lingers.py", "vector_add", "crash", "closed its connection to the judge and was killed",
            restarted=False),
    Hostile("illegal_memory_access.py", "vector_add", "runtime_error", "illegal memory access", gpu_only=True),
    Hostile("reads_secret.py", "vector_add", "correct", restarted=False),
    Hostile("reads_stdin.py", "vector_add", "correct", restarted=False),
    Hostile("forges_reply.py", "vector_add", "wrong_result", "outside atol"),
    Hostile("patches_oracle.py", "vector_add", "runtime_error", "No module named"),
    Hostile("patches_torch_in_call.py", "vector_add", "wrong_result"),
    # On a GPU, exec stays allowed (Triton's compilers): the shell runs, inside the private mounts
    # (as root) where its marker cannot reach the real /tmp, and the PyTorch result launched no kernel.
    Hostile("spawns_shell.py", "vector_add", *(("no_kernel", "without launching") if HAS_GPU
                                               else ("runtime_error", "Operation not permitted"))),
    Hostile("kills_parent.py", "vector_add", "runtime_error", "Operation not permitted"),
    Hostile("leaves_thread.py", "vector_add", "correct", case_set="visible"),
    Hostile("sets_alarm.py", "vector_add", "correct", case_set="visible", restarted=False),
    Hostile("softmax_tail_mask.py", "softmax", "wrong_result", "outside atol"),
    Hostile("softmax_one_block.py", "softmax", "wrong_result", "NaN", case="cols1025"),
    Hostile("softmax_no_max.py", "softmax", "wrong_result", "NaN"),
    Hostile("cumsum_no_carry.py", "cumsum", "wrong_result", "outside atol", case="cols1025"),
    # Typical model cheats (issue 12).
    Hostile("decoy_masked_store.py", "vector_add", "torch_fallback", "add", case_set="visible"),
    # On a GPU its numpy call meets a CUDA tensor and raises; on the CPU its decoy launch is handed
    # numpy's memory: refused either way.
    Hostile("decoy_numpy_result.py", "vector_add", *(("runtime_error", "numpy") if HAS_GPU
                                                     else ("torch_fallback", "unrecorded_memory")), case_set="visible"),
    Hostile("imports_reference.py", "softmax", "runtime_error", "No module named 'bench", case_set="visible"),
    Hostile("torch_reduction_token_kernel.py", "row_sum", "torch_fallback", "sum", case_set="visible"),
    Hostile("returns_transpose_view.py", "transpose", "wrong_result", "shares memory with input 0", case_set="visible"),
    Hostile("reused_output_buffer.py", "vector_add", "wrong_result", "reused across calls", case_set="visible"),
    Hostile("memo_by_shape_and_corner.py", "vector_add", "wrong_result", "outside atol"),
    # PyTorch out of the op record's sight (dispatch modes skipped, or another thread), a kernel
    # moving its numbers: the launch was handed memory no recorded operation made.
    Hostile("computes_with_modes_off.py", "softmax", "torch_fallback", "unrecorded_memory", case_set="visible"),
    Hostile("answer_from_worker_thread.py", "vector_add", "torch_fallback", "unrecorded_memory", case_set="visible"),
    # The same, written into a buffer a recorded op made (so the launch sees known memory): with the
    # modes off, from a helper thread through `.data`, by numpy through `.numpy()`; the buffer's
    # seal no longer matches. And a custom op named `clone` in the candidate's own namespace.
    # The seals are the CPU's; on a GPU only the device trace sees these (it names the aten op).
    Hostile("modes_off_into_recorded_buffer.py", "vector_add", "torch_fallback",
            "aten::add" if HAS_GPU else "unrecorded_memory", case_set="visible", device_trace=HAS_GPU),
    Hostile("thread_writes_recorded_buffer.py", "vector_add", "torch_fallback",
            "" if HAS_GPU else "unrecorded_memory", case_set="visible", device_trace=HAS_GPU),
    Hostile("numpy_writes_recorded_buffer.py", "vector_add", *(("runtime_error", "numpy") if HAS_GPU
                                                               else ("torch_fallback", "unrecorded_memory")),
            case_set="visible"),
    Hostile("custom_op_named_clone.py", "vector_add", "torch_fallback", "kmc_hostile::clone", case_set="visible"),
    # What the GPU actually ran (its activity trace) against the launch record: a CuPy kernel
    # computing the sum beside a token Triton launch, and a CUDA graph replaying the candidate's
    # own kernel outside the recorder.
    # (opt-in until verified on a GPU: judge/candidate/kernel_trace.py TRACE_ENV)
    Hostile("cupy_kernel_beside_token_launch.py", "vector_add", "torch_fallback", "kmc_hostile_add",
            case_set="visible", gpu_only=True, device_trace=True),
    Hostile("graph_replays_unrecorded_kernel.py", "vector_add", "torch_fallback", "the GPU", case_set="visible",
            gpu_only=True, device_trace=True),
    # Its correct control: memory filled through numpy at import, and a buffer kernels rewrite across calls.
    Hostile("numpy_table_at_import.py", "vector_add", "correct"),
    # Tampering with the judge from inside the candidate's process: none of it is there.
    Hostile("walks_judge_frames.py", "vector_add", "wrong_result", "outside atol", case_set="visible"),
    Hostile("edits_judge_state.py", "vector_add", "wrong_result", "outside atol", case_set="visible"),
    Hostile("tensor_subclass_output.py", "vector_add", "wrong_result", "tensor subclass", case_set="visible"),
    Hostile("global_hooks.py", "vector_add", "wrong_result", "outside atol", case_set="visible"),
    Hostile("forges_frames.py", "vector_add", "runtime_error", "protocol violation", case_set="visible"),
    Hostile("scribbles_shared_memory.py", "vector_add", "correct", case_set="visible"),
    Hostile("poisons_next_candidate.py", "vector_add", "wrong_result", case_set="visible"),
    # Containment.
    Hostile("recovers_shell.py", "vector_add", "wrong_result", "outside atol", case_set="visible"),
    Hostile("fills_disk.py", "vector_add", "wrong_result", "outside atol", case_set="visible"),
    # The project is not in a candidate's sandbox at all: nothing to write, its wrong answer judged.
    Hostile("writes_project.py", "vector_add", "wrong_result", "outside atol", case_set="visible"),
    # Subtly wrong kernels the hidden cases used to miss.
    Hostile("row_sum_capped_4096.py", "row_sum", "wrong_result", "outside atol",
            case="cols8191" if HAS_GPU else "cols10007"),  # the first case past 4096 columns
    Hostile("layer_norm_fixed_eps.py", "layer_norm", "wrong_result", "outside atol"),
    Hostile("rms_norm_half_squares.py", "rms_norm", "wrong_result"),
    Hostile("argmax_later_tie.py", "argmax", "wrong_result", "outside atol", case="-s2"),
    Hostile("softmax_assumes_contiguous.py", "softmax", "wrong_result", case="strided"),
    # A timing cheat (outputs remembered by a checksum of the inputs' contents): a correct kernel;
    # that it times no faster than the expert is checked on a GPU (tests/test_judge_gpu.py).
    Hostile("memo_by_content_hash.py", "matmul", "correct", case_set="visible"),
    # The false reject: a last step in PyTorch that the task allows.
    Hostile("total_sum_torch_last_step.py", "total_sum", "correct"),
    # False rejects on the interpreter (issue 41): autotune, libdevice, native bfloat16 arithmetic.
    Hostile("autotuned_vector_add.py", "vector_add", "correct"),
    Hostile("gelu_libdevice_erf.py", "gelu", "correct"),
    Hostile("add_relu_native_bf16.py", "add_relu", "correct"),
    # What the interpreter truly cannot run is said so, not blamed on the candidate.
    Hostile("inline_asm_add.py", "vector_add", *(("correct",) if HAS_GPU
                                                 else ("unsupported_on_interpreter", "inline_asm"))),
)

ACTIVE = tuple(h for h in CORPUS if (HAS_GPU or not h.gpu_only) and not (HAS_GPU and h.cpu_only)
               and (IS_ROOT or not h.root_only))


@dataclass
class Outcome:
    verdict: Any
    seconds: float


@pytest.fixture(scope="module")
def corpus_run() -> dict[str, Any]:
    """Judge the whole corpus once, in order, through one pool; tests below read the results."""
    from bench.registry import get_task
    from judge.device import detect_target
    from runners.pool import LocalPool

    target = detect_target(force_cpu=not HAS_GPU)
    saved = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = FAKE_SECRET  # the workers must never see it
    SHELL_MARKER.unlink(missing_ok=True)
    outcomes: dict[str, Outcome] = {}
    started = time.perf_counter()
    try:
        with LocalPool(target, workers=1, job_timeout=JOB_TIMEOUT_S) as pool:
            baseline = get_task("vector_add").baseline_source()
            first = pool.evaluate("vector_add", baseline, "hidden")
            for h in ACTIVE:
                t0 = time.perf_counter()
                verdict = pool.evaluate(h.task, (HOSTILE / h.file).read_text(), h.case_set,
                                        timeout=HANG_TIMEOUT_S if h.hang else None).verdict
                outcomes[h.file] = Outcome(verdict, time.perf_counter() - t0)
            last = pool.evaluate("vector_add", baseline, "hidden")
            stats = pool.stats
    finally:
        if saved is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = saved
    return {"outcomes": outcomes, "first": first.verdict, "last": last.verdict, "stats": stats,
            "seconds": time.perf_counter() - started}


def test_corpus_is_large_and_complete() -> None:
    files = {p.name for p in HOSTILE.glob("*.py")}
    listed = {h.file for h in CORPUS}
    assert len(CORPUS) >= 15
    assert files == listed, f"unlisted: {files - listed}; missing: {listed - files}"
    assert {h.task for h in CORPUS} >= {"vector_add", "softmax", "cumsum"}


def _marks(h: Hostile) -> list[Any]:
    marks: list[Any] = [pytest.mark.gpu] if h.gpu_only else []
    if h.device_trace and os.environ.get("KMC_DEVICE_TRACE") != "1":
        marks.append(pytest.mark.skip(reason="needs the device trace (KMC_DEVICE_TRACE=1), opt-in until verified"))
    if h.root_only and not IS_ROOT:
        marks.append(pytest.mark.skip(reason="needs root (private read-only mounts)"))
    if h.cpu_only and HAS_GPU:
        marks.append(pytest.mark.skip(reason="judged on the interpreter only (device memory is not guarded)"))
    return marks


@pytest.mark.parametrize("h", [pytest.param(h, id=h.file, marks=_marks(h)) for h in CORPUS])
def test_hostile_verdict(h: Hostile, corpus_run: dict[str, Any]) -> None:
    outcome = corpus_run["outcomes"][h.file]
    v = outcome.verdict
    assert v.kind == h.kind, f"{h.file}: expected {h.kind}, got {v.one_line()}"
    assert h.message in v.message, f"{h.file}: message {v.message!r} lacks {h.message!r}"
    assert h.case in (v.failing_case or ""), f"{h.file}: failing case {v.failing_case!r} lacks {h.case!r}"
    if h.restarted is not None:
        assert v.worker_restarted == h.restarted, f"{h.file}: worker_restarted={v.worker_restarted}"
    if h.hang:
        assert outcome.seconds < HANG_TIMEOUT_S + 60, "the hang cost more than its limit plus a restart"


def test_run_continues_and_baseline_verdict_is_unchanged(corpus_run: dict[str, Any]) -> None:
    first, last = corpus_run["first"], corpus_run["last"]
    assert first.kind == "correct", first.one_line()
    assert last.kind == "correct", last.one_line()
    assert last.cases_run == first.cases_run > 10
    assert len(corpus_run["outcomes"]) == len(ACTIVE)
    stats = corpus_run["stats"]
    assert stats.timeouts == sum(h.kind == "timeout" for h in ACTIVE)
    assert stats.crashes == sum(h.kind == "crash" for h in ACTIVE)
    assert stats.jobs == len(ACTIVE) + 2


def test_secret_probe_works_when_the_secret_is_there(monkeypatch: pytest.MonkeyPatch,
                                                     corpus_run: dict[str, Any]) -> None:
    """`reads_secret.py` is judged correct only because its probe found nothing; the same
    probe, run here where the secret is set, does find it (so the corpus result is not vacuous)."""
    spec = importlib.util.spec_from_file_location("hostile_reads_secret", HOSTILE / "reads_secret.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_SECRET)
    assert module.find_secret() is not None
    assert corpus_run["outcomes"]["reads_secret.py"].verdict.kind == "correct"


def test_shell_never_ran(corpus_run: dict[str, Any]) -> None:
    """On the CPU seccomp refuses the shell; on a GPU (exec allowed) it runs only inside the
    candidate's private mounts, which needs root (without it, the threat model says so)."""
    if HAS_GPU and not IS_ROOT:
        pytest.skip("on a GPU without root nothing keeps a shell's files out of the real /tmp")
    assert corpus_run["outcomes"]["spawns_shell.py"].verdict.kind != "correct"
    assert not SHELL_MARKER.exists()


def test_corpus_time_is_bounded(corpus_run: dict[str, Any]) -> None:
    assert corpus_run["seconds"] < 900, f"hostile corpus took {corpus_run['seconds']:.0f} s"


def test_containment_left_nothing_behind(corpus_run: dict[str, Any]) -> None:
    """The shell, the fork and the setsid child of recovers_shell.py never ran; fills_disk.py's
    files and writes_project.py's sitecustomize.py are nowhere outside the candidate's process."""
    if not (HAS_GPU and not IS_ROOT):  # a GPU allows exec: only root's private /tmp keeps the marker in
        assert not Path("/tmp/kmc_hostile_recovered_shell").exists()
    assert not Path("/tmp/kmc_hostile_fill.bin").exists()
    root = Path(__file__).resolve().parent.parent
    planted = root / "sitecustomize.py"
    try:
        assert not planted.exists(), "a candidate wrote into the project"
    finally:
        planted.unlink(missing_ok=True)


CHAIN = ("poisons_next_candidate.py", "global_hooks.py", "tensor_subclass_output.py", "leaves_thread.py")


def test_same_worker_chain_attack_then_wrong_kernel_then_expert() -> None:
    """On one worker, in order: an attack that rigs its process for whoever comes next, a plainly
    wrong kernel, the correct expert. Each is judged as if it ran alone."""
    from bench.registry import get_task
    from judge.device import detect_target
    from runners.pool import LocalPool

    target = detect_target(force_cpu=not HAS_GPU)
    expert = get_task("vector_add").baseline_source()
    wrong = (HOSTILE / "off_by_one.py").read_text()
    with LocalPool(target, workers=1, job_timeout=JOB_TIMEOUT_S) as pool:
        for attack in CHAIN:
            pool.evaluate("vector_add", (HOSTILE / attack).read_text(), "visible")
            after_wrong = pool.evaluate("vector_add", wrong, "visible").verdict
            after_expert = pool.evaluate("vector_add", expert, "visible").verdict
            assert after_wrong.kind == "wrong_result", f"after {attack}: {after_wrong.one_line()}"
            assert after_expert.kind == "correct", f"after {attack}: {after_expert.one_line()}"
        assert pool.stats.restarts == 0, "the judge worker itself never needed a restart"
