"""`show RUN_DIR --method M --task T`: what one method did on one task, from the store.

Why: the kernels a method generated, the verdicts they got and the feedback it saw live only
in store.sqlite; a reviewer who doubts a number needs to read the submitted kernel, its
hidden verdict with the judge's message, and the trail that led to it (each model call,
each candidate, each piece of visible feedback or own-test result, each change of
submission) in the order the unit lived it. `--all` adds every candidate's code, `--calls`
every prompt and reply.
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from record.run_folder import RunFolder
from record.store import Store
from results.readers import RunData, RunError, deciding_evaluation, load_run


@dataclass(frozen=True)
class CandidateView:
    index: int
    run_index: int
    calls_used: int
    tokens_used: int
    source_hash: str
    hidden_verdict: str | None
    hidden_message: str
    visible_verdict: str | None
    submitted: bool
    final: bool
    source: str | None = None  # the code: the final submission always, every candidate with `all_candidates`


@dataclass(frozen=True)
class TrailEvent:
    calls_used: int  # the unit's spend (in calls) when it happened
    kind: str  # call | candidate | feedback | tests | submission
    text: str


@dataclass(frozen=True)
class UnitView:
    run: str
    method: str
    task: str
    repeat: int
    repeats: int
    simulated: bool
    calls_used: int
    prompt_tokens: int
    completion_tokens: int
    evaluations: int
    error: str | None
    speedup: float | None
    final: CandidateView | None
    candidates: tuple[CandidateView, ...]
    trail: tuple[TrailEvent, ...]
    calls: tuple[dict[str, Any], ...] = field(default_factory=tuple)  # prompts and replies, with `include_calls`

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def format(self) -> str:
        label = "  [SIMULATED MODEL]" if self.simulated else ""
        lines = [f"{self.method} on {self.task}, repeat {self.repeat} of {self.repeats} -- run {self.run}{label}",
                 f"spent {self.calls_used} calls, {self.prompt_tokens} prompt + {self.completion_tokens} completion "
                 f"tokens, {self.evaluations} GPU evaluations (visible feedback and own tests)"
                 + (f"; ended on: {self.error}" if self.error else "")]
        if self.final is None:
            lines.append("submitted: nothing (no candidate was ever submitted)")
        else:
            f = self.final
            speed = f"; speedup vs expert {self.speedup:.3f}x" if self.speedup is not None else ""
            lines.append(f"submitted: candidate {f.index} (at {f.calls_used} calls): hidden {f.hidden_verdict}"
                         + (f" -- {f.hidden_message}" if f.hidden_message else "") + speed)
            lines += ["", "----- submitted kernel " + "-" * 50, (f.source or "").rstrip(), "-" * 73]
        lines += ["", "trail (calls spent when it happened):"]
        lines += [f"  [{e.calls_used:>4}] {e.kind:<10} {e.text}" for e in self.trail]
        others = [c for c in self.candidates if c.source is not None and not c.final]
        for c in others:
            lines += ["", f"----- candidate {c.index} (at {c.calls_used} calls; hidden {c.hidden_verdict}, visible "
                      f"{c.visible_verdict or 'not asked'}) " + "-" * 10, (c.source or "").rstrip()]
        for call in self.calls:
            lines += ["", f"----- call {call['call_index']} ({call['role']}) " + "-" * 40]
            for m in json.loads(call["messages"] or "[]"):
                lines += [f"[{m['role']}]", m["content"].rstrip()]
            lines += ["[reply]", (call["response"] or f"(failed: {call['error']})").rstrip()]
        return "\n".join(lines)


def show_unit(run_dir: Path, method: str, task: str, repeat: int = 0, all_candidates: bool = False,
              include_calls: bool = False) -> UnitView:
    """The unit (method, task, repeat) of a run; RunError (one line, with the nearest names)
    when the run has no such finished unit."""
    data = load_run(Path(run_dir))
    _check_names(data, method, task)
    units = data.units[(data.units["method"] == method) & (data.units["task"] == task)]
    mine = units[units["run_repeat"] == repeat]
    if mine.empty:
        done = sorted(units["run_repeat"].tolist())
        raise RunError(f"{method} on {task} has no finished repeat {repeat}"
                       + (f" (finished: {', '.join(map(str, done))})" if done else " (none finished)"))
    u = mine.iloc[0]

    def unit_rows(df: pd.DataFrame) -> pd.DataFrame:
        return df[(df["method"] == method) & (df["task"] == task) & (df["run_repeat"] == repeat)]

    cands, subs = unit_rows(data.candidates), unit_rows(data.submissions)
    feedback, tests, calls = unit_rows(data.feedback), unit_rows(data.test_runs), unit_rows(data.calls)
    store = Store.for_reading(RunFolder(data.first.path).store_path)
    try:
        final_hash = str(subs.iloc[-1]["source_hash"]) if len(subs) else None
        submitted = set(subs["source_hash"])
        views = []
        for c in cands.itertuples(index=False):
            h = str(c.source_hash)
            hidden = _evaluation(store, data, h, task, "hidden")
            want_code = all_candidates or h == final_hash
            views.append(CandidateView(
                int(c.candidate_index), int(c.run_index), int(c.calls_used), int(c.tokens_used), h,
                _str(c.hidden_verdict), _message(hidden), _str(c.visible_verdict), h in submitted, h == final_hash,
                store.source(h) if want_code else None))
        final = next((v for v in reversed(views) if v.final), None)
        if final is None and final_hash is not None:  # submitted code that was never proposed (a plugin's)
            hidden = _evaluation(store, data, final_hash, task, "hidden")
            final = CandidateView(-1, -1, int(subs.iloc[-1]["calls_used"]), int(subs.iloc[-1]["tokens_used"]),
                                  final_hash, _verdict(hidden), _message(hidden), None, True, True,
                                  store.source(final_hash))
        trail = _trail(store, data, task, calls, cands, feedback, tests, subs)
        full_calls = tuple(store.unit_calls(method, task, repeat)) if include_calls else ()
    finally:
        store.close()
    speedup = float(u["speedup"]) if math.isfinite(float(u["speedup"])) else None
    return UnitView(data.first.name, method, task, repeat, data.first.repeats, data.simulated, int(u["calls_used"]),
                    int(u["prompt_tokens"]), int(u["completion_tokens"]), int(u["feedback_evals"]),
                    _str(u["error"]), speedup, final, tuple(views), tuple(trail), full_calls)


def _check_names(data: RunData, method: str, task: str) -> None:
    for what, name, known in (("method", method, data.methods), ("task", task, data.tasks)):
        if name not in known:
            near = difflib.get_close_matches(name, list(known), n=1)
            hint = f"; did you mean {near[0]}?" if near else f"; the run has: {', '.join(known)}"
            raise RunError(f"the run has no {what} {name!r}{hint}")


def _str(x: Any) -> str | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return str(x)


def _evaluation(store: Store, data: RunData, h: str, task: str, case_set: str) -> dict[str, Any] | None:
    return deciding_evaluation(store, data.evaluations, h, task, case_set)


def _verdict(evaluation: dict[str, Any] | None) -> str | None:
    return str(evaluation["verdict"]["kind"]) if evaluation else None


def _message(evaluation: dict[str, Any] | None) -> str:
    if not evaluation:
        return ""
    v = evaluation["verdict"]
    where = f"on {v['failing_case']}: " if v.get("failing_case") else ""
    text = (v.get("message") or "").strip().splitlines()
    return (where + (text[0][:300] if text else "")).strip()


def _trail(store: Store, data: RunData, task: str, calls: pd.DataFrame, cands: pd.DataFrame,
           feedback: pd.DataFrame, tests: pd.DataFrame, subs: pd.DataFrame) -> list[TrailEvent]:
    """Every event of the unit, in the order it happened: a call at index i brought the spend to
    i + 1 calls; what followed it (candidate, feedback, tests, submission) carries that spend."""
    events: list[tuple[int, int, int, TrailEvent]] = []
    for c in calls.itertuples(index=False):
        failed = f"; FAILED: {c.error}" if _str(c.error) else ""
        charged = "" if int(c.charged) else " (not charged)"
        text = f"call {int(c.call_index)} ({c.role}): {int(c.prompt_tokens)} prompt + " \
               f"{int(c.completion_tokens)} completion tokens{charged}{failed}"
        events.append((int(c.call_index) + 1, 0, int(c.call_index), TrailEvent(int(c.call_index) + 1, "call", text)))
    for c in cands.itertuples(index=False):
        text = (f"candidate {int(c.candidate_index)} ({str(c.source_hash)[:10]}): hidden {_str(c.hidden_verdict)}"
                + (f", run {int(c.run_index)}" if int(c.run_index) >= 0 else ""))
        events.append((int(c.calls_used), 1, int(c.candidate_index), TrailEvent(int(c.calls_used), "candidate", text)))
    for f in feedback.itertuples(index=False):
        seen = _message(_evaluation(store, data, str(f.source_hash), task, "visible"))
        text = f"visible feedback on {str(f.source_hash)[:10]}: {f.verdict}" + (f" -- {seen}" if seen else "")
        events.append((int(f.calls_used), 2, int(f.feedback_index), TrailEvent(int(f.calls_used), "feedback", text)))
    for t in tests.itertuples(index=False):
        text = (f"own tests on {str(t.source_hash)[:10]}: {t.verdict}, {int(t.tests_passed)}/{int(t.tests_total)} "
                "passed")
        events.append((int(t.calls_used), 2, int(t.test_run_index), TrailEvent(int(t.calls_used), "tests", text)))
    for s in subs.itertuples(index=False):
        text = f"submits {str(s.source_hash)[:10]} (hidden {_str(s.hidden_verdict)})"
        events.append((int(s.calls_used), 3, int(s.submission_index),
                       TrailEvent(int(s.calls_used), "submission", text)))
    return [e for *_, e in sorted(events, key=lambda x: x[:3])]
