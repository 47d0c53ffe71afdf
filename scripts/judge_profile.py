#!/usr/bin/env python
"""Where a judged candidate's seconds go on this machine: one worker, the expert of a few
tasks judged several times (the first pays the compile, the rest hit the per-source cache),
each evaluation's wall time and recorded phases printed, plus the cost of a bare CUDA
context and of a fresh candidate process. A diagnostic for the evaluator's throughput.

Usage: python scripts/judge_profile.py [--tasks vector_add,softmax] [--repeats 3] [--case-set hidden]
       [--cprofile]   (the judge worker in this process under cProfile: where the judge's own seconds go)
       [--cprofile --cold]  (its start-up and first evaluations of new sources instead of warm repeats)
       [--timing [--protocol feedback-short]]  (also the timing protocol, final-full by default)
       [--wire]       (the cost of moving tensors through fresh and reused shared memory, and to and from the GPU)
       [--spans [--small-cases]]  (warm evaluations with no profiler anywhere: milliseconds per call, the
                       judge's wait for the candidate process against that process's own steps;
                       --small-cases: only cases of at most 65,536 elements, the goal's small case)
       [--own-tests [--candidate-profile]]  (a method's own-test jobs as a compare run makes them:
                       the simulated model's tests against a fresh copy of the expert each time;
                       phases, steps and the candidate process's seconds per test request, and
                       with --candidate-profile its requests under cProfile)
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.registry import get_task  # noqa: E402
from judge.device import detect_target  # noqa: E402
from judge.policy import FINAL_FULL, PROTOCOLS, TimingPolicy  # noqa: E402
from runners.pool import LocalPool  # noqa: E402


def bare_context_seconds() -> float | None:
    code = ("import time, torch; t = time.perf_counter(); torch.empty(1, device='cuda'); "
            "torch.cuda.synchronize(); print(time.perf_counter() - t)")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        return float(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError):
        return None


def wire_costs(megabytes: int = 16, rounds: int = 10) -> dict[str, float]:
    """Milliseconds per `megabytes` message: a fresh sealed memfd per message (what judge/candidate/wire.py
    does), the same mapping reused, and the device copies either side of it."""
    import mmap
    import os

    import torch

    n = megabytes << 20
    src = torch.randint(0, 255, (n,), dtype=torch.uint8)
    out: dict[str, float] = {}

    def per_round(fn: Any) -> float:
        fn()
        t = time.perf_counter()
        for _ in range(rounds):
            fn()
        return round((time.perf_counter() - t) / rounds * 1e3, 3)

    def fresh() -> None:
        fd = os.memfd_create("probe", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, n)
        with mmap.mmap(fd, n) as mem:
            dest = torch.frombuffer(mem, dtype=torch.uint8)
            dest.copy_(src)
            del dest
        os.close(fd)

    out["fresh_memfd_write_ms"] = per_round(fresh)
    fd = os.memfd_create("probe", os.MFD_CLOEXEC)
    os.ftruncate(fd, n)
    mem = mmap.mmap(fd, n)
    views = [torch.frombuffer(mem, dtype=torch.uint8)]  # emptied before the mapping closes
    out["reused_mapping_write_ms"] = per_round(lambda: views[0].copy_(src))

    def remap() -> None:
        with mmap.mmap(fd, n, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)) as again:
            view = torch.frombuffer(again, dtype=torch.uint8)
            view.copy_(src)
            del view

    out["existing_memfd_new_mapping_write_ms"] = per_round(remap)
    if torch.cuda.is_available():
        gpu = src.cuda()
        pinned = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        out["d2h_into_mapping_ms"] = per_round(lambda: (views[0].copy_(gpu), torch.cuda.synchronize()))
        out["h2d_from_mapping_ms"] = per_round(lambda: (gpu.copy_(views[0]), torch.cuda.synchronize()))
        out["d2h_pinned_ms"] = per_round(lambda: (pinned.copy_(gpu), torch.cuda.synchronize()))
        out["h2d_pinned_ms"] = per_round(lambda: (gpu.copy_(pinned), torch.cuda.synchronize()))
        out["d2h_fresh_pageable_ms"] = per_round(lambda: (gpu.cpu(), torch.cuda.synchronize()))
    views.clear()
    mem.close()
    os.close(fd)
    return out


def _job(task_id: str, source: str, case_set: str, timing: bool, protocol: str) -> dict[str, Any]:
    """A judge worker's job as the pool sends it, timed by `protocol` when `timing`."""
    return {"task": task_id, "source": source, "case_set": case_set, "timing": timing, "timeout": 600,
            "timing_policy": TimingPolicy(protocol=protocol).to_json()}


