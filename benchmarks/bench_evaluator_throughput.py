#!/usr/bin/env python
"""Evaluator throughput: this toolkit's persistent worker pool vs the naive harness.

The same N candidates (default 200: each task's expert baseline and every one of its
Mutations, cycled; so a mix of correct, broken and re-tuned kernels) are judged on the
hidden cases twice:

1. through `LocalPool` (persistent sandboxed workers, torch/triton imported once);
2. through a naive harness, the public harnesses' way: per candidate, write
   `candidate.py` and `candidate_test.py` into a fresh folder and run
   `python candidate_test.py` in a fresh subprocess. The test script calls the same
   `judge.oracle.judge_cases` (the candidate in the test script's own process, `LocalRunner`), so
   verdicts are comparable; a subprocess that times out is
   `timeout`, one that dies without printing a verdict is `crash`.

Both sides run `--workers` candidates at a time, so the ratio measures process reuse,
not parallelism. Each side starts from its own empty Triton cache (TRITON_CACHE_DIR), so
neither reuses kernels the other compiled; duplicates within a side hit its own cache, as
they would in a real run (`--triton-cache shared` keeps the user's cache for both). Where a
fresh interpreter finds no bytecode for torch (an image installed without it, read-only),
both sides read bytecode primed once into a folder of their own (`--bytecode-cache`): a
user's installation has it, and without it every naive process compiled torch from source.
Prints both throughputs, where each side's seconds go, the ratio, and whether the verdict
kinds are identical (listing any that differ). Goal on an H200 (issue 3): ratio >= 10.

Usage: python benchmarks/bench_evaluator_throughput.py [--n 200] [--workers W] [--tasks a,b]
       [--case-set hidden] [--timeout S] [--json OUT]
  The naive side of 200 hidden candidates outlasts one 10-minute sitting on an H200; in shards,
  both sides of each in one sitting (machines differ between sittings):
       ... --range 0:100 --json a.json;  ... --range 100:200 --json b.json;  ... --combine a.json b.json
  or the pool over all 200 in one sitting and the naive side in shards that share a Triton cache:
       ... --skip-naive --json p.json;  ... --skip-pool --naive-cache DIR --range 0:100 --json a.json;
       ... --skip-pool --naive-cache DIR --range 100:200 --json b.json;  ... --combine p.json a.json b.json
On a CPU-only machine it runs through the Triton interpreter (use a small --n).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.registry import get_task, suite_tasks  # noqa: E402
from judge.device import Target, default_device, detect_target  # noqa: E402
from runners.bytecode import installed_bytecode_found  # noqa: E402
from runners.pool import LocalPool, visible_devices  # noqa: E402
from runners.sizing import plan_workers  # noqa: E402
from runners.worker_process import scrubbed_env  # noqa: E402


@dataclass(frozen=True)
class Candidate:
    index: int
    task: str
    label: str
    source: str


def make_candidates(task_ids: list[str], n: int) -> list[Candidate]:
    """Baseline + every mutation of every task, cycled to n (deterministic order)."""
    pool: list[tuple[str, str, str]] = []
    for tid in task_ids:
        task = get_task(tid)
        base = task.baseline_source()
        pool.append((tid, "baseline", base))
        for m in task.mutations:
            if m.find in base:
                pool.append((tid, f"{m.kind}{'' if m.breaks else '(tuning)'}", base.replace(m.find, m.replace, 1)))
    return [Candidate(i, *pool[i % len(pool)]) for i in range(n)]


# ---------------------------------------------------------------- the naive harness

TEST_SCRIPT = textwrap.dedent('''
    """Naive per-candidate test: fresh interpreter, import torch+triton, judge, print one JSON line."""
    import time
    started = time.perf_counter()
    import json, sys
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from bench.registry import get_task
    from judge.candidate.loading import CandidateLoadError, load_module, prepare_process
    from judge.oracle import judge_cases
    from judge.runner import LocalRunner
    task = get_task({task!r})
    interpreter = {interpreter!r}
    device = "cpu" if interpreter else "cuda"
    prepare_process()
    imported = loaded = time.perf_counter()
    try:
        module = load_module(Path(__file__).with_name("candidate.py"), "candidate")
        loaded = time.perf_counter()
        entry = getattr(module, task.entry_point, None)
        if not callable(entry):
            kind, message = "compile_error", "no entry point"
        else:
            runner = LocalRunner(entry, device, interpreter, task.allowed_torch_ops)
            v = judge_cases(task, runner, task.cases({case_set!r}, interpreter), device, interpreter)
            kind, message = v.kind, v.message
    except CandidateLoadError as exc:
        kind, message = exc.kind, str(exc)
    seconds = {{"imports": imported - started, "load": loaded - imported, "judge": time.perf_counter() - loaded}}
    print("VERDICT " + json.dumps({{"kind": kind, "message": message, "seconds": seconds}}), flush=True)
''')

OUTSIDE_SCRIPT = "interpreter start and exit"
"""The naive side's phase for each candidate process's seconds outside its test script's own."""


