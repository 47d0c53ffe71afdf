"""Reflexion (Shinn et al. 2023, programming runs) adapted to kernels, as independent trials.

One trial, in the default `feedback="internal"` mode (the paper's):
1. a test-writing call (temperature `reflect_temperature`, 0.2) asks for `n_tests` (5) unit
   tests: Python `def test_*()` functions that call the entry point on small inputs and
   compare it with a PyTorch expression. They are AST-filtered (methods/extract.py
   `extract_tests`: top-level test functions that parse, take no arguments, carry no
   decorator and contain an assert; the first `n_tests` are kept; the paper says "up to 6",
   5 keeps the prompt and the run short);
2. an implementation call (temperature `impl_temperature`: 1.0 by default, the temperature of every
   other method's code-writing calls; the paper's 0 in configs/paper.yaml);
3. while the implementation fails its tests and fewer than `max_iters` implementations
   exist: a self-reflection call (sees only the implementation and its test results) and a
   re-implementation call (sees the task, the previous implementation, the test results and
   the latest reflection: a memory of one).
A trial costs 1 + 1 + 2 x (iterations - 1) calls. The tests run in the sandboxed worker
through `ctx.run_tests`; the method never runs code. "Pass" means the candidate imported
and every kept test passed (with no test kept, an importable candidate passes: there is
nothing to reflect on). Self-written tests can be wrong or too weak; that is the point of
the faithful mode (false positives drove the paper's weaker MBPP results), and the scheduler
judges every candidate on the hidden cases anyway.

`feedback="visible"`: the harness's visible cases replace the self-written tests (no
test-writing call; a trial costs 1 + 2 x (iterations - 1) calls).

Trials repeat until the budget is spent (the last trial may be cut short by it). Trials are
independent runs only when `impl_temperature` is above 0: at the paper's 0 a deterministic
model writes the same first implementation in every trial, so the trials are declared not
independent (`ctx.begin_run(independent=False)`) and pass@k over them is not computed; the
matched preset (configs/matched.yaml) samples implementations at 1.0, like the other methods.
Submission rule: the final implementation of the latest trial whose implementation passed
its own feedback; before any passes, the latest implementation.
Context: `knowledge` and `oneshot` (an example matched on the instruction, shown in the
implementation prompts) as for every method. Reply caps: `code_max_tokens` for the test and
implementation calls, `text_max_tokens` for reflections (GEAK-v1's 15000 and 5000).
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.task import TaskView
from methods.base import Candidate, Feedback, MethodContext
from methods.extract import NO_CODE_FEEDBACK, TestSuite, extract_code, extract_tests
from methods.registry import register_method
from methods.templates import (
    CODE_MAX_TOKENS,
    TEXT_MAX_TOKENS,
    answer_request,
    fenced,
    oneshot_block,
    render,
    system_prompt,
    task_block,
)
from modelio.types import Message

FEEDBACK_MODES = ("internal", "visible")


@dataclass(frozen=True)
class Implementation:
    """One implementation of a trial and what its feedback said (None: no code in the reply)."""

    code: str | None
    candidate: Candidate | None
    feedback: Feedback | None

    @property
    def passed(self) -> bool:
        return self.feedback is not None and self.feedback.correct

    def feedback_text(self) -> str:
        return self.feedback.describe() if self.feedback else NO_CODE_FEEDBACK


@register_method("reflexion")
class Reflexion:
    def __init__(self, max_iters: int = 5, impl_temperature: float = 1.0, reflect_temperature: float = 0.2,
                 feedback: str = "internal", n_tests: int = 5, knowledge: bool = True, oneshot: bool = True,
                 code_max_tokens: int | None = CODE_MAX_TOKENS, text_max_tokens: int | None = TEXT_MAX_TOKENS):
        if feedback not in FEEDBACK_MODES:
            raise ValueError(f"feedback must be internal or visible, not {feedback!r}")
        if max_iters < 1:
            raise ValueError("max_iters must be at least 1")
        if n_tests < 1:
            raise ValueError("n_tests must be at least 1")
        self.max_iters = max_iters
        self.impl_temperature = impl_temperature
        self.reflect_temperature = reflect_temperature
        self.feedback = feedback
        self.n_tests = n_tests
        self.knowledge = knowledge
        self.oneshot = oneshot
        self.code_max_tokens = code_max_tokens
        self.text_max_tokens = text_max_tokens
        self.trial_calls: list[int] = []  # calls each finished trial used (tests read it)

    def run(self, task: TaskView, ctx: MethodContext) -> None:
        system = Message("system", system_prompt(ctx.vendor, self.knowledge))
        block = task_block(task, self.knowledge)
        example = oneshot_block(ctx.example(task.instruction, "description") if self.oneshot else None)
        passed_any = False
        while True:
            ctx.begin_run(independent=self.impl_temperature > 0)  # each trial is one run
            start = ctx.calls_used()
            passed_any = self._trial(task, ctx, system, block, example, passed_any)
            self.trial_calls.append(ctx.calls_used() - start)

    def _trial(self, task: TaskView, ctx: MethodContext, system: Message, block: str, example: str,
               passed_any: bool) -> bool:
        tests: TestSuite | None = None
        if self.feedback == "internal":
            prompt = render("reflexion_tests", task=block, n=str(self.n_tests), entry_point=task.entry_point,
                            answer=answer_request(ctx.answer_format, "the tests"))
            reply = ctx.ask([system, Message("user", prompt)], temperature=self.reflect_temperature, role="tests",
                            max_tokens=self.code_max_tokens, wants_code=True)
            tests = extract_tests(reply.text, self.n_tests)
        answer = answer_request(ctx.answer_format)
        reply = ctx.ask([system, Message("user", render("direct_generate", task=block, oneshot=example, answer=answer))],
                        temperature=self.impl_temperature, role="implement", max_tokens=self.code_max_tokens,
                        wants_code=True)
        impl = self._judge(ctx, extract_code(reply.text), tests)
        passed_any = self._maybe_submit(ctx, impl, passed_any)
        iterations = 1
        while iterations < self.max_iters and not impl.passed:
            shown = fenced(impl.code) if impl.code else "(no code was produced)"
            fb_text = impl.feedback_text()
            reflection = ctx.ask([system, Message("user", render("reflexion_reflect", code=shown, feedback=fb_text))],
                                 temperature=self.reflect_temperature, role="reflect",
                                 max_tokens=self.text_max_tokens).text
            reply = ctx.ask([system, Message("user", render("reflexion_reimplement", task=block, oneshot=example,
                                                            code=shown, feedback=fb_text, reflection=reflection,
                                                            answer=answer))],
                            temperature=self.impl_temperature, role="implement", max_tokens=self.code_max_tokens,
                            wants_code=True)
            iterations += 1
            code = extract_code(reply.text)
            # A reply without code is a failed re-implementation; the next round still shows the last code.
            impl = self._judge(ctx, code, tests) if code is not None else Implementation(impl.code, None, None)
            passed_any = self._maybe_submit(ctx, impl, passed_any)
        return passed_any

    def _judge(self, ctx: MethodContext, code: str | None, tests: TestSuite | None) -> Implementation:
        if code is None:
            return Implementation(None, None, None)
        candidate = ctx.propose(code)
        if tests is None:
            return Implementation(code, candidate, ctx.feedback(candidate))
        return Implementation(code, candidate, ctx.run_tests(candidate, tests.source))

    @staticmethod
    def _maybe_submit(ctx: MethodContext, impl: Implementation, passed_any: bool) -> bool:
        if impl.candidate is None:
            return passed_any
        if impl.passed:
            ctx.submit(impl.candidate)
            return True
        if not passed_any:
            ctx.submit(impl.candidate)
        return passed_any
