"""The compile pass (judge/candidate/precompile.py, judge/precompile.py; issue 42 item 1):
kernels compiled on host placeholders before the judge takes a GPU ticket. On the CPU the
plumbing is real and Triton's interpreter stands in for the compiler (its warm-up compiles
nothing); the GPU test shows that a judged launch after the pass compiles nothing more."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from judge.candidate import launches, precompile, structure, wire
from tests.helpers import ROOT, cli_env, run_cli

KERNEL_FILE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def double(x):
    y = torch.empty_like(x)
    _double[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
    return y
'''


def _module(tmp_path: Path, source: str = KERNEL_FILE) -> object:
    from judge.candidate.loading import load_module

    path = tmp_path / "cand.py"
    path.write_text(source)
    return load_module(path, f"kmc_precompile_test_{abs(hash(source))}")


def _cases(*tensors: torch.Tensor) -> list[dict]:
    out = []
    for t in tensors:
        spec, found = structure.encode_values((t,))
        out.append({"args": spec, "tensors": [wire.describe(x) for x in found]})
    return out


def test_a_placeholder_has_the_layout_and_alignment_of_the_tensor_it_stands_for() -> None:
    base = torch.arange(64, dtype=torch.float16).reshape(8, 8)
    for t in (base, base[1:, 3:], base.t(), base[:, ::2], torch.zeros(0, 4)):
        p = precompile.placeholder(wire.describe(t))
        assert (p.shape, p.stride(), p.storage_offset(), p.dtype) == (t.shape, t.stride(), t.storage_offset(), t.dtype)
        assert p.untyped_storage().nbytes() == t.untyped_storage().nbytes()
        # Triton specializes a pointer on its 16-byte alignment: the placeholder's is the real one's.
        assert p.data_ptr() % 16 == t.data_ptr() % 16


def test_a_description_reaching_past_its_storage_is_refused() -> None:
    d = wire.describe(torch.zeros(4, 4))
    with pytest.raises(wire.WireError):
        precompile.placeholder({**d, "size": [5, 4]})


@pytest.mark.interpreter  # runs the module on CPU tensors after the pass
def test_the_pass_runs_every_launch_compile_only_and_leaves_the_placeholders_unwritten(tmp_path: Path) -> None:
    module = _module(tmp_path)
    launches.install_launch_recorder()
    seen: list[torch.Tensor] = []

    def entry(x: torch.Tensor) -> torch.Tensor:
        x.fill_(3.0)
        seen.append(x)
        y = module.double(x)  # type: ignore[attr-defined]
        seen.append(y)
        return y

    report = precompile.compile_cases(entry, _cases(torch.ones(100), torch.ones(7, 9)[:, 1:]), module)
    assert (report.cases, report.launches, report.failures, report.stopped) == (2, 2, 0, "")
    assert seen[0].device.type == "cpu" and seen[2].shape == (7, 8) and seen[2].stride() == (9, 1)
    # Launches were warm-ups, not runs: no store reached the outputs (a run writes 6.0 there).
    assert not (seen[1] == 6.0).any() and not (seen[3] == 6.0).any()
    # And the switch is off again afterwards: a launch now runs.
    x = torch.ones(100)
    assert torch.equal(module.double(x), x * 2)  # type: ignore[attr-defined]


def test_an_autotuner_compiles_each_configuration_during_the_pass_and_benchmarks_again_after(tmp_path: Path) -> None:
    from triton.runtime.autotuner import Autotuner

    original = Autotuner.run
    warmed: list[tuple] = []

    class Fake:
        def warmup(self, *args: object, **kwargs: object) -> list:
            warmed.append((args, kwargs))
            return []

    with launches.compile_only([]):
        assert Autotuner.run is not original
        Autotuner.run(Fake(), 1, 2, grid=(1,), warmup=False)  # type: ignore[arg-type]
    assert Autotuner.run is original
    assert warmed == [((1, 2), {"grid": (1,)})]


def test_an_entry_point_that_refuses_host_tensors_stops_the_pass_at_once(tmp_path: Path) -> None:
    module = _module(tmp_path)
    calls: list[int] = []

    def entry(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        if not x.is_cuda:
            raise ValueError("cuda tensors only")
        return x

    report = precompile.compile_cases(entry, _cases(torch.ones(4), torch.ones(8)), module)
    assert (len(calls), report.cases, report.failures) == (1, 0, 1)
    assert "raised before any launch" in report.stopped


def test_a_case_slow_on_host_placeholders_is_cut_short(tmp_path: Path) -> None:
    module = _module(tmp_path)

    def entry(x: torch.Tensor) -> None:
        while True:  # a host fallback that would take minutes
            x.add_(1)

    report = precompile.compile_cases(entry, _cases(torch.ones(4), torch.ones(8)), module, case_limit_s=0.2)
    assert report.failures == 1 and report.cases == 0 and "over" in report.stopped and report.seconds < 5


def test_the_setting_turns_the_pass_off_or_forces_it_under_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(precompile.PRECOMPILE_ENV, raising=False)
    assert precompile.enabled(interpreter=False) and not precompile.enabled(interpreter=True)
    monkeypatch.setenv(precompile.PRECOMPILE_ENV, "force")
    assert precompile.enabled(interpreter=True)
    monkeypatch.setenv(precompile.PRECOMPILE_ENV, "0")
    assert not precompile.enabled(interpreter=False)


def test_the_judge_describes_each_layout_once_and_poisoned_outputs_as_fresh_copies() -> None:
    from bench.registry import get_task
    from judge.precompile import case_descriptions

    task = get_task("softmax")
    cases = task.cases("hidden", True)
    described = case_descriptions(task, cases, "cpu", True)
    assert 1 < len(described) <= len(cases)
    keys = {json.dumps([c["args"], [(d["size"], d["stride"], d["dtype"]) for d in c["tensors"]]]) for c in described}
    assert len(keys) == len(described)
    assert all("bytes" not in d for c in described for d in c["tensors"])  # descriptions, never values


def test_a_visible_failure_stops_the_pass_at_that_case_and_leaves_out_the_perf_cases() -> None:
    from bench.registry import get_task
    from judge.precompile import cases_to_compile

    task = get_task("softmax")
    hidden = tuple(task.cases("hidden", False))
    second = task.visible[1].name
    assert hidden[1].name == second  # the hidden set begins with the visible cases
    assert cases_to_compile(task, "hidden", False, timed=True, through=second) == hidden[:2]
    assert cases_to_compile(task, "hidden", False, timed=False, through=second + "+after in-place refill") == hidden[:2]
    everything = hidden + tuple(task.perf)
    assert cases_to_compile(task, "hidden", False, timed=True) == everything
    assert cases_to_compile(task, "hidden", False, timed=True, through="no-such-case") == everything
    assert cases_to_compile(task, "hidden", False, timed=False) == hidden


VECTOR_ADD_WRONG_PAST_2048 = "tl.where(offsets < 2048, x + y, x - y)"
"""vector_add's expert made wrong past element 2048: it passes the first visible case (1024
elements) and fails the second (4096)."""


@pytest.mark.slow
def test_a_hidden_job_with_the_hint_compiles_less_and_gets_the_same_verdict(tmp_path: Path) -> None:
    """The hint (judge/job.py `Job.compile_through`) for a source that fails the second visible
    case, and a wrong hint for the expert (a run that goes past the case compiles the rest at
    first launch): each hidden verdict is the one judged without the hint, and the hinted
    pass ran fewer cases. The pass forced on under the interpreter."""
    from bench.registry import get_task
    from judge.device import detect_target
    from runners.pool import LocalPool

    task = get_task("vector_add")
    expert = task.baseline_source()
    wrong = expert.replace("x + y", VECTOR_ADD_WRONG_PAST_2048)
    second = task.visible[1].name
    steps = tmp_path / "steps"
    steps.mkdir()
    found: dict[tuple[str, str], tuple[dict[str, Any], int]] = {}
    saved = {k: os.environ.get(k) for k in (precompile.PRECOMPILE_ENV, "KMC_JOB_STEPS")}
    os.environ.update({precompile.PRECOMPILE_ENV: "force", "KMC_JOB_STEPS": str(steps)})
    try:
        with LocalPool(detect_target(force_cpu=True), workers=1, job_timeout=300) as pool:
            for name, source in (("wrong past 2048", wrong), ("expert", expert)):
                for hint in ("", second):
                    verdict = pool.evaluate("vector_add", source, "hidden", compile_through=hint).verdict
                    lines = [json.loads(line) for f in steps.iterdir() for line in f.read_text().splitlines()]
                    found[(name, hint)] = verdict.to_json(), int(lines[-1]["compile_pass"]["cases"])
                    for f in steps.iterdir():
                        f.unlink()
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    for name in ("wrong past 2048", "expert"):
        (unhinted, all_cases), (hinted, up_to_the_case) = found[(name, "")], found[(name, second)]
        assert hinted == unhinted, name
        assert up_to_the_case == 2 < all_cases, (name, up_to_the_case, all_cases)
    assert found[("wrong past 2048", "")][0]["failing_case"] == second
    assert found[("expert", second)][0]["kind"] == "correct"


@pytest.mark.slow
@pytest.mark.parametrize("task_id", ["softmax", "vector_add"])
def test_the_pass_changes_no_verdict_and_reaches_every_layout(tmp_path: Path, task_id: str) -> None:
    """The expert and a wrong kernel judged with the pass off and forced on (the interpreter)."""
    from bench.registry import get_task

    expert = tmp_path / "expert.py"
    expert.write_text(get_task(task_id).baseline_source())
    wrong = tmp_path / "wrong.py"
    wrong.write_text((ROOT / "tests" / "hostile" / "off_by_one.py").read_text() if task_id == "vector_add"
                     else get_task(task_id).baseline_source().replace("tl.exp(", "tl.exp2("))
    for candidate in (expert, wrong):
        verdicts = []
        for setting in ("0", "force"):
            steps = tmp_path / f"steps-{candidate.stem}-{setting}"
            steps.mkdir()
            done = run_cli("eval", "--task", task_id, "--candidate", str(candidate), "--json",
                           env=cli_env(KMC_PRECOMPILE=setting, KMC_JOB_STEPS=str(steps), KMC_FORCE_CPU="1"))
            verdict = json.loads(done.stdout.strip().splitlines()[-1])
            verdicts.append({k: verdict[k] for k in ("verdict", "failing_case", "message", "cases_run")})
            records = [json.loads(line) for f in steps.iterdir() for line in f.read_text().splitlines()]
            passes = [r["compile_pass"] for r in records if r.get("compile_pass")]
            if setting == "force":
                assert passes and passes[0]["cases"] > 1 and passes[0]["launches"] >= passes[0]["cases"]
            else:
                assert not passes
        assert verdicts[0] == verdicts[1], candidate.name


OWN_TESTS = """
import torch