@dataclass(frozen=True)
class NaiveResult:
    """One naive candidate: its verdict kind, and where its process's seconds went (the test
    script's own phases, the rest of the process's wall time as `OUTSIDE_SCRIPT`): how much of
    the naive harness's cost a persistent pool saves, and how much is judging both sides do."""

    kind: str
    seconds: dict[str, float]


def naive_one(c: Candidate, case_set: str, target: Target, device: str | None, timeout: float,
              extra_env: dict[str, str] | None = None) -> NaiveResult:
    with tempfile.TemporaryDirectory(prefix="naive-") as d:
        folder = Path(d)
        (folder / "candidate.py").write_text(c.source)
        (folder / "candidate_test.py").write_text(TEST_SCRIPT.format(root=str(ROOT), task=c.task,
                                                                     interpreter=target.interpreter, case_set=case_set))
        extra = {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""} if target.interpreter else {}
        if device is not None and target.visible_devices_var:
            extra[target.visible_devices_var] = device
        if target.interpreter:
            extra["OMP_NUM_THREADS"] = "1"  # the same single-thread setting the pool gives its workers
        extra.update(extra_env or {})
        began = time.perf_counter()
        try:
            out = subprocess.run([sys.executable, "candidate_test.py"], cwd=folder, capture_output=True, text=True,
                                 timeout=timeout, env=scrubbed_env(extra), start_new_session=True)
        except subprocess.TimeoutExpired:
            return NaiveResult("timeout", {"timed out": time.perf_counter() - began})
        wall = time.perf_counter() - began
        for line in out.stdout.splitlines():
            if line.startswith("VERDICT "):
                said = json.loads(line[len("VERDICT "):])
                seconds = {k: float(v) for k, v in (said.get("seconds") or {}).items()}
                return NaiveResult(said["kind"], {**seconds, OUTSIDE_SCRIPT: max(0.0, wall - sum(seconds.values()))})
        return NaiveResult("crash", {"crashed": wall})


def _add_phases(into: dict[str, float], phases: dict[str, float]) -> None:
    for name, seconds in phases.items():
        into[name] = into.get(name, 0.0) + float(seconds)


def _largest_first(phases: dict[str, float]) -> dict[str, float]:
    """Phase seconds rounded, the largest first: how they are printed and recorded."""
    return {k: round(v, 2) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])}


def run_naive(cands: list[Candidate], case_set: str, target: Target, workers: int, timeout: float,
              progress: Callable[[int, float], None] | None = None, extra_env: dict[str, str] | None = None
              ) -> tuple[list[str], float, dict[str, float]]:
    """(verdict kinds, seconds, each `NaiveResult` phase's seconds summed over the candidates).
    `progress(done, seconds)` after each candidate: a naive side cut off by a time limit (it
    is the slow one) still leaves its rate so far."""
    devices = visible_devices(target)
    started = time.perf_counter()
    done = 0
    phases: dict[str, float] = {}
    lock = threading.Lock()

    def one(c: Candidate) -> str:
        nonlocal done
        got = naive_one(c, case_set, target, devices[c.index % len(devices)] if devices else None, timeout, extra_env)
        with lock:
            done += 1
            _add_phases(phases, got.seconds)
            if progress is not None:
                progress(done, time.perf_counter() - started)
        return got.kind

    with ThreadPoolExecutor(max_workers=workers) as ex:
        kinds = list(ex.map(one, cands))
    return kinds, time.perf_counter() - started, phases


