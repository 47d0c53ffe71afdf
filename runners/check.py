"""Running `bench check`: the expert baselines of a suite judged (and on a GPU timed) by the
same sandboxed workers that judge candidates. The report's records and roofline arithmetic
are bench/check.py's; this module only schedules the jobs."""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.check import (
    UNSCORABLE,
    Ceilings,
    CheckReport,
    PerfRow,
    TaskCheck,
    ceilings_for,
    new_shape_cases,
    roofline_row,
)
from bench.registry import get_task, load_sources, resolve_sources, suite_tasks
from bench.task import NothingToCompare, Task
from judge.device import Target, default_device, detect_target
from judge.policy import TimingPolicy
from runners.config import ConfigError
from runners.pool import LocalPool, out_of_memory_kind


def _perf_rows(task: Task, timing: Any, ceilings: Ceilings) -> tuple[PerfRow, ...]:
    by_name = {c.name: c for c in task.perf}
    rows = []
    for ct in timing.cases:
        case = by_name.get(ct.case)
        if case is None or not ct.candidate_ms:
            continue
        eager = statistics.median(ct.eager_ms) if ct.eager_ms else None
        rows.append(roofline_row(task, case, statistics.median(ct.candidate_ms), eager, ceilings))
    return tuple(rows)


def check_task(pool: Any, task: Task, timed: bool, ceilings: Ceilings | None,
               timing_policy: TimingPolicy | None = None, interpreter: bool = False) -> TaskCheck:
    """Judge one baseline on its hidden cases (and time it when `timed`)."""
    if not getattr(task, "triton_baseline", True):
        return TaskCheck(task.id, "skipped", note="no expert Triton baseline (adapted task)")
    started = time.perf_counter()
    ev = pool.evaluate(task.id, task.baseline_source(), "hidden", timing=timed, timing_policy=timing_policy)
    seconds = time.perf_counter() - started
    v = ev.verdict
    phases = {k: round(x, 3) for k, x in (ev.phases or {}).items()}
    if v.kind == "runtime_error" and NothingToCompare.__name__ in v.message:
        return TaskCheck(task.id, UNSCORABLE, v.message, seconds=seconds, phases=phases,
                         note="the suite's entry point returns nothing and writes no argument: no differential "
                              "oracle can judge a candidate here")
    perf: tuple[PerfRow, ...] = ()
    note = ""
    if timed and v.correct:
        if ev.timing is not None and ceilings is not None:
            perf = _perf_rows(task, ev.timing, ceilings)
        else:
            note = "no timing came back"
    elif not timed:
        note = "timing unavailable on the CPU interpreter" if interpreter else "not timed (--no-timing)"
    shapes = new_shape_cases(task, interpreter, v.skip_reasons) if v.correct else None
    return TaskCheck(task.id, v.kind, v.message, v.failing_case, v.cases_run, v.cases_skipped, v.skip_reasons,
                     seconds, perf, note, shapes, phases)


def spread_order(task_ids: list[str]) -> list[int]:
    """The order of `task_ids`'s jobs (indices): by a hash of each id, the same every run. A
    suite's order puts a family's tasks, named alike, side by side (TritonBench-revised's
    chunk_* and context_attn_*), and a family's jobs peak alike: on an H100 (2026-12-06) twelve
    workers judging that suite in its order ran the GPU out of memory when the chunk_* and
    context_attn_* references came up together, and every such job was judged again."""
    return sorted(range(len(task_ids)), key=lambda i: hashlib.sha256(task_ids[i].encode()).hexdigest())


RETIRE_ENV = "KMC_CHECK_RETIRE"
""""0": a check keeps every worker after a job out of GPU memory (such jobs are still judged again
after the rest). An A/B switch: on an H100 (2026-12-06) retirement reached its floor, 6 of 12
workers, by 390 s of a 540-s check, after which the CPU was 60% idle; since jobs out of memory
wait for the end instead of draining the pool, whether retiring still pays is open. (A retired
worker now comes back once the jobs in flight beside it have ended: runners/pool.py `_recall`.)"""


