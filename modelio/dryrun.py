"""`compare --dry-run`: what a run would spend, in calls, tokens and dollars, without spending.

How the figures are made, so a user can judge them:
- Calls: each method runs on each task against a context whose model answers every call
  with an empty reply (no code, so no candidate, no feedback, no GPU), charged as the ledger
  would charge it, until the budget or the method's own options stop it (direct's
  `max_samples`, Reflexion's `max_iters` per trial, GEAK's `runs` x `iterations`). That is
  the path on which nothing ever passes; the built-in methods stop no later on success, so
  the calls counted are what the run spends at most. A method that proposes code without a
  model cannot be traced this way and is bounded by the budget instead.
- Prompt tokens: every traced prompt, counted with modelio/tokens.count_tokens. Real prompts
  of iterative methods carry earlier code and feedback and are longer, so input tokens are a
  floor, and they are labelled so.
- Completion tokens per call: an assumption (`completion_tokens`, default 800), since no
  reply exists yet.
- Cost: modelio/prices.py's table (extend it with $KMC_PRICES); unknown when the model has no
  price, zero for the simulated model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modelio.prices import Price, estimate_cost, load_prices
from modelio.tokens import count_tokens
from modelio.types import Completion, Message

DEFAULT_COMPLETION_TOKENS = 800


class _ProposedCode(Exception):
    """The method proposed code although no reply held any: its path cannot be traced here."""


class _TracingContext:
    """A MethodContext whose model answers every call with an empty reply (no code), charged
    as the ledger would charge it: the path on which no candidate ever appears, so every
    method runs its full failure loop (direct until `max_samples`, a Reflexion trial to
    `max_iters`, GEAK's `runs` x `iterations`) and stops where its own options or the budget
    stop it. Built-in methods never stop earlier on failure than on success, so the calls
    counted are what the run spends at most."""

    def __init__(self, vendor: str, budget: int, unit: str, completion_tokens: int, answer_format: str = "fenced",
                 retriever: Any = None):
        self.vendor = vendor
        self.answer_format = answer_format
        self._budget, self._unit, self._completion = budget, unit, completion_tokens
        self._retriever = retriever
        self.prompts: list[int] = []
        self.replies: list[int] = []
        self._spent = 0

    def ask(self, messages: list[Message], *, temperature: float, role: str, max_tokens: int | None = None,
            wants_code: bool = False) -> Completion:
        from modelio.ledger import BudgetExhausted

        left = self._budget - self._spent
        prompt = count_tokens("\n\n".join(m.content for m in messages))
        if left <= 0 or (self._unit == "total_tokens" and left - prompt < 1):
            raise BudgetExhausted(f"{self._unit} budget of {self._budget} spent")
        cap = self._completion if max_tokens is None else min(self._completion, max_tokens)
        if self._unit == "calls":
            reply, charge = cap, 1
        elif self._unit == "output_tokens":
            reply = min(cap, left)
            charge = reply
        else:
            reply = min(cap, left - prompt)
            charge = prompt + reply
        self._spent += charge
        self.prompts.append(prompt)
        self.replies.append(reply)
        return Completion(text="", prompt_tokens=prompt, completion_tokens=reply)

    def example(self, query: str, by: str) -> str | None:
        shown = self._retriever.best(query, by) if self._retriever is not None else None
        return shown.program.code if shown is not None else None

    def propose(self, source: str) -> Any:
        raise _ProposedCode()

    def feedback(self, candidate: Any) -> Any:
        raise _ProposedCode()

    def run_tests(self, candidate: Any, tests: str) -> Any:
        raise _ProposedCode()

    def submit(self, candidate: Any) -> None:
        raise _ProposedCode()

    def begin_run(self, independent: bool = True) -> None:
        pass  # declaring a run costs nothing and spends nothing

    def calls_used(self) -> int:
        return len(self.prompts)

    def remaining(self) -> int:
        return self._budget - self._spent

    def evaluations_left(self) -> int | None:
        return None  # a dry run judges nothing: no cap to reach


@dataclass(frozen=True)
class CallTrace:
    """What one (method, task) unit would send on the no-code path: each call's prompt tokens
    and the completion tokens charged for it. `exact_bound` is False when the method proposed
    code of its own (its calls are then bounded by the budget instead)."""

    prompt_tokens: tuple[int, ...]
    completion_tokens: tuple[int, ...]
    exact_bound: bool = True

    @property
    def calls(self) -> int:
        return len(self.prompt_tokens)


def trace_calls(method: Any, task_view: Any, vendor: str, budget: int, unit: str = "calls",
                completion_tokens: int = DEFAULT_COMPLETION_TOKENS, answer_format: str = "fenced",
                retriever: Any = None) -> CallTrace:
    """Run the method against `_TracingContext` (no model, no GPU) and count what it asks;
    `retriever` (bench/oneshot.py GuardedRetriever) supplies the task's one-shot examples."""
    from modelio.ledger import BudgetExhausted

    ctx = _TracingContext(vendor, budget, unit, completion_tokens, answer_format, retriever)
    exact = True
    try:
        method.run(task_view, ctx)
    except BudgetExhausted:
        pass
    except _ProposedCode:
        exact = False
    except Exception as exc:  # noqa: BLE001 - a broken method is reported as one line, not a traceback
        name = getattr(method, "name", type(method).__name__)
        raise ValueError(f"method {name} failed on {task_view.id} without a model: {type(exc).__name__}: {exc}") from None
    if not exact:  # it wrote code without a model: the budget is the only bound known
        prompt = ctx.prompts[0] if ctx.prompts else 0
        per_call = 1 if unit == "calls" else completion_tokens + (prompt if unit == "total_tokens" else 0)
        n = max(1, math.ceil(budget / per_call))
        return CallTrace((prompt,) * n, (completion_tokens,) * n, exact_bound=False)
    return CallTrace(tuple(ctx.prompts), tuple(ctx.replies))


def first_prompt_tokens(method: Any, task_view: Any, vendor: str, budget: int, answer_format: str = "fenced",
                        retriever: Any = None) -> int | None:
    """Tokens of the method's first prompt on this task; None if it never calls the model.
    `retriever` (bench/oneshot.py GuardedRetriever) supplies the task's one-shot examples."""
    trace = trace_calls(method, task_view, vendor, budget, answer_format=answer_format, retriever=retriever)
    return trace.prompt_tokens[0] if trace.calls else None


@dataclass(frozen=True)
class MethodEstimate:
    method: str
    units: int
    calls: int
    prompt_tokens_per_call: float
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


@dataclass(frozen=True)
class DryRunEstimate:
    budget: int
    unit: str
    repeats: int
    tasks: tuple[str, ...]
    model: str
    simulated: bool
    completion_tokens: int
    price: Price | None
    methods: tuple[MethodEstimate, ...]

    @property
    def calls(self) -> int:
        return sum(m.calls for m in self.methods)

    @property
    def input_tokens(self) -> int:
        return sum(m.input_tokens for m in self.methods)

    @property
    def output_tokens(self) -> int:
        return sum(m.output_tokens for m in self.methods)

    @property
    def cost_usd(self) -> float | None:
        costs = [m.cost_usd for m in self.methods]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    def format(self) -> str:
        bound = "at most" if self.unit == "calls" else "about"
        lines = [f"DRY RUN (nothing sent, no run folder): {len(self.methods)} method(s) x {len(self.tasks)} task(s) x "
                 f"{self.repeats} repeat(s); budget {self.budget} {self.unit} per unit; model "
                 + ("built-in SIMULATED model" if self.simulated else self.model)]
        header = f"{'method':<12} {'units':>5} {'calls':>8} {'prompt tok/call':>15} {'input tok':>11} " \
                 f"{'output tok':>11} {'est. cost':>10}"
        lines += [header, "-" * len(header)]
        rows = [(m.method, m.units, m.calls, f"{m.prompt_tokens_per_call:.0f}", m.input_tokens, m.output_tokens,
                 m.cost_usd) for m in self.methods]
        rows.append(("total", sum(m.units for m in self.methods), self.calls, "", self.input_tokens,
                     self.output_tokens, self.cost_usd))
        for name, units, calls, per, inp, out, cost in rows:
            lines.append(f"{name:<12} {units:>5} {calls:>8} {per:>15} {inp:>11} {out:>11} {_money(cost):>10}")
        lines.append(f"calls: {bound} this many, with every method option applied; input tokens: a floor "
                     f"(prompts without earlier code or feedback); output tokens: {self.completion_tokens} per call "
                     "assumed"
                     + ("" if self.unit == "calls" else ", capped by the token budget") + ".")
        if self.simulated:
            lines.append("cost: none (simulated model)")
        elif self.price is None:
            lines.append(f"cost: unknown, no price for model {self.model!r} (add one in a file named by $KMC_PRICES)")
        else:
            lines.append(f"cost: ${self.price.input_per_m:.2f} / ${self.price.output_per_m:.2f} per 1M input / output "
                         "tokens (list prices; override with $KMC_PRICES)")
        return "\n".join(lines)


def _money(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:,.2f}"


def estimate(budget: int, unit: str, methods: dict[str, Any], task_views: list[Any], repeats: int, vendor: str,
             model: str, simulated: bool, completion_tokens: int = DEFAULT_COMPLETION_TOKENS,
             prices: dict[str, Price] | None = None, answer_format: str = "fenced",
             retrievers: Callable[[str], Any] | None = None) -> DryRunEstimate:
    """`methods` maps a method name to a fresh instance (options resolved); `task_views` are
    TaskViews; `retrievers` maps a task id to its guarded one-shot retriever (none: no
    examples). Pure apart from tracing each method on the no-code path (no model, no GPU)."""
    if completion_tokens < 1:
        raise ValueError("the completion-length assumption must be at least 1 token")
    from modelio.prices import price_for

    table = load_prices() if prices is None else prices
    price = Price(0.0, 0.0) if simulated else price_for(model, table)
    rows = []
    for name, method in methods.items():
        units = calls = inp = out = 0
        per_call: list[int] = []
        for view in task_views:
            trace = trace_calls(method, view, vendor, budget, unit, completion_tokens, answer_format,
                                retrievers(view.id) if retrievers else None)
            units += repeats
            per_call.extend(trace.prompt_tokens)
            calls += trace.calls * repeats
            inp += sum(trace.prompt_tokens) * repeats
            out += sum(trace.completion_tokens) * repeats
        cost = 0.0 if simulated else estimate_cost(model, inp, out, table)
        rows.append(MethodEstimate(name, units, calls, sum(per_call) / len(per_call) if per_call else 0.0, inp, out,
                                   cost))
    return DryRunEstimate(budget, unit, repeats, tuple(v.id for v in task_views), model, simulated,
                          completion_tokens, price, tuple(rows))
