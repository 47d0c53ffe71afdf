"""The comparison scheduler: every method on every task and repeat, under one ledger.

A unit is one (method, task, repeat). Its life: the method runs against a `UnitContext`
until its budget is spent; then every distinct candidate it generated is judged on the
hidden cases (oracle pass and budget curves need them all), and its final submission is
timed on a GPU; only then is the unit marked done. Units run concurrently on threads
(model calls wait on the network; evaluations queue for the worker pool). A resumed run
skips done units and replays the rest from the store, so nothing is paid for twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.registry import get_task, load_sources, suite_tasks
from bench.task import Task
from judge.device import Target, detect_target, environment_info
from methods.registry import create_method, load_method_modules, method_class, method_options
from modelio.ledger import BudgetExhausted, Ledger, ModelCallFailed
from modelio.types import ModelClient
from results.run_folder import ResolvedRun, RunFolder, RunFolderError
from results.store import Store
from runners.config import CompareConfig, ConfigError
from runners.context import UnitContext
from runners.evaluator import Evaluator
from runners.executor import Executor
from runners.pool import LocalPool


@dataclass(frozen=True)
class Unit:
    method: str
    task: str
    repeat: int


def resolve_tasks(config: CompareConfig, target: Target) -> list[Task]:
    """Explicit --tasks win; else --suite; else `quick` without a GPU and `full` with one."""
    if config.tasks:
        return [get_task(t) for t in config.tasks]
    suite = config.suite or ("quick" if target.interpreter else "full")
    return suite_tasks(suite)


def resolve_methods(config: CompareConfig) -> dict[str, dict[str, Any]]:
    """Each method's options with defaults filled in (unknown names and options fail here)."""
    load_method_modules(config.method_modules)
    resolved = {}
    for name in config.methods:
        method_class(name)
        options = config.method_options.get(name, {})
        try:
            instance = create_method(name, options)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"method {name}: {exc}") from None
        resolved[name] = method_options(instance)
    extra = sorted(set(config.method_options) - set(config.methods))
    if extra:
        raise ConfigError(f"options given for method(s) not being run: {', '.join(extra)}")
    return resolved


def local_executor(config: CompareConfig, target: Target, clocks_locked: bool = False) -> LocalPool:
    """The run's worker pool, its workers told the run's task sources (and whether clocks are locked)."""
    return LocalPool(target, workers=config.workers, job_timeout=config.job_timeout_s, worker_user=config.worker_user,
                     task_sources=config.task_sources, clocks_locked=clocks_locked)


class Progress:
    """Counts for the progress bar: units done, calls spent, and the budget they come from."""

    def __init__(self, total_units: int, budget_total: int, on_change: Callable[[Progress], None] | None = None):
        self.total_units = total_units
        self.budget_total = budget_total
        self.units_done = 0
        self.spent = 0
        self._lock = threading.Lock()
        self._on_change = on_change

    def add(self, units: int = 0, spent: int = 0) -> None:
        with self._lock:
            self.units_done += units
            self.spent += spent
        if self._on_change:
            self._on_change(self)


