"""The comparison scheduler: every method on every task and repeat, under one ledger.

A unit is one (method, task, repeat). Its life: the method runs against a `UnitContext`
until its budget is spent; then every distinct candidate it generated is judged on the
hidden cases (oracle pass and budget curves need them all), and its final submission is
timed on a GPU; only then is the unit marked done. Units run concurrently on threads
(model calls wait on the network; evaluations queue for the worker pool). A resumed run
skips done units and replays the rest from the store, so nothing is paid for twice.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.oneshot import CorpusError, OneShotLibrary, open_library
from bench.registry import get_task, load_sources, profile_id, suite_tasks
from bench.task import GEAK_EVAL_PROFILE, Task
from judge.device import Target, detect_target, environment_info
from judge.sandbox import require as require_sandbox
from methods.registry import create_method, load_method_modules, method_class, method_options
from modelio.dryrun import DryRunEstimate
from modelio.ledger import BudgetExhausted, Charge, Ledger, ModelCallFailed, ReplayDiverged
from modelio.replay import ReplayClient, ReplayMiss
from modelio.types import ModelClient
from results.provenance import recorded_version, this_version
from results.run_folder import ResolvedRun, RunFolder, RunFolderError
from results.store import RecordedEvaluations, Store
from runners.config import RESUMABLE_OPTIONS, CompareConfig, ConfigError
from runners.context import UnitContext
from runners.evaluator import Evaluator
from runners.executor import Executor, NothingRuns
from runners.logs import get_logger, run_log
from runners.pool import LocalPool, WorkerStartError

log = get_logger("runners.compare")


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


def open_oneshot(config: CompareConfig) -> OneShotLibrary:
    """The run's one-shot corpus behind its leak guard (bench/oneshot.py)."""
    try:
        return open_library(config.oneshot_corpus, config.oneshot_threshold)
    except (CorpusError, ValueError) as exc:
        raise ConfigError(str(exc)) from None


def run_executor(config: CompareConfig, target: Target, clocks_locked: bool = False) -> Executor:
    """The run's executor: the local pool, or Ray actors when the config names a Ray address
    (`--ray ADDRESS`; both keep the two lanes). Ray missing is a one-line ConfigError."""
    if config.ray_address is None:
        return local_executor(config, target, clocks_locked)
    try:
        from runners.ray_executor import RayExecutor

        return RayExecutor(target, actors=config.workers, job_timeout=config.job_timeout_s,
                           address=None if config.ray_address == "local" else config.ray_address,
                           task_sources=config.task_sources, clocks_locked=clocks_locked, sanitize=config.sanitize,
                           unsandboxed=config.unsandboxed)
    except ImportError as exc:
        raise ConfigError(str(exc)) from None
    except (RuntimeError, ConnectionError, ValueError) as exc:
        raise ConfigError(f"the Ray executor could not start: {exc}") from None


def local_executor(config: CompareConfig, target: Target, clocks_locked: bool = False) -> LocalPool:
    """The run's worker pool, its workers told the run's task sources (and whether clocks are locked)."""
    try:
        prepare = tuple(t.id for t in resolve_tasks(config, target))
    except KeyError:
        prepare = ()  # an unknown task is reported where the run resolves its tasks
    return LocalPool(target, workers=config.workers, job_timeout=config.job_timeout_s, worker_user=config.worker_user,
                     task_sources=config.task_sources, clocks_locked=clocks_locked, sanitize=config.sanitize,
                     prepare=prepare, unsandboxed=config.unsandboxed)


class Progress:
    """Counts for the progress bar, updated at every model call, evaluation and finished unit.

    `spent` is what the ledger charged (in the budget's unit, replayed calls of a resumed unit
    included); `work` is `spent` plus the unspent budget of finished units (a method may stop
    early), so it reaches `budget_total` exactly when the last unit ends: a bar drawn from it
    advances with every call and ends full."""

    def __init__(self, total_units: int, budget_total: int, on_change: Callable[[Progress], None] | None = None,
                 unit: str = "calls"):
        self.total_units = total_units
        self.budget_total = budget_total
        self.unit = unit
        self.units_done = 0
        self.spent = 0
        self.evaluations = 0
        self.released = 0  # budget that finished units left unspent
        self.finished: list[str] = []  # "method/task/repeat N" of each finished unit, in finishing order
        self._lock = threading.Lock()
        self._on_change = on_change

    @property
    def work(self) -> int:
        return self.spent + self.released

    def _changed(self) -> None:
        if self._on_change:
            self._on_change(self)

    def charged(self, charge: Charge) -> None:
        """The ledger charged a call (live or replayed)."""
        amount = {"calls": charge.calls, "output_tokens": charge.completion_tokens,
                  "total_tokens": charge.prompt_tokens + charge.completion_tokens}[self.unit]
        with self._lock:
            self.spent += amount
        self._changed()

    def evaluated(self) -> None:
        with self._lock:
            self.evaluations += 1
        self._changed()

    def unit_finished(self, unspent: int, spent: int = 0, unit: str = "") -> None:
        """A unit ended with `unspent` budget left; `spent` is its spend when the ledger never saw
        it charged (a unit finished before a resume); `unit` names it for a line per unit."""
        with self._lock:
            self.units_done += 1
            self.finished.append(unit or f"unit {self.units_done}")
            self.released += max(0, unspent)
            self.spent += spent
        self._changed()


