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
must still be unmodified), work hidden on a side stream (CUDA events on the current
stream would not see it; a synchronised wall-clock measurement does, and a large gap
between the two flags the timing), and an output remembered by the inputs' contents
(every sample runs on input values no earlier call saw: judge/candidate/sampling.py `InputRefresher`).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from judge.baselines import Acquired, DriftEvent, ReferenceTiming, clock_state
from judge.candidate.sampling import SMALL_KERNEL_MS, graph_launches, median_rse
from judge.candidate.verdict import CaseTiming
from judge.clocks import clocks_up
from judge.policy import TimingPolicy
from stats.sequential import decide, look_confidence, speedup_interval


class OutputChangedDuringTiming(Exception):
    """The candidate's output or inputs after timing differ from what the judge accepted."""

    def __init__(self, case: str, message: str):
        super().__init__(message)
        self.case = case

class RemoteSide:
    """The candidate's side, sampled in its own process on the judge's command (judge/candidate/server.py)."""

    def __init__(self, proc: Any, args: tuple, refresh: dict[str, Any] | None = None, timer: int = 0) -> None:
        """`refresh`: how the candidate process refreshes its inputs between samples
        (`judge.candidate.sampling.InputRefresher`'s skip and seed), None for never. `timer`:
        which of the process's timers (one per perf case prepared at once) this side drives."""
        from judge.candidate import structure

        self.proc = proc
        self.timer = timer
        spec, tensors = structure.encode_values(list(args))
        self._start: tuple[dict[str, Any], list[torch.Tensor]] | None = (
            {"op": "time", "step": "start", "timer": timer, "args": spec, "refresh": refresh}, tensors)

    def _step(self, step: str, **fields: Any) -> dict[str, Any]:
        reply, _ = self.proc.request({"op": "time", "step": step, "timer": self.timer, **fields})
        if reply.get("ok") is not True:
            raise RuntimeError(f"the candidate process failed the timing step {step}: {str(reply)[:300]}")
        return reply

    def warm_up(self, warmup_ms: float, warmup_calls: int, allow_graphs: bool = True,
                estimate: bool = True) -> float:
        """The first warm-up sends the inputs ("start"), later slices only warm ("warm")."""
        header, tensors = self._start or ({"op": "time", "step": "warm", "timer": self.timer}, [])
        reply, _ = self.proc.request({**header, "warmup_ms": warmup_ms, "warmup_calls": warmup_calls,
                                      "allow_graphs": allow_graphs, "estimate": estimate}, tensors)
        if reply.get("ok") is not True:
            raise RuntimeError(f"the candidate process failed to start timing: {str(reply)[:300]}")
        self._start = None
        return float(reply["estimate_ms"])

    def prepare(self, launches: int, use_graph: bool) -> str:
        return str(self._step("prepare", launches=launches, use_graph=use_graph)["method"])

    def sample(self) -> float:
        return float(self._step("sample")["ms"])

    def samples(self, count: int) -> list[float]:
        """`count` samples in one message (the short protocol's before its first look)."""
        got = self._step("sample", count=count)["ms"]
        if not isinstance(got, list) or len(got) != count:
            raise RuntimeError(f"the candidate process sent {str(got)[:100]} for {count} samples")
        return [float(ms) for ms in got]

    def restore(self) -> None:
        self._step("restore")

    def wall(self) -> float:
        return float(self._step("wall")["ms"])

    def output(self, poisoned: tuple[int, ...] = (), seed: int | None = None) -> tuple[Any, tuple]:
        """One more call on the timed inputs (output arguments in `poisoned` poisoned first,
        torch seeded with `seed`): its output and the inputs after it."""
        from judge.candidate import structure, wire

        reply, tensors = self.proc.request({"op": "time", "step": "output", "timer": self.timer,
                                            "poisoned": list(poisoned), "seed": seed})
        values = structure.decode_values(reply.get("values"), tensors)
        if not isinstance(values, list) or len(values) != 2:
            raise wire.WireError("timing output that is not (output, inputs)")
        return values[0], tuple(values[1])

    def close(self) -> None:
        """The process lets this side's timer go (its inputs, captured graphs)."""
        self._step("close")


