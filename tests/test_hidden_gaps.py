"""Hidden cases that catch kernels the built-in suite used to pass (issue 41, item 4).

Each wrong kernel in tests/fixtures/hidden_gaps/ was judged `correct` on the hidden cases
before these were added: a softmax that ignores the inner stride, a row_max whose float32 fast
path for wide rows (multiples of 256 above 4096) starts its max at 0.0, a quantiser that
truncates instead of rounding (int8 was compared with atol=1 everywhere), a rotary kernel that
recomputes the classic tables instead of reading cos and sin, and, on a GPU, a softmax that puts
rows on grid axis 1 (at most 65,535 programs). Here each fails, and the task's expert (softmax's
fixed to honour the inner stride) passes the same cases.

The interpreter tests judge in this process (tests/helpers.py `in_process_runner`) on the new
cases only, so they stay a few seconds; the full hidden sets are `bench check`'s and
tests/test_bench_suite.py's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from bench.builtin._common import TALL_ROWS
from bench.builtin.quantization import TIE_AMAX
from bench.registry import get_task
from bench.task import STRIDED_LAYOUTS, Case, Task
from judge import comparison, oracle
from judge.candidate.verdict import Verdict
from tests.helpers import in_process_runner

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "hidden_gaps"
GRID_AXIS_LIMIT = 65_535  # CUDA's most programs along grid axis 1 or 2
_names = itertools.count()


@dataclass(frozen=True)
class Gap:
    """A wrong kernel, its task, and the hidden cases (of the CPU's set) that now catch it."""

    fixture: str
    task: str
    catches: Callable[[Case], bool]


def _wide_multiple_of_256(c: Case) -> bool:
    cols = c.size("cols")
    return c.dtype == "float32" and cols > 4096 and cols % 256 == 0


GAPS = (
    Gap("softmax_ignores_inner_stride.py", "softmax", lambda c: c.layout == "inner_strided"),
    Gap("row_max_wide_fast_path.py", "row_max", _wide_multiple_of_256),
    # Judged exactly now wherever the reference is exact: any case; the "ties" seed (2) is where
    # the expert's round-half-up differs from the reference's half-to-even.
    Gap("quantize_int8_truncates.py", "quantize_int8", lambda c: c.seed == 2 and c.layout == "contiguous"),
    # Tables drawn with another base and positions on every seed but 0, and on every refill.
    Gap("rotary_fixed_base.py", "rotary_embedding", lambda c: c.seed in (1, 3) and c.dtype == "float32"),
)

# Row-wise tasks (one program per row in the natural kernel) and the size that counts their rows.
ROW_WISE = {
    "softmax": "rows", "layer_norm": "rows", "rms_norm": "rows", "online_softmax": "rows", "log_softmax": "rows",
    "cross_entropy": "rows", "row_sum": "rows", "row_max": "rows", "argmax": "rows", "cumsum": "rows",
    "cumprod": "rows", "cummax": "rows", "swiglu": "rows", "flip": "rows", "gather": "rows", "index_select": "rows",
    "quantize_int8": "rows", "dequantize_int8": "rows", "rotary_embedding": "seq", "embedding": "seq",
}


def _judge(task: Task, source: str, cases: tuple[Case, ...], folder: Path) -> Verdict:
    """`source` judged on `cases` in this process on the CPU interpreter."""
    folder.mkdir(parents=True, exist_ok=True)
    runner = in_process_runner(task, source, folder, f"kmc_hidden_gap_{next(_names)}")
    verdict = oracle.judge_cases(task, runner, cases, "cpu", True)
    assert isinstance(verdict, Verdict)
    return verdict


def _new_cases(gap: Gap) -> tuple[Case, ...]:
    cases = tuple(c for c in get_task(gap.task).hidden_cpu if gap.catches(c))
    assert cases, f"{gap.task} has no hidden CPU case for {gap.fixture}"
    return cases


@pytest.mark.interpreter
@pytest.mark.parametrize("gap", GAPS, ids=[g.task for g in GAPS])
def test_the_wrong_kernel_fails_the_new_hidden_cases_and_the_expert_passes_them(
        gap: Gap, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    task, cases = get_task(gap.task), _new_cases(gap)
    wrong = _judge(task, (FIXTURES / gap.fixture).read_text(), cases, tmp_path / "wrong")
    assert wrong.kind == "wrong_result", wrong
    assert wrong.failing_case in {c.name for c in cases}
    expert = _judge(task, task.baseline_source(), cases, tmp_path / "expert")
    assert expert.kind == "correct", expert
    assert expert.cases_run == len(cases) and expert.cases_skipped == 0


@pytest.mark.slow  # about 5 s each on 2 cores: the whole hidden set less the new cases
@pytest.mark.interpreter
@pytest.mark.parametrize("gap", GAPS[:2], ids=[g.task for g in GAPS[:2]])
def test_the_strided_and_wide_row_kernels_pass_every_other_hidden_case(
        gap: Gap, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What made them gaps: without the new cases these two kernels pass the whole hidden set
    (the quantiser and the rotary kernel fail everywhere now: the comparison and the tables
    changed, not only the case list)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    task = get_task(gap.task)
    rest = tuple(c for c in task.cases("hidden", True) if not gap.catches(c))
    verdict = _judge(task, (FIXTURES / gap.fixture).read_text(), rest, tmp_path / "wrong")
    assert verdict.kind == "correct", verdict
    assert verdict.cases_run == len(rest)


def _quantize_judged(q: torch.Tensor, x: torch.Tensor) -> comparison.Mismatch | None:
    """The comparison's complaint about a candidate returning q (and the right scales) for x, if any."""
    task = get_task("quantize_int8")
    expected = comparison.expected_output(task, (x,))
    case = task.hidden_cpu[0]
    try:
        comparison.compare(task.judged_output((q, expected[1].clone()), (x,), case), expected, task)
    except comparison.Mismatch as m:
        return m
    return None


def test_quantisation_gives_slack_at_round_half_ties_only() -> None:
    # scale = 63.5 / 127 = 0.5, so x / scale = 2x: 127, ties 0.5, -1.5, 2.5, and 2.0, 1.4, -2.6.
    x = torch.tensor([[TIE_AMAX, 0.25, -0.75, 1.25, 1.0, 0.7, -1.3]])
    exact = torch.tensor([[127, 0, -2, 2, 2, 1, -3]], dtype=torch.int8)
    half_up = torch.tensor([[127, 1, -1, 3, 2, 1, -3]], dtype=torch.int8)
    truncated = torch.tensor([[127, 0, -1, 2, 2, 1, -2]], dtype=torch.int8)
    assert _quantize_judged(exact, x) is None
    assert _quantize_judged(half_up, x) is None, "either neighbour of a tie passes"
    two_off = half_up.clone()
    two_off[0, 1] = 2
    assert "1/7 elements" in str(_quantize_judged(two_off, x)), "one step at most, even at a tie"
    complaint = _quantize_judged(truncated, x)
    assert complaint is not None and "1/7 elements outside atol=0" in str(complaint), \
        "-2.6 truncated to -2 is not a tie: judged exactly"


def test_every_strided_task_also_gets_inputs_whose_last_stride_is_not_one() -> None:
    for task in (t for t in map(get_task, _builtin_ids()) if t.strided_inputs):
        for hidden in (task.hidden_cpu, task.hidden_gpu):
            layouts = {c.layout for c in hidden}
            assert set(STRIDED_LAYOUTS) <= layouts, (task.id, layouts)
        c = min((c for c in task.hidden_cpu if c.layout == "inner_strided"), key=lambda c: sum(c.dims.values()))
        stepped = task.inputs(c, "cpu")
        plain = task.inputs(Case(c.name, c.sizes, c.dtype, c.seed), "cpu")
        for a, b in zip(stepped, plain, strict=True):
            if isinstance(a, torch.Tensor) and a.dim() >= 2 and a.shape[-1] > 1:
                assert a.stride(-1) == 2 and a.stride(-2) > 2 * a.shape[-1] - 1, (task.id, a.stride())
            if isinstance(a, torch.Tensor):
                assert torch.equal(a, b), f"{task.id}: the same values in other memory"


def test_every_row_wise_task_has_a_gpu_only_case_past_the_grid_axis_limit() -> None:
    with_rows = {t.id for t in map(get_task, _builtin_ids()) if "rows" in t.hidden_gpu[0].dims}
    assert with_rows <= set(ROW_WISE), f"row-wise tasks missing here: {with_rows - set(ROW_WISE)}"
    assert TALL_ROWS > GRID_AXIS_LIMIT
    for tid, key in ROW_WISE.items():
        task = get_task(tid)
        tall = [c for c in task.hidden_gpu if c.size(key) > GRID_AXIS_LIMIT]
        assert len(tall) == 1 and "gpu-only" in tall[0].name, (tid, [c.name for c in tall])
        assert all(c.size(key) <= GRID_AXIS_LIMIT for c in task.hidden_cpu), f"{tid}: too slow for the interpreter"


def _builtin_ids() -> list[str]:
    from bench.registry import all_tasks

    return [t.id for t in all_tasks() if t.source == "builtin"]


@pytest.mark.gpu
def test_on_a_gpu_rows_on_grid_axis_1_fail_the_tall_case_and_every_expert_passes_its_own(tmp_path: Path) -> None:
    from judge.candidate.loading import load_module, prepare_process
    from judge.runner import LocalRunner

    prepare_process()

    def judged(task: Task, source: str, cases: tuple[Case, ...]) -> Verdict:
        path = tmp_path / f"c{next(_names)}.py"
        path.write_text(source)
        module = load_module(path, f"kmc_hidden_gap_gpu_{path.stem}")
        runner = LocalRunner(getattr(module, task.entry_point), "cuda", False, task.allowed_torch_ops,
                             source_path=path)
        verdict = oracle.judge_cases(task, runner, cases, "cuda", False)
        assert isinstance(verdict, Verdict)
        return verdict

    softmax = get_task("softmax")
    tall = tuple(c for c in softmax.hidden_gpu if c.size("rows") > GRID_AXIS_LIMIT)
    short = tuple(c for c in softmax.hidden_gpu if c.size("rows") <= GRID_AXIS_LIMIT and c.layout == "contiguous")
    axis_1 = (FIXTURES / "softmax_rows_on_axis_1.py").read_text()
    assert judged(softmax, axis_1, short).kind == "correct", "right below the limit"
    verdict = judged(softmax, axis_1, tall)
    assert verdict.kind != "correct" and verdict.failing_case == tall[0].name, verdict
    for tid, key in ROW_WISE.items():
        task = get_task(tid)
        cases = tuple(c for c in task.hidden_gpu if c.size(key) > GRID_AXIS_LIMIT)
        verdict = judged(task, task.baseline_source(), cases)
        assert verdict.kind == "correct" and verdict.cases_run == 1, (tid, verdict)