# Errors that end the whole run even when they surface inside a method (through a `ctx` verb):
# the run's own machinery failed, and going on would record something untrue. Anything else a
# method raises ends only its unit, as an errored unit (`units.error`, exit status 3).
RUN_ERRORS: tuple[type[BaseException], ...] = (ReplayMiss, ReplayDiverged, WorkerStartError, sqlite3.Error)


class CompareRun:
    def __init__(self, config: CompareConfig, run_dir: Path, client: ModelClient, target: Target,
                 progress: Callable[[Progress], None] | None = None, executor: Executor | None = None,
                 retry_errors: bool = False, recorded_evaluations: RecordedEvaluations | None = None):
        self.config = config
        self.run_dir = run_dir
        self.client = client
        self.target = target
        self.tasks = resolve_tasks(config, target)
        self.method_opts = resolve_methods(config)
        self.store = Store(RunFolder(run_dir).store_path)
        # Task by task, every method's units of a task together: they share the judge workers'
        # cached inputs and the evaluations of code they both proposed, and a run cut short (a
        # time limit, Ctrl-C) has every method as far along rather than the first method alone
        # (on an H200, a full-suite run cut at 568 s had finished 22 units, all of them direct's).
        self.units = [Unit(m, t.id, r) for t in self.tasks for m in config.methods for r in range(config.repeats)]
        self.progress = Progress(len(self.units), len(self.units) * config.budget, progress, config.budget_unit)
        self.ledger = Ledger(client, self.store, config.budget, config.budget_unit, config.seed,
                             charge_failed_calls=config.charge_failed_calls, on_charge=self._charged)
        self.progress.unit = self.ledger.unit
        self.executor: Executor = executor or local_executor(config, target)
        self._closed = False
        self.stopping = threading.Event()
        self.evaluator = Evaluator(self.executor, self.store, target, config.timing_policy, self.stopping,
                                   recorded=recorded_evaluations, on_executed=self._evaluated,
                                   sanitize=config.sanitize)
        self.oneshot = open_oneshot(config)
        self.retry_errors = retry_errors

    def run(self) -> None:
        self.executor.warm_up()
        if self.retry_errors:
            for key in self.store.errored_units():
                self.store.reopen_errored_unit(*key)
        pending = []
        for u in self.units:
            if self.store.unit_status(u.method, u.task, u.repeat) == "done":
                spend = self.store.unit_spend(u.method, u.task, u.repeat)
                assert spend is not None  # a done unit has its row
                spent = self._spent_from_row(spend)
                self.progress.unit_finished(self.config.budget - spent, spent=spent,
                                            unit=f"{u.method}/{u.task}/repeat {u.repeat} (finished before)")
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

    def _spent_from_row(self, row: dict[str, int]) -> int:
        return {"calls": row["calls_used"], "output_tokens": row["completion_tokens"],
                "total_tokens": row["prompt_tokens"] + row["completion_tokens"]}[self.ledger.unit]

    def _charged(self, c: Charge) -> None:
        log.debug("call %d of %s/%s/repeat %d%s: %d prompt + %d completion tokens%s", c.call_index, c.method, c.task,
                  c.repeat, " (replayed)" if c.replayed else "", c.prompt_tokens, c.completion_tokens,
                  ", failed" if c.failed else "")
        self.progress.charged(c)

    def _evaluated(self, task: str, case_set: str, verdict: str, seconds: float) -> None:
        log.debug("evaluated %s on %s cases: %s (%.1f s)", task, case_set, verdict, seconds)
        self.progress.evaluated()

    def _run_unit(self, unit: Unit) -> None:
        log.info("unit %s/%s/repeat %d: started", unit.method, unit.task, unit.repeat)
        task = get_task(unit.task)
        account = self.ledger.account(unit.method, unit.task, unit.repeat)
        ctx = UnitContext(task, account, self.evaluator, self.store, self.target.vendor,
                          examples=self.oneshot.for_task(task), answer_format=self.config.answer_format,
                          json_mode=self.config.json_mode, eval_budget=self.config.effective_eval_budget())
        method = create_method(unit.method, self.method_opts[unit.method])
        status, error = "done", None
        try:
            with ctx.sealed() as sealed:
                method.run(task.view(), sealed)
            ctx.close_run()  # returned by itself: its last run is complete
        except BudgetExhausted:
            pass  # the run in progress was cut by the budget and stays open
        except ModelCallFailed as exc:
            error = f"model call failed: {exc}"
        except RUN_ERRORS:
            raise  # the run itself cannot go on (a replay that diverged or missed, no worker, no store)
        except Exception as exc:  # noqa: BLE001 - a method's own bug ends its unit, never the run
            error = f"the method raised {type(exc).__name__}: {exc}"[:2000]
            log.warning("unit %s/%s/repeat %d: %s", unit.method, unit.task, unit.repeat, error, exc_info=True)
        if isinstance(self.client, ReplayClient):  # as many calls and the same submissions as the recorded unit
            self.client.check_unit((unit.method, unit.task, unit.repeat), account.next_index,
                                   self.store.unit_submissions(unit.method, unit.task, unit.repeat))
        self._judge_hidden(unit, task)
        s = account.spend
        self.store.finish_unit(unit.method, unit.task, unit.repeat, status, s.calls, s.prompt_tokens,
                               s.completion_tokens, ctx.evaluations_used, error)
        log.info("unit %s/%s/repeat %d: %s; %d calls, %d prompt + %d completion tokens, %d evaluations%s",
                 unit.method, unit.task, unit.repeat, status, s.calls, s.prompt_tokens, s.completion_tokens,
                 ctx.evaluations_used, f"; {error}" if error else "")
        self.progress.unit_finished(self.config.budget - s.used(self.ledger.unit),
                                    unit=f"{unit.method}/{unit.task}/repeat {unit.repeat}"
                                    + (" (ended on an error)" if error else ""))

    def _judge_hidden(self, unit: Unit, task: Task) -> None:
        """Every candidate of the unit on the hidden cases, the final submission also timed (on
        a GPU) and through its suite's own check. The jobs are independent, so they go to the
        executor at once rather than one after another: judged in turn, a unit's ten or twenty
        hidden jobs were a chain that kept the run's last units going while workers sat idle."""
        jobs: list[tuple[str, str, bool]] = [(task.id, self.store.source(h), False)
                                             for h in self.store.unit_candidate_hashes(unit.method, unit.task,
                                                                                       unit.repeat)]
        final = self.store.final_submission(unit.method, unit.task, unit.repeat)
        if final is not None and task.profile(GEAK_EVAL_PROFILE) is not None:
            # The suite's own checker's view of the same answer (GEAK-eval's call and execution
            # accuracy), reported beside the strict hidden verdict.
            jobs.append((profile_id(task.id, GEAK_EVAL_PROFILE), self.store.source(final), False))
        later: list[tuple[str, str, bool]] = []
        if final is not None and not self.target.interpreter:
            final_job = (task.id, self.store.source(final), False)
            if final_job in jobs:  # decided by the timed job when it passes (runners/savings.py)
                jobs.remove(final_job)
                later.append(final_job)
            jobs.insert(0, (task.id, self.store.source(final), True))  # the longest job first
        if not jobs:
            return
        with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), self.executor.size)),
                                thread_name_prefix="hidden") as pool:
            futures = [pool.submit(self.evaluator.evaluate, task_id, source, "hidden", timing=timed)
                       for task_id, source, timed in jobs]
            try:
                for future in as_completed(futures):
                    future.result()  # an interrupted run or a replay that missed must surface
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
        for task_id, source, timed in later:
            self.evaluator.evaluate(task_id, source, "hidden", timing=timed)

    def close(self) -> None:
        """Once; a second call does nothing (`run_compare` closes inside the run's log, so the
        pool's closing counts reach run.log, and again after it in case the log never opened)."""
        if self._closed:
            return
        self._closed = True
        self.executor.close()
        self.store.close()


