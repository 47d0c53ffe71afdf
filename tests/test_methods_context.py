"""The method context the scheduler hands a method (runners/context.py), with a real ledger,
store and evaluator over a scripted executor (no worker): the seal, one-shot examples and their
recorded similarity, the GPU-evaluation budget, symmetric feedback, json_mode for all, and a
ledger account that threads cannot overdraw. A few seconds."""

from __future__ import annotations

import collections
import threading
import types
import weakref
from pathlib import Path
from typing import Any

import pytest

from bench.oneshot import DEFAULT_THRESHOLD, open_library
from bench.registry import get_task
from judge.candidate import verdict as jv
from judge.candidate.internal_tests import InternalTestReport
from judge.candidate.verdict import Evaluation, Verdict
from judge.device import Target
from methods.base import Candidate
from modelio.ledger import BudgetExhausted, Ledger
from modelio.simulated import SimulatedModel
from modelio.types import Message
from record.store import Store
from runners.context import FEEDBACK_TEXT_CAP, SealedContext, UnitContext
from runners.evaluator import Evaluator

CPU = Target("cpu", True, "Triton CPU interpreter", 0)
CODE = "import torch\n\n\ndef vector_add(x, y):\n    return x + y\n"


class ScriptedExecutor:
    """An Executor whose verdicts are scripted; records what it was asked."""

    size = 1

    def __init__(self, verdict: Verdict | None = None):
        self.verdict = verdict or Verdict("wrong_result", "mismatch", "visible-n4096")
        self.jobs: list[tuple[str, str, bool]] = []

    def warm_up(self) -> None:
        pass

    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool = False, timing_policy: Any = None,
                 timeout: float | None = None, compile_through: str = "") -> Evaluation:
        self.jobs.append((case_set, source, timing))
        return Evaluation(self.verdict, None)

    def run_tests(self, task_id: str, source: str, tests: str, timeout: float | None = None,
                  per_test_timeout: float | None = None) -> InternalTestReport:
        self.jobs.append(("tests", source, False))
        return InternalTestReport.from_outcomes((jv.TestOutcome("test_a", False, "E" * 5000),))

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


def make_unit(tmp_path: Path, budget: int = 10, method: str = "m", **options: Any) -> tuple[UnitContext, Store]:
    store = Store(tmp_path / f"{method}.sqlite")
    ledger = Ledger(SimulatedModel(), store, budget)
    task = get_task(options.pop("task_id", "row_sum"))
    executor = options.pop("executor", ScriptedExecutor())
    evaluator = Evaluator(executor, store, CPU)
    examples = open_library(threshold=DEFAULT_THRESHOLD).for_task(task)
    return UnitContext(task, ledger.account(method, task.id, 0), evaluator, store, "nvidia", examples=examples,
                       **options), store


# ---------------------------------------------------------------- the seal


WALK_SKIP = {"__globals__", "__builtins__", "__subclasses__", "__base__", "__bases__", "__mro__", "__dict__"}
FORBIDDEN = ("Task", "Evaluator", "Store", "Account", "Ledger", "UnitContext", "SimulatedModel", "GuardedRetriever",
             "Corpus", "ScriptedExecutor", "OneShotLibrary")


C_BOUND = (types.MethodWrapperType, types.BuiltinMethodType, types.WrapperDescriptorType,
           types.MethodDescriptorType, types.ClassMethodDescriptorType)


def reachable(root: object, max_nodes: int = 20000) -> list[object]:
    """Everything reachable from `root` through attributes (dir() of instances and classes),
    class dictionaries, closure cells, weak references (dereferenced) and container items;
    not through a function's module globals (which reach the whole interpreter, as any import
    does: the seal is about what the context hands over, see runners/context.py)."""
    seen: set[int] = set()
    out: list[object] = []
    frontier = collections.deque([root])  # breadth first: what is near is found first
    while frontier and len(out) < max_nodes:
        obj = frontier.popleft()
        if id(obj) in seen or isinstance(obj, (types.ModuleType, str, bytes, int, float, complex, type(None))):
            continue
        seen.add(id(obj))
        out.append(obj)
        children: list[object] = []
        if isinstance(obj, type) and obj.__module__ == "builtins":
            continue
        if isinstance(obj, C_BOUND):  # a C-level bound method reaches only what it is bound to
            frontier.append(getattr(obj, "__self__", None))
            continue
        for name in dir(obj):
            if name in WALK_SKIP:
                continue
            try:
                children.append(getattr(obj, name))
            except Exception:  # noqa: BLE001 - an attribute that refuses to be read reaches nothing
                continue
        if isinstance(obj, type):
            children += list(vars(obj).values())
        if isinstance(obj, types.FunctionType) and obj.__closure__:
            children += [cell.cell_contents for cell in obj.__closure__]
        if isinstance(obj, weakref.ref):
            children.append(obj())
        if isinstance(obj, dict):
            children += list(obj.keys()) + list(obj.values())
        if isinstance(obj, (list, tuple, set, frozenset)):
            children += list(obj)
        frontier += children
    return out


