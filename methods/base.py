"""The Method protocol, the context a method sees, and the method registry.

A method is a class registered with `@register_method("name")`; its constructor's keyword
arguments are its options (recorded in the run's config). It sees a task only through a
`TaskView` and the world only through a `MethodContext`: the model (through the budget
ledger), visible feedback, and `submit`. It never touches the GPU or the store, which is what
lets the scheduler guarantee identical budgets and held-out evaluation for every method.

The loop ends when `ctx.ask` raises `BudgetExhausted`; a method needs no budget arithmetic
of its own (though it may read `ctx.remaining()` to avoid starting a step it cannot finish).
"""

from __future__ import annotations

import difflib
import inspect
import random
from dataclasses import dataclass
from typing import Any, Callable, Protocol, TypeVar

from bench.task import TaskView
from llm.types import Completion, Message


@dataclass(frozen=True)
class Candidate:
    index: int
    source: str
    calls_used: int


@dataclass(frozen=True)
class Feedback:
    """What a method learns from the visible cases: never anything about hidden ones."""

    verdict: str
    message: str
    failing_case: str | None
    latency_ms: float | None
    speedup: float | None

    @property
    def correct(self) -> bool:
        return self.verdict == "correct"

    @property
    def ran(self) -> bool:
        return self.verdict in ("correct", "wrong_result", "no_kernel")

    def describe(self) -> str:
        if self.correct:
            perf = f"; latency {self.latency_ms:.4f} ms" if self.latency_ms is not None else ""
            return f"passed all visible tests{perf}"
        where = f" on {self.failing_case}" if self.failing_case else ""
        return f"{self.verdict}{where}: {self.message}"


class MethodContext(Protocol):
    vendor: str
    rng: random.Random

    def ask(self, messages: list[Message], *, temperature: float, role: str, max_tokens: int | None = None,
            json_mode: bool = False) -> Completion: ...

    def propose(self, source: str) -> Candidate: ...

    def feedback(self, candidate: Candidate, timing: bool = True) -> Feedback: ...

    def submit(self, candidate: Candidate) -> None: ...

    def calls_used(self) -> int: ...

    def remaining(self) -> int: ...


class Method(Protocol):
    name: str

    def run(self, task: TaskView, ctx: MethodContext) -> None: ...


class UnknownMethodError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


M = TypeVar("M", bound=type)
_METHODS: dict[str, type] = {}


def register_method(name: str) -> Callable[[M], M]:
    def decorate(cls: M) -> M:
        if name in _METHODS and _METHODS[name] is not cls:
            raise ValueError(f"method {name!r} registered twice ({_METHODS[name].__module__}, {cls.__module__})")
        if not callable(getattr(cls, "run", None)):
            raise TypeError(f"method {name!r} has no run(task, ctx)")
        cls.name = name  # type: ignore[attr-defined]
        _METHODS[name] = cls
        return cls

    return decorate


def method_names() -> list[str]:
    _load_builtin()
    return sorted(_METHODS)


def method_class(name: str) -> type:
    _load_builtin()
    try:
        return _METHODS[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(_METHODS), n=2)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UnknownMethodError(f"unknown method {name!r}{hint}; known: {', '.join(sorted(_METHODS))}") from None


def create_method(name: str, options: dict[str, Any] | None = None) -> Method:
    cls = method_class(name)
    options = dict(options or {})
    params = inspect.signature(cls.__init__).parameters
    unknown = [k for k in options if k not in params]
    if unknown:
        raise ValueError(f"method {name!r} has no option(s) {', '.join(unknown)}; "
                         f"options: {', '.join(p for p in params if p != 'self')}")
    return cls(**options)


def method_options(method: Method) -> dict[str, Any]:
    """The resolved options of a method instance (defaults included), for config.json."""
    params = inspect.signature(type(method).__init__).parameters
    return {k: getattr(method, k) for k in params if k != "self" and hasattr(method, k)}


_loaded = False


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        import methods.direct  # noqa: F401
        import methods.geak  # noqa: F401
        import methods.reflexion  # noqa: F401
