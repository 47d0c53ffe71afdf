"""Hidden verdicts already decided by what was judged before, recorded without another job
(issue 42 item 3). Only failures are ever carried over, never a pass, and only where the
earlier job ran exactly what the hidden job would run first:

- a visible evaluation that failed before any case (the source did not import or compile, or
  has no entry point), or on the first visible case: the hidden set begins with the visible
  cases, the same Case objects drawn from the same seeds (bench/task.py `Task.cases`), judged in
  a fresh process, so the hidden job would stop there with the same verdict.
  Timeouts and crashes are not carried over (a limit or the machine may differ), nor a verdict
  that mentions running out of memory (the pool retries those alone);
- a timed hidden evaluation that passed: the untimed hidden job judges the same cases and no
  more, so the final submission's two hidden jobs become one.

Pure functions over stored evaluation JSON; runners/evaluator.py looks the earlier results up.
"""

from __future__ import annotations

from typing import Any

from judge.candidate.verdict import Evaluation, Verdict

NOT_CARRIED = ("correct", "timeout", "crash")


def carried_failure(visible: dict[str, Any] | None, first_case: str) -> Evaluation | None:
    """The hidden evaluation a stored visible one decides, or None. `first_case`: the name of
    the task's first visible case, the hidden set's first case too."""
    if not visible:
        return None
    verdict = Verdict.from_json(visible["verdict"])
    if verdict.kind in NOT_CARRIED or "out of memory" in verdict.message.lower():
        return None
    before_any_case = verdict.cases_run == 0 and verdict.failing_case is None
    on_the_first_case = verdict.failing_case == first_case and verdict.cases_run == 0
    if not (before_any_case or on_the_first_case):
        return None
    return Evaluation(verdict, None)


def untimed_from_timed(timed: dict[str, Any] | None) -> Evaluation | None:
    """The untimed hidden evaluation a stored timed one that passed decides, or None."""
    if not timed:
        return None
    verdict = Verdict.from_json(timed["verdict"])
    return Evaluation(verdict, None) if verdict.kind == "correct" else None
