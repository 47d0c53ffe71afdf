"""The timing protocol's settings: a record the parent's configuration holds and every timing
job carries, importable without torch (judge/timing.py, which uses it, imports torch)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class TimingPolicy:
    min_samples: int = 30
    max_samples: int = 400
    target_rse: float = 0.01
    max_seconds_per_case: float = 3.0
    warmup_calls: int = 3
    warmup_ms: float = 50.0  # and at least this long per function: an idle GPU needs time to reach its clocks
    bootstrap_resamples: int = 2000
    seed: int = 0
    time_eager: bool = True

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
