"""The timing protocol. Runs inside a GPU worker, on the same inputs for candidate and baseline.

Why each step: warm-up keeps compilation out of the samples; an L2
flush between samples stops a kernel from being timed on a warm cache; kernels under about
20 us are timed as CUDA/HIP graph replays of many launches, because one launch is dominated
by launch overhead and timer resolution; candidate, expert baseline and PyTorch eager are
interleaved sample by sample, so drift in clocks or temperature hits all of them alike;
sampling stops once the relative standard error of every median is under the target (or a
time cap), and the raw samples are kept so anyone can recompute the statistics.

Reward hacks the protocol checks for (seen against public harnesses): a kernel that changes behaviour once it
has been called many times (its output is checked again after sampling, and the inputs
must still be unmodified), and work hidden on a side stream (CUDA events on the current
stream would not see it; a synchronised wall-clock measurement does, and a large gap
between the two flags the timing).
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from bench.task import Case, Task
from judge.clocks import CLOCKS_LOCKED_ENV, clock_flags, read_clocks
from judge.policy import TimingPolicy
from judge.verdict import CaseTiming, Timing


class OutputChangedDuringTiming(Exception):
    """The candidate's output or inputs after timing differ from what the judge accepted."""

    def __init__(self, case: str, message: str):
        super().__init__(message)
        self.case = case

L2_FLUSH_BYTES = 256 * 1024 * 1024
SMALL_KERNEL_MS = 0.020
GRAPH_TARGET_MS = 0.25


def median_rse(samples: np.ndarray) -> float:
    """Relative standard error of the median: sqrt(pi/2) * sigma / sqrt(n) / median, with
    sigma estimated robustly as IQR / 1.349 (equal to the SD for normal data).

    GPU latencies are right-skewed with rare large outliers (a context switch, a clock
    change); one such outlier inflates the plain SD enough that the stopping rule never
    fires, although the median itself is unaffected."""
    samples = np.asarray(samples, dtype=float)
    n = len(samples)
    if n < 2:
        return math.inf
    med = float(np.median(samples))
    if med <= 0:
        return math.inf
    q1, q3 = np.percentile(samples, [25, 75])
    sigma = float(q3 - q1) / 1.349
    return 1.2533 * sigma / math.sqrt(n) / med


