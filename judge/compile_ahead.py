"""A compile-ahead worker: a judge worker (judge/worker.py) that judges nothing. It runs the compile
pass (judge/precompile.py) of evaluations still waiting for a judging worker
(runners/compile_ahead.py sends them), so their kernels are in their sources' shared Triton
caches (judge/source_caches.py) by the time a judging worker takes them, and that worker's own
pass finds them there instead of compiling.

Why: on an H100 the 7-task command was bound by its four judging workers (results/occupancy.py:
every one busy with jobs waiting for 89-92% of the span), and compiles were 74 of the fastest
run's 309 worker-seconds, while the CPU was 70% idle and a compile needs no GPU. More judging
workers do not help (8 were slower than 4: their contexts take turns on the GPU); workers that
only compile add no context that computes.

What it does not change: its candidate processes are the same sandboxed, forked processes as a
judging worker's, lent the same side of the source's cache the evaluation itself would be lent
(a hidden evaluation's hidden side, never the visible one), so nothing here lets a process see
what it could not see before. They make no GPU context (judge/spares.py `contexts=False`) and
load no kernel (judge/candidate/precompile.py `_drive`), so they take no ticket at the GPU's gate
and hold no device memory. What they compile decides nothing: a kernel the judged process does
not find compiles at its own pass or launch, as without this.
"""

from __future__ import annotations

import os
from typing import Any

COMPILE_WORKER_ENV = "KMC_COMPILE_WORKER"
""""1" in a worker's environment: a compile-ahead worker (set by runners/compile_ahead.py only)."""
NOTHING_JUDGED = "nothing judged: a compile-ahead job"
REFUSED = "a compile-ahead worker judges nothing: its candidate processes have no GPU context"


def compile_worker() -> bool:
    """Whether this judge worker only compiles ahead (`COMPILE_WORKER_ENV`)."""
    return os.environ.get(COMPILE_WORKER_ENV) == "1"


def compiled_only(task: Any, job: Any, proc: Any) -> tuple[Any, None]:
    """The body of a compile-ahead job (judge/worker.py `_run` loads the source and runs its
    pass before the body): nothing more. Its reply is not a verdict, and the pool reads
    nothing from it but the pass's counts."""
    from judge.candidate.verdict import Verdict

    return Verdict("runtime_error", NOTHING_JUDGED), None

