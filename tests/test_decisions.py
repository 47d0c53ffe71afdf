"""Decisions timing noise cannot flip (methods/speed.py) and feedback text that quotes no
garbage (judge/candidate/value_text.py, judge/candidate/internal_tests.py): design invariant 8."""

from __future__ import annotations

import math

import pytest

from judge.candidate.internal_tests import run_test_functions
from judge.candidate.reruns import RERUNS, steady_verdict
from judge.candidate.value_text import VARYING, describe_value
from judge.candidate.verdict import Verdict
from methods.rounding import two_digits
from methods.speed import SpeedInterval, best, fastest_first, worst


def test_overlapping_intervals_tie_and_the_earlier_wins() -> None:
    a, b, c = SpeedInterval(1.0, 1.2), SpeedInterval(1.1, 1.5), SpeedInterval(1.3, 1.6)
    assert not b.beats(a) and not a.beats(b) and c.beats(a) and not c.beats(b)
    assert best([a, b], lambda s: s) is a  # tied: the earlier
    assert best([a, b, c], lambda s: s) is b  # a is beaten by c; b is beaten by nobody and earlier than c
    assert worst([a, b, c], lambda s: s) is b  # the latest that beats nobody (c beats a)
    assert fastest_first([a, b, c], lambda s: s) == [b, c, a]


def test_intervals_apart_by_less_than_the_margin_tie() -> None:
    """Separate intervals closer than TIE_MARGIN are a tie: the short protocol does not
    resolve such differences, and runs of one seed disagreed on them (methods/speed.py)."""
    from judge.policy import TimingPolicy
    from methods.speed import TIE_MARGIN

    assert TIE_MARGIN == TimingPolicy().feedback_equivalence
    early, later = SpeedInterval(1.00, 1.01), SpeedInterval(1.03, 1.05)
    assert not later.beats(early) and best([early, later], lambda s: s) is early
    assert SpeedInterval(1.07, 1.09).beats(early)  # 1.07 > 1.01 * 1.05
    assert fastest_first([early, later], lambda s: s) == [early, later]


def test_untimed_candidates_tie_with_everything() -> None:
    untimed, timed = SpeedInterval(), SpeedInterval(5.0, 6.0)
    assert not untimed.timed and timed.timed
    assert best([untimed, timed], lambda s: s) is untimed and best([timed, untimed], lambda s: s) is timed
    with pytest.raises(ValueError):
        best([], lambda s: s)


def test_speed_figures_have_two_significant_digits() -> None:
    assert [two_digits(v) for v in (0.012345, 1.2549, 1.25, 137.0, 2.0, 0.0)] == ["0.012", "1.3", "1.2", "140", "2",
                                                                                   "0"]
    assert two_digits(math.inf) == "inf"


def test_garbage_values_are_described_not_quoted() -> None:
    assert describe_value(1.849e20, scale=3.0) == describe_value(6.56e9, scale=3.0)
    assert describe_value(4.5e-41, scale=3.0).startswith("garbage")
    assert describe_value(2.5, scale=3.0) == "2.5" and describe_value(-30000.0, scale=3.0) == "-30000"
    assert describe_value(math.nan, 1.0) == "NaN" and describe_value(-math.inf, 1.0) == "-inf"



def test_a_test_failing_on_values_that_vary_is_described_and_a_steady_failure_quoted() -> None:
    """The runner seeds every test alike and re-runs a failing one: a failure whose text
    changes between runs (here: a tail the 'kernel' fills from a counter, standing in for
    memory it never wrote) is described; a steady wrong value is quoted as before."""
    import torch

    calls = {"n": 0}

    def leaky(x: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        out = x * 2
        out[-1] = 0.5 * calls["n"]  # a different plausible-looking value on every call
        return out

    def steady(x: torch.Tensor) -> torch.Tensor:
        return x * 2 + 1

    tests = ("import torch\n\n\ndef test_double():\n    x = torch.randn(8)\n    out = f(x)\n    expected = x * 2\n"
             "    assert torch.allclose(out, expected)\n")
    varying = run_test_functions(leaky, "f", tests, "cpu")
    assert len(varying) == 1 and not varying[0].passed and VARYING in varying[0].message
    assert calls["n"] == 1 + RERUNS  # the first run and its re-runs
    again = run_test_functions(leaky, "f", tests, "cpu")
    assert again[0].message == varying[0].message
    quoted = run_test_functions(steady, "f", tests, "cpu")
    assert "out and expected (shape (8,)) differ at 8 of 8 elements; first at index (0,): out = " in quoted[0].message
    assert VARYING not in quoted[0].message

    def huge(x: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        out = x * 2
        out[3] = 1e20 * calls["n"]  # garbage far beyond the answer's magnitude: described, never quoted
        return out

    described = run_test_functions(huge, "f", tests, "cpu")
    assert "first at index (3,): out = garbage" in described[0].message and "e+20" not in described[0].message


def test_a_wrong_result_whose_text_varies_between_rejudgings_is_described() -> None:
    wrong = Verdict("wrong_result", "output: 3/8 elements outside atol; first at flat index 5: got 2.5 (first run)",
                    "visible-n8", 2.0, 1.0)
    asked: list[str] = []

    def same(name: str) -> Verdict:
        asked.append(name)
        return wrong

    assert steady_verdict(wrong, same, "cpu") == wrong and asked == ["visible-n8"] * RERUNS
    texts = iter(["got 2.5", "got 2.5", "got 7.1", "got 2.5"])
    varying = steady_verdict(wrong, lambda name: Verdict("wrong_result", f"output: {next(texts)}", name), "cpu")
    assert varying.kind == "wrong_result" and varying.failing_case == "visible-n8"
    assert varying.message == f"output: {VARYING}" and varying.max_abs_err is None
    assert steady_verdict(wrong, lambda name: None, "cpu") == wrong  # the case cannot be judged alone
    crash = Verdict("runtime_error", "boom", "visible-n8")
    assert steady_verdict(crash, same, "cpu") == crash and len(asked) == RERUNS  # only wrong results are re-judged


def test_a_methods_tests_hand_the_kernel_copies_followed_by_nan() -> None:
    """Past the end of what a method's own test passes, the kernel reads NaN in every process
    (not whatever the heap holds there: a flip reading past its row quoted other values from
    one process to the next); a tensor the entry point writes into reaches the test filled."""
    import torch

    seen: list[float] = []

    def reads_one_past_the_end(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        beyond = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), x.storage_offset(), (x.numel() + 1,), (1,))
        seen.append(float(beyond[-1]))
        out.copy_(x * 2)
        return out

    tests = ("import torch\n\n\ndef test_double():\n    x = torch.arange(6, dtype=torch.float32)\n"
             "    out = torch.zeros(6)\n    f(x, out)\n    assert torch.equal(out, x * 2)\n")
    (outcome,) = run_test_functions(reads_one_past_the_end, "f", tests, "cpu")
    assert outcome.passed, outcome.message
    assert len(seen) == 1 and math.isnan(seen[0])


def test_a_failing_tests_index_is_unravelled_in_row_major_order() -> None:
    """The index quoted for a test's first differing element, without torch.unravel_index
    (whose first call imports sympy in a fresh candidate process)."""
    import torch

    from judge.candidate.internal_tests import _unravel

    for shape in [(3, 4, 5), (7,), (1, 100), (2, 1, 3)]:
        for flat in range(torch.Size(shape).numel()):
            assert _unravel(flat, shape) == tuple(int(k) for k in torch.unravel_index(torch.tensor(flat), shape))