def test_nothing_but_the_verbs_is_reachable_from_the_sealed_context(tmp_path: Path) -> None:
    unit, _ = make_unit(tmp_path)
    with unit.sealed() as ctx:
        nodes = reachable(ctx)
        assert len(nodes) < 20000  # the walk finished: everything reachable was seen
        found = {type(o).__name__ for o in nodes}
        assert not found & set(FORBIDDEN), found & set(FORBIDDEN)
        for name in ("task", "evaluator", "store", "client", "account", "ledger", "examples", "unit", "_unit",
                     "__dict__", "__weakref__"):
            with pytest.raises(AttributeError):
                getattr(ctx, name)
        with pytest.raises(AttributeError, match="read-only"):
            ctx.vendor = "amd"  # type: ignore[misc]
        with pytest.raises(AttributeError, match="read-only"):
            ctx.task = get_task("row_sum")  # type: ignore[attr-defined]
        assert ctx.vendor == "nvidia" and ctx.answer_format == "fenced"
        assert ctx.ask.__self__ is ctx and ctx.ask.__func__.__closure__ is None  # type: ignore[attr-defined]
    # The unit side, by contrast, holds them: the walk would have found them there.
    assert {"Task", "Evaluator", "Store", "Account"} <= {type(o).__name__ for o in reachable(unit)}


def test_a_closed_context_refuses_every_verb(tmp_path: Path) -> None:
    unit, _ = make_unit(tmp_path)
    with unit.sealed() as ctx:
        ctx.calls_used()
    with pytest.raises(RuntimeError, match="closed"):
        ctx.ask([Message("user", "hi")], temperature=1.0, role="x")
    with pytest.raises(RuntimeError, match="closed"):
        ctx.propose(CODE)
    assert isinstance(ctx, SealedContext)


def test_threads_cannot_overdraw_one_account(tmp_path: Path) -> None:
    """Sixteen threads of one method hammer one account: exactly the budget is spent, every
    call index is used once, and the run store holds one row per charged call."""
    unit, store = make_unit(tmp_path, budget=25)
    done: list[int] = []
    errors: list[BaseException] = []
    with unit.sealed() as ctx:
        def spend() -> None:
            n = 0
            try:
                while True:
                    ctx.ask([Message("user", f"Task: {get_task('row_sum').instruction}")], temperature=1.0,
                            role="generator")
                    n += 1
            except BudgetExhausted:
                done.append(n)
            except BaseException as exc:  # noqa: BLE001 - surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=spend) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors and sum(done) == 25 == unit.account.spend.calls
    indices = [r[0] for r in store.query("SELECT call_index FROM calls ORDER BY call_index")]
    assert indices == list(range(25))


# ---------------------------------------------------------------- one-shot examples


def test_examples_are_guarded_and_every_shown_example_is_recorded_per_call(tmp_path: Path) -> None:
    unit, store = make_unit(tmp_path, task_id="row_sum")
    with unit.sealed() as ctx:
        example = ctx.example(get_task("row_max").instruction, "description")  # asks for the near-copy by name
        assert example is not None and example != get_task("row_max").baseline_source()
        prompt = [Message("user", f"Task: row sum\nExample:\n{example}")]
        ctx.ask(prompt, temperature=1.0, role="generator")
        ctx.ask([Message("user", "no example here")], temperature=1.0, role="reflector")
        ctx.ask(prompt, temperature=1.0, role="generator")
    rows = [dict(r) for r in store.query("SELECT * FROM examples ORDER BY call_index")]
    assert [r["call_index"] for r in rows] == [0, 2]
    assert all(r["program"] != "task:row_max" and r["program"] != "task:row_sum" for r in rows)
    assert all(0 <= r["similarity"] < DEFAULT_THRESHOLD and r["query_by"] == "description" for r in rows)


# ---------------------------------------------------------------- feedback and the evaluation budget


