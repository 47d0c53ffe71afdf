"""`compare --dry-run`: what a run would spend, in calls, tokens and dollars, without spending.

How the figures are made, so a user can judge them:
- Calls: with a `calls` budget every (method, task, repeat) unit may spend the whole budget,
  so calls = budget x units is an exact upper bound (methods spend their budget). With a
  token budget the call count is estimated: budget / tokens per call.
- Prompt tokens per call: each method's *first* prompt on each task, captured by running
  the method against a context that stops it at its first model call (no model, no GPU),
  counted with modelio/tokens.count_tokens. Iterative methods' later prompts carry earlier code
  and feedback and are longer, so input tokens are a floor, and they are labelled so.
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


class _StopAtFirstCall(Exception):
    def __init__(self, messages: list[Message]):
        super().__init__("first model call reached")
        self.messages = messages


class _FirstCallContext:
    """A MethodContext that ends the method at its first model call, keeping the prompt."""

    def __init__(self, vendor: str, budget: int, answer_format: str = "fenced", retriever: Any = None):
        self.vendor = vendor
        self.answer_format = answer_format
        self._budget = budget
        self._retriever = retriever

    def ask(self, messages: list[Message], *, temperature: float, role: str, max_tokens: int | None = None,
            wants_code: bool = False) -> Completion:
        raise _StopAtFirstCall(list(messages))

    def example(self, query: str, by: str) -> str | None:
        shown = self._retriever.best(query, by) if self._retriever is not None else None
        return shown.program.code if shown is not None else None

    def propose(self, source: str) -> Any:
        raise RuntimeError("a method proposed code before its first model call")

    def feedback(self, candidate: Any) -> Any:
        raise RuntimeError("a method asked for feedback before its first model call")

    def run_tests(self, candidate: Any, tests: str) -> Any:
        raise RuntimeError("a method ran tests before its first model call")

    def submit(self, candidate: Any) -> None:
        raise RuntimeError("a method submitted before its first model call")

    def begin_run(self, independent: bool = True) -> None:
        pass  # declaring a run costs nothing and spends nothing

    def calls_used(self) -> int:
        return 0

    def remaining(self) -> int:
        return self._budget


def first_prompt_tokens(method: Any, task_view: Any, vendor: str, budget: int, answer_format: str = "fenced",
                        retriever: Any = None) -> int | None:
    """Tokens of the method's first prompt on this task; None if it never calls the model.
    `retriever` (bench/oneshot.py GuardedRetriever) supplies the task's one-shot examples."""
    try:
        method.run(task_view, _FirstCallContext(vendor, budget, answer_format, retriever))
    except _StopAtFirstCall as stop:
        return count_tokens("\n\n".join(m.content for m in stop.messages))
    except Exception as exc:  # noqa: BLE001 - a broken method is reported as one line, not a traceback
        name = getattr(method, "name", type(method).__name__)
        raise ValueError(f"method {name} failed before its first model call on {task_view.id}: "
                         f"{type(exc).__name__}: {exc}") from None
    return None


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
        lines.append(f"calls: {bound} this many; input tokens: a floor (each call's prompt taken as the method's "
                     f"first prompt); output tokens: {self.completion_tokens} per call assumed"
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
    examples). Pure apart from running each method up to its first model call."""
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
            prompt = first_prompt_tokens(method, view, vendor, budget, answer_format,
                                         retrievers(view.id) if retrievers else None)
            units += repeats
            if prompt is None:
                continue
            per_call.append(prompt)
            if unit == "calls":
                n, unit_out = budget, budget * completion_tokens
            elif unit == "output_tokens":
                n, unit_out = math.ceil(budget / completion_tokens), budget
            else:  # total_tokens: the budget covers both sides
                n = math.ceil(budget / (prompt + completion_tokens))
                unit_out = min(n * completion_tokens, max(0, budget - n * prompt))
            calls += n * repeats
            inp += n * prompt * repeats
            out += unit_out * repeats
        cost = 0.0 if simulated else estimate_cost(model, inp, out, table)
        rows.append(MethodEstimate(name, units, calls, sum(per_call) / len(per_call) if per_call else 0.0, inp, out,
                                   cost))
    return DryRunEstimate(budget, unit, repeats, tuple(v.id for v in task_views), model, simulated,
                          completion_tokens, price, tuple(rows))