def test_small():
    x = torch.randn(100, device=DEVICE)
    assert torch.allclose(double(x), x * 2)


def test_wrong_on_purpose():
    x = torch.randn(7, 3, device=DEVICE)[:, 1:]
    assert torch.equal(double(x), x * 3)


def test_names_the_gpu():
    x = torch.ones(4, device="cuda")
    assert torch.equal(double(x), x * 2)
"""


def test_the_pass_for_a_methods_own_tests_runs_each_on_the_host(tmp_path: Path) -> None:
    module = _module(tmp_path)
    launches.install_launch_recorder()
    report = precompile.compile_for_tests(module.double, "double", OWN_TESTS)  # type: ignore[attr-defined]
    # Every test fails its assert (a compile-only launch computes nothing) after its launch; the
    # test naming the GPU reaches its launch where torch has a GPU (its tensor made on the host),
    # and a CPU build of torch refuses it before.
    launched = 3 if torch.cuda.is_available() else 2
    assert (report.cases, report.failures, report.launches, report.stopped) == (0, 3, launched, "")
    assert precompile.compile_for_tests(module.double, "double", "def test_(:").stopped  # type: ignore[attr-defined]


@pytest.mark.slow
def test_the_pass_changes_no_outcome_of_a_methods_own_tests(tmp_path: Path) -> None:
    from judge.device import detect_target
    from runners.pool import LocalPool

    source = KERNEL_FILE.replace("def double(x):", "def vector_add(x, y):").replace(
        "y = torch.empty_like(x)", "out = torch.empty_like(x)").replace("_double[(triton.cdiv(x.numel(), 64),)](x, y,",
                                                                         "_double[(triton.cdiv(x.numel(), 64),)](x, out,")
    source = source.replace("    return y", "    return out")
    tests = OWN_TESTS.replace("double(x)", "vector_add(x, x)").replace("x * 2", "x * 2").replace('device="cuda"',
                                                                                                 "device=DEVICE")
    outcomes = []
    for setting in ("0", "force"):
        os.environ[precompile.PRECOMPILE_ENV] = setting
        try:
            with LocalPool(detect_target(force_cpu=True), workers=1, job_timeout=300) as pool:
                report = pool.run_tests("vector_add", source, tests)
        finally:
            os.environ.pop(precompile.PRECOMPILE_ENV, None)
        outcomes.append([(t.name, t.passed, t.message) for t in report.tests])
    assert [passed for _, passed, _ in outcomes[0]] == [True, False, True]
    assert outcomes[0] == outcomes[1]


COUNTS_ITS_CALLS = (ROOT / "bench" / "kernels" / "vector_add.py").read_text().replace(
    "def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n",
    "_CALLS = [0]\n\n\ndef vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n"
    "    _CALLS[0] += 1\n    if _CALLS[0] == 3:\n        return x - y\n")


@pytest.mark.slow
def test_what_the_pass_does_to_the_module_never_reaches_a_judged_call(tmp_path: Path) -> None:
    """A candidate wrong on its third call only: without a fresh import after the pass, the
    pass would use up that call on placeholders and the judged calls would all pass."""
    candidate = tmp_path / "third_call_wrong.py"
    candidate.write_text(COUNTS_ITS_CALLS)
    verdicts = []
    for setting in ("0", "force"):
        done = run_cli("eval", "--task", "vector_add", "--candidate", str(candidate), "--json",
                       env=cli_env(KMC_PRECOMPILE=setting, KMC_FORCE_CPU="1"))
        verdicts.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert verdicts[0]["verdict"] == "wrong_result"
    assert [(v["verdict"], v["failing_case"]) for v in verdicts] == [(verdicts[0]["verdict"], verdicts[0]["failing_case"])] * 2


class _OnTheGPU(torch.Tensor):
    """A host tensor that says it lives on a GPU: what the guard meets for a tensor the
    candidate's import made there (a CPU build of torch cannot make a real one)."""

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return torch.device("cuda", 0)