PLAIN_AFTER_FAILED_CAPTURE = 1
"""Launches per sample when a side's graph capture fails. One: each sample's launch then runs
on inputs refreshed for it (judge/candidate/sampling.py `InputRefresher`). A plain loop of many
launches on one set of inputs let a candidate whose capture fails (a host-side memo cannot be
captured) serve all but the first launch of a sample from its memo. The GPU-side pause before
the start event (`hold_gpu`) keeps the host's launch time out of a single launch's sample."""


@dataclass(frozen=True)
class Holds:
    """How the GPU's gate is held while timing (judge/gate.py): `alone` around what is measured
    (samples, the references' measurement, the clock readings around them), `shared` around the
    rest (inputs, warm-up, graph capture, the output's re-check), which other judging may
    overlap. Why split: the judging on a GPU stops for as long as a timer holds it alone, and
    warm-up plus the re-check were about half of that hold. Both do nothing by default (a
    caller that holds the GPU alone around the whole timing, or has no gate)."""

    shared: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext
    alone: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext


WARMUP_SLICE_MS = 5.0
"""How long each further warm-up slice runs before the clocks are read again (`warm_up`)."""

Clocks = Callable[[], dict[str, Any]]


def warm_up(side: Any, policy: TimingPolicy, allow_graphs: bool, clocks: Clocks | None = None) -> float:
    """Warm `side` up until the GPU's clocks are up, then estimate its time per call.

    At least `warmup_calls` calls and `warmup_floor_ms`, then slices of `WARMUP_SLICE_MS` while
    the clocks read below `judge.clocks.UP_FRACTION` of their maximum, up to `warmup_ms` in all.
    Why: a fixed warm-up of `warmup_ms` per side and case was paid in full on a GPU already at
    its clocks, which a GPU shared by judge workers nearly always is. Where the clocks cannot
    tell (no reading, no maximum) the warm-up runs its full `warmup_ms`, as before; the estimate
    is taken once, at the end, on a warm GPU either way."""
    if clocks is None:
        return side.warm_up(policy.warmup_ms, policy.warmup_calls, allow_graphs)
    spent = min(policy.warmup_floor_ms, policy.warmup_ms)
    side.warm_up(spent, policy.warmup_calls, allow_graphs, estimate=False)
    while spent < policy.warmup_ms:
        up = clocks_up(clocks())
        if up:
            break
        step = policy.warmup_ms - spent if up is None else min(WARMUP_SLICE_MS, policy.warmup_ms - spent)
        side.warm_up(step, 0, allow_graphs, estimate=False)
        spent += step
    return side.warm_up(0.0, 0, allow_graphs)


def _prepare_sides(sides: dict[str, Any], policy: TimingPolicy, allow_graphs: bool,
                   mode: tuple[int, bool] | None = None, clocks: Clocks | None = None) -> tuple[int, dict[str, str], bool]:
    """Warm every side up (`warm_up`: the first brings the clocks up, the rest find them up) and
    prepare it for sampling: (launches per sample, each side's method, whether every side
    replays a graph). Kernels under SMALL_KERNEL_MS are timed as graph replays of many
    launches (the same count for every side); if any side's capture fails, every side runs one
    launch per sample (`PLAIN_AFTER_FAILED_CAPTURE`). `mode` (launches, graph) repeats an
    earlier measurement's choice instead of deciding from the estimates."""
    est = min(warm_up(side, policy, allow_graphs, clocks) for side in sides.values())
    if mode is not None:
        launches, graph = mode
    else:
        graph = est < SMALL_KERNEL_MS and allow_graphs
        launches = graph_launches(est) if graph else 1
    methods = {name: side.prepare(launches, graph) for name, side in sides.items()}
    if graph and len(set(methods.values())) > 1:
        launches, graph = PLAIN_AFTER_FAILED_CAPTURE, False
        methods = {name: side.prepare(launches, False) for name, side in sides.items()}
    return launches, methods, graph