def run_pool(cands: list[Candidate], case_set: str, target: Target, workers: int, timeout: float,
             extra_env: dict[str, str] | None = None) -> tuple[list[str], float, Any, dict[str, float], float]:
    """(verdict kinds, seconds, the pool's stats, seconds per recorded phase summed over the
    evaluations: where the pool's time goes, and when the first verdict came: an upper bound
    on the workers' start-up, the pool's fixed cost). Beside the workers' phases: `evaluate
    (caller's wall)`, each evaluation's wall time as this side waited for it (minus the
    phases: the per-job cost outside them; the first evaluations wait for the workers' start),
    and `correctness (first of a source)`, the correctness seconds of each source's first
    evaluation (its kernels compiled then)."""
    started = time.perf_counter()  # worker start-up is part of the pool's cost
    phases: dict[str, float] = {}
    finished: list[float] = []  # seconds since the start at which each verdict arrived
    begun: set[str] = set()
    lock = threading.Lock()

    def one(c: Candidate) -> str:
        with lock:
            first_of_source = c.source not in begun
            begun.add(c.source)
        asked = time.perf_counter()
        ev = pool.evaluate(c.task, c.source, case_set)
        with lock:
            finished.append(time.perf_counter() - started)
            _add_phases(phases, {"evaluate (caller's wall)": time.perf_counter() - asked, **(ev.phases or {})})
            if first_of_source:
                _add_phases(phases, {"correctness (first of a source)": (ev.phases or {}).get("correctness", 0.0)})
        return ev.verdict.kind

    with LocalPool(target, workers=workers, job_timeout=timeout, prepare=tuple(dict.fromkeys(c.task for c in cands)),
                   extra_env=extra_env) as pool:
        pool.warm_up()
        with ThreadPoolExecutor(max_workers=pool.size) as ex:
            kinds = list(ex.map(one, cands))
        stats = pool.stats
    return kinds, time.perf_counter() - started, stats, phases, min(finished, default=0.0)


# ---------------------------------------------------------------- bytecode

PRIMED_IMPORTS = ("torch", "triton", "bench.registry", "judge.oracle", "judge.worker", "judge.template",
                  "judge.candidate.server", "judge.containment", "judge.candidate.launchers",
                  "judge.candidate.sampling", "runners.pool", "runners.worker_process")
"""What both sides' processes import: compiled to bytecode once by `prime_bytecode`."""


def prime_bytecode(folder: Path, first: Candidate, case_set: str, target: Target, timeout: float) -> dict[str, str]:
    """Bytecode for what both sides import, written once into `folder` (a `PYTHONPYCACHEPREFIX`)
    by a process that imports `PRIMED_IMPORTS` and by one naive run of `first` (Triton's
    compile path, imported at a first launch); returns the environment that has both sides
    read it. Why: on an image without bytecode, each naive candidate process compiled torch
    from source, which a user's installation never does: the naive side was slower than the
    public harnesses it stands for, and the ratio flattered the pool."""
    folder.mkdir(parents=True, exist_ok=True)
    reading = {"PYTHONPYCACHEPREFIX": str(folder.resolve())}
    writing = {**reading, "PYTHONDONTWRITEBYTECODE": ""}
    subprocess.run([sys.executable, "-c", "; ".join(f"import {m}" for m in PRIMED_IMPORTS)], cwd=ROOT,
                   env=scrubbed_env(writing), capture_output=True, timeout=600, check=False)
    naive_one(first, case_set, target, None, timeout, writing)
    return reading


def _candidate_range(text: str, n: int) -> tuple[int, int]:
    first, _, last = text.partition(":")
    a, b = int(first or 0), int(last or n)
    if not 0 <= a < b <= n:
        raise ValueError(f"--range {text}: not a range of the {n} candidates")
    return a, b


_SAME_IN_EVERY_SHARD = ("n", "workers", "case_set", "tasks", "triton_cache", "bytecode_cache")