def test_the_pass_makes_on_the_host_what_would_be_made_on_a_gpu_and_refuses_gpu_tensors() -> None:
    """The guard as torch's dispatcher calls it."""
    guard = launches._HostOnly()
    aten = torch.ops.aten
    made = guard.__torch_dispatch__(aten.zeros.default, (), ([4],), {"device": torch.device("cuda")})
    assert made.device.type == "cpu" and made.shape == (4,)
    copied = guard.__torch_dispatch__(aten._to_copy.default, (), (torch.ones(3),), {"device": "cuda:0"})
    assert copied.device.type == "cpu"
    on_gpu = torch.Tensor._make_subclass(_OnTheGPU, torch.ones(2))
    with pytest.raises(launches.GPUWorkRefused):
        guard.__torch_dispatch__(aten.add.Tensor, (), (on_gpu, 1), {})
    with launches.compile_only([]):
        assert torch.ones(4).add(1).sum() == 8  # host work runs under the pass


@pytest.mark.gpu
def test_on_a_gpu_a_launch_after_the_pass_compiles_nothing(tmp_path: Path) -> None:
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs a GPU and Triton's compiler")
    from triton import knobs

    module = _module(tmp_path, KERNEL_FILE.replace("_double", "_double_gpu_pass"))
    launches.install_launch_recorder()
    # Three specializations: aligned, a pointer 4 bytes past alignment (a view one element in), half.
    layouts = (torch.ones(1000), torch.ones(1001)[1:], torch.ones(16, dtype=torch.float16))
    compiled: list[str] = []
    knobs.runtime.jit_post_compile_hook = lambda *a, **k: compiled.append("compiled")
    try:
        report = precompile.compile_cases(module.double, _cases(*layouts), module)  # type: ignore[attr-defined]
        assert report.cases == 3 and report.kernels >= 2, report
        before = len(compiled)
        for t in layouts:
            x = t.cuda() if t.storage_offset() == 0 else torch.ones(1001, device="cuda")[1:]
            assert torch.equal(module.double(x).cpu(), (x * 2).cpu())  # type: ignore[attr-defined]
        assert len(compiled) == before, "a judged launch compiled again after the pass"
    finally:
        knobs.runtime.jit_post_compile_hook = None