def _sample_rounds(sides: dict[str, Any], min_rounds: int, max_rounds: int, target_rse: float,
                   max_seconds: float) -> dict[str, list[float]]:
    """Rounds of one sample per side, the order alternating, until every median's relative
    standard error is under `target_rse` (after `min_rounds`), `max_rounds`, or the time cap."""
    names = list(sides)
    samples: dict[str, list[float]] = {name: [] for name in names}
    deadline = time.perf_counter() + max_seconds
    rounds = 0
    while rounds < max_rounds:
        order = names if rounds % 2 == 0 else names[::-1]
        for name in order:
            samples[name].append(sides[name].sample())
        rounds += 1
        if rounds >= min_rounds:
            converged = all(median_rse(np.asarray(v)) < target_rse for v in samples.values())
            if converged or time.perf_counter() > deadline:
                break
    for side in sides.values():
        side.restore()
    return samples


def time_case(sides: dict[str, Any], case_name: str, policy: TimingPolicy,
              clocks: Callable[[], dict[str, Any]] | None = None,
              allow_graphs: bool = True, holds: Holds | None = None) -> tuple[CaseTiming, dict[str, Any], dict[str, Any]]:
    """Interleaved samples of every side (keys: candidate, baseline, eager), driven from here:
    the full protocol (FINAL_FULL).

    Each side is a `judge.candidate.sampling.Side` (in this process) or a `RemoteSide` (the candidate in
    its process); one sample at a time, each synchronised before the next starts, so sides
    never overlap on the GPU even from two processes. Kernels under SMALL_KERNEL_MS are timed
    as graph replays of many launches (the same count for every side; if any side's capture
    fails, every side runs one launch per sample); before each sample the inputs get new values
    (`InputRefresher`) and the L2 is flushed. Returns the
    samples and the clock readings taken just before and just after sampling (after warm-up:
    an idle GPU's clocks always "move" when work starts, which says nothing about the samples).
    Code that draws random numbers cannot be captured in a graph (and a failed capture leaves
    the generator unusable): such tasks (Task.seeded_rng) are timed as plain launches
    (`allow_graphs` False). `holds`: warm-up and capture under `shared`, the samples and their
    clock readings under `alone` (`Holds`).
    """
    holds = holds or Holds()
    with holds.shared():
        prepared = prepare_case(sides, policy, allow_graphs, clocks)
    with holds.alone():
        ct = sample_case(sides, case_name, policy, prepared, clocks)
    return ct, ct.clocks_before, ct.clocks_after


def prepare_case(sides: dict[str, Any], policy: TimingPolicy, allow_graphs: bool,
                 clocks: Clocks | None = None) -> tuple[int, dict[str, str]]:
    """The full protocol's part before its samples, which other judging may overlap: every side
    warmed up and prepared (`_prepare_sides`). Returns (launches per sample, each side's method)."""
    launches, methods, _ = _prepare_sides(sides, policy, allow_graphs, clocks=clocks)
    return launches, methods


def sample_case(sides: dict[str, Any], case_name: str, policy: TimingPolicy, prepared: tuple[int, dict[str, str]],
                clocks: Clocks | None = None) -> CaseTiming:
    """The full protocol's samples of sides `prepare_case` prepared, with the clock readings
    just before and after them: what is measured, so the GPU is held alone around it."""
    launches, methods = prepared
    clocks_before = clocks() if clocks else {}
    samples = _sample_rounds(sides, policy.min_samples, policy.max_samples, policy.target_rse,
                             policy.max_seconds_per_case)
    clocks_after = clocks() if clocks else {}
    return CaseTiming(
        case=case_name,
        candidate_ms=tuple(samples["candidate"]),
        baseline_ms=tuple(samples["baseline"]),
        eager_ms=tuple(samples.get("eager", ())),
        launches_per_sample=launches,
        method=methods["candidate"],
        candidate_wall_ms=sides["candidate"].wall(),
        baseline_wall_ms=sides["baseline"].wall(),
        clocks_before=clocks_before,
        clocks_after=clocks_after,
    )


NATURAL = "natural"
"""The references' own launch mode (graph replays when they are small kernels, else plain
launches); the other modes are `graph:<launches>` and `loop:<launches>` (`launch_mode`)."""


def launch_mode(mode: str) -> tuple[int, bool] | None:
    """(launches, graph) of a mode string, None for NATURAL; a ValueError for anything else."""
    if mode == NATURAL:
        return None
    kind, _, count = mode.partition(":")
    if kind not in ("graph", "loop") or not count.isdigit() or int(count) < 1:
        raise ValueError(f"unknown launch mode {mode!r}")
    return int(count), kind == "graph"


