"""The benchmark scripts still run, at toy sizes on the CPU, so the figures they print on a GPU
cannot rot unnoticed. Their timings are meaningless here; only that they run, agree with
themselves and report what they claim to is checked."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT, cli_env, script_module

pytestmark = pytest.mark.slow  # worker processes or whole runs: minutes on 2 cores


def _benchmark(name: str) -> Any:
    """A benchmark script imported as a module (they are scripts, not a package)."""
    import importlib

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def _script(name: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *args], cwd=str(ROOT), env=cli_env(),
                          capture_output=True, text=True, timeout=timeout)


def test_throughput_benchmark_runs_both_harnesses_with_identical_verdicts(tmp_path: Path) -> None:
    out = tmp_path / "thr.json"
    proc = _script("bench_evaluator_throughput.py", "--n", "3", "--tasks", "vector_add", "--case-set", "visible",
                   "--workers", "1", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    result = json.loads(out.read_text())
    assert result["n"] == 3 and result["identical"] is True and result["mismatches"] == []
    assert result["triton_cache"] == "fresh" and result["distinct_sources"] == 3
    assert result["pool_seconds"] > 0 and result["naive_seconds"] > 0
    assert result["bytecode_cache"] in ("as installed", "primed")  # auto: primed only where torch has none
    naive_phases = result["naive_phase_seconds"]  # one at a time: the processes' walls add up to the side's
    assert {"imports", "load", "judge"} <= set(naive_phases) and naive_phases["judge"] > 0
    assert sum(naive_phases.values()) <= result["naive_seconds"] + 0.1
    assert result["reuse_ceiling"] == pytest.approx(sum(naive_phases.values()) / naive_phases["judge"])
    assert "process reuse ceiling:" in proc.stdout
    assert sum(result["verdict_counts"].values()) == 3 and result["verdict_counts"].get("correct", 0) >= 1
    assert "identical verdict kinds: yes" in proc.stdout
    assert "naive: 3/3 in" in proc.stdout  # progress, which a cut-off naive side leaves in the JSON too


def test_repeatability_benchmark_needs_a_gpu() -> None:
    proc = _script("bench_timing_repeatability.py", "--runs", "2", timeout=300)
    assert proc.returncode == 2 and "GPU" in proc.stderr + proc.stdout


def test_feedback_timing_benchmark_needs_a_gpu() -> None:
    proc = _script("bench_feedback_timing.py", "--tasks", "vector_add", timeout=300)
    assert proc.returncode == 2 and "needs a GPU" in proc.stderr


def test_feedback_timing_benchmark_judges_agreement_case_by_case() -> None:
    b = _benchmark("bench_feedback_timing")
    assert b.agreement("faster", 1.3, 1.2, 1.4, 0.05) == "agree"
    assert b.agreement("faster", 0.98, 0.97, 0.99, 0.05) == "contradiction"  # the full interval excludes it
    assert b.agreement("slower", 1.01, 0.99, 1.03, 0.05) == "disagree"
    assert b.agreement("equivalent", 1.02, 1.0, 1.04, 0.05) == "agree"
    assert b.agreement(None, 1.5, 1.4, 1.6, 0.05) == "undecided"
    assert b.classify_full(1.02, 0.99, 1.05, 0.05) == "equivalent"


def test_stats_benchmark_runs_at_a_small_size() -> None:
    proc = _script("bench_stats.py", "--tasks", "30", "--samples", "10", "--resamples", "200", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "30 tasks x 3 methods x 10 samples" in proc.stdout and "(target < 10 s): OK" in proc.stdout


def test_the_gate_model_runs_every_setting_and_says_it_is_a_model(tmp_path: Path) -> None:
    out = tmp_path / "model.json"
    proc = _script("gate_policy_model.py", "--workers", "2", "--scale", "0.002", "--repeats", "1", "--json", str(out),
                   timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("A MODEL of the gate")
    record = json.loads(out.read_text())
    assert record["model"] is True and len(record["rows"]) == len(_benchmark("gate_policy_model").SETTINGS)
    assert all(r["wall_s"] > 0 and 0 <= r["gate_share"] < 1 for r in record["rows"])


def test_modelio_concurrency_benchmark_runs_against_serve_sim() -> None:
    proc = _script("bench_modelio_concurrency.py", "--latency", "0.5", "--concurrency", "8", "--serial-calls", "2",
                   "--calls-per-caller", "1", timeout=300)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # 1: the speed goal (for 32 callers) missed
    assert "serial:        2 calls" in proc.stdout and "concurrent:    8 calls" in proc.stdout
    assert "peak in flight 8" in proc.stdout  # the client really kept every caller's request in flight


def test_compare_benchmark_runs_the_seven_task_command_at_toy_size(tmp_path: Path) -> None:
    """bench_compare_gpu.py at toy size on the CPU: two same-seed runs of a two-task command,
    their wall time, phase seconds per method, CPU use and the identical-submission share."""
    out = tmp_path / "compare.json"
    proc = _script("bench_compare_gpu.py", "--device", "cpu", "--seven-tasks", "vector_add,flip", "--budget", "2",
                   "--skip-full", "--determinism", "2", "--workers", "1", "--sample-s", "0.2", "--spares", "2",
                   "--steps", "--out", str(tmp_path / "runs"), "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    record = json.loads(out.read_text())
    assert record["spares"] == "2"  # two candidate processes forked ahead per worker, judged alike
    assert record["contexts_gated"] is True  # contexts under a ticket unless --ungated-contexts
    runs = record["seven_task_runs"]
    assert len(runs) == 2 and record["full_suite"] is None
    for run in runs:
        assert run["units"] == 6 and run["calls"] == 12 and run["wall_s"] > 0 and run["evaluations"] >= 2
        assert {r["method"] for r in run["phases"]} == {"direct", "geak", "reflexion"}
        assert all(r["correctness_s"] > 0 and r["timing_s"] == 0 for r in run["phases"])  # nothing timed on a CPU
        assert run["utilisation"]["cpu_percent"]["samples"] >= 1
        assert len(run["final_submissions"]) == 6
        # --steps: every job the worker judged has its line, the spare's waits among its steps
        steps = {r["kind"]: r for r in run["steps"]}
        assert steps.keys() >= {"visible", "hidden"} and sum(r["jobs"] for r in steps.values()) >= run["evaluations_judged"]
        assert 0 < run["evaluations_judged"] <= run["evaluations"]
        starts = steps.pop("worker_start")  # the worker's start, once: its imports, template and helpers
        assert starts["jobs"] == 1 and starts["wall_s"] > 0
        assert all(r["wall_s"] > 0 and r["unnamed_s"] >= 0 and "close" in r for r in steps.values())
        assert sum(run["hidden_verdicts"].values()) >= 1 and isinstance(run["runtime_errors"], list)
        swept = run["occupancy"]  # one worker: its jobs never overlap, and it is busy for some of the span
        assert swept["jobs"] == run["evaluations_judged"] and swept["workers"] == 1
        assert 0 < swept["mean_running"] <= 1.0 and swept["span_s"] <= run["wall_s"]
    assert record["identical_submission_share"] == 1.0 and record["differences"] == {}
    assert all(run["visible"].keys() <= {"vector_add", "flip"} and run["visible"] for run in runs)
    assert "identical final submissions over 2 runs with seed 0: 100.0% of units" in proc.stdout
    assert "evaluation seconds by phase" in proc.stdout
    assert "the GPU held alone to time (gpu:alone, the timing lane's busy time): 0.0 s of" in proc.stdout
    assert "the workers' time outside the queue: " in proc.stdout and "correctness " in proc.stdout
    assert "jobs over time (capacity- or chain-bound): " in proc.stdout and "every one of the 1 workers busy" in proc.stdout


def test_the_timing_lanes_busy_time_sums_the_alone_step_over_every_job() -> None:
    bench = _compare_benchmark()
    rows = [{"kind": "visible timed", "jobs": 10, "gpu:alone": 0.25, "close": 0.01},
            {"kind": "hidden timed", "jobs": 4, "gpu:alone": 1.5}, {"kind": "hidden", "jobs": 50, "close": 0.02}]
    assert bench.lane_seconds(rows) == pytest.approx(10 * 0.25 + 4 * 1.5)
    assert bench.lane_seconds([]) == 0.0
    kinds = [{"kind": "hidden", "jobs": 3, **{c: 0.0 for c in bench.PHASE_COLUMNS}, "queue_s": 9.0,
              "correctness_s": 1.5, "gate_s": 0.5},
             {"kind": "visible timed", "jobs": 2, **{c: 0.0 for c in bench.PHASE_COLUMNS}, "timing_s": 0.25,
              "gate_s": 1.0}]
    spent = bench.worker_seconds(kinds)
    assert "queue_s" not in spent and spent["correctness_s"] == 4.5 and spent["gate_s"] == 3.5
    assert spent["timing_s"] == 0.5 and sum(spent.values()) == pytest.approx(8.5)


def test_the_compare_benchmark_refuses_a_spare_count_out_of_range(tmp_path: Path) -> None:
    proc = _script("bench_compare_gpu.py", "--device", "cpu", "--spares", "0", "--out", str(tmp_path))
    assert proc.returncode == 2 and "--spares must be from 1 to 4" in proc.stderr


@pytest.mark.slow
def test_the_compare_benchmark_measures_a_full_suite_run_stopped_at_its_time_limit(tmp_path: Path) -> None:
    """`--full-limit-s`: the run is stopped as Ctrl-C stops it and measured as far as it got (a
    full suite outlasts one device command), said so in the record and the output. Started with
    SIGINT ignored, as a background job or a CI runner starts it (the first version of this
    limit then never fired: the run went on to its end)."""
    out = tmp_path / "full.json"
    args = ["--device", "cpu", "--skip-seven", "--full-budget", "20", "--full-limit-s", "15", "--workers", "1",
            "--sample-s", "0.5", "--out", str(tmp_path / "runs"), "--json", str(out)]
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_compare_gpu.py"), *args], cwd=str(ROOT),
                          env=cli_env(), capture_output=True, text=True, timeout=600,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    full = json.loads(out.read_text())["full_suite"]
    assert full["finished"] is False and full["units"] < full["units_total"]
    assert 15 <= full["wall_s"] < 120
    assert f"STOPPED at its time limit: {full['units']} of {full['units_total']} units finished" in proc.stdout
    assert (Path(full["run_dir"]) / "store.sqlite").exists()


def _compare_benchmark() -> Any:
    """benchmarks/bench_compare_gpu.py as a module."""
    return script_module("bench_compare_gpu", "benchmarks")


def test_the_compare_benchmark_explains_units_that_differ_between_runs() -> None:
    """Each differing unit lists, per run, every final any run chose, with what that run's
    visible evaluation said of it (how a speed-based choice flipped)."""
    bench = _compare_benchmark()

    def run(final: str, speeds: dict[str, list[object]]) -> object:
        return bench.Measured("r", "c", 1.0, "d", 2, 2, 2, [], {}, {"direct/flip/0": final, "geak/flip/0": "s"},
                              {"flip": speeds})

    a, b = run("h1", {"h1": ["correct", 1.1, 1.0, 1.2], "h2": ["correct", 1.0, 0.9, 1.1]}), \
        run("h2", {"h1": ["correct", 0.9, 0.8, 1.0], "h2": ["correct", 1.2, 1.1, 1.3]})
    assert bench.identical_share([a, b]) == 0.5
    a.visible_cases = {"flip": {"h1": [{"case": "perf", "method": "graph", "launches": 64}]}}
    assert bench.differences([a, b]) == {"direct/flip/0": [
        {"final": "h1", "visible": {"h1": ["correct", 1.1, 1.0, 1.2], "h2": ["correct", 1.0, 0.9, 1.1]},
         "cases": {"h1": [{"case": "perf", "method": "graph", "launches": 64}], "h2": None}},
        {"final": "h2", "visible": {"h1": ["correct", 0.9, 0.8, 1.0], "h2": ["correct", 1.2, 1.1, 1.3]},
         "cases": {"h1": None, "h2": None}}]}


def test_a_stored_timing_is_described_case_by_case() -> None:
    """What a determinism record keeps of each visible timing: per perf case, how it was timed
    and the medians (a unit that differs between runs shows which case moved, and whether its
    launch mode did)."""
    bench = _compare_benchmark()
    stored = json.dumps({"verdict": {"kind": "correct"}, "timing": {"cases": [
        {"case": "perf-n64K", "candidate_ms": [0.003, 0.002, 0.004], "baseline_ms": [0.0031, 0.0029],
         "method": "graph", "launches_per_sample": 128, "baseline_source": "reused", "decision": "equivalent"}]}})
    assert bench.case_timings(stored) == [
        {"case": "perf-n64K", "method": "graph", "launches": 128, "references": "reused", "decision": "equivalent",
         "samples": 3, "candidate_median_ms": 0.003, "baseline_median_ms": 0.003}]
    assert bench.case_timings(json.dumps({"verdict": {"kind": "wrong_result"}, "timing": None})) == []
    assert bench.case_timings("not json") == []


def test_throughput_benchmark_in_shards_combines_into_one_comparison(tmp_path: Path) -> None:
    """The naive side of P1's 200 hidden candidates outlasts one 10-minute device command: shards
    (`--range`, both sides of each in one sitting), then `--combine`."""
    common = ["--n", "3", "--tasks", "vector_add", "--case-set", "visible", "--workers", "1"]
    for name, shard in (("a.json", "0:2"), ("b.json", "2:3")):
        proc = _script("bench_evaluator_throughput.py", *common, "--range", shard, "--json", str(tmp_path / name))
        assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    proc = _script("bench_evaluator_throughput.py", "--combine", str(tmp_path / "b.json"), str(tmp_path / "a.json"),
                   "--json", str(tmp_path / "all.json"))
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    result = json.loads((tmp_path / "all.json").read_text())
    shards = [json.loads((tmp_path / n).read_text()) for n in ("a.json", "b.json")]
    assert result["identical"] is True and result["shards"] == [[0, 2], [2, 3]]
    assert result["naive_seconds"] == sum(s["naive_seconds"] for s in shards)
    assert result["pool_seconds"] == sum(s["pool_seconds"] for s in shards)
    assert "identical verdict kinds: yes" in proc.stdout
    bad = _script("bench_evaluator_throughput.py", "--combine", str(tmp_path / "a.json"))
    assert bad.returncode == 2 and "leave candidates out" in bad.stderr
    # One side per record: the pool over all three, the naive side with a cache it keeps.
    pool = _script("bench_evaluator_throughput.py", *common, "--skip-naive", "--json", str(tmp_path / "p.json"))
    naive = _script("bench_evaluator_throughput.py", *common, "--skip-pool", "--naive-cache", str(tmp_path / "cache"),
                    "--json", str(tmp_path / "n.json"))
    assert pool.returncode == 0 and naive.returncode == 0, pool.stderr[-2000:] + naive.stderr[-2000:]
    assert "pool :" not in naive.stdout and (tmp_path / "cache").is_dir()  # the interpreter writes no kernels there
    assert json.loads((tmp_path / "n.json").read_text())["naive_cache"] == "kept across shards"
    assert "naive_kinds" not in json.loads((tmp_path / "p.json").read_text())
    sides = _script("bench_evaluator_throughput.py", "--combine", str(tmp_path / "n.json"), str(tmp_path / "p.json"))
    assert sides.returncode == 0 and "identical verdict kinds: yes" in sides.stdout, sides.stdout + sides.stderr
    assert "process reuse ceiling:" in sides.stdout  # from the naive side's phases, whichever record has them
    neither = _script("bench_evaluator_throughput.py", *common, "--skip-naive", "--skip-pool")
    assert neither.returncode == 2 and "nothing to measure" in neither.stderr


def test_shards_must_cover_the_candidates_once() -> None:
    b = _benchmark("bench_evaluator_throughput")

    def shard(a: int, z: int, kinds: list[str], naive: list[str] | None = None, **other: object) -> dict[str, object]:
        return {"n": 3, "workers": 1, "case_set": "hidden", "tasks": ["t"], "triton_cache": "fresh", "range": [a, z],
                "pool_seconds": 1.0, "pool_kinds": kinds, "naive_seconds": 10.0, "naive_kinds": naive or kinds,
                **other}

    both = b.combine([shard(1, 3, ["wrong_result", "correct"]), shard(0, 1, ["correct"])])
    assert both["ratio"] == 10.0 and both["identical"] and both["shards"] == [[0, 1], [1, 3]]
    assert both["verdict_counts"] == {"correct": 2, "wrong_result": 1}
    differing = b.combine([shard(0, 1, ["correct"], ["timeout"]), shard(1, 3, ["wrong_result", "correct"])])
    assert not differing["identical"] and differing["mismatches"] == [(0, "correct", "timeout")]
    with pytest.raises(ValueError, match="overlap"):
        b.combine([shard(0, 2, ["correct", "wrong_result"]), shard(1, 3, ["wrong_result", "correct"])])
    with pytest.raises(ValueError, match="leave candidates out"):
        b.combine([shard(0, 1, ["correct"])])
    with pytest.raises(ValueError, match="another case_set"):
        b.combine([shard(0, 1, ["correct"]), shard(1, 3, ["correct"] * 2, case_set="visible")])


def test_a_pool_record_of_every_candidate_combines_with_naive_only_shards() -> None:
    """The pool over all candidates in one sitting (`--skip-naive`), the naive side in shards
    (`--skip-pool`): each side must cover every candidate once, whichever records it comes from."""
    b = _benchmark("bench_evaluator_throughput")
    same = {"n": 3, "workers": 1, "case_set": "hidden", "tasks": ["t"], "triton_cache": "fresh"}
    pool = {**same, "range": [0, 3], "pool_seconds": 3.0, "pool_kinds": ["correct", "wrong_result", "correct"]}
    naive_a = {**same, "range": [0, 2], "naive_seconds": 20.0, "naive_kinds": ["correct", "wrong_result"]}
    naive_b = {**same, "range": [2, 3], "naive_seconds": 13.0, "naive_kinds": ["timeout"]}
    result = b.combine([naive_b, pool, naive_a])
    assert result["ratio"] == 11.0 and result["pool_shards"] == [[0, 3]] and result["naive_shards"] == [[0, 2], [2, 3]]
    assert not result["identical"] and result["mismatches"] == [(2, "correct", "timeout")]
    with pytest.raises(ValueError, match="out of the naive side"):
        b.combine([pool, naive_a])
    with pytest.raises(ValueError, match="out of the pool side"):
        b.combine([naive_a, naive_b])
    assert "naive_phase_seconds" not in result and "pool_phase_seconds" not in result  # records without phases


def test_each_sides_phases_are_summed_over_the_records_that_measured_it() -> None:
    b = _benchmark("bench_evaluator_throughput")
    same = {"n": 3, "workers": 1, "case_set": "hidden", "tasks": ["t"], "triton_cache": "fresh"}
    pool = {**same, "range": [0, 3], "pool_seconds": 3.0, "pool_kinds": ["correct"] * 3,
            "pool_phase_seconds": {"correctness": 2.0, "start": 0.5}}
    naive_a = {**same, "range": [0, 2], "naive_seconds": 20.0, "naive_kinds": ["correct"] * 2,
               "naive_phase_seconds": {"imports": 12.0, "judge": 4.0}}
    naive_b = {**same, "range": [2, 3], "naive_seconds": 9.0, "naive_kinds": ["correct"],
               "naive_phase_seconds": {"imports": 6.0, "judge": 2.5, b.OUTSIDE_SCRIPT: 0.5}}
    result = b.combine([naive_a, pool, naive_b])
    assert result["naive_phase_seconds"] == {"imports": 18.0, "judge": 6.5, b.OUTSIDE_SCRIPT: 0.5}
    assert result["pool_phase_seconds"] == {"correctness": 2.0, "start": 0.5}
    older = {k: v for k, v in naive_b.items() if k != "naive_phase_seconds"}  # a record from before phases
    assert "naive_phase_seconds" not in b.combine([pool, naive_a, older])


@pytest.mark.slow
def test_the_lanes_benchmark_runs_on_the_cpu_and_records_the_ungated_experiment_as_not_run(tmp_path: Path) -> None:
    """bench_lanes_gpu.py on the CPU: part 1 (timing beside judging, gated and ungated
    contexts) needs a GPU and is recorded as not run; part 2, the main job at toy size, runs."""
    out = tmp_path / "lanes.json"
    proc = _script("bench_lanes_gpu.py", "--device", "cpu", "--seven-tasks", "vector_add", "--budget", "1",
                   "--ungated-contexts", "--sample-s", "0.5", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    record = json.loads(out.read_text())
    assert record["timing_beside_judging"] is None and record["timing_beside_judging_ungated_contexts"] is None
    assert "skipped (the CPU interpreter times nothing)" in proc.stdout
    assert record["seven_task_run"]["units"] == 3 and record["seven_task_run"]["calls"] == 3


def test_judge_profile_spans_split_each_call_between_the_judge_and_the_candidate_process(tmp_path: Path) -> None:
    """scripts/judge_profile.py --spans: warm evaluations with no profiler; every call the judge
    sent is counted, its wait for their replies lies inside the correctness phase, and the
    candidate process's own call steps come back per call."""
    out = tmp_path / "spans.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "judge_profile.py"), "--spans", "--tasks",
                           "vector_add", "--repeats", "2", "--case-set", "visible", "--json", str(out)],
                          cwd=str(ROOT), env=cli_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [row] = json.loads(out.read_text())
    from bench.registry import get_task

    cases = len(get_task("vector_add").cases("visible", True))
    assert row["verdict"] == "correct" and row["calls"] == 2 * 2 * cases  # two evaluations, two calls a case
    ms = row["per_call_ms"]
    assert 0 < ms["judge_waiting_for_calls"] <= ms["correctness"] and ms["judge_rest"] >= 0
    assert ms["candidate call:run_and_record"] > 0 and ms["candidate calls:handle"] >= ms["candidate call:run_and_record"]
    assert ms["candidate call:run_and_record:steady"] > 0
    assert 0 <= ms["candidate call:run_and_record:slow"] <= ms["candidate call:run_and_record"]
    assert "milliseconds per call" in proc.stdout


