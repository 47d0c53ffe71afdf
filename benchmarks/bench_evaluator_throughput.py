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
they would in a real run (`--triton-cache shared` keeps the user's cache for both). Prints both throughputs, the ratio, and whether the verdict kinds are
identical (listing any that differ). Goal on an H200 (issue 3): ratio >= 10.

Usage: python benchmarks/bench_evaluator_throughput.py [--n 200] [--workers W] [--tasks a,b]
       [--case-set hidden] [--timeout S] [--json OUT]
  The naive side of 200 hidden candidates outlasts one 10-minute sitting on an H200; in shards:
       ... --skip-naive --json pool.json
       ... --naive-only 0:100 --naive-cache DIR --json naive1.json   (DIR kept for the next shard)
       ... --naive-only 100:200 --naive-cache DIR --json naive2.json
       ... --combine pool.json naive1.json naive2.json
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
from runners.pool import LocalPool, scrubbed_env, visible_devices  # noqa: E402


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
    import json, sys
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from bench.registry import get_task
    from judge.oracle import CandidateLoadError, LocalRunner, judge_cases, load_module, prepare_process
    task = get_task({task!r})
    interpreter = {interpreter!r}
    device = "cpu" if interpreter else "cuda"
    prepare_process()
    try:
        module = load_module(Path(__file__).with_name("candidate.py"), "candidate")
        entry = getattr(module, task.entry_point, None)
        if not callable(entry):
            kind, message = "compile_error", "no entry point"
        else:
            runner = LocalRunner(entry, device, interpreter, task.allowed_torch_ops)
            v = judge_cases(task, runner, task.cases({case_set!r}, interpreter), device, interpreter)
            kind, message = v.kind, v.message
    except CandidateLoadError as exc:
        kind, message = exc.kind, str(exc)
    print("VERDICT " + json.dumps({{"kind": kind, "message": message}}), flush=True)
''')


def naive_one(c: Candidate, case_set: str, target: Target, device: str | None, timeout: float) -> str:
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
        try:
            out = subprocess.run([sys.executable, "candidate_test.py"], cwd=folder, capture_output=True, text=True,
                                 timeout=timeout, env=scrubbed_env(extra), start_new_session=True)
        except subprocess.TimeoutExpired:
            return "timeout"
        for line in out.stdout.splitlines():
            if line.startswith("VERDICT "):
                return json.loads(line[len("VERDICT "):])["kind"]
        return "crash"


def run_naive(cands: list[Candidate], case_set: str, target: Target, workers: int, timeout: float,
              progress: Callable[[int, float], None] | None = None) -> tuple[list[str], float]:
    """`progress(done, seconds)` after each candidate: a naive side cut off by a time limit (it
    is the slow one) still leaves its rate so far."""
    devices = visible_devices(target)
    started = time.perf_counter()
    done = 0
    lock = threading.Lock()

    def one(c: Candidate) -> str:
        nonlocal done
        kind = naive_one(c, case_set, target, devices[c.index % len(devices)] if devices else None, timeout)
        with lock:
            done += 1
            if progress is not None:
                progress(done, time.perf_counter() - started)
        return kind

    with ThreadPoolExecutor(max_workers=workers) as ex:
        kinds = list(ex.map(one, cands))
    return kinds, time.perf_counter() - started


def run_pool(cands: list[Candidate], case_set: str, target: Target, workers: int, timeout: float
             ) -> tuple[list[str], float, Any, dict[str, float], float]:
    """(verdict kinds, seconds, the pool's stats, seconds per recorded phase summed over the
    evaluations: where the pool's time goes, and when the first verdict came: an upper bound
    on the workers' start-up, the pool's fixed cost)."""
    started = time.perf_counter()  # worker start-up is part of the pool's cost
    phases: dict[str, float] = {}
    finished: list[float] = []  # seconds since the start at which each verdict arrived
    lock = threading.Lock()

    def one(c: Candidate) -> str:
        ev = pool.evaluate(c.task, c.source, case_set)
        with lock:
            finished.append(time.perf_counter() - started)
            for name, seconds in (ev.phases or {}).items():
                phases[name] = phases.get(name, 0.0) + seconds
        return ev.verdict.kind

    with LocalPool(target, workers=workers, job_timeout=timeout, prepare=tuple(dict.fromkeys(c.task for c in cands))) as pool:
        pool.warm_up()
        with ThreadPoolExecutor(max_workers=pool.size) as ex:
            kinds = list(ex.map(one, cands))
        stats = pool.stats
    return kinds, time.perf_counter() - started, stats, phases, min(finished, default=0.0)


def _naive_range(text: str, n: int) -> tuple[int, int]:
    first, _, last = text.partition(":")
    a, b = int(first or 0), int(last or n)
    if not 0 <= a < b <= n:
        raise ValueError(f"--naive-only {text}: not a range of the {n} candidates")
    return a, b


def combine(pool_record: dict[str, Any], shards: list[dict[str, Any]]) -> dict[str, Any]:
    """The comparison from a pool-only record and naive shards that cover its candidates once
    each: the naive side's seconds are the shards' summed (each ran `workers` at a time, as one
    run would; a shard continued the Triton cache the one before it left, `--naive-cache`)."""
    n = int(pool_record["n"])
    kinds: list[str | None] = [None] * n
    shards = sorted(shards, key=lambda r: r["naive_range"][0])
    for shard in shards:
        for key in ("n", "workers", "case_set", "tasks"):
            if shard.get(key) != pool_record.get(key):
                raise ValueError(f"a naive shard with another {key}: {shard.get(key)} (the pool's: {pool_record.get(key)})")
        a, b = shard["naive_range"]
        if any(k is not None for k in kinds[a:b]):
            raise ValueError(f"naive shards overlap at {a}:{b}")
        kinds[a:b] = shard["naive_kinds"]
    if any(k is None for k in kinds):
        raise ValueError(f"the naive shards leave candidates out: {[i for i, k in enumerate(kinds) if k is None][:10]}")
    naive_s = sum(float(s["naive_seconds"]) for s in shards)
    pool_s = float(pool_record["pool_seconds"])
    mismatches = [(i, p, q) for i, (p, q) in enumerate(zip(pool_record["pool_kinds"], kinds, strict=True)) if p != q]
    return {**pool_record, "naive_seconds": naive_s, "naive_per_s": n / naive_s, "ratio": naive_s / pool_s,
            "identical": not mismatches, "mismatches": mismatches, "naive_shards": [s["naive_range"] for s in shards]}


def _print_comparison(result: dict[str, Any]) -> None:
    print(f"throughput ratio (pool / naive): {result['ratio']:.1f}x  (goal >= 10x on an H200)")
    differ = len(result["mismatches"])
    print(f"identical verdict kinds: {'yes' if not differ else f'NO ({differ} differ)'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--n", type=int, default=200, help="number of candidates [200]")
    ap.add_argument("--workers", type=int, default=None,
                    help="concurrent candidates on each side [pool default: 2 per GPU, or min(cores, 4)]")
    ap.add_argument("--tasks", default=None, help="comma-separated task ids [the quick suite]")
    ap.add_argument("--case-set", default="hidden", choices=["visible", "hidden"])
    ap.add_argument("--timeout", type=float, default=None, help="per-candidate limit, seconds [180 GPU, 600 CPU]")
    ap.add_argument("--triton-cache", choices=["fresh", "shared"], default="fresh",
                    help="fresh: an empty Triton cache per side [default]; shared: the user's cache for both")
    ap.add_argument("--skip-naive", action="store_true", help="only the pool (for a quick look)")
    ap.add_argument("--naive-only", metavar="A:B", default=None,
                    help="only the naive side, on candidates A..B-1: a shard of a naive side longer than one "
                         "sitting (combine the shards with --combine)")
    ap.add_argument("--naive-cache", type=Path, default=None,
                    help="the naive side's Triton cache folder [a fresh one]: a shard continues where the one "
                         "before it left the cache, as one run would")
    ap.add_argument("--combine", nargs="+", type=Path, metavar="JSON", default=None,
                    help="measure nothing: the pool-only record (--skip-naive --json) first, then its naive shards")
    ap.add_argument("--json", dest="json_out", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    if args.combine:
        try:
            records = [json.loads(p.read_text()) for p in args.combine]
            combined = combine(records[0], records[1:])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"pool : {combined['pool_seconds']:8.1f} s; naive: {combined['naive_seconds']:8.1f} s over "
              f"{len(combined['naive_shards'])} shards")
        _print_comparison(combined)
        if args.json_out:
            args.json_out.write_text(json.dumps(combined, indent=2))
        return 0 if combined["identical"] else 1
    if args.n < 1:
        print("error: --n must be at least 1", file=sys.stderr)
        return 2
    target = detect_target(force_cpu=default_device() == "cpu")
    try:
        task_ids = args.tasks.split(",") if args.tasks else [t.id for t in suite_tasks("quick")]
        cands = make_candidates(task_ids, args.n)
        shard = _naive_range(args.naive_only, len(cands)) if args.naive_only else None
    except (KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    workers = args.workers or (max(1, min(os.cpu_count() or 1, 4)) if target.interpreter
                               else 2 * max(1, target.device_count))
    timeout = args.timeout or (600.0 if target.interpreter else 180.0)
    print(f"target: {target.vendor} ({target.device_name}); {len(cands)} candidates "
          f"({len({c.source for c in cands})} distinct) over {len(task_ids)} tasks; "
          f"{workers} at a time; case set {args.case_set}", flush=True)
    result: dict[str, Any] = {"n": len(cands), "workers": workers, "triton_cache": args.triton_cache,
                              "case_set": args.case_set, "tasks": task_ids,
                              "distinct_sources": len({c.source for c in cands}), "target": target.to_json()}

    fresh_cache = args.triton_cache == "fresh"
    if shard is None:
        if fresh_cache:
            os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="kmc-bench-triton-pool-")
        pool_kinds, pool_s, stats, phases, first_s = run_pool(cands, args.case_set, target, workers, timeout)
        print(f"pool : {pool_s:8.1f} s  {len(cands) / pool_s:8.2f} candidates/s  (restarts {stats.restarts}, "
              f"timeouts {stats.timeouts}, crashes {stats.crashes}; first verdict after {first_s:.1f} s)", flush=True)
        phase_s = {k: round(v, 2) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])}
        print(f"pool phases, seconds summed over the {len(cands)} evaluations: {phase_s}", flush=True)
        result.update({"pool_seconds": pool_s, "pool_per_s": len(cands) / pool_s, "pool_phase_seconds": phase_s,
                       "pool_first_verdict_s": first_s, "pool_kinds": pool_kinds,
                       "verdict_counts": {k: pool_kinds.count(k) for k in sorted(set(pool_kinds))}})
        print(f"verdicts: {result['verdict_counts']}")
        if args.json_out:  # written now too, so a naive side cut short still leaves the pool's figures
            args.json_out.write_text(json.dumps(result, indent=2))
        if args.skip_naive:
            return 0
    a, b = shard or (0, len(cands))
    if args.naive_cache is not None:
        args.naive_cache.mkdir(parents=True, exist_ok=True)
        os.environ["TRITON_CACHE_DIR"] = str(args.naive_cache.resolve())
    elif fresh_cache:
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="kmc-bench-triton-naive-")
    todo = cands[a:b]

    def naive_progress(done: int, seconds: float) -> None:
        if done % max(1, len(todo) // 10) and done != len(todo):
            return
        rate = done / seconds
        print(f"naive: {done}/{len(todo)} in {seconds:.1f} s ({rate:.2f}/s so far)", flush=True)
        if args.json_out:  # a cut-off naive side leaves its rate so far
            partial = {**result, "naive_range": [a, b], "naive_done": done, "naive_elapsed_s": seconds,
                       "naive_per_s_so_far": rate}
            if "pool_per_s" in result:
                partial["ratio_so_far"] = result["pool_per_s"] / rate
            args.json_out.write_text(json.dumps(partial, indent=2))

    naive_kinds, naive_s = run_naive(todo, args.case_set, target, workers, timeout, naive_progress)
    print(f"naive: {naive_s:8.1f} s  {len(todo) / naive_s:8.2f} candidates/s  (candidates {a}..{b - 1})")
    result.update({"naive_range": [a, b], "naive_seconds": naive_s, "naive_per_s": len(todo) / naive_s,
                   "naive_kinds": naive_kinds})
    if shard is None:
        result = combine(result, [result])
        _print_comparison(result)
        for i, p, q in result["mismatches"][:20]:
            print(f"  candidate {i} {cands[i].task}/{cands[i].label}: pool {p}, naive {q}")
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2))
    return 0 if shard is not None or result["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
