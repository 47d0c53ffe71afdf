"""Reference timings measured once per run: the expert baseline and eager PyTorch, cached for
visible-feedback timings (the short protocol, judge/timing.py `time_case_short`).

Why: a candidate's visible feedback used to re-time the expert baseline and eager PyTorch
beside it, every time, although those two never change within a run; they were most of the
timing's cost. Now they are measured once per (device, task, case, clock state, launch mode)
with the full protocol's stopping rule (interleaved with each other, until every median is
precise or the time cap), and re-used by every later feedback timing of that case.

Drift: a cached timing is re-checked every `baseline_recheck_uses` uses or
`baseline_recheck_seconds` seconds (TimingPolicy), whichever comes first: the references are
re-sampled briefly (`feedback_max_samples` rounds), and when the re-check's median interval
and the cached one do not overlap (the 95% intervals of stats/sequential.py; non-overlap
rather than "the new median outside the cached interval", because a short re-check's own
noise would put its median outside a narrow cached interval about one time in six), the
references are measured afresh, the new timing replaces the cached one, and the event is
recorded in the timing that saw it (`DriftEvent`). The clock state is part of the key, so
a GPU whose clocks were locked, unlocked or throttled gets its own reference timings
(`clock_state`).

Where the cache lives: in each judge worker (`judge/worker.py` holds one `BaselineCache`), in
memory, and one copy per run in the parent's pool (runners/pool.py), which every worker
follows. The worker is the trusted side: a candidate runs in a process forked from a template
and can reach neither this memory, nor the pool's channel, nor the baseline's code, so it
cannot make the baseline look slow (a file shared by the workers of one GPU would be writable
by a candidate wherever the containment has no root and no read-only mounts, so there is
none). A job of the short protocol carries the run's reference timings of its task
(`Shared.to_json`); the worker adopts each one it does not hold, or holds in another
measurement (`adopt`), and its reply carries what it measured itself (`take_new`: a first
measurement, or a fresh one after drift), which the pool keeps for every later job. A task's
first timed job of the run measures the references whatever its candidate's verdict
(`put`, judge/timing_job.py `prime_references`), and the pool sends the task's other timed jobs
once it has returned, so the first measurement is taken once.

Why one per run, not one per worker: each worker used to measure its own, and a candidate's
speedup then depended on which worker judged it: two candidates timed by different workers
were compared through two measurements of the same baseline, so the choices between them
(methods/speed.py) could follow which worker each got, which differs between same-seed runs.
It also cost one reference timing per (case, worker) instead of one per case.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from stats.sequential import intervals_overlap, median_interval

DRIFT_CONFIDENCE = 0.95


def clock_state(reading: dict[str, Any], locked: bool) -> str:
    """The clock state a reference timing is valid under, from the clocks read after warm-up.

    Locked clocks (`--lock-clocks`) are a state per locked SM and memory clock. Unlocked, the
    GPU runs at its boost clock under load, and the SM clock read at one instant jitters by a
    few MHz around it: keying on that reading would flap between states (and re-measure the
    references) for nothing, so unlocked clocks are one state, "boost", unless a slowdown
    reason is active (power cap, thermal or hardware slowdown: each set of reasons a state of
    its own). Slower moves inside one state are what the drift re-check is for. "unknown"
    where the clocks cannot be read."""
    if not reading.get("available"):
        return "unknown"
    throttle = sorted(t for t in reading.get("throttle", ()) if not (locked and t == "applications_clocks_setting"))
    state = f"locked:sm{reading.get('sm_mhz')}:mem{reading.get('mem_mhz')}" if locked else "boost"
    return state + (":throttle=" + ",".join(throttle) if throttle else "")


@dataclass(frozen=True)
class BaselineKey:
    device: str
    task: str
    case: str
    clock_state: str
    mode: str = "natural"  # launch mode (judge/timing.py launch_mode): the references' own, graph:N or loop:N


@dataclass(frozen=True)
class ReferenceTiming:
    """The expert baseline's and eager PyTorch's samples of one case, as one measurement took them."""

    baseline_ms: tuple[float, ...]
    eager_ms: tuple[float, ...]
    launches: int
    use_graph: bool  # sampled as graph replays of `launches` calls (else plain launches)
    method: str
    baseline_wall_ms: float | None = None
    clocks_before: dict[str, Any] = field(default_factory=dict)
    clocks_after: dict[str, Any] = field(default_factory=dict)

    def interval(self) -> tuple[float, float]:
        return median_interval(self.baseline_ms, DRIFT_CONFIDENCE)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ReferenceTiming:
        d = dict(d)
        d["baseline_ms"] = tuple(float(x) for x in d["baseline_ms"])
        d["eager_ms"] = tuple(float(x) for x in d.get("eager_ms", ()))
        return cls(**d)


@dataclass(frozen=True)
class Shared:
    """One reference timing as the pool keeps it for the run and jobs carry it."""

    key: BaselineKey
    timing: ReferenceTiming

    def to_json(self) -> dict[str, Any]:
        return {"key": asdict(self.key), "timing": self.timing.to_json()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Shared:
        return cls(BaselineKey(**d["key"]), ReferenceTiming.from_json(d["timing"]))


@dataclass(frozen=True)
class DriftEvent:
    """A cached reference timing found out of date: the baseline's cached median, the re-check's
    and the fresh measurement's (ms per launch), and when (seconds since the cache was made)."""

    case: str
    clock_state: str
    cached_ms: float
    recheck_ms: float
    fresh_ms: float
    uses: int
    age_s: float

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case, "clock_state": self.clock_state, "cached_ms": self.cached_ms,
                "recheck_ms": self.recheck_ms, "fresh_ms": self.fresh_ms, "uses": self.uses, "age_s": self.age_s}