def run_check(tasks: Iterable[Task], target: Target, workers: int | None = None,
              timing_policy: TimingPolicy | None = None,
              on_result: Callable[[TaskCheck], None] | None = None,
              task_sources: list[str] | tuple[str, ...] = (), timing: bool = True,
              job_timeout: float | None = None) -> CheckReport:
    """Check every task's baseline on local workers (which load `task_sources`, the sources
    the tasks came from); results keep the order of `tasks`. On a GPU the baselines are also
    timed unless `timing` is False (judging alone)."""
    tasks = list(tasks)
    timed = timing and not target.interpreter
    ceilings, exact = ceilings_for(target.device_name) if timed else (None, True)
    report = CheckReport(target.device_name, target.interpreter, ceilings, exact)
    done: dict[int, TaskCheck] = {}
    broken: list[Exception] = []  # a task's check that raised: raised once every other row is reported
    with LocalPool(target, workers=workers, task_sources=task_sources, job_timeout=job_timeout,
                   prepare=tuple(t.id for t in tasks),
                   # one job per task: nothing kept would be used again; jobs long enough (a GEAK-eval
                   # reference's: 30-150 s) that a retry alone would drain the pool for that long
                   keep_task_inputs=False, shrink_on_oom=os.environ.get(RETIRE_ENV, "1") != "0") as pool:
        pool.warm_up()

        def check_all(order: list[int]) -> list[int]:
            """Judge `order`'s tasks; those out of GPU memory beside others come back, unreported."""
            later: list[int] = []
            with ThreadPoolExecutor(max_workers=pool.size) as ex:
                futures = {ex.submit(check_task, pool, tasks[i], timed, ceilings, timing_policy,
                                     target.interpreter): i for i in order}
                for fut in as_completed(futures):  # reported as each finishes: a cut-off run keeps what it judged
                    i = futures[fut]
                    try:
                        row = fut.result()
                    except Exception as exc:  # noqa: BLE001 - raised below, after every other row
                        # Raised here, it left the loop while the executor waited for every job still
                        # running: those were judged and never reported (an H100, 2026-12-06: 26 rows
                        # of 113 judged written before a cut).
                        broken.append(exc)
                        continue
                    if pool.defer_alone and out_of_memory_kind(row.verdict, row.message):  # the pool's own test
                        later.append(i)
                        done[i] = row  # its seconds, carried into the row that stands
                        continue
                    if i in done:  # judged again after the rest: the first attempt's seconds were lost
                        row = replace(row, phases={**row.phases, "retry": round(
                            row.phases.get("retry", 0.0) + done[i].seconds, 3)})
                    done[i] = row
                    if on_result is not None:
                        on_result(row)
            return later

        # Out of GPU memory beside others: judged again only once every other job is done, where a
        # retry alone would idle the whole pool behind it mid-run (the pool then retries alone).
        order = spread_order([t.id for t in tasks])
        pool.defer_alone = pool.gated
        later = check_all(order)
        pool.defer_alone = False
        check_all(sorted(later, key=order.index))
    if broken:
        raise broken[0]
    report.rows.extend(done[i] for i in sorted(done))
    return report


def check_suite(suite: str | None = None, task_ids: list[str] | None = None, sources: list[str] | None = None,
                workers: int | None = None, device: str | None = None, timing_seconds: float | None = None,
                on_result: Callable[[TaskCheck], None] | None = None, timing: bool = True,
                shard: str | None = None, job_timeout: float | None = None,
                skip: set[str] | frozenset[str] = frozenset()) -> CheckReport:
    """`cli.py bench check` as a library call: the baselines of `task_ids`, else of `suite`
    [quick without a GPU, full with one], after loading `sources` [$KMC_TASK_SOURCES].
    `device` "auto" or "cpu" [$KMC_FORCE_CPU's default]; `timing_seconds` caps sampling per perf case;
    `timing` False judges only; `shard` "K/N" checks the K-th of N slices (a long check split into runs);
    `job_timeout` seconds per baseline [the pool's default] (an adapted task's first job also records
    the suite's calls); `skip`: task ids judged already (`judged_in`), left out."""
    if workers is not None and workers < 1:
        raise ConfigError("--workers must be at least 1")
    target = detect_target(force_cpu=(device or default_device()) == "cpu")
    task_sources = resolve_sources(sources)
    load_sources(task_sources, target.vendor)
    if task_ids:
        chosen = [get_task(i) for i in task_ids]
    else:
        chosen = suite_tasks(suite or ("quick" if target.interpreter else "full"))
    if shard is not None:
        chosen = select_shard(chosen, shard)
    chosen = [t for t in chosen if t.id not in skip]
    if timing_seconds is not None and timing_seconds <= 0:
        raise ConfigError("--timing-seconds must be positive")
    policy = TimingPolicy(max_seconds_per_case=timing_seconds) if timing_seconds else None
    if job_timeout is not None and job_timeout <= 0:
        raise ConfigError("--timeout must be positive")
    return run_check(chosen, target, workers=workers, timing_policy=policy, on_result=on_result,
                     task_sources=task_sources, timing=timing, job_timeout=job_timeout)


def judged_in(progress: Path) -> set[str]:
    """Task ids with a row in a `--jsonl` progress file (a check cut off by a time limit goes on
    with `--skip-judged`, on another machine or in another call); a line that does not parse
    (cut off mid-write) names no task."""
    ids: set[str] = set()
    if not progress.exists():
        return ids
    for line in progress.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("task"), str):
            ids.add(row["task"])
    return ids


def select_shard(tasks: list[Task], spec: str) -> list[Task]:
    """`K/N`: the tasks whose position in id order is K-1 modulo N."""
    try:
        k, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise ConfigError(f"--shard {spec!r} is not K/N (e.g. 2/4)") from None
    if not 1 <= k <= n:
        raise ConfigError(f"--shard {spec!r}: K must be between 1 and N")
    ordered = sorted(tasks, key=lambda t: t.id)
    return [t for i, t in enumerate(ordered) if i % n == k - 1]
