"""Direct prompting: independent samples at one temperature until the budget is spent.

Submission rule (`selection`):
- "visible-best" (default): among samples that pass the visible cases, the fastest on them
  (on the CPU interpreter, where nothing is timed, the first to pass); before any passes,
  the first sample. Each sample costs one visible GPU evaluation, counted by the scheduler.
- "first": the first sample, unseen by any test: the GEAK paper's single-sample baseline.
"""

from __future__ import annotations

from bench.task import TaskView
from llm.types import Message
from methods.base import Candidate, MethodContext, register_method
from methods.extract import extract_code
from methods.templates import render, system_prompt, task_block


@register_method("direct")
class DirectPrompting:
    def __init__(self, temperature: float = 1.0, selection: str = "visible-best", knowledge: bool = True,
                 max_samples: int | None = None):
        if selection not in ("visible-best", "first"):
            raise ValueError(f"selection must be visible-best or first, not {selection!r}")
        self.temperature = temperature
        self.selection = selection
        self.knowledge = knowledge
        self.max_samples = max_samples

    def run(self, task: TaskView, ctx: MethodContext) -> None:
        messages = [
            Message("system", system_prompt(ctx.vendor, self.knowledge)),
            Message("user", render("direct_generate", task=task_block(task, self.knowledge))),
        ]
        best: tuple[float, Candidate] | None = None
        submitted = False
        samples = 0
        while self.max_samples is None or samples < self.max_samples:
            reply = ctx.ask(messages, temperature=self.temperature, role="generator")
            samples += 1
            code = extract_code(reply.text)
            if code is None:
                continue
            candidate = ctx.propose(code)
            if self.selection == "first":
                if not submitted:
                    ctx.submit(candidate)
                    submitted = True
                continue
            if not submitted:
                ctx.submit(candidate)
                submitted = True
            fb = ctx.feedback(candidate)
            if fb.correct:
                latency = fb.latency_ms if fb.latency_ms is not None else float("inf")
                if best is None or latency < best[0]:
                    if best is None or best[1].source != candidate.source:
                        ctx.submit(candidate)
                    best = (latency, candidate)
