"""What the pool asks a judge worker and what the worker answers: typed records shared by both
sides of the job channel (runners/pool.py and runners/worker_process.py write jobs and read
replies; judge/worker.py reads jobs and writes replies), as JSON lines.

Why typed: as plain dicts, each side read the other's fields with `.get` and a default of its
own, so a field renamed on one side, or a default that differed, went unnoticed (issue 42
item 4). Here each field has one name, one type and one default, and a line that lacks a
required field or carries an unknown one is refused (`JobError`) by whoever reads it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

EVALUATION = "evaluation"
INTERNAL_TESTS = "internal_tests"  # judge/candidate/internal_tests.py JOB_KIND
COMPILE_AHEAD = "compile_ahead"
"""An evaluation's kernels compiled into its source's shared Triton cache while the evaluation
waits for a judging worker, by a worker that judges nothing (runners/compile_ahead.py)."""
KINDS = (EVALUATION, INTERNAL_TESTS, COMPILE_AHEAD)
DEFAULT_LIMIT_S = 600.0


class JobError(ValueError):
    """A job or reply line that is not one."""


@dataclass(frozen=True)
class Job:
    """One job for a judge worker. `kind` EVALUATION: judge `source` on `case_set` (timed with
    `timing_policy` when `timing`); INTERNAL_TESTS: run a method's own `tests` against it;
    COMPILE_AHEAD: only the compile pass of the evaluation it stands for, nothing judged.
    `alone`: hold the GPU's gate exclusively throughout (a retry after running out of GPU
    memory beside other jobs). `references`: reference timings the pool already has for the
    task (runners/references.py); `prime_references`: measure them whatever the verdict.
    `compile_through`: the case a hidden job's source failed on in its visible run (the hidden
    set begins with the visible cases): its compile pass stops at that case
    (judge/precompile.py `cases_to_compile`); a hint for speed, never for the verdict.
    `id` and `nonce` are set by the worker's handle when it sends the job
    (runners/worker_process.py), so a reply names the job it answers."""

    task: str
    source: str
    kind: str = EVALUATION
    case_set: str = "hidden"
    timing: bool = False
    timing_policy: dict[str, Any] | None = None
    sanitize: bool = False
    tests: str = ""
    per_test_timeout: float | None = None
    references: tuple[dict[str, Any], ...] = ()
    prime_references: bool = False
    alone: bool = False
    compile_through: str = ""
    timeout: float = DEFAULT_LIMIT_S
    id: int = 0
    nonce: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise JobError(f"a job of unknown kind {self.kind!r}")

    @property
    def tests_job(self) -> bool:
        return self.kind == INTERNAL_TESTS

    @property
    def compile_only(self) -> bool:
        return self.kind == COMPILE_AHEAD

    def with_(self, **changes: Any) -> Job:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        return _as_json(self)

    @classmethod
    def from_json(cls, d: Any) -> Job:
        fields = _checked(cls, d, required=("task", "source"))
        if "references" in fields:
            fields["references"] = tuple(fields["references"] or ())
        return cls(**fields)


DEVICE_ERROR = "device error in the judge"
"""`JobReply.restart_reason` when the judge's own GPU context failed during the job: its worker
is restarted, and the pool judges the job again once (runners/pool.py `_run_job_retried`)."""


@dataclass(frozen=True)
class JobReply:
    """A judge worker's answer to `Job` number `id`: the evaluation's JSON (judge/candidate/
    verdict.py `Evaluation`, plus `tests` for a tests job), whether the worker must be
    restarted before its next job (`fatal`, `restart_reason`), how the candidate was contained,
    and reference timings it measured for the pool to share."""

    id: int
    nonce: str
    evaluation: dict[str, Any]
    fatal: bool = False
    restart_reason: str = ""
    contained: str = ""
    references: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return _as_json(self)

    @classmethod
    def from_json(cls, d: Any) -> JobReply:
        fields = _checked(cls, d, required=("id", "nonce", "evaluation"))
        if not isinstance(fields["evaluation"], dict):
            raise JobError("a reply whose evaluation is not an object")
        fields["references"] = tuple(fields.get("references") or ())
        return cls(**fields)


def _as_json(record: Job | JobReply) -> dict[str, Any]:
    d = dataclasses.asdict(record)
    d["references"] = list(record.references)  # a JSON array, as `from_json` reads it back
    return d


_NUMBER = (int, float)
_TYPES: dict[str, tuple[type, ...]] = {
    "task": (str,), "source": (str,), "kind": (str,), "case_set": (str,), "timing": (bool,),
    "timing_policy": (dict, type(None)), "sanitize": (bool,), "tests": (str,),
    "per_test_timeout": (*_NUMBER, type(None)), "references": (list, tuple), "prime_references": (bool,),
    "alone": (bool,), "compile_through": (str,), "timeout": _NUMBER, "id": (int,), "nonce": (str,),
    "evaluation": (dict,), "fatal": (bool,),
    "restart_reason": (str,), "contained": (str,),
}
"""Each field's JSON types, checked as a line is read."""


def _checked(cls: type, d: Any, required: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise JobError(f"a {cls.__name__} line that is not an object: {str(d)[:200]}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise JobError(f"a {cls.__name__} with unknown field(s) {', '.join(unknown)}")
    missing = [name for name in required if name not in d]
    if missing:
        raise JobError(f"a {cls.__name__} without {', '.join(missing)}")
    for name, value in d.items():
        types = _TYPES[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise JobError(f"a {cls.__name__} whose {name} is a {type(value).__name__}")
    return dict(d)
