"""Verdict and Timing records: the two facts every reported number rests on.

They cross process boundaries (worker -> parent -> store) as plain JSON, so each has an
exact `to_json` / `from_json` pair; nothing is matched by position.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

FINAL_FULL = "final-full"  # judge/policy.py FINAL_FULL (this module is candidate-side: it imports nothing of the project)

VERDICT_KINDS = (
    "correct",
    "syntax_error",
    "compile_error",
    "runtime_error",
    "timeout",
    "crash",
    "wrong_result",
    "no_kernel",
    "missing_entry_point",  # the code imported, but defines no callable under the task's entry-point name
    "torch_fallback",  # PyTorch did arithmetic outside Triton kernels beyond the task's allow-list
    # The CPU interpreter lacks a feature the kernel uses (judge/candidate/interpreter_support.py): neither a
    # pass nor the candidate's fault; judged on a GPU, counted apart in reports.
    "unsupported_on_interpreter",
)


@dataclass(frozen=True)
class CaseResult:
    case: str
    ok: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    skipped: str | None = None


@dataclass(frozen=True)
class Verdict:
    kind: str
    message: str = ""
    failing_case: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    cases_run: int = 0
    cases_skipped: int = 0
    skip_reasons: tuple[str, ...] = ()
    kernel_launched: bool = False
    worker_restarted: bool = False
    # The candidate's own frames when it raised (judge/candidate/tracebacks.py): feedback shows them
    # after the message; "" when it did not raise or none of its lines was on the stack.
    traceback: str = ""

    def __post_init__(self) -> None:
        if self.kind not in VERDICT_KINDS:
            raise ValueError(f"unknown verdict kind {self.kind!r}")

    @property
    def compiled(self) -> bool:
        return self.kind not in ("syntax_error", "compile_error")

    @property
    def ran(self) -> bool:
        return self.kind in ("correct", "wrong_result", "no_kernel", "torch_fallback")

    @property
    def correct(self) -> bool:
        return self.kind == "correct"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["skip_reasons"] = list(self.skip_reasons)
        if not self.traceback:  # absent, as in records written before tracebacks were kept
            del d["traceback"]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Verdict:
        d = dict(d)
        d["skip_reasons"] = tuple(d.get("skip_reasons", ()))
        return cls(**d)

    def one_line(self) -> str:
        where = f" on {self.failing_case}" if self.failing_case else ""
        msg = f": {self.message.splitlines()[0][:300]}" if self.message else ""
        return f"{self.kind}{where}{msg}"


def capped_traceback(text: Any) -> str:
    """A traceback as the judge accepts it from a candidate process (which wrote it, so it may
    be anything): a string, at most judge/candidate/tracebacks.py's cap plus a margin."""
    from judge.candidate.tracebacks import MAX_CHARS

    return text[:MAX_CHARS + 100] if isinstance(text, str) else ""


def missing_entry_point(entry_name: str, module: Any) -> Verdict:
    """The verdict for a candidate that imported but has no callable `entry_name`; the message
    names the functions it does define (the nearest first), since the usual cause is a rename."""
    import difflib
    import inspect

    defined = sorted(n for n, v in vars(module).items()
                     if not n.startswith("__") and (inspect.isfunction(v) or inspect.isclass(v))
                     and getattr(v, "__module__", None) == getattr(module, "__name__", None))
    near = difflib.get_close_matches(entry_name, defined, n=1, cutoff=0.4)
    names = near + [n for n in defined if n not in near]
    found = f"it defines {', '.join(names[:8])}{', ...' if len(names) > 8 else ''}" if names else "it defines none"
    hint = f"; did you mean {near[0]}?" if near else ""
    return Verdict("missing_entry_point", f"the candidate defines no function {entry_name!r} ({found}{hint}): "
                   "the entry point must carry exactly the task's name")