def profile_in_process(tasks: list[str], case_set: str, repeats: int, timing: bool, top: int = 35,
                       protocol: str = FINAL_FULL,
                       cold: bool = False) -> None:
    """The judge worker's own code in this process under cProfile (its candidate processes are
    forked as usual): seconds the judge waits on a candidate show as socket receives. `cold`:
    the worker's start-up and each task's first evaluation (a source no process has compiled)
    instead of warm repeats, which is where a run of many distinct candidates spends its time."""
    import cProfile
    import os

    from judge.candidate.server import PROFILE_ENV
    from judge.worker import Worker

    os.environ[PROFILE_ENV] = "1"  # the template inherits it, and every candidate process from it
    if detect_target().interpreter:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # as the pool sets it for its workers
    if cold:
        _profile_cold(Worker, tasks, case_set, timing, top, protocol)
        return
    worker = Worker()
    try:
        for task_id in tasks:
            source = get_task(task_id).baseline_source()
            job = _job(task_id, source, case_set, timing, protocol)
            worker.handle({**job, "id": 0})  # compile and caches
            prof = cProfile.Profile()
            t = time.perf_counter()
            with CallSpans() as spans:
                prof.enable()
                for i in range(repeats):
                    reply = worker.handle({**job, "id": i + 1})
                prof.disable()
            print(f"== {task_id}: {repeats} warm evaluations in {time.perf_counter() - t:.2f} s, last: "
                  f"{reply['evaluation']['verdict']['kind']} {reply['evaluation'].get('phases')}", flush=True)
            print("candidate processes' own seconds (as they report them):", spans.steps_s(), flush=True)
            if spans.profiles:
                print("the last candidate process's requests under cProfile:\n" + spans.profiles[-1], flush=True)
            _print_stats(prof, top)
    finally:
        worker.close()


class CallSpans:
    """Per-call seconds from a judge worker in this process, with no profiler (cProfile slows
    Python-heavy code several times over and so misplaces a per-call cost): how many calls the
    judge sent, how long it waited for their replies, and the candidate processes' own steps
    as they report them (`spent`, sent with `collect`; with `KMC_PROFILE_CANDIDATE`, their
    requests under cProfile too). Patches `CandidateProcess` while entered; `--cprofile` reads
    the same record."""

    def __init__(self) -> None:
        self.calls = 0
        self.waiting_s = 0.0
        self.said: dict[str, float] = {}  # every step the candidate processes report, seconds summed
        self.profiles: list[str] = []  # their requests under cProfile, where KMC_PROFILE_CANDIDATE asks

    def steps_s(self) -> dict[str, float]:
        """The reported steps, largest first, in seconds."""
        return {k: round(v, 3) for k, v in sorted(self.said.items(), key=lambda kv: -kv[1])}

    def __enter__(self) -> CallSpans:
        from judge.remote import CandidateProcess

        self._originals = (CandidateProcess.send, CandidateProcess.receive)
        send, receive = self._originals
        spans = self
        awaited: set[int] = set()  # processes whose unanswered request is a batch of calls

        def counting(proc: Any, header: dict[str, Any], tensors: Any = None) -> None:
            send(proc, header, tensors)
            if header.get("op") == "calls":
                spans.calls += len(header["calls"])
                awaited.add(id(proc))

        def waiting(proc: Any) -> Any:
            t = time.perf_counter()
            reply: dict[str, Any] = {}
            try:
                reply, back = receive(proc)
            finally:
                if id(proc) in awaited:
                    spans.waiting_s += time.perf_counter() - t
                    if reply.get("more") is not True:
                        awaited.discard(id(proc))
            for step, seconds in (reply.get("spent") or {}).items():
                spans.said[step] = spans.said.get(step, 0.0) + float(seconds)
            if reply.get("profile"):
                spans.profiles.append(str(reply["profile"]))
            return reply, back

        CandidateProcess.send, CandidateProcess.receive = counting, waiting  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        from judge.remote import CandidateProcess

        CandidateProcess.send, CandidateProcess.receive = self._originals  # type: ignore[method-assign]

    def per_call_ms(self, correctness_s: float) -> dict[str, float]:
        """Milliseconds per call: the judge's correctness phase, its wait for the calls' replies,
        the rest of that phase (its own side where the candidate was not running a call meanwhile:
        inputs, answers, comparisons, the set's reset and end check), and each call step the
        candidate processes report."""
        n = max(self.calls, 1)
        out = {"correctness": correctness_s / n * 1e3, "judge_waiting_for_calls": self.waiting_s / n * 1e3,
               "judge_rest": (correctness_s - self.waiting_s) / n * 1e3}
        out.update({f"candidate {k}": v / n * 1e3 for k, v in sorted(self.said.items(), key=lambda kv: -kv[1])
                    if k.startswith("call:") or k in ("copy_in", "calls:handle")})  # a batch's handling, all of it
        return {k: round(v, 3) for k, v in out.items()}


