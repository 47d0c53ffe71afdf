"""Test doubles for methods: a MethodContext with a real ledger account and scripted
feedback, and a scripted model client. Branch tests become exact and fast: no worker, no GPU,
no store; the budget is still enforced by the real `modelio.ledger` code."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from methods.base import Candidate, Feedback, TestResult
from modelio.ledger import Ledger
from modelio.simulated import SimulatedModel
from modelio.tokens import count_tokens
from modelio.types import Completion, Message, Request


class MemoryRecorder:
    """The ledger's CallRecorder, in memory: nothing recorded before, every call kept."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def recorded_call(self, method: str, task: str, repeat: int, call_index: int) -> Any:
        return None

    def record_call(self, row: dict[str, Any]) -> None:
        self.rows.append(row)


class ScriptedClient:
    """Answers every request with `reply(request)`."""

    model = "scripted"
    simulated = True

    def __init__(self, reply: Callable[[Request], str]):
        self.reply = reply

    def complete(self, request: Request) -> Completion:
        text = self.reply(request)
        return Completion(text=text, prompt_tokens=count_tokens(request.prompt_text()),
                          completion_tokens=count_tokens(text), model=self.model)


def feedback(verdict: str = "correct", latency_ms: float | None = None, message: str = "",
             noise: float = 0.0, traceback: str = "") -> Feedback:
    """A visible verdict; a timed one (latency_ms) is against a 1 ms expert kernel, its speedup
    interval +-`noise` (relative) around the point estimate; `traceback`: the candidate's frames."""
    if verdict != "correct" and not message:
        message = "1024/4096 elements outside atol=0.0001 rtol=0.0001"
    speedup = 1.0 / latency_ms if latency_ms else None
    ci = (speedup * (1 - noise), speedup * (1 + noise)) if speedup is not None else None
    return Feedback(verdict=verdict, message=message, failing_case=None if verdict == "correct" else "visible-n4096",
                    latency_ms=latency_ms, speedup=speedup, speedup_ci=ci, traceback=traceback)


def suite_result(passed: bool) -> Feedback:
    results = (TestResult("test_small", True), TestResult("test_tail", passed, "" if passed else "AssertionError"))
    return Feedback(verdict="correct" if passed else "wrong_result", message="", failing_case=None, latency_ms=None,
                    speedup=None, tests=results, kind="tests")


@dataclass
class Call:
    role: str
    temperature: float
    json_mode: bool
    messages: list[Message]
    max_tokens: int | None = None
    wants_code: bool = False


@dataclass
class FakeContext:
    """A MethodContext. `visible` and `tests` are scripts: the i-th visible evaluation gets
    `visible[i]` (the last entry repeats), likewise for test runs; or callables (i, candidate)."""

    budget: int
    client: Any = None
    visible: Any = None
    tests: Any = None
    vendor: str = "nvidia"
    answer_format: str = "fenced"
    json_mode: bool = False
    examples: Any = None  # a bench.oneshot GuardedRetriever, or a callable (query, by) -> code; None: no examples
    calls: list[Call] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    submissions: list[Candidate] = field(default_factory=list)
    visible_runs: list[Candidate] = field(default_factory=list)
    test_runs: list[tuple[Candidate, str]] = field(default_factory=list)
    run_starts: list[int] = field(default_factory=list)  # calls used when each declared run began
    run_independent: list[bool] = field(default_factory=list)
    example_queries: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.recorder = MemoryRecorder()
        self.ledger = Ledger(self.client or SimulatedModel(), self.recorder, self.budget)
        self.account = self.ledger.account("method", "vector_add", 0)

    def ask(self, messages: list[Message], *, temperature: float, role: str, max_tokens: int | None = None,
            wants_code: bool = False) -> Completion:
        json_mode = self.json_mode and wants_code
        completion = self.account.complete(messages, temperature=temperature, role=role, max_tokens=max_tokens,
                                           json_mode=json_mode)
        self.calls.append(Call(role, temperature, json_mode, list(messages), max_tokens, wants_code))
        return completion

    def example(self, query: str, by: str) -> str | None:
        self.example_queries.append((by, query))
        if self.examples is None:
            return None
        if callable(self.examples):
            return self.examples(query, by)  # type: ignore[no-any-return]
        shown = self.examples.best(query, by)
        return shown.program.code if shown is not None else None

    def propose(self, source: str) -> Candidate:
        candidate = Candidate(len(self.candidates), source, self.account.spend.calls)
        self.candidates.append(candidate)
        return candidate

    @staticmethod
    def _scripted(script: Any, i: int, candidate: Candidate, default: Feedback) -> Feedback:
        if script is None:
            return default
        if callable(script):
            return script(i, candidate)
        return script[min(i, len(script) - 1)]

    def feedback(self, candidate: Candidate) -> Feedback:
        fb = self._scripted(self.visible, len(self.visible_runs), candidate, feedback("correct"))
        self.visible_runs.append(candidate)
        return fb

    def run_tests(self, candidate: Candidate, tests: str) -> Feedback:
        fb = self._scripted(self.tests, len(self.test_runs), candidate, suite_result(True))
        self.test_runs.append((candidate, tests))
        return fb

    def begin_run(self, independent: bool = True) -> None:
        self.run_starts.append(self.account.spend.calls)
        self.run_independent.append(independent)

    def submit(self, candidate: Candidate) -> None:
        if not self.submissions or self.submissions[-1].source != candidate.source:
            self.submissions.append(candidate)

    def calls_used(self) -> int:
        return self.account.spend.calls

    def remaining(self) -> int:
        return self.account.remaining()

    def evaluations_left(self) -> int | None:
        return None

    @property
    def roles(self) -> list[str]:
        return [c.role for c in self.calls]


def json_code_reply(code: str, thought: str = "plan") -> str:
    return json.dumps({"thought": thought, "code": code})