def _side_kinds(shards: list[dict[str, Any]], side: str, n: int) -> tuple[list[str], float, list[list[int]]]:
    """One side's verdict kinds over all `n` candidates, its seconds summed and the ranges it
    came from: the records that measured that side (`--skip-pool` / `--skip-naive` leave one
    out) must cover every candidate once."""
    kinds: list[str | None] = [None] * n
    seconds = 0.0
    ranges: list[list[int]] = []
    for shard in shards:
        if f"{side}_kinds" not in shard:
            continue
        a, b = shard["range"]
        if any(k is not None for k in kinds[a:b]):
            raise ValueError(f"shards overlap at {a}:{b} ({side} side)")
        kinds[a:b] = shard[f"{side}_kinds"]
        seconds += float(shard[f"{side}_seconds"])
        ranges.append([a, b])
    missing = [i for i, k in enumerate(kinds) if k is None]
    if missing:
        raise ValueError(f"the shards leave candidates out of the {side} side: {missing[:10]}")
    return [str(k) for k in kinds], seconds, ranges


def _side_phases(shards: list[dict[str, Any]], side: str) -> dict[str, float] | None:
    """One side's phase seconds summed over the records that measured it, or None where one of
    them has none (a record from before phases were kept)."""
    measured = [s for s in shards if f"{side}_kinds" in s]
    if not measured or any(f"{side}_phase_seconds" not in s for s in measured):
        return None
    summed: dict[str, float] = {}
    for shard in measured:
        _add_phases(summed, shard[f"{side}_phase_seconds"])
    return _largest_first(summed)


def combine(shards: list[dict[str, Any]]) -> dict[str, Any]:
    """One comparison from shards (`--range`) that cover the candidates once on each side:
    seconds summed per side, verdict kinds compared candidate by candidate. A shard usually
    measures both sides in one sitting; one side can come from its own records (the pool over
    all candidates in one sitting, `--skip-naive`; the naive side in shards, `--skip-pool`,
    sharing one Triton cache through `--naive-cache` as one unsharded run would). A shard that
    measures the pool pays its start-up again: shards favour the naive side."""
    shards = sorted(shards, key=lambda r: r["range"][0])
    first = shards[0]
    n = int(first["n"])
    for shard in shards:
        for key in _SAME_IN_EVERY_SHARD:
            if shard.get(key) != first.get(key):
                raise ValueError(f"shards with another {key}: {shard.get(key)} and {first.get(key)}")
    pool_kinds, pool_s, pool_ranges = _side_kinds(shards, "pool", n)
    naive_kinds, naive_s, naive_ranges = _side_kinds(shards, "naive", n)
    mismatches = [(i, p, q) for i, (p, q) in enumerate(zip(pool_kinds, naive_kinds, strict=True)) if p != q]
    phases = {f"{side}_phase_seconds": summed for side in ("pool", "naive")
              if (summed := _side_phases(shards, side)) is not None}
    return {**{k: first.get(k) for k in (*_SAME_IN_EVERY_SHARD, "distinct_sources", "target")}, **phases,
            "range": [0, n], "pool_seconds": pool_s, "pool_per_s": n / pool_s, "pool_kinds": pool_kinds,
            "naive_seconds": naive_s, "naive_per_s": n / naive_s, "naive_kinds": naive_kinds,
            "verdict_counts": {k: pool_kinds.count(k) for k in sorted(set(pool_kinds), key=str)},
            "ratio": naive_s / pool_s, "reuse_ceiling": reuse_ceiling(phases.get("naive_phase_seconds")),
            "identical": not mismatches, "mismatches": mismatches, "shards": [s["range"] for s in shards],
            "pool_shards": pool_ranges, "naive_shards": naive_ranges}


def reuse_ceiling(naive_phases: dict[str, float] | None) -> float | None:
    """The ratio a pool would reach if it judged a candidate as fast as a naive process judges it
    in its own process: what reusing processes can save is the rest of a naive process (its
    imports, its interpreter's start and exit). None without the naive side's phases. Why: on
    an H200 this was about 3x against a 10x goal (benchmarks/results/README.md), so the goal
    asked for judging itself to be faster, not for process reuse."""
    if not naive_phases or not naive_phases.get("judge"):
        return None
    return sum(naive_phases.values()) / naive_phases["judge"]