SMALL_CASE_ELEMENTS = 1 << 16
"""Issue 42's judged-call goal is for a small case: one whose sizes multiply to at most this
many elements (256 KiB of float32: `judge/candidate/wire.py` sends that much inline). A hidden
set's mean per call is dominated by its few multi-megabyte cases (on a GPU the perf cases join
it), whose bytes cross host memory twice; `--small-cases` measures the goal's case instead."""


def case_elements(case: Any) -> int:
    """The product of a case's named sizes: an upper bound on any of its tensors' elements."""
    return math.prod(max(int(value), 1) for _, value in case.sizes)


@contextmanager
def small_cases_only(max_elements: int = SMALL_CASE_ELEMENTS) -> Iterator[None]:
    """Every task's case sets cut to their small cases while entered (the judge worker in this
    process reads them through `Task.cases`)."""
    from bench.task import Task

    original = Task.cases

    def small(self: Task, case_set: str, interpreter: bool) -> tuple[Any, ...]:
        return tuple(c for c in original(self, case_set, interpreter) if case_elements(c) <= max_elements)

    Task.cases = small  # type: ignore[method-assign]
    try:
        yield
    finally:
        Task.cases = original  # type: ignore[method-assign]


def spans_in_process(tasks: list[str], case_set: str, repeats: int, label: str = "all cases") -> list[dict[str, Any]]:
    """Warm evaluations of each task's expert by a judge worker in this process, no profiler:
    one row per task with its calls and `CallSpans.per_call_ms`; `label`: which cases (the
    caller may have cut the sets, `small_cases_only`)."""
    import os

    from judge.worker import Worker

    if detect_target().interpreter:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # as the pool sets it for its workers
    rows = []
    worker = Worker()
    try:
        for task_id in tasks:
            job = _job(task_id, get_task(task_id).baseline_source(), case_set, False, FINAL_FULL)
            worker.handle({**job, "id": 0})  # compile and caches
            correctness = 0.0
            with CallSpans() as spans:
                for i in range(repeats):
                    reply = worker.handle({**job, "id": i + 1})
                    correctness += float((reply["evaluation"].get("phases") or {}).get("correctness", 0.0))
            row = {"task": task_id, "cases": label, "evaluations": repeats,
                   "verdict": reply["evaluation"]["verdict"]["kind"], "calls": spans.calls,
                   "correctness_s": round(correctness, 3), "per_call_ms": spans.per_call_ms(correctness)}
            rows.append(row)
            print(f"== {task_id} ({label}): {repeats} warm evaluations, {spans.calls} calls, {row['verdict']}; "
                  f"milliseconds per call: {row['per_call_ms']}", flush=True)
    finally:
        worker.close()
    return rows