def test_judge_profile_small_cases_keep_only_the_goals_small_case_and_restore_the_sets() -> None:
    """`--small-cases` (issue 42's judged-call goal is for a small case): while entered, every
    task's sets hold only cases of at most SMALL_CASE_ELEMENTS elements, the visible ones kept
    and the large hidden ones gone; after, the full sets again."""
    from bench.registry import get_task

    profile = script_module("judge_profile")
    task = get_task("cumsum")
    full = task.cases("hidden", False)
    assert any(profile.case_elements(c) > profile.SMALL_CASE_ELEMENTS for c in full)
    with profile.small_cases_only():
        small = task.cases("hidden", False)
        assert small and all(profile.case_elements(c) <= profile.SMALL_CASE_ELEMENTS for c in small)
        assert set(task.visible) <= set(small) and len(small) < len(full)
        assert all(c.name.startswith(("visible", "hidden")) for c in small)  # no perf case is small
    assert task.cases("hidden", False) == full


def test_primed_bytecode_covers_what_both_sides_import_and_is_only_read_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bench_evaluator_throughput `prime_bytecode`: one process writes the bytecode of what both
    sides import (torch's and the judge's) into the folder; the environment it hands both sides
    reads that folder and never writes (the workers' own PYTHONDONTWRITEBYTECODE stays)."""
    import importlib.util

    import torch

    b = _benchmark("bench_evaluator_throughput")
    from judge.device import detect_target

    folder = tmp_path / "pycache"
    env = b.prime_bytecode(folder, b.make_candidates(["vector_add"], 1)[0], "visible",
                           detect_target(force_cpu=True), 300.0)
    assert env == {"PYTHONPYCACHEPREFIX": str(folder.resolve())}
    monkeypatch.setattr(sys, "pycache_prefix", str(folder.resolve()))  # where such a process looks
    for source in (torch.__file__, str(ROOT / "judge" / "oracle.py"), str(ROOT / "judge" / "candidate" / "server.py")):
        assert Path(importlib.util.cache_from_source(source)).exists(), source


@pytest.mark.parametrize(("calls", "evaluations", "errored", "why"), [
    (0, 0, 6, "no model call"), (12, 0, 0, "judged nothing"), (12, 9, 2, "2 of 6 units ended on an error"),
    (12, 9, 0, "")])
def test_a_compare_run_that_measured_something_else_is_not_believed(calls: int, evaluations: int, errored: int,
                                                                     why: str) -> None:
    """Issue 42: a run whose every unit failed at once (0 calls, 0 evaluations, a missing
    dependency) was reported as a finished measurement."""
    bench = _compare_benchmark()
    measured = bench.Measured("seven-task run 1", "compare", 5.8, "runs/x", 6, calls, evaluations, [], {},
                              errored_units=errored)
    assert (why in measured.dishonest()) if why else measured.dishonest() == ""


def test_the_load_estimate_judges_the_experts_correct_and_every_breaking_mutation_wrong() -> None:
    """Issue 42: its stand-in judge found a generic mutation (a dropped colon, whose replacement
    is a prefix of the original) in every source, so every source was a syntax error."""
    from bench.registry import suite_tasks
    from modelio.simulated import generic_mutations

    executor = _benchmark("estimate_compare_load").BugAwareExecutor()
    for task in suite_tasks("full"):
        expert = task.baseline_source()
        assert executor._verdict(task.id, expert)[0].kind == "correct", task.id
        for m in [*generic_mutations(expert), *(m for m in task.mutations if m.breaks)]:
            if m.find in expert:
                broken = expert.replace(m.find, m.replace, 1)
                assert executor._verdict(task.id, broken)[0].kind != "correct", (task.id, m.kind)


def test_the_worker_start_profile_times_each_part_in_a_fresh_process() -> None:
    """scripts/worker_start_profile.py on the CPU: torch's import, the judge's modules and the
    candidate template's start with its own steps, each measured (the helpers need a GPU)."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "worker_start_profile.py"), "--device", "cpu"],
                          cwd=str(ROOT), env=cli_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert float(report["torch import, no bytecode folder"]) > 0
    assert float(report["judge worker modules, torch already imported"]) >= 0
    template = json.loads(report["candidate template start"])
    assert template["seconds"] > 0 and "import torch" in template["steps"]


def test_the_judge_memory_probe_says_in_one_line_that_it_needs_a_gpu() -> None:
    """scripts/judge_memory_probe.py measures a judge worker's GPU memory; without a GPU it
    stops at once, non-zero, with one line saying so."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "judge_memory_probe.py"), "vector_add"],
                          cwd=str(ROOT), env=cli_env(CUDA_VISIBLE_DEVICES=""), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "judge_memory_probe: needs a GPU (torch sees none)"], proc.stderr[-2000:]

