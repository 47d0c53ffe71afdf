"""GEAK (arXiv 2507.23194), the GEAK-v1 loop, run as N independent runs of T iterations.

Per iteration exactly two model calls and at most one visible evaluation:
1. generator (temperature 1.0; the reply format is the run's one answer request, GEAK-v1's
   JSON {"thought", "code"} with `answer_format: json`, read by the one tolerant extractor):
   - optimise branch when the ancestor pool is non-empty and (the last generation was
     correct or `perf_debug_num >= max_perf_debug_num`); it resets the counter. The prompt
     holds the ancestors from slowest to fastest, each with code, latency, speedup and its
     analysis, plus the strategy keywords and "generate better code";
   - first branch (the run's first iteration): task and one-shot example;
   - debug branch otherwise: one-shot example (retrieved by the previous code), previous
     code (or, after a reply with no code, that reply), the raw error of running it,
     previous reflection. It increments `perf_debug_num`
     only when ancestors exist (the debugging-trap guard counts only once a correct kernel
     is in the pool; on a GPU every correct kernel is timed, and on the CPU interpreter,
     where nothing is timed, correct kernels still enter the pool with unknown latency);
2. evaluation on the visible cases (latency only for correct code, on a GPU), and the
   answer rule below applied at once, so a budget that ends at the reflector call still
   leaves the last evaluated candidate submitted. A reply with no complete code is a failed
   generation: it is never evaluated, and counts as an incorrect last generation;
3. reflector: on failing code, the error and "what went wrong"; on correct code, the
   latency and a request for an optimisation strategy.
Reply caps: `code_max_tokens` 15000 for the generator and `text_max_tokens` 5000 for the
reflector, as GEAK-v1 sent them.
The ancestor pool keeps at most `ancestor_num` correct kernels; a new correct kernel
replaces the slowest when faster. "Faster" here and in the answer rule means a speedup
interval wholly above the other's: kernels whose intervals overlap are tied, and the earlier
kernel counts as the faster (methods/speed.py), so timing noise cannot change the pool, its
order in the prompt or the answer. Latency and speedup appear in prompts to two significant
digits.

One-shot retrieval (`oneshot`, methods/retrieval.py): the instruction against corpus
descriptions once at the start; the previous code against corpus code on every debug round.

Submission (the GEAK-v1 answer rule, from visible feedback only, across the runs so far):
the fastest timed correct kernel (ties to the earliest), else the latest correct, else the
latest runnable, else the last generated.

Budget: T = `iterations` per run (default 10, i.e. 20 calls); `runs` = N runs, or (default)
as many as the budget allows, so N = budget / (2 T) when it divides; otherwise the last run
is cut short by the budget. With `runs` set, the budget beyond N x 2T is left unspent. Runs
are declared independent when the temperature is above 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.task import TaskView
from methods.base import Candidate, Feedback, MethodContext
from methods.extract import NO_CODE_FEEDBACK, extract_code
from methods.registry import register_method
from methods.rounding import two_digits
from methods.speed import SpeedInterval, best, fastest_first, worst
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

FIX_REQUEST = "Reflect on what went wrong and how to fix it."
OPTIMISE_REQUEST = ("Analyse this correct kernel's performance and propose an optimisation strategy and ideas "
                    "to make it faster.")


@dataclass(frozen=True)
class Attempt:
    candidate: Candidate
    feedback: Feedback
    reflection: str

    @property
    def speed(self) -> SpeedInterval:
        return SpeedInterval.of(self.feedback)


@dataclass
class RunState:
    """One GEAK run's memory, rebuilt for every run."""

    ancestors: list[Attempt]
    last_code: str | None = None  # the last generated code; after a reply without code, that reply
    last_shown: str | None = None  # what the debug prompt shows under "Previous code"
    last_result: str = ""
    last_reflection: str = "(none)"
    last_correct: bool = False
    perf_debug_num: int = 0