def test_feedback_is_requested_the_same_way_for_everyone_and_its_text_is_capped(tmp_path: Path) -> None:
    frames = 'Traceback (the candidate\'s own lines, most recent call last):\n  File "candidate.py", line 4, in f'
    executor = ScriptedExecutor(Verdict("runtime_error", "Traceback ...\n" + "x" * 10_000, "visible-n4096",
                                        traceback=frames))
    unit, _ = make_unit(tmp_path, executor=executor)
    with unit.sealed() as ctx:
        candidate = ctx.propose(CODE)
        fb = ctx.feedback(candidate)
        tests = ctx.run_tests(candidate, "def test_a():\n    assert False\n")
    assert executor.jobs[0] == ("visible", CODE, False)  # timed on a GPU (the interpreter times nothing)
    assert fb.failing_case == "visible-n4096" and fb.message.startswith("Traceback")
    assert len(fb.message) <= FEEDBACK_TEXT_CAP + 20 and fb.message.endswith("[... cut]")
    assert fb.traceback == frames and fb.describe().endswith("\n" + frames)
    assert len(tests.tests[0].message) <= FEEDBACK_TEXT_CAP + 20


def test_the_evaluation_budget_is_enforced_like_calls(tmp_path: Path) -> None:
    unit, store = make_unit(tmp_path, eval_budget=3)
    with unit.sealed() as ctx:
        candidate = ctx.propose(CODE)
        ctx.feedback(candidate)
        ctx.run_tests(candidate, "def test_a():\n    assert True\n")
        ctx.feedback(Candidate(1, CODE + "# 2\n", 0))
        with pytest.raises(BudgetExhausted, match="GPU evaluation budget of 3"):
            ctx.feedback(candidate)
        with pytest.raises(BudgetExhausted, match="GPU evaluation budget of 3"):
            ctx.run_tests(candidate, "def test_a():\n    assert True\n")
    assert unit.evaluations_used == 3
    assert len(store.query("SELECT 1 FROM feedback")) == 2 and len(store.query("SELECT 1 FROM test_runs")) == 1


def test_json_mode_is_the_runs_and_reaches_only_code_writing_calls(tmp_path: Path) -> None:
    unit, store = make_unit(tmp_path, answer_format="json", json_mode=True)
    seen: list[bool] = []
    real = unit.account.ledger.client

    class Spy:
        model, simulated = real.model, True

        def complete(self, request: Any) -> Any:
            seen.append(request.json_mode)
            return real.complete(request)

    unit.account.ledger.client = Spy()  # type: ignore[assignment]
    with unit.sealed() as ctx:
        assert ctx.answer_format == "json"
        ctx.ask([Message("user", "write code")], temperature=1.0, role="generator", wants_code=True)
        ctx.ask([Message("user", "reflect")], temperature=1.0, role="reflector")
    assert seen == [True, False]


def test_runs_record_whether_they_are_independent(tmp_path: Path) -> None:
    unit, store = make_unit(tmp_path)
    with unit.sealed() as ctx:
        for independent in (True, False):
            ctx.begin_run(independent=independent)
            ctx.ask([Message("user", "x")], temperature=0.0, role="generator")
    assert [tuple(r) for r in store.query("SELECT run_index, independent FROM runs ORDER BY run_index")] == \
        [(0, 1), (1, 0)]