@dataclass(frozen=True)
class TestOutcome:
    """One of a method's own test functions, run against a candidate (judge/candidate/internal_tests.py);
    the scheduler hands it to the method as `methods.api.TestResult`."""

    name: str
    passed: bool
    message: str = ""


@dataclass(frozen=True)
class CaseTiming:
    """Interleaved candidate and baseline samples for one case, in milliseconds."""

    case: str
    candidate_ms: tuple[float, ...]
    baseline_ms: tuple[float, ...]
    eager_ms: tuple[float, ...] = ()
    launches_per_sample: int = 1
    method: str = "events"
    candidate_wall_ms: float | None = None  # synchronised wall clock per call (side-stream check)
    baseline_wall_ms: float | None = None
    # Clock readings (judge/clocks.py) just before and after this case's samples: the clock
    # state each sample set was taken under. Empty in records written before they were kept.
    clocks_before: dict[str, Any] = field(default_factory=dict)
    clocks_after: dict[str, Any] = field(default_factory=dict)
    # Where the baseline and eager samples come from: "interleaved" (taken round by round with
    # the candidate's: the full protocol), "fresh" (measured for this job and cached) or
    # "reused" (a cached measurement; judge/baselines.py). Records older than the short
    # protocol read "interleaved", which is what they were.
    baseline_source: str = "interleaved"
    early_stopped: bool = False  # the short protocol's sequential rule stopped before the sample cap
    decision: str | None = None  # its decision against 1.0x (stats/sequential.py), None when undecided

    def median(self, which: str = "candidate") -> float:
        import statistics

        samples = {"candidate": self.candidate_ms, "baseline": self.baseline_ms, "eager": self.eager_ms}[which]
        return statistics.median(samples) if samples else float("nan")


@dataclass(frozen=True)
class Timing:
    cases: tuple[CaseTiming, ...]
    clocks_before: dict[str, Any] = field(default_factory=dict)
    clocks_after: dict[str, Any] = field(default_factory=dict)
    flagged: bool = False
    flag_reasons: tuple[str, ...] = ()
    speedup_vs_baseline: float | None = None
    speedup_ci: tuple[float, float] | None = None
    speedup_vs_eager: float | None = None
    candidate_ms: float | None = None
    clocks_locked: bool | None = None  # clocks locked by --lock-clocks while timing; None: not recorded
    protocol: str = FINAL_FULL  # which protocol produced these numbers (judge/policy.py PROTOCOLS)
    drift_events: tuple[dict[str, Any], ...] = ()  # cached references found out of date (judge/baselines.py)

    @property
    def samples_taken(self) -> int:
        """Candidate samples over every case (the cost the short protocol saves)."""
        return sum(len(c.candidate_ms) for c in self.cases)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> Timing | None:
        if d is None:
            return None
        d = dict(d)
        d["cases"] = tuple(
            CaseTiming(**{**c, "candidate_ms": tuple(c["candidate_ms"]), "baseline_ms": tuple(c["baseline_ms"]),
                          "eager_ms": tuple(c.get("eager_ms", ()))})
            for c in d["cases"]
        )
        d["flag_reasons"] = tuple(d.get("flag_reasons", ()))
        d["drift_events"] = tuple(dict(e) for e in d.get("drift_events", ()))
        if d.get("speedup_ci") is not None:
            d["speedup_ci"] = tuple(d["speedup_ci"])
        return cls(**d)


@dataclass(frozen=True)
class Evaluation:
    """One candidate judged on one case set: the verdict plus, on a GPU, the timing, and the
    seconds each phase took (judge/phases.py; kept apart from the verdict by the store)."""

    verdict: Verdict
    timing: Timing | None = None
    phases: dict[str, float] | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"verdict": self.verdict.to_json(), "timing": self.timing.to_json() if self.timing else None}
        if self.phases is not None:
            d["phases"] = dict(self.phases)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Evaluation:
        return cls(verdict=Verdict.from_json(d["verdict"]), timing=Timing.from_json(d.get("timing")),
                   phases=d.get("phases"))