@register_method("geak")
class Geak:
    def __init__(self, iterations: int = 10, runs: int | None = None, ancestor_num: int = 5,
                 max_perf_debug_num: int = 5, temperature: float = 1.0, knowledge: bool = True,
                 oneshot: bool = True, code_max_tokens: int | None = CODE_MAX_TOKENS,
                 text_max_tokens: int | None = TEXT_MAX_TOKENS):
        if iterations < 1:
            raise ValueError("iterations must be at least 1")
        if runs is not None and runs < 1:
            raise ValueError("runs must be at least 1 (or null: as many as the budget allows)")
        if ancestor_num < 1:
            raise ValueError("ancestor_num must be at least 1")
        self.iterations = iterations
        self.runs = runs
        self.ancestor_num = ancestor_num
        self.max_perf_debug_num = max_perf_debug_num
        self.temperature = temperature
        self.knowledge = knowledge
        self.oneshot = oneshot
        self.code_max_tokens = code_max_tokens
        self.text_max_tokens = text_max_tokens
        self.branches: list[str] = []  # the generator branch of every iteration, in order (tests read it)

    def run(self, task: TaskView, ctx: MethodContext) -> None:
        history: list[Attempt] = []  # across runs, for the answer rule
        first_example = ctx.example(task.instruction, "description") if self.oneshot else None
        done = 0
        while self.runs is None or done < self.runs:
            ctx.begin_run(independent=self.temperature > 0)  # each of the N parallel runs is one run
            self._one_run(task, ctx, history, first_example)
            done += 1

    def _one_run(self, task: TaskView, ctx: MethodContext, history: list[Attempt], first_example: str | None) -> None:
        system = Message("system", system_prompt(ctx.vendor, self.knowledge))
        block = task_block(task, self.knowledge)
        state = RunState(ancestors=[])
        for _ in range(self.iterations):
            branch, prompt = self._generator_prompt(ctx, block, state, first_example)
            reply = ctx.ask([system, Message("user", prompt)], temperature=self.temperature, role="generator",
                            max_tokens=self.code_max_tokens, wants_code=True)
            self.branches.append(branch)
            code = extract_code(reply.text)
            if code is None:
                shown = f"```text\n{reply.text.strip()[:4000]}\n```"
                state.last_code, state.last_shown = reply.text, shown
                state.last_correct, state.last_result = False, NO_CODE_FEEDBACK
                state.last_reflection = self._reflect(ctx, system, block, shown, NO_CODE_FEEDBACK, FIX_REQUEST)
                continue
            candidate = ctx.propose(code)
            fb = ctx.feedback(candidate)
            history.append(Attempt(candidate, fb, ""))
            self._submit(ctx, history)  # before the reflector call, which the budget may refuse
            reflection = self._reflect(ctx, system, block, fenced(code), fb.describe(),
                                       OPTIMISE_REQUEST if fb.correct else FIX_REQUEST)
            attempt = Attempt(candidate, fb, reflection)
            history[-1] = attempt
            if fb.correct:
                self._admit(state.ancestors, attempt)
            state.last_code, state.last_shown, state.last_result = code, fenced(code), fb.describe()
            state.last_reflection, state.last_correct = reflection, fb.correct

    def _generator_prompt(self, ctx: MethodContext, block: str, state: RunState,
                          first_example: str | None) -> tuple[str, str]:
        answer = answer_request(ctx.answer_format)
        optimise = bool(state.ancestors) and (state.last_correct or state.perf_debug_num >= self.max_perf_debug_num)
        if optimise:
            state.perf_debug_num = 0
            return "optimise", render("geak_optimise", task=block, ancestors=self._describe(state.ancestors),
                                      answer=answer)
        if state.last_code is None:
            return "first", render("geak_first", task=block, oneshot=oneshot_block(first_example), answer=answer)
        if state.ancestors:
            state.perf_debug_num += 1
        example = ctx.example(state.last_code, "code") if self.oneshot else None
        return "debug", render("geak_debug", task=block, oneshot=oneshot_block(example), code=state.last_shown or "",
                               feedback=state.last_result, reflection=state.last_reflection, answer=answer)

    def _reflect(self, ctx: MethodContext, system: Message, block: str, shown: str, result: str, request: str) -> str:
        prompt = render("geak_reflect", task=block, code=shown, feedback=result, request=request)
        return ctx.ask([system, Message("user", prompt)], temperature=self.temperature, role="reflector",
                       max_tokens=self.text_max_tokens).text

    def _admit(self, ancestors: list[Attempt], attempt: Attempt) -> None:
        """Kept in the order they were admitted; `_describe` orders them by speed."""
        if len(ancestors) < self.ancestor_num:
            ancestors.append(attempt)
            return
        slowest = worst(ancestors, lambda a: a.speed)
        if attempt.speed.beats(slowest.speed):
            ancestors.remove(slowest)
            ancestors.append(attempt)

    @staticmethod
    def _describe(ancestors: list[Attempt]) -> str:
        parts = []
        for i, a in enumerate(reversed(fastest_first(ancestors, lambda a: a.speed))):  # slowest to fastest
            fb = a.feedback
            lat = f"{two_digits(fb.latency_ms)} ms" if fb.latency_ms is not None else "not timed (no GPU)"
            speed = f", {two_digits(fb.speedup)}x the reference kernel's speed" if fb.speedup else ""
            parts.append(f"Kernel {i + 1} (latency {lat}{speed}):\n{fenced(a.candidate.source)}\n"
                         f"Analysis: {a.reflection.strip()}\n")
        return "\n".join(parts).rstrip()

    @staticmethod
    def _submit(ctx: MethodContext, history: list[Attempt]) -> None:
        correct = [a for a in history if a.feedback.correct]
        if correct:
            timed = [a for a in correct if a.feedback.latency_ms is not None]
            choice = best(timed, lambda a: a.speed) if timed else correct[-1]
        else:
            runnable = [a for a in history if a.feedback.ran]
            choice = runnable[-1] if runnable else history[-1]
        ctx.submit(choice.candidate)
