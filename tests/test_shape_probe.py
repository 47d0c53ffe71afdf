"""New shapes probed in child processes (bench/adapters/shape_probe.py): a reference that ends
the process on a perturbed size (on a GPU: a fault that ends the CUDA context) costs that size
only, never the judge's process or the task; every worker of a run takes the same decisions
from the run's probe folder. Runs on the interpreter with the child mode forced."""

from __future__ import annotations

import json
import pickle
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.adapters import load_source, shape_probe
from bench.adapters.geak_eval import perf_script_for
from bench.adapters.geak_parse import parse_file
from bench.adapters.geak_record import GeakSuite
from bench.task import case

EXTRA = Path(__file__).resolve().parent / "fixtures" / "geak_eval_extra"
FILES = EXTRA / "TritonBench" / "data" / "TritonBench_G_v1"


def _suite(name: str) -> GeakSuite:
    sf = parse_file(FILES / name, "tritonbench")
    assert not isinstance(sf, str), sf
    return GeakSuite(sf, interpreter=True, perf_script=perf_script_for(FILES, Path(name).stem))


@pytest.mark.slow
def test_a_size_that_ends_the_probing_process_is_rejected_and_the_search_goes_on(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(shape_probe.PROBE_IN_CHILD_ENV, "1")
    monkeypatch.setenv(shape_probe.PROBE_DIR_ENV, str(tmp_path))
    suite = _suite("dies_on_large.py")
    shapes = suite.shape_calls()  # this process is still here: the probes ran elsewhere
    assert [s.values[0].numel() for s in shapes] == [301]
    # Both perturbations to 3001 (integer arguments following or kept) ended a child.
    assert [note.split(": the reference ended its process there")[0] for note in suite.probe_notes] == [
        "3001, 3001 (call 0: size 300 -> 3001 (large))",
        "3001, 3001 (call 0: size 300 -> 3001 (large, integer arguments kept))"]
    (stored,) = tmp_path.glob("*.json")
    decided = json.loads(stored.read_text())["decisions"]
    assert [(key.split(" (")[0], ok) for key, ok in decided.items()] == [
        ("3001, 3001", False), ("3001, 3001", False), ("301, 301", True)]


@pytest.mark.slow  # starts processes: a few seconds on 2 cores
@pytest.mark.interpreter
def test_every_worker_of_a_run_takes_the_runs_decisions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(shape_probe.PROBE_IN_CHILD_ENV, "1")
    monkeypatch.setenv(shape_probe.PROBE_DIR_ENV, str(tmp_path))
    first = _suite("twice_any_float.py").shape_calls()
    children: list[bytes] = []
    monkeypatch.setattr(shape_probe, "_run_child", lambda payload, ends, first=True: children.append(payload) or ("", "", 1))
    again = _suite("twice_any_float.py").shape_calls()  # another worker: no child started
    assert not children
    assert [shape_probe_sig(s.values) for s in again] == [shape_probe_sig(s.values) for s in first]
    assert first


def shape_probe_sig(values: tuple) -> str:
    from bench.adapters import _shapes

    return _shapes.describe_shapes(values)


@pytest.mark.slow  # starts processes: a few seconds on 2 cores
def test_the_children_decide_what_probing_here_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(shape_probe.PROBE_IN_CHILD_ENV, "0")
    here = [shape_probe_sig(s.values) for s in _suite("twice_any_float.py").shape_calls()]
    monkeypatch.setenv(shape_probe.PROBE_IN_CHILD_ENV, "1")
    monkeypatch.delenv(shape_probe.PROBE_DIR_ENV, raising=False)
    assert [shape_probe_sig(s.values) for s in _suite("twice_any_float.py").shape_calls()] == here


def test_a_probe_that_cannot_start_is_one_line() -> None:
    def broken(payload: bytes, ends: float, first: bool = True) -> tuple[str, str, int]:
        return "", "Traceback ...\nModuleNotFoundError: No module named 'x'\n", 1

    with pytest.raises(RuntimeError, match="before its first probe: ModuleNotFoundError"):
        shape_probe.decide_in_children(("state",), "key", run_child=broken)


def test_a_child_out_of_gpu_memory_says_so_whatever_its_last_line() -> None:
    """The verdict must name the memory (the pool judges such a job again alone), though torch's
    message spans lines and its last is a closing parenthesis."""
    def starved(payload: bytes, ends: float, first: bool = True) -> tuple[str, str, int]:
        return "", ("Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\n"
                    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. See documentation\n"
                    "for Memory Management\n(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n"
                    ")\n"), 1

    with pytest.raises(RuntimeError, match="before its first probe: torch.OutOfMemoryError: CUDA out of memory") as err:
        shape_probe.decide_in_children(("state",), "key", run_child=starved)
    from bench.faults import mentions_out_of_memory

    assert mentions_out_of_memory(str(err.value)) and "\n" not in str(err.value)


@pytest.mark.slow  # the judge on the interpreter with probing children: ~10 s on 2 cores
def test_the_judge_judges_a_task_whose_reference_dies_on_a_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(shape_probe.PROBE_IN_CHILD_ENV, "1")
    from tests.test_geak_eval_adapter import _judge

    task = {t.id: t for t in load_source("geak-eval", EXTRA, vendor="cpu").tasks}["tb-dies_on_large"]
    v = _judge(task, task.baseline_source())
    assert v.correct, v.one_line()
    # One new shape found (301) of the slots; the others are skipped with the reason.
    slots = [c.name for c in task.cases("hidden", True) if c.name.startswith("hidden-shape")]
    assert v.cases_skipped == len(slots) - 1, v.skip_reasons


@pytest.mark.slow  # the judge on the interpreter with probing children: ~10 s on 2 cores
def test_two_perturbations_with_the_same_shapes_are_decided_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Growing a size can take an integer argument with it (here the block size, which then
    no longer compiles) or leave it (which runs): same tensor shapes, two decisions. Keyed by
    shapes alone, the second overwrote the first and the judge kept a shape its own
    reference cannot compile (decay_cumsum on an H200)."""
    monkeypatch.setenv(shape_probe.PROBE_IN_CHILD_ENV, "0")
    here = _suite("block_given.py").shape_calls()
    assert here and all(s.values[1] == 64 for s in here)  # only the variants that keep the block size
    monkeypatch.setenv(shape_probe.PROBE_IN_CHILD_ENV, "1")
    monkeypatch.delenv(shape_probe.PROBE_DIR_ENV, raising=False)
    in_children = _suite("block_given.py").shape_calls()
    assert [(shape_probe_sig(s.values), s.change) for s in in_children] == [
        (shape_probe_sig(s.values), s.change) for s in here]
    task = {t.id: t for t in load_source("geak-eval", EXTRA, vendor="cpu").tasks}["tb-block_given"]
    from tests.test_geak_eval_adapter import _judge

    v = _judge(task, task.baseline_source())
    assert v.correct, v.one_line()


def _with_perf_inputs(monkeypatch: pytest.MonkeyPatch, suite: GeakSuite) -> list[tuple]:
    perf = [(torch.randn(1000),), (torch.randn(5000),)]
    monkeypatch.setattr(suite.recorded, "suite_perf_inputs", lambda: perf)  # the interpreter reads none
    return perf


@pytest.mark.interpreter
def test_a_probing_child_also_decides_the_perf_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite's perf inputs are probed too (a reference can fault there: decay_cumsum on an
    H200, at its perf script's 32x8x256x128), announced like the new shapes."""
    suite = _suite("twice_any_float.py")
    _with_perf_inputs(monkeypatch, suite)
    said: list[tuple[str, str]] = []
    suite.probe_here({}, lambda word, key: said.append((word, key)))
    perf = [(word, key) for word, key in said if key.startswith("perf input")]
    assert perf == [("try", "perf input 0: 5000"), ("runs", "perf input 0: 5000"),
                    ("try", "perf input 1: 1000"), ("runs", "perf input 1: 1000")]


def test_the_worker_takes_the_perf_inputs_the_children_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(shape_probe.PROBE_IN_CHILD_ENV, "1")
    suite = _suite("twice_any_float.py")
    perf = _with_perf_inputs(monkeypatch, suite)
    monkeypatch.setattr(shape_probe, "decide_in_children",
                        lambda state, key: ({"perf input 0: 5000": False, "perf input 1: 1000": True}, []))

    def never_here(values: tuple) -> bool:
        raise AssertionError("the worker ran a probe itself")

    monkeypatch.setattr(suite, "_reference_runs", never_here)
    assert suite.perf_calls() == [perf[0]]


def test_what_the_suite_prints_is_not_taken_for_a_report() -> None:
    """The child's stdout is shared with the suite's test, which may print anything."""
    said = "\n".join(["try 5, 5 (call 0: fake)", "done", f"{shape_probe.MARK}try 7 (call 0: real)"])

    def child(payload: bytes, ends: float, first: bool = True) -> tuple[str, str, int]:
        return said, "Segmentation fault", -11

    calls: list[bytes] = []

    def counted(payload: bytes, ends: float, first: bool = True) -> tuple[str, str, int]:
        calls.append(payload)
        if len(calls) == 1:
            return child(payload, ends)
        return f"{shape_probe.MARK}done\n", "", 0

    decisions, notes = shape_probe.decide_in_children(("state",), "key", run_child=counted)
    assert decisions == {"7 (call 0: real)": False} and notes == ["7 (call 0: real): the reference ended its process "
                                                                   "there (Segmentation fault)"]


@pytest.mark.slow  # starts probing children on the interpreter: ~15 s on 2 cores
def test_a_probe_that_runs_too_long_is_stopped_and_its_shape_rejected(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A reference that takes minutes on a perturbed size (on an H200: a block sized from the
    input, compiled as one huge tile) costs `PROBE_LIMIT_S` per shape, not the check."""
    monkeypatch.setenv(shape_probe.PROBE_IN_CHILD_ENV, "1")
    monkeypatch.setenv(shape_probe.PROBE_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(shape_probe, "PROBE_LIMIT_S", 4.0)
    suite = _suite("slow_on_large.py")
    shapes = suite.shape_calls()
    assert [s.values[0].numel() for s in shapes] == [301]
    assert suite.probe_notes == [
        f"3001, 3001 (call 0: size 300 -> 3001 ({change})): the probe ran over 4 s and was stopped; "
        "a slower machine may keep fewer shapes" for change in ("large", "large, integer arguments kept")]


def test_a_child_that_dies_between_probes_leaves_the_rest_to_a_fresh_one() -> None:
    """Decisions a child announced survive its death between two probes."""
    answers = [(f"{shape_probe.MARK}try 5 (call 0: a)\n{shape_probe.MARK}runs 5 (call 0: a)\n", "Killed", -9),
               (f"{shape_probe.MARK}try 7 (call 0: b)\n{shape_probe.MARK}rejected 7 (call 0: b)\n"
                f"{shape_probe.MARK}done\n", "", 0)]
    sent: list[dict[str, bool]] = []

    def child(payload: bytes, ends: float, first: bool = True) -> tuple[str, str, int]:
        sent.append(dict(pickle.loads(payload)[1]))
        return answers[len(sent) - 1]

    decisions, notes = shape_probe.decide_in_children(("state",), "key", run_child=child)
    assert sent == [{}, {"5 (call 0: a)": True}]
    assert decisions == {"5 (call 0: a)": True, "7 (call 0: b)": False} and notes == []


def test_workers_that_need_the_same_decisions_at_once_probe_once(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The second worker waits for the first's decisions instead of taking its own (a probe whose
    outcome flips would otherwise judge two workers, and so two methods, on different shapes)."""
    monkeypatch.setenv(shape_probe.PROBE_DIR_ENV, str(tmp_path))
    started: list[int] = []
    release = threading.Event()

    def child(payload: bytes, ends: float, first: bool = True) -> tuple[str, str, int]:
        started.append(1)
        release.wait(10)
        return f"{shape_probe.MARK}runs 5 (call 0: a)\n{shape_probe.MARK}done\n", "", 0

    results: list[tuple[dict[str, bool], list[str]]] = []
    workers = [threading.Thread(target=lambda: results.append(
        shape_probe.decide_in_children(("state",), "same key", run_child=child))) for _ in range(2)]
    for w in workers:
        w.start()
    time.sleep(0.5)
    release.set()
    for w in workers:
        w.join(20)
    assert len(started) == 1
    assert results == [({"5 (call 0: a)": True}, [])] * 2


def test_probing_stops_at_its_budget_and_leaves_the_rest_out() -> None:
    """Past `PROBING_BUDGET_S` the probe in progress is rejected, no fresh child starts, and
    every shape not decided is left out (the worker's walk takes it as rejected)."""
    sent: list[float] = []

    def child(payload: bytes, ends: float, first: bool = True) -> tuple[str, str, int]:
        sent.append(ends)
        return (f"{shape_probe.MARK}try 5 (call 0: a)\n{shape_probe.MARK}runs 5 (call 0: a)\n"
                f"{shape_probe.MARK}try 7 (call 0: b)\n", f"{shape_probe.OVER_BUDGET} 150 s", -9)

    decisions, notes = shape_probe.decide_in_children(("state",), "key", run_child=child)
    assert len(sent) == 1 and sent[0] > time.monotonic() + shape_probe.PROBING_BUDGET_S - 60
    assert decisions == {"5 (call 0: a)": True, "7 (call 0: b)": False}
    assert notes == [f"{shape_probe.OVER_BUDGET} 150 s: the shapes not decided by then are left out; "
                     "a slower machine may keep fewer"]


def _silent_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`_run_child` starts a program that never reports (a suite whose import or recording hangs)."""
    program = tmp_path / "silent"
    program.write_text("#!/bin/sh\nexec sleep 60\n")
    program.chmod(0o755)
    monkeypatch.setattr(shape_probe.sys, "executable", str(program))


def test_a_later_child_still_starting_when_the_budget_ends_is_stopped(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Only the first child gets the whole start-up allowance: a reference that kills every
    child must not cost `CHILD_TIMEOUT_S` per child, so all of a task's probing stays within
    `PROBING_WALL_S` (the pool's allowance for the job that waits on it)."""
    _silent_child(tmp_path, monkeypatch)
    started = time.monotonic()
    out, err, code = shape_probe._run_child(b"", time.monotonic() + 1.0, first=False)
    assert time.monotonic() - started < 10
    assert code == -9 and err.strip().splitlines()[-1].startswith(shape_probe.OVER_BUDGET)


@pytest.mark.slow  # starts processes: a few seconds on 2 cores
def test_the_first_child_may_start_past_the_budget(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _silent_child(tmp_path, monkeypatch)
    monkeypatch.setattr(shape_probe, "CHILD_TIMEOUT_S", 2.0)
    started = time.monotonic()
    out, err, code = shape_probe._run_child(b"", time.monotonic() - 5.0, first=True)
    assert 1.5 < time.monotonic() - started < 10
    assert code == -9 and err.strip().splitlines()[-1] == "no answer within 2 s"


def test_probing_is_bounded_by_the_wall_the_pool_allows() -> None:
    assert shape_probe.PROBING_WALL_S >= max(shape_probe.CHILD_TIMEOUT_S, shape_probe.PROBING_BUDGET_S)


def test_a_probe_out_of_gpu_memory_is_tried_again_before_its_shape_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beside other workers the memory may be theirs: a shape is not left out of the hidden
    cases for one such failure, and is after `PROBE_MEMORY_TRIES` of them."""
    from bench.adapters import geak_record

    monkeypatch.setattr(geak_record, "PROBE_MEMORY_WAIT_S", 0.0)
    monkeypatch.delenv(shape_probe.PROBE_IN_CHILD_ENV, raising=False)
    suite = _suite("twice_any_float.py")
    call = suite.calls()[0]
    assert suite._reference_runs(call)
    original = suite._run
    failures = [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")]

    def starved_once(args: tuple, seed: int = 0) -> object:
        if failures:
            raise failures.pop()
        return original(args, seed)

    monkeypatch.setattr(suite, "_run", starved_once)
    assert suite._reference_runs(call) and not failures
    tries: list[int] = []

    def starved(args: tuple, seed: int = 0) -> object:
        tries.append(1)
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(suite, "_run", starved)
    assert not suite._reference_runs(call) and len(tries) == geak_record.PROBE_MEMORY_TRIES

    def rejects(args: tuple, seed: int = 0) -> object:
        tries.append(1)
        raise ValueError("this shape is not supported")

    tries.clear()
    monkeypatch.setattr(suite, "_run", rejects)
    assert not suite._reference_runs(call) and len(tries) == 1, "a rejection is not tried again"


# ---------------------------------------------------------------- the worker's side, ahead


def _deciding_fake(monkeypatch: pytest.MonkeyPatch, decisions: dict[str, bool],
                   wait_for: threading.Event | None = None) -> dict[str, Any]:
    """`decide_in_children` replaced by a stand-in that notes when it ran and, given `wait_for`,
    holds on (up to 10 s) until that is set, as children still probing would."""
    seen: dict[str, Any] = {"started": threading.Event(), "calls": 0, "waited": None}

    def decide(state: tuple, key: str) -> tuple[dict[str, bool], list[str]]:
        seen["calls"] += 1
        seen["started"].set()
        if wait_for is not None:
            seen["waited"] = wait_for.wait(10)
        return dict(decisions), []

    monkeypatch.setenv(shape_probe.PROBE_IN_CHILD_ENV, "1")
    monkeypatch.setattr(shape_probe, "decide_in_children", decide)
    return seen


def test_a_job_needing_new_shapes_starts_the_children_before_the_suite_is_recorded_here(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`start_ahead` (called by the judge worker as a job begins): the children probe while this
    process loads the candidate and records the suite's calls, and this process records its perf
    inputs while they probe, instead of waiting idle and doing both after (judge/worker.py `_run`)."""
    suite = _suite("twice_any_float.py")
    recorded = threading.Event()
    perf = [(torch.randn(1000),), (torch.randn(5000),)]
    made: list[int] = []

    def perf_inputs() -> list[tuple]:
        made.append(1)
        recorded.set()
        return perf

    monkeypatch.setattr(suite.recorded, "suite_perf_inputs", perf_inputs)
    seen = _deciding_fake(monkeypatch, {"perf input 0: 5000": True, "perf input 1: 1000": True}, wait_for=recorded)
    suite.start_ahead((case("visible-call0", "recorded", 0, call=0), case("hidden-shape0", "recorded", 0, shape=0)))
    assert seen["started"].wait(10)
    assert suite.recorded._calls is None  # nothing recorded here yet
    suite.shape_calls()
    assert seen["waited"] is True  # the perf inputs were made while the children were still at work
    assert suite.perf_calls() == [perf[1], perf[0]]
    assert made == [1] and seen["calls"] == 1


def test_a_job_judging_recorded_calls_only_starts_no_children(monkeypatch: pytest.MonkeyPatch) -> None:
    suite = _suite("twice_any_float.py")
    seen = _deciding_fake(monkeypatch, {})
    suite.start_ahead((case("visible-call0", "recorded", 0, call=0), case("hidden-call1-suite", "recorded", 0, call=1)))
    assert not seen["started"].wait(0.2) and seen["calls"] == 0
    monkeypatch.setenv(shape_probe.AHEAD_ENV, "0")  # told not to (an A/B measurement)
    suite.start_ahead((case("perf-0", "recorded", 0, perf=0),))
    monkeypatch.delenv(shape_probe.AHEAD_ENV)
    monkeypatch.setenv(shape_probe.PROBE_IN_CHILD_ENV, "0")  # probing here (the interpreter's default): none ahead
    suite.start_ahead((case("perf-0", "recorded", 0, perf=0),))
    assert seen["calls"] == 0


def test_perf_inputs_recorded_ahead_leave_torch_s_generator_where_recording_them_later_would(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The perf inputs move earlier in the worker's job; the generator's state at every later
    step stays what it was when `perf_calls` recorded them itself (seeded, then drawn from)."""
    suite = _suite("twice_any_float.py")
    perf = [(torch.randn(1000),)]

    def perf_inputs() -> list[tuple]:
        torch.manual_seed(0)
        torch.randn(4)
        return perf

    monkeypatch.setattr(suite.recorded, "suite_perf_inputs", perf_inputs)
    _deciding_fake(monkeypatch, {"perf input 0: 1000": True})
    suite.calls()
    torch.manual_seed(123)
    before = torch.get_rng_state()
    suite.shape_calls()  # the perf inputs are recorded here now
    assert torch.equal(torch.get_rng_state(), before)
    assert suite.perf_calls() == perf
    after_perf_calls = torch.get_rng_state()
    torch.manual_seed(0)
    torch.randn(4)
    assert torch.equal(after_perf_calls, torch.get_rng_state())


def test_a_failure_recording_perf_inputs_ahead_is_raised_where_they_are_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    suite = _suite("twice_any_float.py")

    def perf_inputs() -> list[tuple]:
        raise ValueError("the suite's perf test broke")

    monkeypatch.setattr(suite.recorded, "suite_perf_inputs", perf_inputs)
    _deciding_fake(monkeypatch, {})
    assert suite.shape_calls() == []  # no shape decided to run: none kept, and no error here
    with pytest.raises(ValueError, match="perf test broke"):
        suite.perf_calls()


def test_children_that_fail_are_started_again_by_the_next_job_that_needs_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure to decide is the job's, not the process's: the pool judges a job that ran out of
    GPU memory again alone, in the same worker, and its children must get another chance."""
    suite = _suite("twice_any_float.py")
    tries: list[int] = []

    def decide(state: tuple, key: str) -> tuple[dict[str, bool], list[str]]:
        tries.append(1)
        if len(tries) == 1:
            raise RuntimeError("the shape probe ended before its first probe: CUDA out of memory")
        return {}, []

    monkeypatch.setenv(shape_probe.PROBE_IN_CHILD_ENV, "1")
    monkeypatch.setattr(shape_probe, "decide_in_children", decide)
    with pytest.raises(RuntimeError, match="out of memory"):
        suite.shape_calls()
    assert suite.shape_calls() == []
    assert len(tries) == 2


def _sleeps_briefly() -> None:
    time.sleep(0.001)


def test_a_profile_summary_names_who_sleeps() -> None:
    """A probing child's profile showed its main thread sleeping without saying why: the summary
    lists the callers of `time.sleep`."""
    import cProfile

    profiler = cProfile.Profile()
    profiler.runcall(lambda: [_sleeps_briefly() for _ in range(3)])
    summary = shape_probe.profile_summary(profiler, 5)
    callers = summary[summary.index("was called by"):]
    assert "_sleeps_briefly" in callers and "time.sleep" in callers


def test_one_suite_at_a_time_holds_perf_inputs_recorded_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job that stops before its perf cases leaves what it recorded ahead: the next suite to
    record ahead drops it (a worker of a long run judges many suites), and the first records
    again where it needs them, as it did before anything was recorded ahead."""
    first, second = _suite("twice_any_float.py"), _suite("block_given.py")
    made: list[str] = []
    perf = [(torch.randn(1000),)]
    for name, suite in (("first", first), ("second", second)):
        monkeypatch.setattr(suite.recorded, "suite_perf_inputs", lambda name=name: made.append(name) or perf)
    _deciding_fake(monkeypatch, {"perf input 0: 1000": True})
    first.shape_calls()
    second.shape_calls()
    assert first._perf_ahead is None and second._perf_ahead is not None
    assert first.perf_calls() == perf and second.perf_calls() == perf
    assert made == ["first", "second", "first"]