@pytest.mark.slow
def test_no_example_shown_to_any_method_on_any_builtin_task_is_a_near_copy(tmp_path: Path) -> None:
    """All three built-in methods on all 31 built-in tasks with oneshot on, through the real
    context and store (scripted verdicts alternate wrong and correct, so GEAK debugs and
    retrieves by code too): every example any call showed is recorded, and its similarity to
    the task's expert kernel, recomputed here from the stored program, is below the threshold."""
    import methods  # noqa: F401 - registers the built-ins
    from bench.oneshot import similarity
    from bench.registry import all_tasks
    from methods.registry import create_method

    library = open_library(threshold=DEFAULT_THRESHOLD)
    programs = {p.name: p.code for p in library.corpus.programs}
    store = Store(tmp_path / "store.sqlite")
    ledger = Ledger(SimulatedModel(), store, 8)
    tasks = [t for t in all_tasks() if t.source == "builtin"]
    assert len(tasks) == 31
    verdicts = iter([Verdict("wrong_result", "mismatch", "visible-a"), Verdict("correct")] * 10_000)

    class Alternating(ScriptedExecutor):
        def evaluate(self, *args: Any, **kwargs: Any) -> Evaluation:
            return Evaluation(next(verdicts), None)

    evaluator = Evaluator(Alternating(), store, CPU)
    for task in tasks:
        for name in ("direct", "reflexion", "geak"):
            unit = UnitContext(task, ledger.account(name, task.id, 0), evaluator, store, "nvidia",
                               examples=library.for_task(task))
            with unit.sealed() as ctx, pytest.raises(BudgetExhausted):
                create_method(name, {"iterations": 2} if name == "geak" else {}).run(task.view(), ctx)
    rows = [dict(r) for r in store.query("SELECT * FROM examples")]
    shown_calls = {(r["method"], r["task"], r["call_index"]) for r in rows}
    assert {r["task"] for r in rows} == {t.id for t in tasks} and {r["method"] for r in rows} == \
        {"direct", "reflexion", "geak"}
    assert {r["query_by"] for r in rows if r["method"] == "geak"} == {"description", "code"}
    assert len(shown_calls) > 31 * 3 * 4  # most calls show an example
    for r in rows:
        expert = get_task(r["task"]).baseline_source()
        assert r["program"] != f"task:{r['task']}"
        assert similarity(programs[r["program"]], expert) < DEFAULT_THRESHOLD, r
        assert r["similarity"] < DEFAULT_THRESHOLD


def test_a_resume_refuses_a_changed_oneshot_corpus(tmp_path: Path) -> None:
    import json

    from bench.oneshot import file_digest
    from record.run_folder import ResolvedRun, RunFolder
    from runners.config import CompareConfig, ConfigError
    from runners.plan import CompareOptions, plan_run

    corpus = tmp_path / "crawl.json"
    corpus.write_text(json.dumps([{"code": "def f(x):\n    return x\n", "description_1": "identity"}]))
    config = CompareConfig(oneshot_corpus=str(corpus), tasks=["vector_add"])
    config.validate()
    run = tmp_path / "run"
    run.mkdir()
    RunFolder(run).write_config(config.to_json(), ResolvedRun(
        tasks=("vector_add",), method_options={}, budget_unit="calls", model="m", simulated=True,
        target={"vendor": "cpu"}, oneshot={"sha256": file_digest(corpus)}))
    plan = plan_run(CompareConfig(), CompareOptions(resume=run))
    assert plan.resumed and plan.config.oneshot_corpus == str(corpus.resolve())
    corpus.write_text(json.dumps([{"code": "def g(x):\n    return -x\n"}]))
    with pytest.raises(ConfigError, match="changed since this run started"):
        plan_run(CompareConfig(), CompareOptions(resume=run))
    with pytest.raises(ConfigError, match="oneshot_threshold"):
        CompareConfig(oneshot_threshold=1.5).validate()
    with pytest.raises(ConfigError, match="needs answer_format: json"):
        CompareConfig(json_mode=True).validate()
    with pytest.raises(ConfigError, match="eval_budget"):
        CompareConfig(eval_budget=0).validate()


def test_sanitize_is_part_of_the_evaluation_cache_key(tmp_path: Path) -> None:
    """A timed evaluation judged under compute-sanitizer is a different result from a plain one:
    a run with `sanitize` never reuses a plain timed verdict (nor the other way round), while
    untimed evaluations, which the sanitizer never touches, are still shared."""
    gpu = Target("nvidia", False, "NVIDIA H200", 1)
    store = Store(tmp_path / "store.sqlite")
    executor = ScriptedExecutor(Verdict("correct", ""))
    plain, sanitized = Evaluator(executor, store, gpu), Evaluator(executor, store, gpu, sanitize=True)
    for evaluator in (plain, sanitized, plain, sanitized):
        evaluator.evaluate("vector_add", CODE, "hidden", timing=True)
        evaluator.evaluate("vector_add", CODE, "hidden")
    # One plain and one sanitized timed run; the untimed verdict, decided by the plain timed
    # pass without a job of its own (runners/savings.py), is stored once and shared.
    assert [timing for _, _, timing in executor.jobs] == [True, True], "one plain and one sanitized timed run"
    untimed = store.query("SELECT device_key FROM evaluations WHERE timed=0")
    assert [r[0] for r in untimed] == [gpu.key]
    keys = {r[0] for r in store.query("SELECT device_key FROM evaluations")}
    assert keys == {gpu.key, gpu.key + "|sanitized"}
    on_cpu = Evaluator(ScriptedExecutor(), store, CPU, sanitize=True)
    assert on_cpu.judging_key(True) == CPU.key, "nothing is sanitized on the interpreter"
