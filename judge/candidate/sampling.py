"""Taking timing samples of one function on the GPU: usable in the judge (baseline, eager
PyTorch) and in a candidate process (the candidate, on the judge's command), so the two are
sampled the same way while the judge drives the rounds (judge/timing.py).

It imports no task, reference or tolerance: a candidate process may hold it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024
MAX_SAMPLES_PER_MESSAGE = 1000
SMALL_KERNEL_MS = 0.020
GRAPH_TARGET_MS = 0.25
MAX_GRAPH_LAUNCHES = 1024


def graph_launches(est_ms: float) -> int:
    """Launches per graph replay for a kernel estimated at `est_ms`: at least enough for
    `GRAPH_TARGET_MS` per sample, rounded up to a power of two. Why a power of two: the count
    is part of a reference timing's cache key (judge/baselines.py, the launch mode), and a count
    taken straight from a noisy warm-up estimate differed from one candidate to the next, so
    each small kernel's feedback measured the references afresh, against a baseline of its own
    (more timing, and choices between candidates that followed which baseline each got)."""
    wanted = max(1, math.ceil(GRAPH_TARGET_MS / max(est_ms, 1e-4)))
    return min(MAX_GRAPH_LAUNCHES, 1 << (wanted - 1).bit_length())


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


HOLD_CYCLES = 2_000_000
"""GPU clock cycles `hold_gpu` spins for: about 1 ms at an H200's boost clock."""


def hold_gpu() -> None:
    """Keep the GPU busy while the host enqueues a sample (nvbench's "blocking kernel").

    The start event and the timed launches are enqueued behind this spin, so the time the host
    takes to get from the start event to the launch (a Triton wrapper's Python, its launcher)
    is spent while the GPU still spins, not between the events. Before, only the L2 flush (a
    fraction of a millisecond) stood in front: a host slowed down by other work (eight workers
    compiling candidates beside the timing) that takes longer than that puts GPU idle time
    inside the sample. One small kernel's feedback samples read several times its time in one
    run and its own time in the next; a late host is one cause that fits (a GPU context made
    by another process meanwhile is another, judge/spares.py `start_on_device`). Where the
    spin is not available (`torch.cuda._sleep` missing), the flush alone stands."""
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None:
        try:
            sleep(HOLD_CYCLES)
        except RuntimeError:
            pass


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


REFRESH_SCALE = 2.0 ** -6
"""The largest relative change a refresh makes to one input value (each is multiplied by a
factor drawn from (1 - REFRESH_SCALE, 1]): above half-precision's and bfloat16's rounding, so
nearly every value changes; shrinking only, so no value overflows; small enough that no
kernel's work depends on it."""


class InputRefresher:
    """New values in a timed function's floating-point inputs before every sample, in place.

    Why: timing calls the function again and again on one set of inputs, so a candidate that
    remembers its output by the inputs' *contents* (a hash computed by a cheap kernel, then the
    remembered result copied out) passes every correctness check (new contents, new answer) yet
    times as fast as its hash on a compute-bound task. Each sample now runs on values it has
    never seen: every floating-point input is its pristine values times a fresh factor in
    (1 - REFRESH_SCALE, 1], drawn from a generator of its own (seeded by `seed` and the sample's
    number, so reruns refresh alike; the global generator a seeded task draws from is untouched).
    The refresh runs before the sample's L2 flush, outside the timed region, on every side
    alike. Integer and boolean inputs keep their values (indices must stay in range), and so do
    output arguments (`skip`: the call writes them). `restore` puts the pristine values back
    for what follows the samples (the output check, the wall-clock check)."""

    def __init__(self, args: tuple, skip: tuple[int, ...] | list[int] = (), seed: int = 0) -> None:
        self.seed = seed
        self.count = 0
        self.targets: list[torch.Tensor] = []
        self.pristine: list[torch.Tensor] = []
        self.generators: dict[torch.device, torch.Generator] = {}
        with torch.no_grad():  # inputs that require grad (a backward task's) are written all the same
            for i, a in enumerate(args):
                if i in skip or not isinstance(a, torch.Tensor) or not a.is_floating_point() or a.numel() == 0:
                    continue
                copy = a.clone()
                try:
                    a.copy_(copy)  # same values; refused for a view whose elements share memory (expanded)
                except RuntimeError:  # ... or an inference tensor: such an input keeps its values
                    continue
                self.targets.append(a)
                self.pristine.append(copy)
                if a.device not in self.generators:
                    self.generators[a.device] = torch.Generator(device=a.device)

    @classmethod
    def from_spec(cls, args: tuple, spec: dict[str, Any] | None) -> InputRefresher | None:
        """The refresher a timing job asks for: `spec` holds its `skip` and `seed` (what the judge
        sends the candidate process, judge/timing_job.py `_refresh_spec`); None for no refreshing."""
        if not isinstance(spec, dict):
            return None
        return cls(args, tuple(spec.get("skip") or ()), int(spec.get("seed") or 0))

    def refresh(self) -> None:
        if not self.targets:
            return
        self.count += 1
        for generator in self.generators.values():
            generator.manual_seed((self.seed * 1_000_003 + self.count) % (1 << 63))
        with torch.no_grad():
            for target, pristine in zip(self.targets, self.pristine, strict=True):
                # The factors first, then the values: x = pristine * u, u in (1 - REFRESH_SCALE, 1].
                target.uniform_(1.0 - REFRESH_SCALE, 1.0, generator=self.generators[target.device])
                target.mul_(pristine)

    def restore(self) -> None:
        if self.count:
            with torch.no_grad():
                for target, pristine in zip(self.targets, self.pristine, strict=True):
                    target.copy_(pristine)


