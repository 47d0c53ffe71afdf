"""A toy method plugin, written from methods/base.py's docstring alone: best-of-n with repair.

Each round draws `n` independent samples; every sample is judged on the visible cases; the
first `repairs` failing samples of the round each get one repair call that shows the code and
its error. Rounds repeat until the budget is spent. Submission rule: the fastest sample that
passed the visible cases (the first to pass where nothing is timed), else the first sample.

It lives in tests/ on purpose: the test that runs it through the real scheduler shows that a
method needs no change outside its own file.
"""

from __future__ import annotations

from bench.task import TaskView
from methods.base import Candidate, Feedback, MethodContext
from methods.extract import extract_code
from methods.registry import register_method
from methods.templates import answer_request, fenced, render, system_prompt, task_block
from modelio.types import Message


@register_method("toy_best_of_n_repair")
class BestOfNWithRepair:
    def __init__(self, n: int = 2, repairs: int = 1, temperature: float = 1.0, knowledge: bool = True):
        if n < 1 or repairs < 0:
            raise ValueError("n must be at least 1 and repairs at least 0")
        self.n = n
        self.repairs = repairs
        self.temperature = temperature
        self.knowledge = knowledge

    def run(self, task: TaskView, ctx: MethodContext) -> None:
        system = Message("system", system_prompt(ctx.vendor, self.knowledge))
        block = task_block(task, self.knowledge)
        answer = answer_request(ctx.answer_format)
        sample_prompt = [system, Message("user", render("direct_generate", task=block, oneshot="", answer=answer))]
        best: tuple[float, Candidate] | None = None
        while True:
            failing: list[tuple[Candidate, Feedback]] = []
            for _ in range(self.n):
                code = extract_code(ctx.ask(sample_prompt, temperature=self.temperature, role="sample",
                                            wants_code=True).text)
                best = self._consider(ctx, code, best, failing)
            for candidate, fb in failing[: self.repairs]:
                repair = (f"{block}\nThis implementation failed:\n{fenced(candidate.source)}\n\n"
                          f"Result: {fb.describe()}\n\n"
                          f"Fix it. {answer}")
                code = extract_code(ctx.ask([system, Message("user", repair)], temperature=self.temperature,
                                            role="repair", wants_code=True).text)
                best = self._consider(ctx, code, best, [])

    @staticmethod
    def _consider(ctx: MethodContext, code: str | None, best: tuple[float, Candidate] | None,
                  failing: list[tuple[Candidate, Feedback]]) -> tuple[float, Candidate] | None:
        if code is None:
            return best
        candidate = ctx.propose(code)
        if candidate.index == 0:
            ctx.submit(candidate)
        fb = ctx.feedback(candidate)
        if not fb.correct:
            failing.append((candidate, fb))
            return best
        latency = fb.latency_ms if fb.latency_ms is not None else float("inf")
        if best is None or latency < best[0]:
            ctx.submit(candidate)
            return latency, candidate
        return best
