"""The timing protocol. Runs inside a GPU worker, on the same inputs for candidate and baseline.

Why each step (ANCHORS.md, "Timing"): warm-up keeps compilation out of the samples; an L2
flush between samples stops a kernel from being timed on a warm cache; kernels under about
20 us are timed as CUDA/HIP graph replays of many launches, because one launch is dominated
by launch overhead and timer resolution; candidate, expert baseline and PyTorch eager are
interleaved sample by sample, so drift in clocks or temperature hits all of them alike;
sampling stops once the relative standard error of every median is under the target (or a
time cap), and the raw samples are kept so anyone can recompute the statistics.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from bench.task import Case, Task
from runners.clocks import clock_flags, read_clocks
from runners.verdict import CaseTiming, Timing

L2_FLUSH_BYTES = 256 * 1024 * 1024
SMALL_KERNEL_MS = 0.020
GRAPH_TARGET_MS = 0.25


@dataclass(frozen=True)
class TimingPolicy:
    min_samples: int = 10
    max_samples: int = 400
    target_rse: float = 0.01
    max_seconds_per_case: float = 3.0
    warmup_calls: int = 3
    bootstrap_resamples: int = 2000
    seed: int = 0
    time_eager: bool = True


def median_rse(samples: np.ndarray) -> float:
    """Relative standard error of the median, by the normal approximation sqrt(pi/2)*sd/sqrt(n)."""
    n = len(samples)
    if n < 2:
        return math.inf
    med = float(np.median(samples))
    return 1.2533 * float(np.std(samples, ddof=1)) / math.sqrt(n) / med if med > 0 else math.inf


class _Runner:
    """One timed function: either plain launches or a replayed graph of `launches` calls."""

    def __init__(self, fn: Callable[[], Any], launches: int, use_graph: bool):
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


def time_case(fns: dict[str, Callable[[], Any]], case_name: str, policy: TimingPolicy) -> CaseTiming:
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    for fn in fns.values():
        for _ in range(policy.warmup_calls):
            fn()
    torch.cuda.synchronize()
    est = min(_single_call_ms(fn) for fn in fns.values())
    small = est < SMALL_KERNEL_MS
    launches = max(1, min(1000, math.ceil(GRAPH_TARGET_MS / max(est, 1e-4)))) if small else 1
    runners = {name: _Runner(fn, launches, use_graph=small) for name, fn in fns.items()}
    names = list(runners)
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
    del flush
    return CaseTiming(
        case=case_name,
        candidate_ms=tuple(samples["candidate"]),
        baseline_ms=tuple(samples["baseline"]),
        eager_ms=tuple(samples.get("eager", ())),
        launches_per_sample=launches,
        method=runners["candidate"].method,
    )


def speedup_with_ci(cases: list[CaseTiming], policy: TimingPolicy, against: str = "baseline") -> tuple[float, tuple[float, float]]:
    """Geometric mean over cases of median(against)/median(candidate), with a percentile
    bootstrap interval that resamples every case's raw samples independently."""
    rng = np.random.default_rng(policy.seed)
    logs = []
    boot = np.zeros(policy.bootstrap_resamples)
    for ct in cases:
        cand = np.asarray(ct.candidate_ms)
        base = np.asarray(ct.baseline_ms if against == "baseline" else ct.eager_ms)
        logs.append(math.log(np.median(base) / np.median(cand)))
        rc = rng.choice(cand, size=(policy.bootstrap_resamples, len(cand)), replace=True)
        rb = rng.choice(base, size=(policy.bootstrap_resamples, len(base)), replace=True)
        boot += np.log(np.median(rb, axis=1) / np.median(rc, axis=1))
    boot /= len(cases)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return math.exp(float(np.mean(logs))), (math.exp(float(lo)), math.exp(float(hi)))


def time_candidate(task: Task, candidate: Callable[..., Any], baseline: Callable[..., Any], cases: tuple[Case, ...],
                   vendor: str, device_index: int, policy: TimingPolicy) -> Timing:
    before = read_clocks(vendor, device_index)
    results = []
    for c in cases:
        args = task.make_inputs(c, "cuda")
        fns: dict[str, Callable[[], Any]] = {
            "candidate": lambda a=args: candidate(*a),
            "baseline": lambda a=args: baseline(*a),
        }
        if policy.time_eager:
            fns["eager"] = lambda a=args: task.reference(*a)
        results.append(time_case(fns, c.name, policy))
        del args
    after = read_clocks(vendor, device_index)
    flags = clock_flags(before, after)
    speedup, ci = speedup_with_ci(results, policy)
    eager = speedup_with_ci(results, policy, against="eager")[0] if policy.time_eager else None
    cand_ms = math.exp(float(np.mean([math.log(np.median(ct.candidate_ms)) for ct in results])))
    return Timing(
        cases=tuple(results),
        clocks_before=before,
        clocks_after=after,
        flagged=bool([f for f in flags if f != "clocks_unavailable"]),
        flag_reasons=tuple(flags),
        speedup_vs_baseline=speedup,
        speedup_ci=ci,
        speedup_vs_eager=eager,
        candidate_ms=cand_ms,
    )