def measure_references(sides: dict[str, Any], policy: TimingPolicy, clocks: Callable[[], dict[str, Any]] | None,
                       allow_graphs: bool, mode: str = NATURAL) -> ReferenceTiming:
    """The expert baseline and eager PyTorch (keys baseline, eager) timed once, interleaved with
    each other under the full protocol's stopping rule, in launch `mode`: what the short
    protocol caches."""
    launches, methods, graph = _prepare_sides(sides, policy, allow_graphs, mode=launch_mode(mode), clocks=clocks)
    before = clocks() if clocks else {}
    samples = _sample_rounds(sides, policy.min_samples, policy.max_samples, policy.target_rse,
                             policy.max_seconds_per_case)
    after = clocks() if clocks else {}
    return ReferenceTiming(tuple(samples["baseline"]), tuple(samples.get("eager", ())), launches, graph,
                           methods["baseline"], sides["baseline"].wall(), before, after)


def recheck_references(sides: dict[str, Any], policy: TimingPolicy, cached: ReferenceTiming,
                       clocks: Clocks | None = None) -> ReferenceTiming:
    """A short re-timing of the references (`feedback_max_samples` rounds, the cached launch
    count and mode): the drift re-check of judge/baselines.py."""
    launches, methods, graph = _prepare_sides(sides, policy, cached.use_graph, mode=(cached.launches, cached.use_graph),
                                              clocks=clocks)
    n = policy.feedback_max_samples
    samples = _sample_rounds(sides, n, n, 0.0, policy.max_seconds_per_case)
    return ReferenceTiming(tuple(samples["baseline"]), tuple(samples.get("eager", ())), launches, graph,
                           methods["baseline"])


References = Callable[[str, str], Acquired]
"""(clock state, launch mode) -> the case's reference timing from the cache (judge/baselines.py)."""


def time_case_short(candidate: Any, case_name: str, policy: TimingPolicy, references: References,
                    clocks: Callable[[], dict[str, Any]] | None = None, allow_graphs: bool = True,
                    locked: bool = False, holds: Holds | None = None) -> tuple[CaseTiming, list[DriftEvent]]:
    """The short protocol (FEEDBACK_SHORT) for one case: the candidate alone, against reference
    timings from the cache.

    The candidate is warmed up as in the full protocol, the clocks read, and the references
    for this clock state fetched (measured now when the cache has none, re-checked for drift
    when due). Both sides are timed alike: the candidate is prepared in the references' launch
    mode (graph replays of the same launch count, or plain launches); a candidate under
    SMALL_KERNEL_MS against references too slow for graphs gets references replayed as graphs
    of its launch count (as the full protocol would time all three), and a candidate whose
    graph capture fails gets references taken one launch per sample. It is sampled with an L2
    flush before each sample, at least `feedback_min_samples` times and at most
    `feedback_max_samples`; after each sample from the minimum on, the sequential rule of
    stats/sequential.py looks at the speedup's interval and stops once it is decisively above,
    below or around 1.0x (or at the per-case time cap)."""
    holds = holds or Holds()
    with holds.shared():
        est = warm_up(candidate, policy, allow_graphs, clocks)
    with holds.alone():
        return sample_short(candidate, case_name, policy, references, clocks, allow_graphs, locked, est)


