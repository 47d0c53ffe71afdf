"""Reflexion (Shinn et al. 2023) adapted to kernels, as a sequence of independent trials.

One trial: an implementation call; then, while the feedback fails and fewer than
`max_iters` implementations exist, a self-reflection call (sees only the implementation and
its test results) and a re-implementation call (sees the previous implementation, the
feedback and the latest reflection: a memory of one). A trial therefore costs
1 + 2 x (iterations - 1) calls in this feedback mode. Implementations at temperature 0
by default, reflections at 0.2 (the paper's settings). Trials repeat until the budget is
spent, so pass@k over trials is defined.

Feedback: "visible" uses the harness's visible cases. (The paper's own mode, self-written
internal tests plus one test-writing call per trial, is issue #5's next slice.)

Submission rule: the latest implementation that passed its feedback, else the latest
implementation (Reflexion submits a trial's final implementation once).
"""

from __future__ import annotations

from bench.task import TaskView
from llm.types import Message
from methods.base import Candidate, Feedback, MethodContext, register_method
from methods.extract import extract_code
from methods.templates import render, system_prompt, task_block


@register_method("reflexion")
class Reflexion:
    def __init__(self, max_iters: int = 5, impl_temperature: float = 0.0, reflect_temperature: float = 0.2,
                 feedback: str = "visible", knowledge: bool = True):
        if feedback != "visible":
            raise ValueError("feedback='internal' is not implemented yet; use feedback='visible'")
        if max_iters < 1:
            raise ValueError("max_iters must be at least 1")
        self.max_iters = max_iters
        self.impl_temperature = impl_temperature
        self.reflect_temperature = reflect_temperature
        self.feedback = feedback
        self.knowledge = knowledge

    def run(self, task: TaskView, ctx: MethodContext) -> None:
        system = Message("system", system_prompt(ctx.vendor, self.knowledge))
        block = task_block(task, self.knowledge)
        passed_any = False
        while True:
            # Trials differ through the sample index the ledger attaches to each call.
            reply = ctx.ask([system, Message("user", render("direct_generate", task=block))],
                            temperature=self.impl_temperature, role="implement")
            code = extract_code(reply.text)
            candidate, fb = self._judge(ctx, code)
            passed_any = self._maybe_submit(ctx, candidate, fb, passed_any)
            iterations = 1
            while iterations < self.max_iters and (fb is None or not fb.correct):
                shown = code or "(no code was produced)"
                fb_text = fb.describe() if fb else "no code block found in the reply"
                reflection = ctx.ask([system, Message("user", render("reflexion_reflect", task=block, code=shown,
                                                                     feedback=fb_text))],
                                     temperature=self.reflect_temperature, role="reflect").text
                reply = ctx.ask([system, Message("user", render("reflexion_reimplement", task=block, code=shown,
                                                                feedback=fb_text, reflection=reflection))],
                                temperature=self.impl_temperature, role="implement")
                iterations += 1
                new_code = extract_code(reply.text)
                if new_code is not None:
                    code = new_code
                    candidate, fb = self._judge(ctx, code)
                    passed_any = self._maybe_submit(ctx, candidate, fb, passed_any)

    @staticmethod
    def _judge(ctx: MethodContext, code: str | None) -> tuple[Candidate | None, Feedback | None]:
        if code is None:
            return None, None
        candidate = ctx.propose(code)
        return candidate, ctx.feedback(candidate, timing=False)

    @staticmethod
    def _maybe_submit(ctx: MethodContext, candidate: Candidate | None, fb: Feedback | None, passed_any: bool) -> bool:
        if candidate is None or fb is None:
            return passed_any
        if fb.correct:
            ctx.submit(candidate)
            return True
        if not passed_any:
            ctx.submit(candidate)
        return passed_any