@dataclass(frozen=True)
class PreparedRun:
    config: CompareConfig
    run_dir: Path
    resumed: bool
    changed: dict[str, dict[str, Any]] = field(default_factory=dict)  # resumable options a --resume changed


def prepare_run(config: CompareConfig, out: Path | None, resume: Path | None,
                resume_with: dict[str, Any] | None = None) -> PreparedRun:
    """Validate, pick or reopen the run folder. A resume takes the recorded configuration, with
    the options in `resume_with` (only RESUMABLE_OPTIONS: how to run, never what is compared)
    changed, validated, and written back to config.json."""
    if resume is not None:
        folder = RunFolder(resume)
        try:
            recorded = folder.read_config()
        except RunFolderError as exc:
            raise ConfigError(str(exc)) from None
        changes = {k: v for k, v in (resume_with or {}).items() if v is not None}
        refused = sorted(set(changes) - set(RESUMABLE_OPTIONS))
        if refused:
            raise ConfigError(f"--resume cannot change {', '.join(refused)} (it may change only "
                              f"{', '.join(RESUMABLE_OPTIONS)})")
        changed = {k: {"from": recorded.config.get(k), "to": v} for k, v in changes.items()
                   if recorded.config.get(k) != v}
        config = CompareConfig.from_json({**recorded.config, **changes})
        try:
            config.validate()
        except ConfigError as exc:
            if any(str(exc).startswith(k) for k in changes):
                raise  # the new value itself is bad
            hint = "; pass --workers N with --resume to change it" if str(exc).startswith("workers") else ""
            raise ConfigError(f"{resume}: recorded {exc}{hint}") from None
        _check_same_corpus(config, recorded.resolved.oneshot)
        if changed:
            folder.update_options({k: c["to"] for k, c in changed.items()})
        return PreparedRun(config, Path(resume), True, changed)
    config.validate()
    _check_names(config)
    try:
        folder = RunFolder.create(out or "runs", config.to_json())
    except RunFolderError as exc:
        raise ConfigError(str(exc)) from None
    return PreparedRun(config, folder.path, False)


