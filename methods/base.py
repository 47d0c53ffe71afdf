"""The Method protocol and the records and context a method sees (the registry is methods/registry.py).

Writing a method (a plugin is one file; nothing else changes):

    from bench.task import TaskView
    from methods.base import MethodContext
    from methods.registry import register_method
    from modelio.types import Message

    @register_method("my_method")
    class MyMethod:
        def __init__(self, temperature: float = 1.0):   # keyword arguments are the options
            self.temperature = temperature               # stored under the same names
        def run(self, task: TaskView, ctx: MethodContext) -> None:
            while True:                                  # until ctx.ask raises BudgetExhausted
                reply = ctx.ask([Message("user", task.instruction)], temperature=self.temperature,
                                role="generator")
                ...                                      # ctx.propose / ctx.feedback / ctx.submit

Rules the scheduler relies on:
- The constructor's keyword arguments are the method's options (`method_options` in a config);
  store each under the attribute of the same name, so the resolved options (defaults included)
  are recorded in the run's config.json. Every option needs a default.
- `run(task, ctx)` sees the task only through a `TaskView` (no reference, no hidden cases) and
  the world only through `ctx`: the model (`ask`, through the budget ledger), one-shot examples
  (`example`), code it proposes (`propose`), visible feedback (`feedback`), its own tests run on
  a candidate (`run_tests`), and its answer (`submit`, to be called again whenever the answer
  changes, so budget curves come from one run). It never runs code, touches the GPU or the
  store itself.
- The loop ends when `ctx.ask` raises `BudgetExhausted`; let it propagate. A method needs no
  budget arithmetic of its own (it may read `ctx.remaining()`), and may also return early
  (the unspent remainder is then recorded as such).
- A fresh instance is made for every (task, repeat); instance state is per unit.
- The module must be imported before the scheduler looks the name up: built-ins are imported
  by `methods/__init__.py`; other modules are named in the run's `method_modules` option
  (recorded in config.json; `$KMC_METHOD_MODULES` gives its default) or simply imported by
  the caller (as tests do).
- Shared helpers: methods/templates.py (prompt files under methods/prompts/, knowledge prompt
  per vendor, task block, the one answer request every code prompt ends with),
  methods/extract.py (one tolerant code extractor: JSON, fenced or bare code, never truncated
  code; test extraction). One-shot examples come from `ctx.example`, which excludes
  near-copies of the task's answer before a method ever sees them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bench.task import TaskView
from methods.rounding import two_digits
from modelio.types import Completion, Message


@dataclass(frozen=True)
class Candidate:
    """Code a method proposed: `index` counts 0, 1, ... in the order this unit proposed them;
    `calls_used` is the unit's spend when it was proposed (budget curves read it)."""

    index: int
    source: str
    calls_used: int


@dataclass(frozen=True)
class TestResult:
    """One of a method's own test functions, run against a candidate."""

    name: str
    passed: bool
    message: str = ""


@dataclass(frozen=True)
class Feedback:
    """What a method learns from running a candidate: the visible cases (`ctx.feedback`) or
    its own tests (`ctx.run_tests`, then `tests` holds one result per test function and
    `correct` means the candidate imported and every test passed); never the hidden cases."""

    verdict: str
    message: str
    failing_case: str | None
    latency_ms: float | None
    speedup: float | None
    tests: tuple[TestResult, ...] = ()
    kind: str = "visible"  # "visible" (the task's visible cases) or "tests" (the method's own tests)
    # The speedup's bootstrap interval (low, high) as the timing protocol measured it; methods
    # compare candidates by it (methods/speed.py), so differences inside the noise are ties.
    speedup_ci: tuple[float, float] | None = None
    # When the candidate raised: the traceback of its own lines (the judge's, torch's and
    # Triton's frames left out; capped; the same text in every run), shown after the message.
    traceback: str = ""

    @property
    def correct(self) -> bool:
        return self.verdict == "correct"

    @property
    def ran(self) -> bool:
        return self.verdict in ("correct", "wrong_result", "no_kernel")

    def describe(self) -> str:
        if self.kind == "tests" and (self.tests or self.correct):
            return self._describe_tests()
        if self.correct:  # figures to two significant digits: more would quote timing noise
            perf = f"; latency {two_digits(self.latency_ms)} ms" if self.latency_ms is not None else ""
            return f"passed all visible tests{perf}"
        where = f" on {self.failing_case}" if self.failing_case else ""
        shown = f"\n{self.traceback}" if self.traceback else ""
        return f"{self.verdict}{where}: {self.message}{shown}"

    def _describe_tests(self) -> str:
        """Reflexion's feedback format: the passing tests by name, the failing ones with why."""
        passed = [t.name for t in self.tests if t.passed]
        failed = [t for t in self.tests if not t.passed]
        lines = ["Tests passed:"] + [f"  {n}" for n in passed or ["(none)" if self.tests else "(no tests to run)"]]
        if failed:
            lines += ["Tests failed:"] + [f"  {t.name}: {t.message}" for t in failed]
        return "\n".join(lines)