def simulated_tests(task_id: str, n: int = 5, seed: int = 0) -> str:
    """The tests the simulated model writes when Reflexion asks for `n` (methods/reflexion.py)."""
    import random

    from methods.extract import extract_tests
    from modelio.simulated import SimulatedModel

    task = get_task(task_id)
    return extract_tests(SimulatedModel()._write_tests(task, n, random.Random(seed)), n).source


def own_tests_in_process(tasks: list[str], repeats: int, candidate_profile: bool) -> list[dict[str, Any]]:
    """Own-test jobs by a judge worker in this process, as a compare run sends them: each on a
    source no process has seen (so the compile pass runs, as for a method's new candidate).
    One row per job: its wall, phases, named steps and what its candidate process reports per
    `tests` request (`CallSpans`); `candidate_profile`: those requests under cProfile too,
    the last job's printed."""
    import os

    from judge.candidate.internal_tests import JOB_KIND
    from judge.candidate.server import PROFILE_ENV
    from judge.job import Job
    from judge.worker import Worker

    if detect_target().interpreter:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if candidate_profile:
        os.environ[PROFILE_ENV] = "1"
    rows = []
    worker = Worker()
    try:
        for task_id in tasks:
            tests = simulated_tests(task_id)
            base = get_task(task_id).baseline_source()
            for i in range(repeats):
                job = Job(task_id, base + f"\n# own-test job {i} {time.time_ns()}\n", kind=JOB_KIND, tests=tests,
                          id=i + 1)
                t = time.perf_counter()
                with CallSpans() as spans:
                    reply = worker.handle(job)
                wall = time.perf_counter() - t
                ev = reply["evaluation"]
                row = {"task": task_id, "repeat": i, "wall_s": round(wall, 3), "verdict": ev["verdict"]["kind"],
                       "tests": len(ev.get("tests") or ()),
                       "phases": {k: round(v, 3) for k, v in (ev.get("phases") or {}).items()},
                       "steps": {k: round(v, 3) for k, v in worker.clock.steps.items()},
                       "candidate_s": spans.steps_s(), "pass": dict(worker.compile_pass)}
                rows.append(row)
                print(f"== {task_id} #{i}: {wall:.2f} s, {row['verdict']} ({row['tests']} tests); phases "
                      f"{row['phases']}; steps {row['steps']}; pass {row['pass']}; its candidate process: {row['candidate_s']}",
                      flush=True)
                if candidate_profile and i == repeats - 1 and spans.profiles:
                    print("its candidate process's requests under cProfile:\n" + spans.profiles[-1], flush=True)
    finally:
        worker.close()
    return rows