def _check_same_corpus(config: CompareConfig, recorded: dict[str, Any]) -> None:
    """A resumed run must show the examples the interrupted one showed: same corpus file."""
    from bench.oneshot import file_digest

    if config.oneshot_corpus and recorded.get("sha256") and file_digest(config.oneshot_corpus) != recorded["sha256"]:
        raise ConfigError(f"the one-shot corpus {config.oneshot_corpus} changed since this run started "
                          "(its sha256 differs from config.json's); restore it to resume")


def _check_names(config: CompareConfig) -> None:
    """Unknown methods, options, tasks or suites fail before a run folder is made."""
    resolve_methods(config)
    if config.oneshot_corpus is not None:
        open_oneshot(config)  # a malformed corpus file fails before a run folder exists
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


def record_run_files(run: CompareRun, resumed: bool, command_line: list[str] | None = None,
                     changed: dict[str, dict[str, Any]] | None = None, machine: Target | None = None) -> None:
    """config.json and env.json for a new run; a resumed run adds its resumption (and the
    options it changed) to env.json. `machine`: this machine's device, for env.json, when the
    run judges as another device did (an exact replay)."""
    folder = RunFolder(run.run_dir)
    if not resumed:
        folder.write_config(run.config.to_json(), ResolvedRun(
            tasks=tuple(t.id for t in run.tasks), method_options=run.method_opts, budget_unit=run.ledger.unit,
            model=run.client.model, simulated=run.client.simulated, target=run.target.to_json(),
            task_difficulty={t.id: int(t.difficulty) for t in run.tasks},
            new_shape_slots={t.id: n for t in run.tasks
                             if (n := sum("shape" in c.dims for c in t.hidden(run.target.interpreter)))},
            oneshot=oneshot_record(run)), executor=run.executor.layout())
        folder.write_env(environment_info(machine or run.target), command_line)
    else:
        folder.record_resume(command_line, changed)
        folder.record_executor(run.executor.layout())
    run.store.set_meta("simulated", run.client.simulated)
    counts = callable(getattr(run.client, "count_prompt_tokens", None))
    run.store.set_meta("prompt_counting", "count_tokens" if counts else "bound")


def oneshot_record(run: CompareRun) -> dict[str, Any]:
    """What config.json says about the one-shot corpus: where it came from, its size, the
    file's digest (so a resume can tell a changed corpus), the guard's threshold and measure."""
    from bench.oneshot import SIMILARITY_MEASURE, file_digest

    cfg = run.config
    return {"corpus": cfg.oneshot_corpus or "builtin", "programs": len(run.oneshot.corpus),
            "sha256": file_digest(cfg.oneshot_corpus) if cfg.oneshot_corpus else None,
            "threshold": cfg.oneshot_threshold, "similarity": SIMILARITY_MEASURE}


# ---------------------------------------------------------------------------- the `compare` command as a library call
Message = Callable[[str], None]


@dataclass(frozen=True)
class RunStarted:
    """Told to `CompareOptions.on_start` once the run folder is ready, before any unit runs."""

    run_dir: Path
    resumed: bool
    total_units: int
    budget_unit: str


