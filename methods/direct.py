"""Direct prompting: independent samples of one prompt at one temperature until the budget
is spent (or `max_samples` are drawn; the rest of the budget is then left unspent).

Submission rule (`selection`):
- "visible-best" (default): among samples that pass the visible cases, the fastest on them
  (on the CPU interpreter, where nothing is timed, the first to pass); before any passes,
  the first sample. Each sample costs one visible GPU evaluation, counted by the scheduler.
- "first": the first sample, unseen by any test: the GEAK paper's single-sample baseline
  (with `max_samples: 1`, `temperature: 0`, `knowledge: false`, `oneshot: false`).

Context: `knowledge` (hardware rules and exact signature) and `oneshot` (a BM25-retrieved
example program, matched on the instruction once) as for every method.
"""

from __future__ import annotations

from bench.task import TaskView
from methods.base import Candidate, MethodContext
from methods.extract import extract_code
from methods.registry import register_method
from methods.retrieval import retrieve
from methods.templates import oneshot_block, render, system_prompt, task_block
from modelio.types import Message

SELECTIONS = ("visible-best", "first")


@register_method("direct")
class DirectPrompting:
    def __init__(self, temperature: float = 1.0, selection: str = "visible-best", knowledge: bool = True,
                 oneshot: bool = True, max_samples: int | None = None):
        if selection not in SELECTIONS:
            raise ValueError(f"selection must be visible-best or first, not {selection!r}")
        if max_samples is not None and max_samples < 1:
            raise ValueError("max_samples must be at least 1 (or null for the whole budget)")
        self.temperature = temperature
        self.selection = selection
        self.knowledge = knowledge
        self.oneshot = oneshot
        self.max_samples = max_samples

    def run(self, task: TaskView, ctx: MethodContext) -> None:
        example = retrieve(task.id, task.instruction, "description") if self.oneshot else None
        messages = [
            Message("system", system_prompt(ctx.vendor, self.knowledge)),
            Message("user", render("direct_generate", task=task_block(task, self.knowledge),
                                   oneshot=oneshot_block(example))),
        ]
        best: tuple[float, Candidate] | None = None
        submitted = False
        samples = 0
        while self.max_samples is None or samples < self.max_samples:
            ctx.begin_run()  # each sample is one independent run
            reply = ctx.ask(messages, temperature=self.temperature, role="generator")
            samples += 1
            code = extract_code(reply.text)
            if code is None:
                continue  # a failed generation: no candidate, the call is still spent
            candidate = ctx.propose(code)
            if not submitted:
                ctx.submit(candidate)
                submitted = True
            if self.selection == "first":
                continue
            fb = ctx.feedback(candidate)
            if fb.correct:
                latency = fb.latency_ms if fb.latency_ms is not None else float("inf")
                if best is None or latency < best[0]:
                    best = (latency, candidate)
                    ctx.submit(candidate)
