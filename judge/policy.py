"""The timing protocol's settings: a record the parent's configuration holds and every timing
job carries, importable without torch (judge/timing.py, which uses it, imports torch).

Two protocols share one record (`protocol` says which a job runs): `final-full`, the full
interleaved protocol every final submission gets, and `feedback-short`, the cheap one for
visible feedback (few candidate samples against expert-baseline and eager timings cached in
the judge worker, stopping as soon as the speedup's interval decides against 1.0x;
judge/timing.py `time_case_short`, judge/baselines.py). The `feedback_*` and
`baseline_recheck_*` fields tune only the short protocol.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

FINAL_FULL = "final-full"
"""The full interleaved protocol (warm-up, L2 flush, candidate, expert baseline and eager
interleaved round by round until every median is precise): final submissions, verify, eval."""
FEEDBACK_SHORT = "feedback-short"
"""The short protocol of visible feedback: few candidate samples against cached reference timings."""
PROTOCOLS = (FINAL_FULL, FEEDBACK_SHORT)


@dataclass(frozen=True)
class TimingPolicy:
    min_samples: int = 30
    max_samples: int = 400
    target_rse: float = 0.01
    max_seconds_per_case: float = 3.0
    warmup_calls: int = 3
    warmup_ms: float = 50.0  # at most this long per function: until its clocks are up (judge/timing.py warm_up)
    warmup_floor_ms: float = 5.0  # and at least this long, clocks up or not
    bootstrap_resamples: int = 2000
    seed: int = 0
    time_eager: bool = True
    protocol: str = "final-full"  # FINAL_FULL or FEEDBACK_SHORT: which protocol this job runs
    feedback_min_samples: int = 5  # candidate samples before the first look
    feedback_max_samples: int = 20  # the cap: the short protocol never takes more
    feedback_alpha: float = 0.05  # error rate of the sequential decision, shared over all its looks (Bonferroni)
    feedback_equivalence: float = 0.05  # speedups within 1/(1+e) .. 1+e count as "as fast as the baseline"
    feedback_noise_floor: float = 0.005  # least relative standard error granted a median (timer, clock jitter)
    baseline_recheck_uses: int = 8  # a cached baseline is re-checked for drift after this many uses ...
    baseline_recheck_seconds: float = 120.0  # ... or this long after it was measured or last checked
    # New input values before every sample (judge/candidate/sampling.py InputRefresher).
    refresh_inputs: bool = True

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown timing protocol {self.protocol!r} (known: {', '.join(PROTOCOLS)})")
        if not 2 <= self.feedback_min_samples <= self.feedback_max_samples:
            raise ValueError("feedback_min_samples must be at least 2 and at most feedback_max_samples")
        if not 0 < self.feedback_alpha < 1 or self.feedback_equivalence <= 0 or self.feedback_noise_floor < 0:
            raise ValueError("feedback_alpha must lie in (0, 1), feedback_equivalence be positive and "
                             "feedback_noise_floor not negative")
        if not 0 <= self.warmup_floor_ms or self.warmup_ms < 0 or self.warmup_calls < 0:
            raise ValueError("warmup_ms, warmup_floor_ms and warmup_calls must not be negative")
        if self.baseline_recheck_uses < 1 or self.baseline_recheck_seconds <= 0:
            raise ValueError("baseline_recheck_uses must be at least 1 and baseline_recheck_seconds positive")

    def for_protocol(self, protocol: str) -> TimingPolicy:
        """The same settings, running `protocol` (a ValueError when it is not one of PROTOCOLS)."""
        return replace(self, protocol=protocol)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> TimingPolicy:
        """Unknown keys are a ValueError naming them (a typo must not silently keep a default)."""
        d = dict(d or {})
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown timing_policy key(s): {', '.join(unknown)}")
        return cls(**d)