class Side:
    """One timed function: warmed up, estimated, prepared as plain launches or a graph, sampled.
    `refresher`: the inputs given new values before each sample (`InputRefresher`), else none."""

    def __init__(self, fn: Callable[[], Any], refresher: InputRefresher | None = None) -> None:
        self.fn = fn
        self.refresher = refresher
        self.runner: _Runner | None = None
        self.flush: torch.Tensor | None = None

    def warm_up(self, warmup_ms: float, warmup_calls: int, allow_graphs: bool = True,
                estimate: bool = True) -> float:
        """Warm up (at least `warmup_calls` calls and `warmup_ms`), then estimate the time per
        call (from a graph replay unless `allow_graphs` is False: code drawing random numbers
        cannot be captured); without `estimate`, 0.0 (judge/timing.py `warm_up` warms in slices
        and estimates once, after the last)."""
        deadline = time.perf_counter() + warmup_ms / 1e3
        calls = 0
        while calls < warmup_calls or time.perf_counter() < deadline:
            self.fn()
            calls += 1
            if calls % 8 == 0:
                torch.cuda.synchronize()  # keep the queue short so the wall clock tracks the GPU
            if calls >= 100_000:
                break
        torch.cuda.synchronize()
        if not estimate:
            return 0.0
        return _gpu_ms(self.fn) if allow_graphs else _single_call_ms(self.fn)

    def prepare(self, launches: int, use_graph: bool) -> str:
        self.runner = _Runner(self.fn, launches, use_graph)
        return self.runner.method

    def sample(self) -> float:
        """One sample after an L2 flush and a GPU-side pause (`hold_gpu`), in ms per launch."""
        assert self.runner is not None
        if self.flush is None:
            self.flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
        if self.refresher is not None:
            self.refresher.refresh()
        self.flush.zero_()
        hold_gpu()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        self.runner()
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e) / self.runner.launches

    def samples(self, count: int) -> list[float]:
        """`count` samples in a row (`sample`): the short protocol's samples before its first
        look, asked for in one message from a candidate process."""
        return [self.sample() for _ in range(count)]

    def restore(self) -> None:
        """The inputs' pristine values back, once sampling is over."""
        if self.refresher is not None:
            self.refresher.restore()

    def wall(self) -> float:
        return _wall_ms(self.fn)


class CandidateTimer:
    """The candidate process's half of timing: each judge message is one step."""

    def __init__(self, entry: Callable[..., Any], args: tuple, refresh: dict[str, Any] | None = None) -> None:
        """`refresh`: the judge's `InputRefresher` settings (skip, seed), None for none."""
        self.entry, self.args = entry, args
        self.side = Side(lambda: entry(*args), InputRefresher.from_spec(args, refresh))

    def step(self, header: dict[str, Any]) -> tuple[dict[str, Any], list[torch.Tensor]]:
        step = header.get("step")
        if step in ("start", "warm"):  # the first warm-up slice comes with the inputs ("start")
            return {"estimate_ms": self.side.warm_up(float(header["warmup_ms"]), int(header["warmup_calls"]),
                                                     header.get("allow_graphs") is not False,
                                                     header.get("estimate") is not False)}, []
        if step == "prepare":
            return {"method": self.side.prepare(int(header["launches"]), bool(header["use_graph"]))}, []
        if step == "sample":
            count = int(header.get("count") or 1)
            if not 1 <= count <= MAX_SAMPLES_PER_MESSAGE:
                raise ValueError(f"{count} samples asked for in one message")
            return {"ms": self.side.samples(count) if "count" in header else self.side.sample()}, []
        if step == "restore":
            self.side.restore()
            return {}, []
        if step == "wall":
            return {"ms": self.side.wall()}, []
        if step == "output":
            from bench.poison import poison_tensor
            from judge.candidate import structure

            for i in header.get("poisoned") or ():
                if isinstance(i, int) and 0 <= i < len(self.args) and isinstance(self.args[i], torch.Tensor):
                    poison_tensor(self.args[i])
            if header.get("seed") is not None:
                torch.manual_seed(int(header["seed"]))
            out = self.entry(*self.args)
            torch.cuda.synchronize()
            spec, tensors = structure.encode_values([out, list(self.args)], objects=False)
            return {"values": spec}, tensors
        raise ValueError(f"unknown timing step {step!r}")