CARRIED_FILE = '''
from triton.runtime.jit import JITFunction


def _scale(x_ptr, n):
    pass


scale = JITFunction(_scale)


class Tuner:  # stands for an autotuner: the kernel it wraps in `.fn`
    def __init__(self, fn):
        self.fn = fn


tuned = Tuner(JITFunction(_scale))


class Raising:  # a module attribute whose `.fn` raises: carrying skips it
    @property
    def fn(self):
        raise RuntimeError("not here")


raising = Raising()
'''


def test_the_passs_compiled_kernels_are_carried_to_the_module_imported_afresh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`precompile.carry_compiled_kernels`: Triton's in-memory kernels of the first import go to
    the same kernels (by source hash) of the second, also under a wrapper's `.fn`; a kernel
    whose source changed gets nothing, and `KMC_CARRY_KERNELS=0` moves nothing."""
    from judge.candidate.loading import load_module

    path = tmp_path / "carried.py"
    path.write_text(CARRIED_FILE)

    def imported(name: str) -> object:
        return load_module(path, name)

    old = imported("kmc_carry_old")
    old.scale.device_caches[0] = ({"spec-a": "kernel a", "spec-b": "kernel b"}, {}, None, None, None)  # type: ignore[attr-defined]
    from concurrent.futures import Future

    class _Pending:  # an asynchronous compile's placeholder (Triton's FutureKernel)
        def __init__(self, error: BaseException | None) -> None:
            self.future: Future = Future()
            if error is None:
                self.future.set_result("kernel")
            else:
                self.future.set_exception(error)

    failed, done = _Pending(RuntimeError("compile failed")), _Pending(None)
    old.tuned.fn.device_caches[0] = ({"spec-c": "kernel c", "spec-d": failed, "spec-e": done},  # type: ignore[attr-defined]
                                     {}, None, None, None)
    from triton.runtime.jit import JITFunction

    def create_binder(self: Any) -> tuple:  # Triton's own set-up of a device's entry, without a GPU here
        self.ASTSource = "what Triton compiles a new specialization with"
        return {}, {}, None, None, None

    monkeypatch.setattr(JITFunction, "create_binder", create_binder)
    new = imported("kmc_carry_new")
    assert precompile.carry_compiled_kernels(old, new) == 4
    assert new.scale.device_caches[0][0] == {"spec-a": "kernel a", "spec-b": "kernel b"}  # type: ignore[attr-defined]
    assert new.tuned.fn.device_caches[0][0] == {"spec-c": "kernel c", "spec-e": done}  # type: ignore[attr-defined]
    # Made by Triton, so a specialization the pass did not compile can still be compiled: before,
    # the entry was copied whole and a correct kernel's next new specialization raised AttributeError.
    assert new.scale.ASTSource and new.tuned.fn.ASTSource  # type: ignore[attr-defined]
    path.write_text(CARRIED_FILE.replace("    pass", "    x = n + 1"))  # the second import's source differs
    assert precompile.carry_compiled_kernels(old, imported("kmc_carry_changed")) == 0
    path.write_text(CARRIED_FILE)
    monkeypatch.setenv(precompile.CARRY_ENV, "0")
    assert precompile.carry_compiled_kernels(old, imported("kmc_carry_off")) == 0


@pytest.mark.gpu
def test_on_a_gpu_the_module_imported_afresh_launches_the_passs_kernels_without_looking_them_up(
        tmp_path: Path) -> None:
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs a GPU and Triton's compiler")
    from triton import knobs

    from judge.candidate.loading import load_module

    source = KERNEL_FILE.replace("_double", "_double_carried")
    module = _module(tmp_path, source)
    report = precompile.compile_cases(module.double, _cases(torch.ones(1000)), module)  # type: ignore[attr-defined]
    assert report.kernels >= 1, report
    again = load_module(tmp_path / "cand.py", "kmc_precompile_carried_again")
    assert precompile.carry_compiled_kernels(module, again) >= 1
    looked_up: list[str] = []
    knobs.runtime.jit_cache_hook = lambda *a, **k: looked_up.append("miss")  # Triton's in-memory cache missed
    try:
        x = torch.ones(1000, device="cuda")
        assert torch.equal(again.double(x), x * 2)  # type: ignore[attr-defined]
    finally:
        knobs.runtime.jit_cache_hook = None
    assert looked_up == [], "the module imported afresh looked its kernel up again"
    # A specialization the pass did not compile (another dtype) compiles at its launch, as
    # without the pass; it raised AttributeError ('ASTSource') when the entry was copied whole.
    h = torch.ones(1000, device="cuda", dtype=torch.float16)
    assert torch.equal(again.double(h), h * 2)  # type: ignore[attr-defined]


def test_compiles_of_the_pass_run_on_threads_and_a_failed_one_raises_nothing() -> None:
    """Triton's asynchronous compile mode is on during the pass (where this Triton has it); a
    compile that fails there is dropped (its judged launch reports it), never raised by the pass."""
    _async = pytest.importorskip("triton.runtime._async_compile")
    cache: dict[str, object] = {}

    def failing() -> object:
        raise RuntimeError("a compile error")

    with precompile._concurrent_compiles():
        mode = _async.active_mode.get()
        assert mode is not None
        with_failure_callback = len(inspect.signature(mode.submit).parameters) >= 4
        if with_failure_callback:  # Triton 3.9's mode: the failed compile's entry is dropped
            cache["k"] = mode.submit("k", failing, lambda kernel: cache.__setitem__("k", kernel),
                                     lambda future: cache.pop("k", None))
        else:  # an older mode (Triton 3.6) has no failure callback: its failure is still not raised
            mode.submit("k", failing, lambda kernel: kernel)
    assert _async.active_mode.get() is None
    assert "k" not in cache or not with_failure_callback


@pytest.mark.slow
def test_a_methods_tests_hold_the_gpus_gate_one_test_function_at_a_time(tmp_path: Path) -> None:
    """A ticket per test function (a timer waits for one test, not them all): three tests
    draw two tickets more than one test does, and the outcomes are those of a run of them all."""
    from judge.device import detect_target
    from runners.pool import LocalPool

    source = KERNEL_FILE.replace("def double(x):", "def vector_add(x, y):").replace(
        "y = torch.empty_like(x)", "out = torch.empty_like(x)").replace("](x, y,", "](x, out,").replace(
        "    return y", "    return out")
    one = "import torch\n\n\ndef test_a():\n    x = torch.ones(8, device=DEVICE)\n    assert torch.equal(vector_add(x, x), 2 * x)\n"
    three = one + one.replace("test_a", "test_b").replace("2 * x", "3 * x") + one.replace("test_a", "test_c").split(
        "import torch\n\n\n")[1]
    gate = tmp_path / "gate"
    drawn = []
    outcomes = []
    with LocalPool(detect_target(force_cpu=True), workers=1, job_timeout=300, gate_on_cpu=True,
                   gate_folder=gate) as pool:
        for tests in (one, three):
            before = int((gate / "counter").read_text()) if (gate / "counter").exists() else 0
            report = pool.run_tests("vector_add", source, tests)
            drawn.append(int((gate / "counter").read_text()) - before)
            outcomes.append([(t.name, t.passed) for t in report.tests])
    assert outcomes == [[("test_a", True)], [("test_a", True), ("test_b", False), ("test_c", True)]]
    assert drawn[1] - drawn[0] == 2


DIES_IN_THE_PASS = (ROOT / "bench" / "kernels" / "vector_add.py").read_text().replace(
    "    out = torch.empty_like(x)\n", "    out = torch.full_like(x, 7.0)\n").replace(
    "    return out", "    if out.numel() and out.flatten()[0].item() == 7.0:  # the kernel did not run: the pass\n"
    "        import os\n        os._exit(3)\n    return out")


@pytest.mark.slow
def test_a_process_lost_to_the_pass_is_judged_afresh_without_it(tmp_path: Path) -> None:
    """A candidate whose process dies during the pass (here on purpose, where its launch did not
    run) gets the verdict it gets without the pass: the pass never decides one."""
    candidate = tmp_path / "dies_in_the_pass.py"
    candidate.write_text(DIES_IN_THE_PASS)
    verdicts = []
    for setting in ("0", "force"):
        steps = tmp_path / f"steps-{setting}"
        steps.mkdir()
        done = run_cli("eval", "--task", "vector_add", "--candidate", str(candidate), "--json",
                       env=cli_env(KMC_PRECOMPILE=setting, KMC_JOB_STEPS=str(steps), KMC_FORCE_CPU="1"))
        verdict = json.loads(done.stdout.strip().splitlines()[-1])
        verdicts.append({k: verdict[k] for k in ("verdict", "failing_case", "cases_run")})
        records = [r for f in steps.iterdir() for line in f.read_text().splitlines()
                   if (r := json.loads(line)).get("kind") != "worker_start"]  # the worker's own start line
        if setting == "force":
            assert "lost" in records[0]["compile_pass"], records
    assert verdicts[0]["verdict"] == "correct" and verdicts[0] == verdicts[1]


def test_on_a_gpu_only_inputs_already_drawn_are_described_and_nothing_is_drawn() -> None:
    """Describing draws nothing on a GPU (no ticket is held): a case not yet drawn is left to
    its first judged launch, a drawn one is described from the worker's cache."""
    from bench.registry import get_task
    from judge import case_inputs
    from judge.precompile import case_descriptions

    task = get_task("vector_add")
    cases = task.cases("hidden", True)[:3]
    cache = case_inputs._CACHE
    saved = (cache.max_bytes, cache.used, dict(cache.entries), dict(cache.sizes), dict(cache.task_bytes))
    case_inputs.set_input_cache_bytes(1 << 30)
    # Empty to begin with: an earlier test in this process (a worker judging vector_add in it,
    # tests/test_judge_gpu.py) may have drawn these very cases.
    cache.entries, cache.sizes, cache.task_bytes, cache.used = {}, {}, {}, 0
    try:
        assert case_descriptions(task, cases, "cuda", False) == []
        assert case_inputs.drawn_inputs(task, cases[0], "cuda") is None  # still nothing drawn
        # One case drawn (here on the host, standing in for the GPU worker's own draw).
        drawn = case_inputs.cached_inputs(task, cases[0], "cpu", refill=False)
        case_inputs._CACHE.entries[(task.id, cases[0], "cuda", False)] = drawn
        described = case_descriptions(task, cases, "cuda", False)
        assert len(described) == 1 and [d["size"] for d in described[0]["tensors"]] == [list(t.shape) for t in drawn]
    finally:  # the cache as it was: other tests in this process see none of this
        cache.max_bytes, cache.used = saved[0], saved[1]
        cache.entries, cache.sizes, cache.task_bytes = saved[2], saved[3], saved[4]