def _print_comparison(result: dict[str, Any]) -> None:
    print(f"throughput ratio (pool / naive): {result['ratio']:.1f}x  (goal >= 10x on an H200)")
    ceiling = result.get("reuse_ceiling")
    if ceiling is not None:
        print(f"process reuse ceiling: {ceiling:.1f}x (a pool judging a candidate as fast as a naive process "
              f"judges it in its own process)")
    differ = len(result["mismatches"])
    print(f"identical verdict kinds: {'yes' if not differ else f'NO ({differ} differ)'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--n", type=int, default=200, help="number of candidates [200]")
    ap.add_argument("--workers", type=int, default=None,
                    help="concurrent candidates on each side [the pool's default plan on a GPU (4 on one H200), or min(cores, 4)]")
    ap.add_argument("--tasks", default=None, help="comma-separated task ids [the quick suite]")
    ap.add_argument("--case-set", default="hidden", choices=["visible", "hidden"])
    ap.add_argument("--timeout", type=float, default=None, help="per-candidate limit, seconds [180 GPU, 600 CPU]")
    ap.add_argument("--triton-cache", choices=["fresh", "shared"], default="fresh",
                    help="fresh: an empty Triton cache per side [default]; shared: the user's cache for both")
    ap.add_argument("--skip-naive", action="store_true", help="only the pool (for a quick look)")
    ap.add_argument("--skip-pool", action="store_true",
                    help="only the naive side (its shards beside a pool record of every candidate: --combine)")
    ap.add_argument("--naive-cache", type=Path, default=None, metavar="DIR",
                    help="the naive side's Triton cache: this folder, kept from one shard to the next on a "
                         "machine (or carried), instead of an empty one per shard")
    ap.add_argument("--range", dest="shard", metavar="A:B", default=None,
                    help="both sides on candidates A..B-1 only: a shard of a comparison longer than one sitting "
                         "(combine the shards' records with --combine)")
    ap.add_argument("--combine", nargs="+", type=Path, metavar="JSON", default=None,
                    help="measure nothing: the comparison from the --json records of shards covering the candidates")
    ap.add_argument("--bytecode-cache", choices=["auto", "prime", "off"], default="auto",
                    help="auto: where a fresh interpreter finds no bytecode for torch, both sides read bytecode "
                         "primed once into a folder of their own [default]; prime: always; off: as found")
    ap.add_argument("--json", dest="json_out", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    if args.combine:
        try:
            combined = combine([json.loads(p.read_text()) for p in args.combine])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"pool : {combined['pool_seconds']:8.1f} s; naive: {combined['naive_seconds']:8.1f} s; "
              f"{len(combined['shards'])} shards")
        _print_comparison(combined)
        if args.json_out:
            args.json_out.write_text(json.dumps(combined, indent=2))
        return 0 if combined["identical"] else 1
    if args.n < 1:
        print("error: --n must be at least 1", file=sys.stderr)
        return 2
    if args.skip_naive and args.skip_pool:
        print("error: --skip-naive and --skip-pool leave nothing to measure", file=sys.stderr)
        return 2
    target = detect_target(force_cpu=default_device() == "cpu")
    try:
        task_ids = args.tasks.split(",") if args.tasks else [t.id for t in suite_tasks("quick")]
        cands = make_candidates(task_ids, args.n)
        a, b = _candidate_range(args.shard, len(cands)) if args.shard else (0, len(cands))
    except (KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    todo = cands[a:b]
    # On a GPU, as many at a time as the pool would run by default (runners/sizing.py: 4 on one
    # H200); it was 2 per GPU, so a run without --workers was not comparable with the README's.
    workers = args.workers or (max(1, min(os.cpu_count() or 1, 4)) if target.interpreter
                               else plan_workers(target, visible_devices(target)).workers)
    timeout = args.timeout or (600.0 if target.interpreter else 180.0)
    print(f"target: {target.vendor} ({target.device_name}); {len(todo)} candidates (of {len(cands)}; "
          f"{len({c.source for c in todo})} distinct) over {len(task_ids)} tasks; "
          f"{workers} at a time; case set {args.case_set}", flush=True)
    result: dict[str, Any] = {"n": len(cands), "range": [a, b], "workers": workers, "triton_cache": args.triton_cache,
                              "case_set": args.case_set, "tasks": task_ids,
                              "distinct_sources": len({c.source for c in todo}), "target": target.to_json()}
    bytecode_env: dict[str, str] = {}
    found = installed_bytecode_found()  # torch's (runners/bytecode.py)
    if args.bytecode_cache == "prime" or (args.bytecode_cache == "auto" and not found):
        primed = time.perf_counter()
        bytecode_env = prime_bytecode(Path(tempfile.mkdtemp(prefix="kmc-bench-pycache-")), todo[0], args.case_set,
                                      target, timeout)
        result["bytecode_cache"] = "primed"
        print(f"bytecode: primed for both sides in {time.perf_counter() - primed:.1f} s "
              f"({'torch had none here' if not found else 'asked for'})", flush=True)
    else:
        result["bytecode_cache"] = "as installed" if found else (
            "none installed: the pool's workers write a run folder of their own (runners/bytecode.py), "
            "each naive process compiles from source")

    fresh_cache = args.triton_cache == "fresh"
    if not args.skip_pool:
        if fresh_cache:
            os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="kmc-bench-triton-pool-")
        pool_kinds, pool_s, stats, phases, first_s = run_pool(todo, args.case_set, target, workers, timeout,
                                                              bytecode_env)
        print(f"pool : {pool_s:8.1f} s  {len(todo) / pool_s:8.2f} candidates/s  (restarts {stats.restarts}, "
              f"timeouts {stats.timeouts}, crashes {stats.crashes}; first verdict after {first_s:.1f} s)", flush=True)
        phase_s = _largest_first(phases)
        print(f"pool phases, seconds summed over the {len(todo)} evaluations: {phase_s}", flush=True)
        result.update({"pool_seconds": pool_s, "pool_per_s": len(todo) / pool_s, "pool_phase_seconds": phase_s,
                       "pool_first_verdict_s": first_s, "pool_kinds": pool_kinds,
                       "verdict_counts": {k: pool_kinds.count(k) for k in sorted(set(pool_kinds))}})
        print(f"verdicts: {result['verdict_counts']}")
        if args.json_out:  # written now too, so a naive side cut short still leaves the pool's figures
            args.json_out.write_text(json.dumps(result, indent=2))
        if args.skip_naive:
            return 0
    if args.naive_cache is not None:
        args.naive_cache.mkdir(parents=True, exist_ok=True)
        os.environ["TRITON_CACHE_DIR"] = str(args.naive_cache.resolve())
        result["naive_cache"] = "kept across shards"
    elif fresh_cache:
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="kmc-bench-triton-naive-")

    def naive_progress(done: int, seconds: float) -> None:
        if done % max(1, len(todo) // 10) and done != len(todo):
            return
        rate = done / seconds
        print(f"naive: {done}/{len(todo)} in {seconds:.1f} s ({rate:.2f}/s so far)", flush=True)
        if args.json_out:  # a cut-off naive side leaves its rate so far
            partial = {**result, "naive_done": done, "naive_elapsed_s": seconds, "naive_per_s_so_far": rate}
            if "pool_seconds" in result:
                partial["ratio_so_far"] = (len(todo) / result["pool_seconds"]) / rate
            args.json_out.write_text(json.dumps(partial, indent=2))

    naive_kinds, naive_s, naive_phases = run_naive(todo, args.case_set, target, workers, timeout, naive_progress,
                                                   bytecode_env)
    print(f"naive: {naive_s:8.1f} s  {len(todo) / naive_s:8.2f} candidates/s")
    naive_phase_s = _largest_first(naive_phases)
    print(f"naive phases, seconds summed over the {len(todo)} candidate processes: {naive_phase_s}", flush=True)
    result.update({"naive_seconds": naive_s, "naive_per_s": len(todo) / naive_s, "naive_kinds": naive_kinds,
                   "naive_phase_seconds": naive_phase_s})
    if args.skip_pool:
        if args.json_out:
            args.json_out.write_text(json.dumps(result, indent=2))
        return 0
    result["ratio"] = naive_s / result["pool_seconds"]
    result["reuse_ceiling"] = reuse_ceiling(naive_phase_s)
    mismatches = [(c.index, c.task, c.label, p, q)
                  for c, p, q in zip(todo, result["pool_kinds"], naive_kinds, strict=True) if p != q]
    result.update({"identical": not mismatches, "mismatches": mismatches})
    _print_comparison(result)
    for m in mismatches[:20]:
        print(f"  candidate {m[0]} {m[1]}/{m[2]}: pool {m[3]}, naive {m[4]}")
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2))
    return 0 if result["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