class _Runner:
    """One timed function: either plain launches or a replayed graph of `launches` calls."""

    def __init__(self, fn: Callable[[], Any], launches: int, use_graph: bool) -> None:
        self.launches = launches
        self.graph: torch.cuda.CUDAGraph | None = None
        self.fn = fn
        if use_graph:
            try:
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    for _ in range(2):
                        fn()
                torch.cuda.current_stream().wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    for _ in range(launches):
                        fn()
                torch.cuda.synchronize()
                self.graph = graph
            except Exception:  # noqa: BLE001 - capture is an optimisation; plain launches still time correctly
                torch.cuda.synchronize()
                self.graph = None

    @property
    def method(self) -> str:
        return "graph" if self.graph is not None else ("loop" if self.launches > 1 else "events")

    def __call__(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            for _ in range(self.launches):
                self.fn()


def _single_call_ms(fn: Callable[[], Any], calls: int = 5) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls


def _warm_up(fn: Callable[[], Any], policy: TimingPolicy) -> None:
    """At least `warmup_calls` calls and `warmup_ms` of wall time (compilation, autotuning,
    and clocks ramping up from idle all happen here, not in the samples)."""
    deadline = time.perf_counter() + policy.warmup_ms / 1e3
    calls = 0
    while calls < policy.warmup_calls or time.perf_counter() < deadline:
        fn()
        calls += 1
        if calls % 8 == 0:
            torch.cuda.synchronize()  # keep the queue short so the wall clock tracks the GPU
        if calls >= 100_000:
            break
    torch.cuda.synchronize()


def _gpu_ms(fn: Callable[[], Any], calls: int = 10) -> float:
    """Device time per call, from a replayed graph of `calls` launches when capture works.

    Timing back-to-back Python launches measures the launch overhead (tens of us for a
    Triton launch) instead of a tiny kernel, which would hide exactly the kernels that
    need graph replay; a graph replays without that overhead."""
    try:
        runner = _Runner(fn, calls, use_graph=True)
    except Exception:  # noqa: BLE001 - falls back to plain launches below
        runner = None
    if runner is None or runner.graph is None:
        return _single_call_ms(fn)
    runner()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(3):
        runner()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / (3 * calls)


def _wall_ms(fn: Callable[[], Any], calls: int = 5) -> float:
    """Synchronised wall-clock time per call: sees work on any stream, events do not."""
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def time_case(fns: dict[str, Callable[[], Any]], case_name: str, policy: TimingPolicy,
              flush: torch.Tensor | None = None,
              clocks: Callable[[], dict[str, Any]] | None = None,
              allow_graphs: bool = True) -> tuple[CaseTiming, dict[str, Any], dict[str, Any]]:
    """Interleaved samples of every function in `fns` (keys: candidate, baseline, eager).

    Kernels under SMALL_KERNEL_MS are timed as graph replays of many launches; the L2 is
    flushed before each replay, not between the launches inside it, so those samples are
    mostly warm-cache: the regime of back-to-back small kernels, the same for every side.
    Returns the samples and the clock readings taken just before and just after sampling
    (after warm-up: an idle GPU's clocks always "move" when work starts, which says
    nothing about the samples).
    """
    if flush is None:
        flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    for fn in fns.values():
        _warm_up(fn, policy)
    est = min((_gpu_ms(fn) if allow_graphs else _single_call_ms(fn)) for fn in fns.values())
    # Code that draws random numbers cannot be captured in a graph (and a failed capture leaves
    # the generator unusable): such tasks (Task.seeded_rng) are timed as plain launches.
    small = est < SMALL_KERNEL_MS and allow_graphs
    launches = max(1, min(1000, math.ceil(GRAPH_TARGET_MS / max(est, 1e-4)))) if small else 1
    runners = {name: _Runner(fn, launches, use_graph=small) for name, fn in fns.items()}
    if small and len({r.method for r in runners.values()}) > 1:
        # One side replaying a graph and the other paying Python launch overhead is not a
        # comparison of kernels: if any capture failed, every side runs as a plain loop.
        runners = {name: _Runner(fn, launches, use_graph=False) for name, fn in fns.items()}
    names = list(runners)
    clocks_before = clocks() if clocks else {}
    samples: dict[str, list[float]] = {name: [] for name in names}
    deadline = time.perf_counter() + policy.max_seconds_per_case
    rounds = 0
    while rounds < policy.max_samples:
        order = names if rounds % 2 == 0 else names[::-1]
        events = []
        for name in order:
            flush.zero_()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            runners[name]()
            e.record()
            events.append((name, s, e))
        torch.cuda.synchronize()
        for name, s, e in events:
            samples[name].append(s.elapsed_time(e) / launches)
        rounds += 1
        if rounds >= policy.min_samples:
            converged = all(median_rse(np.asarray(v)) < policy.target_rse for v in samples.values())
            if converged or time.perf_counter() > deadline:
                break
    clocks_after = clocks() if clocks else {}
    wall = {name: _wall_ms(fns[name]) for name in ("candidate", "baseline")}
    return CaseTiming(
        case=case_name,
        candidate_ms=tuple(samples["candidate"]),
        baseline_ms=tuple(samples["baseline"]),
        eager_ms=tuple(samples.get("eager", ())),
        launches_per_sample=launches,
        method=runners["candidate"].method,
        candidate_wall_ms=wall["candidate"],
        baseline_wall_ms=wall["baseline"],
        clocks_before=clocks_before,
        clocks_after=clocks_after,
    ), clocks_before, clocks_after


def side_stream_suspected(ct: CaseTiming, min_wall_ms: float = 0.05) -> bool:
    """True when the candidate's event time is far below its synchronised wall time while
    the baseline's is not: the work ran where the events could not see it. Only judged
    where the wall time is well above launch overhead."""
    if ct.candidate_wall_ms is None or ct.baseline_wall_ms is None or ct.candidate_wall_ms < min_wall_ms:
        return False
    cand_ratio = ct.median("candidate") / ct.candidate_wall_ms
    base_ratio = ct.median("baseline") / max(ct.baseline_wall_ms, 1e-9)
    return cand_ratio < 0.5 * min(base_ratio, 1.0)


def speedup_with_ci(cases: list[CaseTiming], policy: TimingPolicy,
                    against: str = "baseline") -> tuple[float, tuple[float, float]]:
    """Geometric mean over cases of median(against) / median(candidate), with a 95%
    percentile bootstrap interval.

    The samples of candidate and reference were taken interleaved, one of each per round,
    so rounds are resampled as pairs (same indices on both sides): drift shared by a round
    (clocks, temperature) stays paired, as it was measured. Sides of unequal length (a
    stored timing edited by hand) fall back to independent resampling."""
    if not cases:
        raise ValueError("speedup_with_ci needs at least one case")
    rng = np.random.default_rng(policy.seed)
    b = policy.bootstrap_resamples
    logs = []
    boot = np.zeros(b)
    for ct in cases:
        cand = np.asarray(ct.candidate_ms, dtype=float)
        base = np.asarray(ct.baseline_ms if against == "baseline" else ct.eager_ms, dtype=float)
        if len(cand) == 0 or len(base) == 0:
            raise ValueError(f"case {ct.case}: no {against if len(base) == 0 else 'candidate'} samples")
        logs.append(math.log(_positive(np.median(base)) / _positive(np.median(cand))))
        if len(cand) == len(base):
            idx = rng.integers(0, len(cand), size=(b, len(cand)))
            rc, rb = cand[idx], base[idx]
        else:
            rc = cand[rng.integers(0, len(cand), size=(b, len(cand)))]
            rb = base[rng.integers(0, len(base), size=(b, len(base)))]
        boot += np.log(np.maximum(np.median(rb, axis=1), _TINY_MS) / np.maximum(np.median(rc, axis=1), _TINY_MS))
    boot /= len(cases)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return math.exp(float(np.mean(logs))), (math.exp(float(lo)), math.exp(float(hi)))


_TINY_MS = 1e-6  # below any real kernel time: keeps a zero median (timer resolution) finite


def _positive(value: float) -> float:
    return max(float(value), _TINY_MS)


def time_candidate(task: Task, candidate: Callable[..., Any], baseline: Callable[..., Any], cases: tuple[Case, ...],
                   vendor: str, device_index: int | str, policy: TimingPolicy) -> Timing:
    from judge.oracle import (
        Mismatch,
        accept_unwritten,
        call_seeded,
        compare,
        expected_and_unwritten,
        poison_outputs,
    )

    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    # Locked clocks (`--lock-clocks`) show up in NVML as an applications-clocks "throttle".
    locked = os.environ.get(CLOCKS_LOCKED_ENV) == "1"
    ignore = ("applications_clocks_setting",) if locked else ()
    results = []
    readings: list[tuple[dict[str, Any], dict[str, Any]]] = []
    flags: list[str] = []
    for c in cases:
        args = task.make_inputs(c, "cuda")
        outputs = task.output_args(c)
        poison_outputs(args, outputs)
        pristine = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        expected, unwritten = expected_and_unwritten(task, pristine, c)
        fns: dict[str, Callable[[], Any]] = {
            "candidate": functools.partial(candidate, *args),
            "baseline": functools.partial(baseline, *args),
        }
        if policy.time_eager:
            fns["eager"] = functools.partial(task.reference, *args)
        ct, before, after = time_case(fns, c.name, policy, flush, lambda: read_clocks(vendor, device_index),
                                      allow_graphs=not task.seeded_rng)
        results.append(ct)
        readings.append((before, after))
        flags += [f for f in clock_flags(before, after, ignore=ignore) if f not in flags]
        # A kernel that behaves once the judge has looked away (after N calls, or only
        # outside warm-up) is caught here, on the very inputs it was timed on.
        for i, (a, p) in enumerate(zip(args, pristine, strict=True)):
            if isinstance(a, torch.Tensor) and i not in outputs.written and not torch.equal(a, p):
                raise OutputChangedDuringTiming(c.name, f"input {i} was modified during timing")
        poison_outputs(args, outputs)
        out = task.judged_output(call_seeded(task, c, candidate, args), args, c)
        torch.cuda.synchronize()
        try:
            compare(accept_unwritten(out, expected, unwritten), expected, task)
        except Mismatch as m:
            raise OutputChangedDuringTiming(c.name, f"output after timing is wrong: {m}") from None
        del args, pristine, expected, out
    del flush
    flags += [f"side_stream_suspected:{ct.case}" for ct in results if side_stream_suspected(ct)]
    speedup, ci = speedup_with_ci(results, policy)
    eager = speedup_with_ci(results, policy, against="eager")[0] if policy.time_eager else None
    cand_ms = math.exp(float(np.mean([math.log(_positive(np.median(ct.candidate_ms))) for ct in results])))
    return Timing(
        cases=tuple(results),
        clocks_before=readings[0][0] if readings else {},
        clocks_after=readings[-1][1] if readings else {},
        flagged=bool([f for f in flags if f != "clocks_unavailable"]),
        flag_reasons=tuple(flags),
        speedup_vs_baseline=speedup,
        speedup_ci=ci,
        speedup_vs_eager=eager,
        candidate_ms=cand_ms,
        clocks_locked=locked,
    )