def sample_short(candidate: Any, case_name: str, policy: TimingPolicy, references: References,
                 clocks: Callable[[], dict[str, Any]] | None, allow_graphs: bool, locked: bool,
                 est: float) -> tuple[CaseTiming, list[DriftEvent]]:
    """`time_case_short` after the warm-up (`est`: its estimate): the references, the capture
    and the samples, all of it measured or measuring, so the GPU is held alone around it."""
    before = clocks() if clocks else {}
    state = clock_state(before, locked)
    got = references(state, NATURAL)
    drift = [got.drift] if got.drift else []
    if allow_graphs and est < SMALL_KERNEL_MS and not got.timing.use_graph and got.timing.launches == 1:
        got = references(state, f"graph:{graph_launches(est)}")
        drift += [got.drift] if got.drift else []
    method = candidate.prepare(got.timing.launches, got.timing.use_graph)
    if got.timing.use_graph and method != "graph":
        got = references(state, f"loop:{PLAIN_AFTER_FAILED_CAPTURE}")
        drift += [got.drift] if got.drift else []
        method = candidate.prepare(PLAIN_AFTER_FAILED_CAPTURE, False)
    ref = got.timing
    confidence = look_confidence(policy.feedback_alpha, policy.feedback_min_samples, policy.feedback_max_samples)
    deadline = time.perf_counter() + policy.max_seconds_per_case
    samples = candidate.samples(policy.feedback_min_samples)  # no look before the minimum: one message
    while True:  # a look after each sample from the minimum on
        _, lo, hi = speedup_interval(ref.baseline_ms, samples, confidence, policy.feedback_noise_floor)
        decision = decide(lo, hi, policy.feedback_equivalence)
        if decision is not None or len(samples) >= policy.feedback_max_samples or time.perf_counter() > deadline:
            break
        samples.append(candidate.sample())
    candidate.restore()
    after = clocks() if clocks else {}
    return CaseTiming(
        case=case_name,
        candidate_ms=tuple(samples),
        baseline_ms=ref.baseline_ms,
        eager_ms=ref.eager_ms,
        launches_per_sample=ref.launches,
        method=method,
        candidate_wall_ms=candidate.wall(),
        baseline_wall_ms=ref.baseline_wall_ms,
        clocks_before=before,
        clocks_after=after,
        baseline_source=got.source,
        early_stopped=decision is not None and len(samples) < policy.feedback_max_samples,
        decision=decision,
    ), drift


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
                    against: str = "baseline", paired: bool = True) -> tuple[float, tuple[float, float]]:
    """Geometric mean over cases of median(against) / median(candidate), with a 95%
    percentile bootstrap interval.

    The samples of candidate and reference were taken interleaved, one of each per round,
    so rounds are resampled as pairs (same indices on both sides): drift shared by a round
    (clocks, temperature) stays paired, as it was measured. Sides of unequal length (a
    stored timing edited by hand), or `paired` False (the short protocol, whose reference
    samples come from another measurement), are resampled independently. The short protocol
    then reports `geomean_speedup_interval` instead of this interval (`time_candidate`)."""
    if not cases:
        raise ValueError("speedup_with_ci needs at least one case")
    point = point_speedup(cases, against)  # raises for a case without samples on either side
    rng = np.random.default_rng(policy.seed)
    b = policy.bootstrap_resamples
    boot = np.zeros(b)
    for ct in cases:
        cand = np.asarray(ct.candidate_ms, dtype=float)
        base = np.asarray(ct.baseline_ms if against == "baseline" else ct.eager_ms, dtype=float)
        if paired and len(cand) == len(base):
            idx = rng.integers(0, len(cand), size=(b, len(cand)))
            rc, rb = cand[idx], base[idx]
        else:
            rc = cand[rng.integers(0, len(cand), size=(b, len(cand)))]
            rb = base[rng.integers(0, len(base), size=(b, len(base)))]
        boot += np.log(np.maximum(np.median(rb, axis=1), _TINY_MS) / np.maximum(np.median(rc, axis=1), _TINY_MS))
    boot /= len(cases)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return point, (math.exp(float(lo)), math.exp(float(hi)))


def point_speedup(cases: list[CaseTiming], against: str = "baseline") -> float:
    """Geometric mean over cases of median(against) / median(candidate): `speedup_with_ci`'s
    point, without its bootstrap (the short protocol's figures, eager's)."""
    logs = []
    for ct in cases:
        base = ct.baseline_ms if against == "baseline" else ct.eager_ms
        if len(ct.candidate_ms) == 0 or len(base) == 0:
            raise ValueError(f"case {ct.case}: no {against if len(base) == 0 else 'candidate'} samples")
        logs.append(math.log(positive_ms(np.median(base)) / positive_ms(np.median(ct.candidate_ms))))
    return math.exp(float(np.mean(logs)))


_TINY_MS = 1e-6  # below any real kernel time: keeps a zero median (timer resolution) finite


def positive_ms(value: float) -> float:
    """`value` (milliseconds) at least `_TINY_MS`, so its logarithm is finite."""
    return max(float(value), _TINY_MS)