class CompareRun:
    def __init__(self, config: CompareConfig, run_dir: Path, client: ModelClient, target: Target,
                 progress: Callable[[Progress], None] | None = None, executor: Executor | None = None):
        self.config = config
        self.run_dir = run_dir
        self.client = client
        self.target = target
        self.tasks = resolve_tasks(config, target)
        self.method_opts = resolve_methods(config)
        self.store = Store(RunFolder(run_dir).store_path)
        self.ledger = Ledger(client, self.store, config.budget, config.budget_unit, config.seed,
                             charge_failed_calls=config.charge_failed_calls)
        self.executor: Executor = executor or local_executor(config, target)
        self.stopping = threading.Event()
        self.evaluator = Evaluator(self.executor, self.store, target, config.timing_policy, self.stopping)
        self.units = [Unit(m, t.id, r) for m in config.methods for t in self.tasks for r in range(config.repeats)]
        self.progress = Progress(len(self.units), len(self.units) * config.budget, progress)

    def run(self) -> None:
        self.executor.warm_up()
        pending = []
        for u in self.units:
            if self.store.unit_status(u.method, u.task, u.repeat) == "done":
                row = self.store.query("SELECT calls_used, prompt_tokens, completion_tokens FROM units "
                                       "WHERE method=? AND task=? AND repeat=?", (u.method, u.task, u.repeat))[0]
                self.progress.add(units=1, spent=self._spent_from_row(row))
            else:
                pending.append(u)
        concurrency = self.config.concurrency or max(2, 2 * self.executor.size)
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="unit") as pool:
            futures = {pool.submit(self._run_unit, u): u for u in pending}
            try:
                for future in as_completed(futures):
                    future.result()  # a scheduler error is fatal and must surface, never be swallowed
            except BaseException:
                # Ctrl-C, or a fatal error: stop every unit now rather than letting each run to its
                # budget. Units not started never start; running ones end at their next model call
                # or evaluation, unfinished and resumable; the workers die so in-flight jobs return.
                self.stopping.set()
                pool.shutdown(wait=False, cancel_futures=True)
                self.executor.abort()
                raise

    def _spent_from_row(self, row: Any) -> int:
        return {"calls": row[0], "output_tokens": row[2], "total_tokens": row[1] + row[2]}[self.ledger.unit]

    def _run_unit(self, unit: Unit) -> None:
        task = get_task(unit.task)
        account = self.ledger.account(unit.method, unit.task, unit.repeat)
        ctx = UnitContext(task, account, self.evaluator, self.store, self.target.vendor)
        method = create_method(unit.method, self.method_opts[unit.method])
        status, error = "done", None
        try:
            method.run(task.view(), ctx)
            ctx.close_run()  # returned by itself: its last run is complete
        except BudgetExhausted:
            pass  # the run in progress was cut by the budget and stays open
        except ModelCallFailed as exc:
            error = f"model call failed: {exc}"
        self._judge_hidden(unit, task)
        s = account.spend
        self.store.finish_unit(unit.method, unit.task, unit.repeat, status, s.calls, s.prompt_tokens,
                               s.completion_tokens, ctx.n_feedback + ctx.n_test_runs, error)
        self.progress.add(units=1, spent=s.used(self.ledger.unit))

    def _judge_hidden(self, unit: Unit, task: Task) -> None:
        key = (unit.method, unit.task, unit.repeat)
        hashes = [r[0] for r in self.store.query(
            "SELECT DISTINCT source_hash FROM candidates WHERE method=? AND task=? AND repeat=? ORDER BY candidate_index",
            key)]
        for h in hashes:
            self.evaluator.evaluate(task.id, self.store.source(h), "hidden")
        final = self.store.query("SELECT source_hash FROM submissions WHERE method=? AND task=? AND repeat=? "
                                 "ORDER BY submission_index DESC LIMIT 1", key)
        if final and not self.target.interpreter:
            self.evaluator.evaluate(task.id, self.store.source(final[0][0]), "hidden", timing=True)

    def close(self) -> None:
        self.executor.close()
        self.store.close()


def prepare_run(config: CompareConfig, out: Path | None, resume: Path | None) -> tuple[CompareConfig, Path, bool]:
    """Validate, pick or reopen the run folder. Returns (config, run_dir, resumed)."""
    if resume is not None:
        try:
            recorded = RunFolder(resume).read_config()
        except RunFolderError as exc:
            raise ConfigError(str(exc)) from None
        config = CompareConfig.from_json(recorded.config)
        config.validate()
        return config, Path(resume), True
    config.validate()
    _check_names(config)
    try:
        folder = RunFolder.create(out or "runs", config.to_json())
    except RunFolderError as exc:
        raise ConfigError(str(exc)) from None
    return config, folder.path, False


def _check_names(config: CompareConfig) -> None:
    """Unknown methods, options, tasks or suites fail before a run folder is made."""
    resolve_methods(config)
    for task_id in config.tasks or []:
        get_task(task_id)
    if config.suite and not config.tasks:
        suite_tasks(config.suite)


def start_target(config: CompareConfig) -> Target:
    """The run's device (the CPU interpreter for --device cpu), with the run's task sources
    loaded for it, so their tasks can be looked up. Sets nothing in the environment."""
    target = detect_target(force_cpu=config.device == "cpu")
    load_sources(config.task_sources, target.vendor)
    return target


def record_run_files(run: CompareRun, resumed: bool, command_line: list[str] | None = None) -> None:
    """config.json and env.json for a new run; a resumed run adds its resumption to env.json."""
    folder = RunFolder(run.run_dir)
    if not resumed:
        folder.write_config(run.config.to_json(), ResolvedRun(
            tasks=tuple(t.id for t in run.tasks), method_options=run.method_opts, budget_unit=run.ledger.unit,
            model=run.client.model, simulated=run.client.simulated, target=run.target.to_json(),
            task_difficulty={t.id: int(t.difficulty) for t in run.tasks}))
        folder.write_env(environment_info(run.target), command_line)
    else:
        folder.record_resume(command_line)
    run.store.set_meta("simulated", run.client.simulated)