@dataclass
class CompareOptions:
    """How to run a comparison, beside what it compares (CompareConfig): where, whether it resumes
    or replays a recorded run, clock locking, and who hears about progress."""

    out: Path | None = None  # folder for new run folders [runs/]
    resume: Path | None = None  # finish this interrupted run folder, with its recorded config
    replay: Path | None = None  # answer model calls from this recorded run folder, with no network
    lock_clocks: tuple[int | None, int | None] | None = None  # (SM, memory) MHz, None each for auto; None: unlocked
    command_line: list[str] | None = None  # recorded in env.json [this process's argv]
    on_message: Message = lambda _m: None  # one line for the user (the CLI prints them on stderr)
    on_start: Callable[[RunStarted], None] = lambda _s: None
    on_progress: Callable[[Progress], None] | None = None
    retry_errors: bool = False  # with resume: run the units that ended on a failed model call again
    # With replay: judge every candidate anew on this machine instead of replaying the recorded
    # evaluations (an exact replay runs nothing: no worker, no GPU, no network).
    rejudge: bool = False
    # With resume: new values of options that say how to run (runners.config.RESUMABLE_OPTIONS,
    # e.g. {"workers": 4}); validated and recorded in config.json and env.json.
    resume_with: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunResult:
    run_dir: Path
    resumed: bool
    summary: dict[str, Any]  # what summary.json holds
    target: Target
    endpoint_stats: Any | None  # modelio.openai_client.ClientStats for an HTTP endpoint; None otherwise
    wall_s: float
    errored_units: list[tuple[str, str, int]] = field(default_factory=list)  # (method, task, repeat) that ended on an error

    @property
    def summary_path(self) -> Path:
        return RunFolder(self.run_dir).summary_path


class CompareInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped the run: what finished is recorded and `--resume run_dir` finishes it."""

    def __init__(self, run_dir: Path, units_done: int, units_total: int):
        super().__init__(f"interrupted: {units_done} of {units_total} units finished and recorded")
        self.run_dir = run_dir
        self.units_done = units_done
        self.units_total = units_total


def resume_command(run_dir: Path, *flags: str) -> str:
    """The line that finishes `run_dir`, in the command the run was started with (env.json's
    command line: `kmc compare --resume RUN` for a run started with kmc, `python cli.py ...` for
    one started with the script), so the hint works where the user typed it."""
    return " ".join([RunFolder(run_dir).launcher(), "compare", "--resume", str(run_dir), *flags])


def recorded_options(run_dir: Path) -> dict[str, Any]:
    """A recorded run's options, its resolved task list included: what `--replay` starts from."""
    folder = RunFolder(run_dir)
    try:
        recorded = folder.read_config()
    except RunFolderError:
        raise ConfigError(f"{run_dir} is not a recorded run folder (no readable config.json)") from None
    if not folder.has_store():
        raise ConfigError(f"{run_dir} has no store.sqlite to replay")
    data = dict(recorded.config)
    if not data.get("tasks"):
        data["tasks"] = list(recorded.resolved.tasks)
    for key, before in BEHAVIOUR_BEFORE_OPTION.items():  # recorded before the option existed
        data.setdefault(key, before)
    return _pin_recorded_defaults(data, recorded.resolved.method_options)


#: Options added to config.json since runs were first recorded whose default changed what a run
#: does, with the value that does what the toolkit did before them; a recorded config.json
#: without the key is replayed so. `match_evals` (issue 43): before it, evaluations were not capped.
BEHAVIOUR_BEFORE_OPTION: dict[str, Any] = {"match_evals": False}