@dataclass
class _Entry:
    timing: ReferenceTiming
    checked_at: float
    uses: int = 0


@dataclass(frozen=True)
class Acquired:
    """What `BaselineCache.acquire` hands the timing: the reference timing, whether it was
    measured for this job ("fresh") or taken from the cache ("reused"), and the drift event
    when a re-check replaced it."""

    timing: ReferenceTiming
    source: str
    drift: DriftEvent | None = None
    rechecked: bool = False


class BaselineCache:
    """Reference timings by BaselineKey, with the drift re-check (module docstring).

    `measure()` takes a full reference timing (in the key's launch mode); `recheck(cached)` a
    short one with the cached timing's launch count and mode. Both are supplied per call by the timing code, which owns the GPU; this class only
    decides when each is needed, so it is tested with fake timers."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._entries: dict[BaselineKey, _Entry] = {}
        self._new: dict[BaselineKey, ReferenceTiming] = {}
        self.measurements = 0
        self.rechecks = 0
        self.drift_events = 0

    def __len__(self) -> int:
        return len(self._entries)

    def acquire(self, key: BaselineKey, measure: Callable[[], ReferenceTiming],
                recheck: Callable[[ReferenceTiming], ReferenceTiming], recheck_uses: int,
                recheck_seconds: float) -> Acquired:
        now = self._clock()
        entry = self._entries.get(key)
        if entry is None:
            return self._store(key, measure(), now, "fresh")
        due = entry.uses >= recheck_uses or now - entry.checked_at >= recheck_seconds
        if not due:
            entry.uses += 1
            return Acquired(entry.timing, "reused")
        self.rechecks += 1
        probe = recheck(entry.timing)
        if intervals_overlap(entry.timing.interval(), probe.interval()):
            entry.uses, entry.checked_at = 1, now
            return Acquired(entry.timing, "reused", rechecked=True)
        fresh = measure()
        self.drift_events += 1
        event = DriftEvent(key.case, key.clock_state, _median(entry.timing.baseline_ms), _median(probe.baseline_ms),
                           _median(fresh.baseline_ms), entry.uses, round(now - entry.checked_at, 3))
        return replace(self._store(key, fresh, now, "fresh"), drift=event, rechecked=True)

    def _store(self, key: BaselineKey, timing: ReferenceTiming, now: float, source: str) -> Acquired:
        self.measurements += 1
        self._entries[key] = _Entry(timing, now, uses=1)
        self._new[key] = timing
        return Acquired(timing, source)

    def put(self, key: BaselineKey, timing: ReferenceTiming) -> bool:
        """A measurement taken outside `acquire` (the first job of a task priming the run's
        references, judge/timing_job.py `prime_references`), kept where the key has none."""
        if key in self._entries:
            return False
        self._store(key, timing, self._clock(), "fresh")
        return True

    def adopt(self, shared: list[Shared]) -> int:
        """Take the run's reference timings (what the pool sent with a job): each key this cache
        does not hold, or holds in another measurement, gets the run's, its drift clock started
        afresh. Returns how many were taken."""
        now = self._clock()
        taken = 0
        for s in shared:
            entry = self._entries.get(s.key)
            if entry is None or entry.timing != s.timing:
                self._entries[s.key] = _Entry(s.timing, now)
                self._new.pop(s.key, None)
                taken += 1
        return taken

    def take_new(self) -> list[Shared]:
        """What this cache measured itself since the last call (for the pool to keep)."""
        new = [Shared(k, t) for k, t in self._new.items()]
        self._new.clear()
        return new


def _median(samples: tuple[float, ...]) -> float:
    import statistics

    return float(statistics.median(samples)) if samples else math.nan
