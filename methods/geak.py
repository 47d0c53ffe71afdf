"""GEAK (arXiv 2507.23194), the GEAK-v1 loop, run as N independent runs of T iterations.

Per iteration exactly two model calls and one visible evaluation:
1. generator: the optimise branch when the ancestor pool is non-empty and (the last code
   was correct or `perf_debug_num >= max_perf_debug_num`), which resets the counter; the
   debug branch otherwise, which increments the counter once correct ancestors exist (the
   debugging-trap guard);
2. evaluation on the visible cases (latency only for correct code, on a GPU);
3. reflector: on failing code, the error; on correct code, the latency and a request for an
   optimisation strategy.
The ancestor pool keeps at most `ancestor_num` correct kernels sorted by latency; a new
correct kernel replaces the worst when faster. Temperature 1.0, JSON {"thought", "code"}
replies; a malformed reply is a failed generation.

Submission (the GEAK-v1 answer rule, from visible feedback only, across the runs so far):
the fastest correct ancestor, else the latest correct, else the latest runnable, else the
last generated.

Budget: T iterations per run (default 10, i.e. 20 calls); runs repeat until the budget is
spent, so N = budget / (2 T) when it divides.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.task import TaskView
from llm.types import Message
from methods.base import Candidate, Feedback, MethodContext, register_method
from methods.extract import extract_json_code
from methods.templates import render, system_prompt, task_block


@dataclass(frozen=True)
class Attempt:
    candidate: Candidate
    feedback: Feedback
    reflection: str

    @property
    def latency(self) -> float:
        return self.feedback.latency_ms if self.feedback.latency_ms is not None else float("inf")


@register_method("geak")
class Geak:
    def __init__(self, iterations: int = 10, ancestor_num: int = 5, max_perf_debug_num: int = 5,
                 temperature: float = 1.0, knowledge: bool = True, oneshot: bool = False):
        if iterations < 1:
            raise ValueError("iterations must be at least 1")
        self.iterations = iterations
        self.ancestor_num = ancestor_num
        self.max_perf_debug_num = max_perf_debug_num
        self.temperature = temperature
        self.knowledge = knowledge
        self.oneshot = oneshot
        self.branches: list[str] = []  # which generator branch each iteration took (tests read it)

    def run(self, task: TaskView, ctx: MethodContext) -> None:
        history: list[Attempt] = []  # across runs, for the answer rule
        while True:
            self._one_run(task, ctx, history)

    def _one_run(self, task: TaskView, ctx: MethodContext, history: list[Attempt]) -> None:
        system = Message("system", system_prompt(ctx.vendor, self.knowledge))
        block = task_block(task, self.knowledge)
        ancestors: list[Attempt] = []
        last: Attempt | None = None
        last_code: str | None = None
        last_error = "no code has been generated yet"
        perf_debug_num = 0
        for _ in range(self.iterations):
            optimise = bool(ancestors) and ((last is not None and last.feedback.correct)
                                            or perf_debug_num >= self.max_perf_debug_num)
            if optimise:
                perf_debug_num = 0
                prompt = render("geak_optimise", task=block, ancestors=self._describe(ancestors))
            elif last_code is None:
                prompt = render("geak_first", task=block, oneshot="")
            else:
                if ancestors:
                    perf_debug_num += 1
                prompt = render("geak_debug", task=block, oneshot="", code=last_code, feedback=last_error,
                                reflection=last.reflection if last else "(none)")
            self.branches.append("optimise" if optimise else "debug")
            reply = ctx.ask([system, Message("user", prompt)], temperature=self.temperature, role="generator",
                            json_mode=True)
            _, code = extract_json_code(reply.text)
            if code is None:
                last_error = "the reply was not a JSON object with a non-empty 'code' field"
                ctx.ask([system, Message("user", render("geak_reflect", task=block, code=last_code or "",
                                                        feedback=last_error,
                                                        request="Reflect on what went wrong and how to fix it."))],
                        temperature=self.temperature, role="reflector")
                continue
            candidate = ctx.propose(code)
            fb = ctx.feedback(candidate)
            request = ("Analyse this correct kernel's performance and propose an optimisation strategy and ideas "
                       "to make it faster." if fb.correct else "Reflect on what went wrong and how to fix it.")
            reflection = ctx.ask([system, Message("user", render("geak_reflect", task=block, code=code,
                                                                 feedback=fb.describe(), request=request))],
                                 temperature=self.temperature, role="reflector").text
            last = Attempt(candidate, fb, reflection)
            last_code, last_error = code, fb.describe()
            history.append(last)
            if fb.correct:
                self._admit(ancestors, last)
            self._submit(ctx, history)

    def _admit(self, ancestors: list[Attempt], attempt: Attempt) -> None:
        if len(ancestors) < self.ancestor_num:
            ancestors.append(attempt)
        elif attempt.latency < max(a.latency for a in ancestors):
            ancestors.remove(max(ancestors, key=lambda a: a.latency))
            ancestors.append(attempt)
        ancestors.sort(key=lambda a: a.latency)

    @staticmethod
    def _describe(ancestors: list[Attempt]) -> str:
        parts = []
        for i, a in enumerate(sorted(ancestors, key=lambda a: -a.latency)):
            lat = f"{a.feedback.latency_ms:.4f} ms" if a.feedback.latency_ms is not None else "not timed (no GPU)"
            parts.append(f"Kernel {i + 1} (latency {lat}):\n```python\n{a.candidate.source}```\nAnalysis: {a.reflection}\n")
        return "\n".join(parts)

    @staticmethod
    def _submit(ctx: MethodContext, history: list[Attempt]) -> None:
        correct = [a for a in history if a.feedback.correct]
        if correct:
            fastest = min(correct, key=lambda a: a.latency)
            choice = fastest if fastest.feedback.latency_ms is not None else correct[-1]
        else:
            runnable = [a for a in history if a.feedback.ran]
            choice = runnable[-1] if runnable else history[-1]
        ctx.submit(choice.candidate)