def _pin_recorded_defaults(data: dict[str, Any], recorded: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`data` with every method option whose default this version changed set to the value the
    recorded run resolved (config.json `resolved.method_options`): a run recorded with
    Reflexion's `impl_temperature` 0 is replayed at 0 after the default became 1. Options this
    version no longer has are left out; names it does not know fail later, in one line."""
    try:
        now = resolve_methods(CompareConfig.from_json(data))
    except Exception:  # noqa: BLE001 - an unknown method or option is reported by the run itself
        return data

    def same(a: Any, b: Any) -> bool:
        return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)

    options = {m: dict(o) for m, o in (data.get("method_options") or {}).items()}
    for method, values in recorded.items():
        current = now.get(method, {})
        changed = {k: v for k, v in values.items() if k in current and not same(current[k], v)}
        if changed:
            options[method] = {**options.get(method, {}), **changed}
    return {**data, "method_options": options} if options != (data.get("method_options") or {}) else data


def make_run_client(config: CompareConfig) -> ModelClient:
    """The configured endpoint (checked reachable) or the simulated model; ConfigError otherwise."""
    from modelio.clients import EndpointUnreachable, make_client

    ep = config.endpoint
    try:
        return make_client(ep.base_url, ep.model, ep.api_key_env, ep.timeout_s, ep.max_retries, config.sim_params,
                           max_concurrency=ep.max_concurrency)
    except (EndpointUnreachable, ValueError) as exc:
        raise ConfigError(str(exc)) from None


def _recorded_evaluations(run_dir: Path) -> RecordedEvaluations:
    try:
        return RecordedEvaluations(RunFolder(run_dir).store_path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot replay {run_dir}: {exc}") from None


def recorded_target(resolved: ResolvedRun, machine: Target) -> Target:
    """The device a recorded run was judged on (config.json `resolved.target`); a run recorded
    before the target was kept is taken to have run on this machine's kind of device."""
    t = resolved.target
    if not t.get("vendor"):
        return machine
    vendor = str(t["vendor"])
    return Target(vendor, bool(t.get("interpreter", vendor == "cpu")), str(t.get("device_name", "")),
                  int(t.get("device_count", 0)))


def resumed_replay(run_dir: Path) -> tuple[Path, bool] | None:
    """What an interrupted run folder was replaying (its store's meta `replay_of` and
    `replay_mode`, written before its first unit): (the recorded run, rejudge), or None for a
    run that was not a replay. Its resume keeps replaying, never falls back to the model."""
    folder = RunFolder(run_dir)
    if not folder.has_store():
        return None
    try:
        store = Store.for_reading(folder.store_path)
    except RunFolderError as exc:
        raise ConfigError(f"cannot resume {run_dir}: {exc}") from None
    try:
        source, mode = store.get_meta("replay_of"), store.get_meta("replay_mode", "exact")
    finally:
        store.close()
    return (Path(source), mode == "rejudge") if source else None


def _recorded_config(run_dir: Path) -> CompareConfig:
    try:
        return CompareConfig.from_json(RunFolder(run_dir).read_config().config)
    except RunFolderError as exc:
        raise ConfigError(str(exc)) from None


def _replay_client(run_dir: Path, positional: bool) -> ReplayClient:
    """The recorded run's calls as a client. `positional` (an exact replay): a prompt whose text
    this version words otherwise is answered by its unit and call index (modelio/replay.py);
    every miss names the version that recorded the run (its env.json) and this one."""
    folder = RunFolder(run_dir)
    try:
        resolved = folder.read_config().resolved
        versions = (recorded_version(folder.read_env()), this_version())
        return ReplayClient(folder.store_path, model=resolved.model or None, simulated=resolved.simulated,
                            positional=positional, versions=versions)
    except (OSError, ValueError, RunFolderError) as exc:
        raise ConfigError(f"cannot replay {run_dir}: {exc}") from None


def _clock_lock(target: Target, clocks: tuple[int | None, int | None] | None, on_message: Message) -> Any:
    """A context that locks clocks for the run when asked, and does nothing otherwise."""
    if clocks is None:
        return contextlib.nullcontext()
    if target.interpreter:
        raise ConfigError("--lock-clocks needs a GPU; this run uses the CPU interpreter")
    from runners.clock_lock import ClockLockError, lock_clocks
    from runners.pool import visible_devices

    try:
        return lock_clocks(target.vendor, tuple(int(d) for d in visible_devices(target)), *clocks,
                           on_message=on_message)
    except (ClockLockError, ValueError) as exc:
        raise ConfigError(f"cannot lock clocks: {exc}") from None


def run_compare(config: CompareConfig, options: CompareOptions | None = None) -> RunResult:
    """Run (or resume, or replay) a comparison to its end and write summary.json. A resumed run
    uses the configuration its folder recorded (`config` is then ignored, as the CLI notes).

    Bad input (ConfigError and the registries' errors) is raised before any run folder exists
    where it can be: an unreachable endpoint, a clock lock refused, an unknown name. Ctrl-C
    raises CompareInterrupted after every unit stopped, leaving a run that `--resume` finishes.
    """
    opts = options or CompareOptions()
    if opts.replay is not None and opts.resume is not None:
        raise ConfigError("--replay and --resume cannot be combined")
    if opts.resume_with and opts.resume is None:
        raise ConfigError("resume_with changes a resumed run's options; it goes with resume")
    if opts.rejudge and opts.replay is None:
        raise ConfigError("--rejudge goes with --replay RUN_DIR")
    resume = opts.resume
    if resume is not None and opts.replay is None:
        replayed = resumed_replay(resume)  # an interrupted replay resumes as the replay it was
        if replayed is not None:
            opts = dataclasses.replace(opts, replay=replayed[0], rejudge=replayed[1])
            config = _recorded_config(resume)
    exact_replay = opts.replay is not None and not opts.rejudge
    client: ModelClient | None = None
    clock_lock = None
    recorded_evaluations = None
    replayed_target = None
    if opts.replay is not None:
        client = _replay_client(opts.replay, positional=exact_replay)
        if exact_replay:
            recorded_evaluations = _recorded_evaluations(opts.replay)
            # Judged as the recorded run was, on its device: the same evaluation keys and timing rule.
            replayed_target = recorded_target(RunFolder(opts.replay).read_config().resolved,
                                              detect_target(force_cpu=config.device == "cpu"))
    elif opts.resume is None:
        config.validate()
        client = make_run_client(config)  # before any run folder: an unreachable endpoint leaves nothing behind
    if exact_replay and opts.lock_clocks is not None:
        raise ConfigError("an exact replay times nothing, so --lock-clocks has nothing to lock (add --rejudge to "
                          "judge anew)")
    if replayed_target is not None:
        # The task sources as the recorded device saw them (one target per process), before the
        # run folder is made, so the recorded names resolve.
        load_sources(config.task_sources, replayed_target.vendor)
        clock_lock = contextlib.nullcontext()
    elif opts.resume is None:
        clock_lock = _clock_lock(start_target(config), opts.lock_clocks, opts.on_message)  # likewise
    if not exact_replay and opts.resume is None:
        require_sandbox(config.unsandboxed)  # refused before a run folder exists
    out_made = opts.resume is None and not Path(opts.out or "runs").exists()
    prepared = prepare_run(config, opts.out, opts.resume, opts.resume_with)
    config, run_dir, resumed = prepared.config, prepared.run_dir, prepared.resumed
    if resumed:
        finished = finished_run(run_dir, config, opts)
        if finished is not None:
            return finished
    # A replay that fails (calls that part from the record, a task this version lacks) leaves
    # nothing behind: the folder it made is removed; an interrupted one stays for --resume.
    with _discarded_on_failure(run_dir, out_made, opts.replay is not None and not resumed):
        if not exact_replay and resumed:
            require_sandbox(config.unsandboxed)  # as the run was started: its recorded choice
        if replayed_target is not None:
            machine, target = detect_target(force_cpu=config.device == "cpu"), replayed_target
        else:
            machine = target = start_target(config)
        if resumed:
            recorded = RunFolder(run_dir).read_config().resolved
            if recorded.vendor != target.vendor:
                raise ConfigError(f"{run_dir} ran on {recorded.vendor}; this machine is {target.vendor}")
            config.tasks = list(recorded.tasks)
        if client is None:
            client = make_run_client(config)
        if clock_lock is None:
            clock_lock = _clock_lock(target, opts.lock_clocks, opts.on_message)
        started = time.perf_counter()
        if opts.retry_errors and not resumed:
            raise ConfigError("--retry-errors goes with --resume RUN_DIR")
        executor = NothingRuns() if exact_replay else run_executor(config, target,
                                                                     clocks_locked=opts.lock_clocks is not None)
        run = CompareRun(config, run_dir, client, target, progress=opts.on_progress, executor=executor,
                         retry_errors=opts.retry_errors, recorded_evaluations=recorded_evaluations)
        try:
            with run_log(RunFolder(run_dir).log_path):
                try:
                    summary, errored = _run_logged(run, opts, resumed, exact_replay, prepared.changed, machine,
                                                   clock_lock)
                finally:
                    run.close()
        finally:
            run.close()
        stats = getattr(client, "stats", None)
        return RunResult(run_dir, resumed, summary, target, stats() if callable(stats) else None,
                         time.perf_counter() - started, errored)


@contextlib.contextmanager
def _discarded_on_failure(run_dir: Path, out_made: bool, active: bool) -> Iterator[None]:
    """When `active`, an error (not an interruption) removes the run folder (the replay can be run
    again), and the output folder when this run made it and it is left empty."""
    try:
        yield
    except Exception:
        if active:
            shutil.rmtree(run_dir, ignore_errors=True)
            if out_made:
                with contextlib.suppress(OSError):
                    run_dir.parent.rmdir()  # only when empty
        raise


def finished_run(run_dir: Path, config: CompareConfig, opts: CompareOptions) -> RunResult | None:
    """A `--resume` of a run whose every unit is finished (and, with --retry-errors, none ended on
    an error): it says so and returns the recorded result, starting no worker and changing no
    file but a missing summary.json (a run stopped between its last unit and its summary). None
    when there is something to run."""
    from results.completeness import run_progress
    from results.summary import build_summary

    progress = run_progress(run_dir)
    if not progress.complete:
        return None
    store = Store.for_reading(RunFolder(run_dir).store_path)
    try:
        errored = store.errored_units()
    finally:
        store.close()
    if opts.retry_errors and errored:
        return None
    folder = RunFolder(run_dir)
    summary = folder.read_summary()
    if summary is None:
        summary = build_summary(run_dir)
        folder.write_summary(summary)
    opts.on_message(f"{run_dir} is complete: all {progress.units_done} units finished; nothing to resume"
                    + (f" ({len(errored)} ended on an error: add --retry-errors to run them again)" if errored
                       else ""))
    target = recorded_target(folder.read_config().resolved, start_target(config))
    return RunResult(run_dir, True, summary, target, None, 0.0, errored)


def _run_logged(run: CompareRun, opts: CompareOptions, resumed: bool, exact_replay: bool, changed: Any,
                machine: Target, clock_lock: Any) -> tuple[dict[str, Any], list[tuple[str, str, int]]]:
    """The run itself, with its run folder's log open: every line the user is told goes there too.
    Returns summary.json's content and the units that ended on an error."""
    from results.summary import build_summary

    config, run_dir, client = run.config, run.run_dir, run.client

    def say(message: str) -> None:
        log.info(message)
        opts.on_message(message)

    log.info("%s %s; command line: %s", "resumed" if resumed else "started", run_dir,
             " ".join(opts.command_line or []) or "(library call)")
    log.info("budget %d %s; methods %s; tasks %s; repeats %d; seed %d; model %s%s", config.budget, config.budget_unit,
             ",".join(config.methods), ",".join(config.tasks or []) or config.suite or "(default suite)",
             config.repeats, config.seed, client.model, " (simulated)" if client.simulated else "")
    record_run_files(run, resumed, opts.command_line, changed, machine)
    say(f"run folder: {run_dir}" + (" (resumed)" if resumed else ""))
    if opts.replay is not None:
        run.store.set_meta("replay_of", str(opts.replay))
        run.store.set_meta("replay_mode", "exact" if exact_replay else "rejudge")
        what = ("recorded responses and evaluations, no network, no GPU" if exact_replay
                else "recorded responses, no network; evaluations judged anew")
        say(f"model: REPLAY of {opts.replay} ({what})")
    elif client.simulated:
        where = getattr(client, "base_url", None)
        say("model: built-in SIMULATED model " + (f"served by {where}" if where else "(no endpoint configured)"))
    opts.on_start(RunStarted(run_dir, resumed, len(config.methods) * len(run.tasks) * config.repeats,
                             config.budget_unit))
    try:
        with clock_lock:  # entered before the workers start, so their timings say clocks were locked
            run.run()
    except KeyboardInterrupt:
        log.warning("interrupted: %d of %d units finished and recorded", run.progress.units_done, len(run.units))
        raise CompareInterrupted(run_dir, run.progress.units_done, len(run.units)) from None
    except BaseException as exc:
        log.error("run stopped by %s: %s", type(exc).__name__, exc)
        raise
    if isinstance(client, ReplayClient):
        _say_replayed(client, run.store, say)
    summary = build_summary(run_dir)
    RunFolder(run_dir).write_summary(summary)
    errored = run.store.errored_units()
    log.info("finished: %d units; %d evaluations run; summary written", run.progress.units_done,
             run.progress.evaluations)
    return summary, errored


def _say_replayed(client: ReplayClient, store: Store, say: Message) -> None:
    """After a replay: how many prompts this version worded otherwise than the recorded run
    (answered by unit and call index, modelio/replay.py), in the run's log, on screen and in the
    store's meta (`replay_prompts_differed`, `replay_versions`)."""
    recorded, this = client.versions or ("", "")
    store.set_meta("replay_versions", {"recorded": recorded, "replayed": this})
    store.set_meta("replay_prompts_differed", client.differed)
    if client.differed:
        say(f"replay: {client.differed} of {client.hits} prompts differed from the recorded ones (recorded by "
            f"{recorded}, replayed by {this}); each was answered with the reply recorded for the same call of its "
            f"unit (same role and sampling parameters), so every decision is the recorded one; the first differs at "
            f"{client.first_differed}")


def estimate_compare(config: CompareConfig) -> DryRunEstimate:
    """`compare --dry-run`: the calls, tokens and cost the run would spend; nothing is spent or made."""
    from modelio.dryrun import estimate

    config.validate()
    target = start_target(config)
    tasks = resolve_tasks(config, target)
    methods = {name: create_method(name, opts) for name, opts in resolve_methods(config).items()}
    library = open_oneshot(config)
    by_id = {t.id: t for t in tasks}
    try:
        return estimate(config.budget, config.budget_unit, methods, [t.view() for t in tasks], config.repeats,
                        target.vendor, config.endpoint.model or "", config.endpoint.simulated,
                        answer_format=config.answer_format, retrievers=lambda tid: library.for_task(by_id[tid]))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