def _print_stats(prof: Any, top: int) -> None:
    import pstats

    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def _profile_cold(worker_class: Any, tasks: list[str], case_set: str, timing: bool, top: int,
                  protocol: str = FINAL_FULL) -> None:
    import cProfile
    import os

    from judge.template import PROFILE_STARTUP_ENV

    os.environ[PROFILE_STARTUP_ENV] = "1"  # the template's warm-up under cProfile too
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    worker = worker_class()
    prof.disable()
    print(f"== worker start-up: {time.perf_counter() - t:.2f} s (the template's own start is not in the "
          "judge's profile: it shows as waiting)", flush=True)
    print(f"the template's start-up steps, seconds: {worker.template.startup}", flush=True)
    print(f"the template's warm-up under cProfile:\n{worker.template.startup_profile}", flush=True)
    _print_stats(prof, top)
    try:
        for i, task_id in enumerate(tasks):
            source = get_task(task_id).baseline_source() + f"\n# cold evaluation {time.time_ns()}\n"
            job = _job(task_id, source, case_set, timing, protocol)
            prof = cProfile.Profile()
            t = time.perf_counter()
            with CallSpans() as spans:
                prof.enable()
                reply = worker.handle({**job, "id": i})
                prof.disable()
            print(f"== {task_id}: first evaluation of a new source in {time.perf_counter() - t:.2f} s: "
                  f"{reply['evaluation']['verdict']['kind']} {reply['evaluation'].get('phases')}", flush=True)
            print("its candidate process's own seconds (as it reports them):", spans.steps_s(), flush=True)
            for text in spans.profiles:
                print("its candidate process's requests under cProfile:\n" + text, flush=True)
            _print_stats(prof, top)
    finally:
        worker.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="vector_add,softmax,layer_norm")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--case-set", default="hidden")
    ap.add_argument("--timing", action="store_true", help="also run the timing protocol (final submissions)")
    ap.add_argument("--protocol", choices=PROTOCOLS, default=FINAL_FULL,
                    help="with --timing: the protocol timed (feedback-short: the visible feedback's)")
    ap.add_argument("--json", dest="json_out", type=Path, default=None)
    ap.add_argument("--cprofile", action="store_true", help="the judge worker in this process, under cProfile")
    ap.add_argument("--wire", action="store_true", help="only the shared-memory and device copy costs")
    ap.add_argument("--small-cases", action="store_true",
                    help=f"with --spans or --cprofile: only cases of at most {SMALL_CASE_ELEMENTS} elements (the goal's small case)")
    ap.add_argument("--spans", action="store_true",
                    help="warm evaluations with no profiler: milliseconds per call, judge and candidate process")
    ap.add_argument("--cold", action="store_true",
                    help="with --cprofile: the worker's start-up and first evaluations of new sources")
    ap.add_argument("--own-tests", action="store_true",
                    help="a method's own-test jobs (the simulated model's tests, a new source each time)")
    ap.add_argument("--candidate-profile", action="store_true",
                    help="with --own-tests: the candidate process's requests under cProfile")
    args = ap.parse_args(argv)
    if args.own_tests:
        rows = own_tests_in_process(args.tasks.split(","), args.repeats, args.candidate_profile)
        if args.json_out:
            args.json_out.write_text(json.dumps(rows, indent=2))
        return 0
    if args.wire:
        print(json.dumps(wire_costs()), flush=True)
        return 0
    if args.spans or args.cprofile:
        with small_cases_only() if args.small_cases else nullcontext():
            if not args.spans:
                profile_in_process(args.tasks.split(","), args.case_set, args.repeats, args.timing, cold=args.cold,
                                   protocol=args.protocol)
                return 0
            spans = spans_in_process(args.tasks.split(","), args.case_set, args.repeats,
                                     "small cases" if args.small_cases else "all cases")
        if args.json_out:
            args.json_out.write_text(json.dumps(spans, indent=2))
        return 0
    target = detect_target()
    rows = []
    if not target.interpreter:
        print(f"bare CUDA context in a fresh python: {bare_context_seconds()} s", flush=True)
    t0 = time.perf_counter()
    with LocalPool(target, workers=1) as pool:
        print(f"pool start: {time.perf_counter() - t0:.2f} s ({target.device_name}); containment: {pool.contained}",
              flush=True)
        for task_id in args.tasks.split(","):
            source = get_task(task_id).baseline_source()
            n_cases = len(get_task(task_id).cases(args.case_set, target.interpreter))
            for i in range(args.repeats):
                t = time.perf_counter()
                ev = pool.evaluate(task_id, source, args.case_set, timing=args.timing,
                                   timing_policy=TimingPolicy(protocol=args.protocol))
                wall = time.perf_counter() - t
                phases = {k: round(v, 3) for k, v in (ev.phases or {}).items()}
                phases["outside_phases"] = round(wall - sum(phases.values()), 3)
                rows.append({"task": task_id, "repeat": i, "cases": n_cases, "wall_s": round(wall, 3),
                             "verdict": ev.verdict.kind, "phases": phases})
                print(f"{task_id:<12} #{i} {n_cases:>3} cases  {wall:6.2f} s  {ev.verdict.kind:<14} {phases}", flush=True)
                if not ev.verdict.correct:
                    print(f"    {ev.verdict.one_line()[:1500]}", flush=True)
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