class MethodContext(Protocol):
    """Everything a method can reach: read-only facts and verbs, nothing else. The scheduler's
    context (runners/context.py) is sealed: no evaluator, task, store, account or model client
    is reachable through its attributes (docs/ARCHITECTURE.md lists what a method can reach)."""

    @property
    def vendor(self) -> str:
        """The target's vendor ("nvidia", "amd", "cpu"), for the knowledge prompt."""
        ...

    @property
    def answer_format(self) -> str:
        """How every code-writing prompt asks for code: "fenced" or "json" (the run's option)."""
        ...

    def ask(self, messages: list[Message], *, temperature: float, role: str, max_tokens: int | None = None,
            wants_code: bool = False) -> Completion:
        """One model call through the budget ledger. `max_tokens` is the method's cap for this
        call (the ledger sends the smaller of it and what the budget has left); `wants_code`
        marks a call whose reply is code, which the run's `json_mode` (constrained JSON
        decoding, for every method or none) applies to. Raises BudgetExhausted when the budget
        cannot pay for the call; let it propagate."""
        ...

    def example(self, query: str, by: str) -> str | None:
        """A one-shot example program (bench/oneshot.py): the best BM25 match for `query`
        against the corpus descriptions (`by="description"`) or code (`by="code"`) among the
        programs that are not near-copies of this task's answer; None when none is left."""
        ...

    def propose(self, source: str) -> Candidate: ...

    def feedback(self, candidate: Candidate) -> Feedback:
        """The candidate judged on the task's visible cases: the same information for every
        method (verdict, failing case, error text capped in length, the traceback of the
        candidate's own lines when it raised; latency on a GPU); `describe()` is its text. Counts
        against the run's GPU-evaluation budget when it has one (BudgetExhausted past it)."""
        ...

    def run_tests(self, candidate: Candidate, tests: str) -> Feedback:
        """Run the method's own test functions (`tests`: Python source of `def test_*()`
        functions calling the entry point, which is a global there, as is `DEVICE`) against
        the candidate, in the sandboxed evaluation worker. Never uses the task's cases.
        Counts against the GPU-evaluation budget like `feedback`."""
        ...

    def submit(self, candidate: Candidate) -> None: ...

    def begin_run(self, independent: bool = True) -> None:
        """Declare that a run starts (a sample, a trial, a parallel run): the previous one is
        then complete. Recorded so pass@k over runs needs no guessing; a method that never
        calls it is treated as one run. `independent=False` says the runs are not independent
        draws (e.g. temperature 0 with a deterministic model): pass@k over them is then not
        computed, and the report says so."""
        ...

    def calls_used(self) -> int: ...

    def remaining(self) -> int: ...

    def evaluations_left(self) -> int | None:
        """GPU evaluations (feedback and own-test runs) this unit may still ask for; None: no
        cap. A method that can go on without feedback (direct prompting's independent samples)
        asks this instead of ending its loop at the cap."""
        ...


class Method(Protocol):
    name: str

    def run(self, task: TaskView, ctx: MethodContext) -> None: ...
