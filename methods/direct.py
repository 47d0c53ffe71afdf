"""Direct prompting: independent samples of one prompt at one temperature until the budget
is spent (or `max_samples` are drawn; the rest of the budget is then left unspent).

Submission rule (`selection`):
- "visible-best" (default): among samples that pass the visible cases, the fastest on them,
  where "faster" means a speedup interval wholly above the other's: samples whose intervals
  overlap are tied and the earlier one wins (methods/speed.py), so timing noise cannot flip
  the pick (on the CPU interpreter, where nothing is timed, the first to pass); before any
  passes, the first sample. Each sample costs one visible GPU evaluation, counted by the
  scheduler; once the run's evaluation cap is spent (the matched default caps every method
  alike), later samples go unjudged on the visible cases but are still drawn, so direct
  prompting spends the same calls as every method, and each sample still counts for oracle
  pass and pass@k through the hidden judging.
- "first": the first sample, unseen by any test: the GEAK paper's single-sample baseline.

Prompt (`prompt_style`):
- "toolkit" (default): the task block (instruction, signature or entry point, visible cases),
  the `knowledge` system prompt and the `oneshot` example as for every method, and the run's
  one answer request.
- "geak-direct": GEAK-v1's DirectPrompt exactly: one user message holding the instruction
  and "Please output the codes only without explanation, which we can run directly."; no
  system prompt, signature, cases or example (so `knowledge` and `oneshot` must be off). The
  paper preset uses it with `max_samples: 1`, `temperature: 0`, `selection: first`.

Samples are independent runs when the temperature is above 0; at temperature 0 they are
declared not independent (a deterministic model repeats itself), so pass@k is not computed
over them. `code_max_tokens` caps each reply (GEAK-v1's generator cap by default).
"""

from __future__ import annotations

from bench.task import TaskView
from methods.base import Candidate, Feedback, MethodContext
from methods.extract import extract_code
from methods.registry import register_method
from methods.speed import SpeedInterval, best
from methods.templates import (
    CODE_MAX_TOKENS,
    answer_request,
    oneshot_block,
    render,
    system_prompt,
    task_block,
)
from modelio.types import Message

SELECTIONS = ("visible-best", "first")
PROMPT_STYLES = ("toolkit", "geak-direct")


@register_method("direct")
class DirectPrompting:
    def __init__(self, temperature: float = 1.0, selection: str = "visible-best", knowledge: bool = True,
                 oneshot: bool = True, max_samples: int | None = None, prompt_style: str = "toolkit",
                 code_max_tokens: int | None = CODE_MAX_TOKENS):
        if selection not in SELECTIONS:
            raise ValueError(f"selection must be visible-best or first, not {selection!r}")
        if max_samples is not None and max_samples < 1:
            raise ValueError("max_samples must be at least 1 (or null for the whole budget)")
        if prompt_style not in PROMPT_STYLES:
            raise ValueError(f"prompt_style must be toolkit or geak-direct, not {prompt_style!r}")
        if prompt_style == "geak-direct" and (knowledge or oneshot):
            raise ValueError("prompt_style geak-direct is GEAK's DirectPrompt: knowledge and oneshot must be false")
        if code_max_tokens is not None and code_max_tokens < 1:
            raise ValueError("code_max_tokens must be at least 1 (or null: only the budget caps a reply)")
        self.temperature = temperature
        self.selection = selection
        self.knowledge = knowledge
        self.oneshot = oneshot
        self.max_samples = max_samples
        self.prompt_style = prompt_style
        self.code_max_tokens = code_max_tokens

    def _messages(self, task: TaskView, ctx: MethodContext) -> list[Message]:
        if self.prompt_style == "geak-direct":
            return [Message("user", render("geak_direct", instruction=task.instruction))]
        example = ctx.example(task.instruction, "description") if self.oneshot else None
        return [
            Message("system", system_prompt(ctx.vendor, self.knowledge)),
            Message("user", render("direct_generate", task=task_block(task, self.knowledge),
                                   oneshot=oneshot_block(example), answer=answer_request(ctx.answer_format))),
        ]

    def run(self, task: TaskView, ctx: MethodContext) -> None:
        messages = self._messages(task, ctx)
        passing: list[tuple[Candidate, Feedback]] = []  # samples that passed the visible cases, in order
        chosen: Candidate | None = None
        submitted = False
        samples = 0
        while self.max_samples is None or samples < self.max_samples:
            ctx.begin_run(independent=self.temperature > 0)  # each sample is one run
            reply = ctx.ask(messages, temperature=self.temperature, role="generator", max_tokens=self.code_max_tokens,
                            wants_code=True)
            samples += 1
            code = extract_code(reply.text)
            if code is None:
                continue  # a failed generation: no candidate, the call is still spent
            candidate = ctx.propose(code)
            if not submitted:
                ctx.submit(candidate)
                submitted = True
            if self.selection == "first" or ctx.evaluations_left() == 0:
                continue  # past the run's evaluation cap a sample is still a candidate, judged on the hidden cases
            fb = ctx.feedback(candidate)
            if fb.correct:
                passing.append((candidate, fb))
                pick = best(passing, lambda p: SpeedInterval.of(p[1]))[0]
                if pick is not chosen:
                    chosen = pick
                    ctx.submit(pick)
