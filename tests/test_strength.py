"""bench strength (issue 44): seeded mutants, equivalence detection, scores, and small runs.

Mutant generation and the report are pure and fast. The equivalence check runs in this
process through the worker side (`runners.strength._Judging`) on vector_add's tiny cases; the
whole-run tests start worker processes and are marked slow."""

from __future__ import annotations

import ast
import csv
from pathlib import Path

import pytest

from bench.strength.mutate import OPERATOR_NAMES, find_sites, make_mutant, mutants
from bench.strength.report import (
    EQUIVALENT,
    NON_EQUIVALENT,
    TOLERATED,
    MutantOutcome,
    StrengthReport,
    format_table,
    score,
    write_csv,
)
from bench.strength.stress import draw_cases
from stats.intervals import wilson_ci

ROOT = Path(__file__).resolve().parent.parent
GEAK = ROOT / "tests" / "fixtures" / "geak_eval"

# Every operator has a site here: a mask, strides, program ids, a loop, an eps, float32 casts,
# a reduction with an axis, a scan, a block size, `other=`, a barrier and an atomic.
ALL_SITES = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _kernel(x_ptr, out_ptr, total_ptr, stride_x, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += tl.cumsum(x, axis=0) + eps
    tl.debug_barrier()
    tl.atomic_add(total_ptr, tl.sum(acc, axis=0))
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def entry(x: torch.Tensor, eps: float) -> torch.Tensor:
    out = torch.empty((x.shape[0],), device=x.device, dtype=torch.float32)
    total = torch.zeros((), device=x.device, dtype=torch.float32)
    BLOCK_SIZE = triton.next_power_of_2(x.shape[1])
    _kernel[(x.shape[0],)](x, out, total, x.stride(0), x.shape[1], eps, BLOCK_SIZE=BLOCK_SIZE)
    return out
'''


def test_every_operator_has_a_site_and_gives_a_changed_source_that_parses() -> None:
    sites = find_sites(ALL_SITES)
    assert {s.operator for s in sites} == set(OPERATOR_NAMES)
    original = ast.unparse(ast.parse(ALL_SITES))
    for number, site in enumerate(sites):
        m = make_mutant("toy", ALL_SITES, site, number, seed=0)
        assert ast.unparse(ast.parse(m.source)) != original, m.id
        assert m.operator == site.operator and m.line == site.line


def test_operators_make_the_edits_they_name() -> None:
    by_op = {s.operator: s for s in find_sites(ALL_SITES)}

    def edit(op: str) -> str:
        return make_mutant("toy", ALL_SITES, by_op[op], 0, seed=0).source

    assert "cols <= n_cols" in edit("mask_off_by_one")
    assert "tl.atomic_add" not in edit("dropped_sync") or "tl.debug_barrier" not in edit("dropped_sync")
    assert "reverse=True" in edit("scan_order")
    assert "_kmc_contiguous_stride(x, 0)" in edit("stride_fixed")
    assert "min(triton.next_power_of_2(x.shape[1]), " in edit("block_cap")
    assert "tl.float16" in edit("narrow_accumulation")
    assert "1e-06" in edit("constant_fixed")


def test_the_same_seed_gives_the_same_mutants_and_a_smaller_count_a_prefix() -> None:
    source = (ROOT / "bench" / "kernels" / "attention.py").read_text()
    first = mutants("attention", source, 12, seed=3)
    assert first == mutants("attention", source, 12, seed=3)
    assert mutants("attention", source, 5, seed=3) == first[:5]
    assert [m.id for m in mutants("attention", source, 12, seed=4)] != [m.id for m in first]
    assert len({m.operator for m in first[:6]}) == 6  # operators take turns before any repeats


def test_stress_cases_are_drawn_from_the_seed_and_capped_at_the_largest_hidden_case() -> None:
    from bench.registry import get_task

    task = get_task("softmax")
    a = draw_cases(task, 40, seed=1, label="stress")
    assert a == draw_cases(task, 40, seed=1, label="stress")
    assert a != draw_cases(task, 40, seed=2, label="stress")
    largest = max(c.size("rows") * c.size("cols") for c in (*task.visible, *task.hidden_cpu))
    assert all(c.size("rows") * c.size("cols") <= largest for c in a)
    assert {c.dtype for c in a} <= set(task.dtypes)


def _outcome(mutant: str, suite: str, hidden: str, stress: str, status: str = NON_EQUIVALENT) -> MutantOutcome:
    return MutantOutcome("toy", mutant.split("/")[0], mutant, "mask_off_by_one", 1, "d", suite, hidden, stress, status)


def test_scores_count_only_non_equivalent_mutants_with_wilson_intervals(tmp_path: Path) -> None:
    outcomes = [_outcome("a/m/0", "correct", "wrong_result", "wrong_result"),
                _outcome("a/m/1", "correct", "correct", "wrong_result"),
                _outcome("a/m/2", "wrong_result", "wrong_result", "wrong_result"),
                _outcome("a/m/3", "correct", "correct", "correct", EQUIVALENT),
                _outcome("a/m/4", "correct", "correct", "correct", TOLERATED)]
    report = StrengthReport("toy", "cpu-interpreter", 0, 5, ["a"], outcomes)
    hidden = score(outcomes, "hidden")
    expected = wilson_ci(2, 3)
    assert (hidden.killed, hidden.total) == (2, 3) and (hidden.lo, hidden.hi) == (expected.lo, expected.hi)
    assert score(outcomes, "suite").killed == 1 and score(outcomes, "stress").killed == 3
    assert [o.mutant for o in report.only_hidden()] == ["a/m/0"]
    assert [o.mutant for o in report.survive_both()] == ["a/m/1"]
    assert [o.mutant for o in report.tolerated()] == ["a/m/4"]
    scores, per_mutant = write_csv(report, tmp_path)
    rows = list(csv.DictReader(scores.open()))
    assert [r["task"] for r in rows] == ["a", "[suite toy]"]
    assert rows[0]["hidden_killed"] == "2" and rows[0]["non_equivalent"] == "3" and rows[0]["equivalent"] == "1"
    assert len(list(csv.DictReader(per_mutant.open()))) == 5
    assert "2/3  67%" in format_table(report)


EQUIVALENT_VECTOR_ADD = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _add_kernel(y_ptr, x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    keep = n_elements > offsets
    tl.store(out_ptr + offsets, tl.load(y_ptr + offsets, mask=keep) + tl.load(x_ptr + offsets, mask=keep), mask=keep)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    _add_kernel[(triton.cdiv(n, 256),)](y, x, out, n, BLOCK=256)
    return out
'''


@pytest.mark.interpreter
def test_a_hand_made_equivalent_mutant_is_found_equivalent_and_a_wrong_one_is_not() -> None:
    """Operands swapped, a smaller block, the mask written the other way round: the same bits on
    every case (x + y is commutative in IEEE arithmetic). Dropping the second program's work is
    not: it differs on the first case with more than one block."""
    from bench.registry import get_task
    from runners.strength import _classify, _Judging

    judging = _Judging((), interpreter=True)
    task = get_task("vector_add")
    cases = draw_cases(task, 6, seed=0, label="stress")
    same = judging.compare({"task": "vector_add", "source": EQUIVALENT_VECTOR_ADD, "seed": 0, "factor": 0,
                            "cases": cases})
    assert same == {"differs_on": ""}
    first_block = EQUIVALENT_VECTOR_ADD.replace("tl.program_id(axis=0)", "0")
    differs = judging.compare({"task": "vector_add", "source": first_block, "seed": 0, "factor": 0,
                               "cases": task.cases("hidden", True)})
    assert differs == {"differs_on": "visible-n1024"}  # the first case with more than one block of 256
    from bench.strength.mutate import Mutant

    mutant = Mutant("vector_add", "vector_add/hand/0", "hand", 1, "operands swapped", EQUIVALENT_VECTOR_ADD)
    ok = {"kind": "correct", "message": "", "case": ""}
    assert _classify(mutant, {"suite": ok, "hidden": ok, "stress": ok}, "", "builtin").status == EQUIVALENT
    assert _classify(mutant, {"suite": ok, "hidden": ok, "stress": ok}, "stress-3", "builtin").status == TOLERATED


@pytest.mark.interpreter
def test_a_mutant_s_unwritten_output_is_poisoned_as_the_judge_poisons_it() -> None:
    """The comparison runs each kernel under the judge's poisoned allocations: an output left
    unwritten reads as poison, never as whatever the allocator hands back (the expert's own
    bits, freed a moment before, made a wrong mutant look equivalent once in CI)."""
    import torch

    from bench.registry import get_task
    from runners.strength import _Judging

    judging = _Judging((), interpreter=True)
    task = get_task("vector_add")
    got = judging.outputs(task, lambda x, y: torch.empty_like(x), task.visible[0])
    assert got.is_floating_point() and got.numel() > 0
    assert bool(torch.isnan(got).all())


@pytest.mark.slow
def test_a_small_run_is_reproducible_and_writes_its_table_csv_and_figure(tmp_path: Path) -> None:
    """Two built-in tasks, three mutants each, run twice with one seed: the same mutants, the
    same verdicts, the same table; each judge's kills are at most the non-equivalent mutants."""
    from bench.strength.report import draw_figure
    from runners.strength import StrengthOptions, run_strength

    options = StrengthOptions(task_ids=("vector_add", "gelu"), mutants=3, seed=0, device="cpu",
                              stress_factor=1, differential_factor=1)
    first = run_strength(options)
    second = run_strength(options)
    assert [o.mutant for o in first.outcomes] == [o.mutant for o in second.outcomes]
    assert len(first.outcomes) == 6
    assert first.outcomes == second.outcomes
    assert format_table(first) == format_table(second)
    # vector_add's first-block mutant writes only block 0: every judge sees it (the visible cases span blocks).
    fb = next(o for o in first.outcomes if o.mutant == "vector_add/first_block_only/0")
    assert fb.status == NON_EQUIVALENT and fb.killed("hidden") and fb.killed("stress")
    assert draw_figure(first, tmp_path / "s.png") is not None and (tmp_path / "s.png").stat().st_size > 0


@pytest.mark.slow
def test_a_geak_eval_source_is_judged_by_its_own_calls_beside_the_hidden_cases() -> None:
    """The --source path on the small GEAK-eval fixture: the suite's judge is GEAK-eval's own
    check (the task's `geak-eval` profile), so each outcome records call accuracy too."""
    from runners.strength import StrengthOptions, run_strength

    report = run_strength(StrengthOptions(task_ids=("tb-module_rms", "tb-add_vectors"),
                                          sources=(f"geak-eval:{GEAK}",), mutants=3, seed=0, device="cpu",
                                          stress_factor=1, differential_factor=1))
    assert {o.task for o in report.outcomes} == {"tb-module_rms", "tb-add_vectors"}
    assert all(o.suite_call is not None for o in report.outcomes)
    off_by_one = next(o for o in report.outcomes if o.mutant == "tb-module_rms/mask_off_by_one/0")
    # GEAK-eval's own calls accept reading one column past the row; the hidden cases do not.
    assert not off_by_one.killed("suite") and off_by_one.killed("hidden")