def test_the_judge_counts_what_the_pass_wrote_to_the_cache_itself(tmp_path: Path) -> None:
    """judge/precompile.py: `written`, the cache entries the pass added (kernels compiled rather
    than found), is counted by the judge in the process's folder, never taken from its reply."""
    from types import SimpleNamespace

    from bench.registry import get_task
    from judge.precompile import precompile

    task = get_task("vector_add")
    (tmp_path / "FOUND").mkdir()  # lent from the source's cache before the pass

    def request(header: dict, tensors: object = None) -> tuple[dict, list]:
        assert header["op"] == "compile" and header["cases"]
        for name in ("COMPILED", "LAUNCHER", ".HALF.partial"):  # a hidden name (a copy in progress) is no entry
            (tmp_path / name).mkdir()
        return {"pass": {"kernels": 3, "written": 99}}, []

    proc = SimpleNamespace(cache=str(tmp_path), request=request)
    report = precompile(proc, task, task.cases("visible", True), "cpu", True)
    assert report["kernels"] == 3 and report["written"] == 2
    no_cache = SimpleNamespace(cache="", request=lambda header, tensors=None: ({"pass": {"kernels": 1}}, []))
    assert "written" not in precompile(no_cache, task, task.cases("visible", True), "cpu", True)


def test_only_counts_and_short_texts_of_a_pass_report_are_kept() -> None:
    """A pass's report comes from the candidate's process: the judge keeps its counts and a few
    short texts for the step lines, and nothing else it might send."""
    from judge.precompile import reported_counts

    hostile = {"kernels": 3, "seconds": 0.5, "first_failure": "x" * 10_000, "nested": {"a": [1] * 1000},
               7: "a key that is not a name", "k" * 100: 1, "flag": True, **{f"n{i}": i for i in range(100)}}
    kept = reported_counts(hostile)
    assert kept["kernels"] == 3 and kept["seconds"] == 0.5 and len(kept["first_failure"]) == 300
    assert "nested" not in kept and 7 not in kept and "k" * 100 not in kept and "flag" not in kept
    assert len(kept) <= 32
    assert reported_counts(["not", "a", "dict"]) == {} and reported_counts(None) == {}
