"""The device trace's check (judge/candidate/kernel_trace.py), on event lists: the candidate's
own kernels as often as the launch record says, kernels under allowed aten operations, and
everything else named. On a GPU the hostile corpus exercises it end to end (tests/test_hostile.py:
a CuPy kernel beside a token launch, a CUDA graph replaying a Triton kernel)."""

from __future__ import annotations

from judge.candidate.kernel_trace import TracedKernel, TraceFindings, findings, judged_findings
from judge.candidate.launches import ALLOWED_OPS

ALLOWED = frozenset(ALLOWED_OPS)


def test_own_kernels_as_often_as_recorded_and_copies_under_allowed_ops_pass() -> None:
    traced = [TracedKernel("add_kernel", ""), TracedKernel("add_kernel", ""),
              TracedKernel("void at::native::vectorized_elementwise_kernel<FillFunctor>", "aten::fill_"),
              TracedKernel("void at::native::direct_copy_kernel_cuda", "aten::copy_")]
    found = findings(traced, {"add_kernel": 2})
    assert found.miscounted == ()
    assert judged_findings(found, ALLOWED) == ""


def test_a_kernel_outside_any_operation_that_is_not_the_candidates_is_named() -> None:
    found = findings([TracedKernel("add_kernel", ""), TracedKernel("kmc_hostile_add", "")], {"add_kernel": 1})
    why = judged_findings(found, ALLOWED)
    assert "kmc_hostile_add" in why and "outside any operation" in why


def test_a_compute_kernel_under_a_pytorch_op_or_a_custom_namespace_is_named() -> None:
    for op in ("aten::add", "kmc_hostile::clone", "inductor::triton_poi_fused_add_0"):
        found = findings([TracedKernel("some_kernel", op)], {})
        assert op in judged_findings(found, ALLOWED), op
    # the task's own allow-list admits its op (a last step in PyTorch the task allows)
    assert judged_findings(findings([TracedKernel("reduce_kernel", "aten::sum")], {}), ALLOWED | {"sum"}) == ""


def test_counts_that_disagree_with_the_record_either_way_are_named() -> None:
    replayed = findings([TracedKernel("add_kernel", "")] * 3, {"add_kernel": 1})
    assert replayed.miscounted == (("add_kernel", 1, 3),)
    assert "recorded 1x, ran 3x" in judged_findings(replayed, ALLOWED)
    forged = findings([], {"add_kernel": 2})
    assert "recorded 2x, ran 0x" in judged_findings(forged, ALLOWED)


def test_a_launch_over_an_empty_or_unknown_grid_need_not_show() -> None:
    """Triton skips a launch over an empty grid (a tail kernel with nothing left to do); a grid
    given as a function is not known outside Triton: such launches bound the count from above."""
    tail_skipped = findings([TracedKernel("main_kernel", "")], {"main_kernel": 1, "tail_kernel": 1},
                            sure={"main_kernel": 1})
    assert judged_findings(tail_skipped, ALLOWED) == ""
    assert findings([], {"k": 1}, sure={"k": 1}).miscounted == (("k", 1, 0),)


def test_findings_travel_on_the_wire_unchanged() -> None:
    found = TraceFindings((("k", "aten::add"),), (("own", 1, 2),))
    assert TraceFindings.from_wire(found.to_wire()) == found
    assert TraceFindings.from_wire(None) == TraceFindings()
