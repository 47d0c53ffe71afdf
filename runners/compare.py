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
import json
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.oneshot import OneShotLibrary
from bench.registry import get_task, profile_id
from bench.task import GEAK_EVAL_PROFILE, Task
from judge.device import Target, environment_info
from methods.registry import create_method
from modelio.dryrun import DryRunEstimate
from modelio.ledger import BudgetExhausted, Charge, Ledger, ModelCallFailed, ReplayDiverged
from modelio.replay import ReplayClient, ReplayMiss
from modelio.types import ModelClient
from record.recorded import RecordedEvaluations
from record.run_folder import ResolvedRun, RunFolder, RunFolderError, ensure_writable
from record.store import Store
from runners.config import CompareConfig, ConfigError
from runners.context import UnitContext
from runners.evaluator import Evaluator
from runners.executor import Executor, NothingRuns
from runners.logs import get_logger, run_log
from runners.plan import (
    CompareOptions,
    Message,
    RunMode,
    RunPlan,
    open_oneshot,
    plan_run,
    resolve_methods,
    resolve_tasks,
)
from runners.pool import LocalPool, WorkerStartError
from runners.progress import Progress, RunStarted

log = get_logger("runners.compare")


@dataclass(frozen=True)
class Unit:
    method: str
    task: str
    repeat: int


def run_executor(config: CompareConfig, target: Target, clocks_locked: bool = False,
                 tasks: Sequence[Task] | None = None) -> Executor:
    """The run's executor: the local pool, or Ray actors when the config names a Ray address
    (`--ray ADDRESS`; both keep the two lanes). Ray missing is a one-line ConfigError."""
    if config.ray_address is None:
        return local_executor(config, target, clocks_locked, tasks)
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


def local_executor(config: CompareConfig, target: Target, clocks_locked: bool = False,
                   tasks: Sequence[Task] | None = None) -> LocalPool:
    """The run's worker pool, its workers told the run's task sources (and whether clocks are locked)
    and the run's tasks (`tasks`, resolved from the config when not given), whose inputs they draw early."""
    try:
        prepare = tuple(t.id for t in (resolve_tasks(config, target) if tasks is None else tasks))
    except KeyError:
        prepare = ()  # an unknown task is reported where the run resolves its tasks
    return LocalPool(target, workers=config.workers, job_timeout=config.job_timeout_s, worker_user=config.worker_user,
                     task_sources=config.task_sources, clocks_locked=clocks_locked, sanitize=config.sanitize,
                     prepare=prepare, unsandboxed=config.unsandboxed)


# Errors that end the whole run even when they surface inside a method (through a `ctx` verb):
# the run's own machinery failed, and going on would record something untrue. Anything else a
# method raises ends only its unit, as an errored unit (`units.error`, exit status 3).
RUN_ERRORS: tuple[type[BaseException], ...] = (ReplayMiss, ReplayDiverged, WorkerStartError, sqlite3.Error)


class CompareRun:
    def __init__(self, config: CompareConfig, run_dir: Path, client: ModelClient, target: Target,
                 progress: Callable[[Progress], None] | None = None, executor: Executor | None = None,
                 retry_errors: bool = False, recorded_evaluations: RecordedEvaluations | None = None,
                 tasks: Sequence[Task] | None = None, method_opts: dict[str, dict[str, Any]] | None = None,
                 oneshot: OneShotLibrary | None = None):
        """`tasks`, `method_opts` and `oneshot`: as a RunPlan resolved them (runners/plan.py);
        resolved from `config` here when not given."""
        self.config = config
        self.run_dir = run_dir
        self.client = client
        self.target = target
        self.tasks = list(tasks) if tasks is not None else resolve_tasks(config, target)
        self.method_opts = method_opts if method_opts is not None else resolve_methods(config)
        self.store = Store(RunFolder(run_dir).store_path)
        # Task by task, every method's units of a task together: they share the judge workers'
        # cached inputs and the evaluations of code they both proposed, and a run cut short (a
        # time limit, Ctrl-C) has every method as far along rather than the first method alone
        # (a full-suite run cut short by a time limit had finished direct's units and no other's).
        self.units = [Unit(m, t.id, r) for t in self.tasks for m in config.methods for r in range(config.repeats)]
        self.progress = Progress(len(self.units), len(self.units) * config.budget, progress, config.budget_unit)
        self.ledger = Ledger(client, self.store, config.budget, config.budget_unit, config.seed,
                             charge_failed_calls=config.charge_failed_calls, on_charge=self._charged)
        self.progress.unit = self.ledger.unit
        self.executor: Executor = executor or local_executor(config, target, tasks=self.tasks)
        self._closed = False
        self.stopping = threading.Event()
        self.evaluator = Evaluator(self.executor, self.store, target, config.timing_policy, self.stopping,
                                   recorded=recorded_evaluations, on_executed=self._evaluated,
                                   sanitize=config.sanitize)
        self.oneshot = oneshot if oneshot is not None else open_oneshot(config)
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


def run_compare(config: CompareConfig, options: CompareOptions | None = None) -> RunResult:
    """Run (or resume, or replay) a comparison to its end and write summary.json: `plan_run`
    settles the run (runners/plan.py), then `run_plan` runs it. A resumed run uses the
    configuration its folder recorded (`config` is then ignored, as the CLI notes).

    Bad input is a ConfigError raised before any run folder exists: an unreachable endpoint, a
    clock lock refused, an unknown name, an option that goes with another. Ctrl-C raises
    CompareInterrupted after every unit stopped, leaving a run that `--resume` finishes.
    """
    opts = options or CompareOptions()
    return run_plan(plan_run(config, opts), opts)


def run_plan(plan: RunPlan, options: CompareOptions | None = None) -> RunResult:
    """Run a plan that `plan_run` made from the same options (their hooks are told what happens).
    The run folder is made (or, on a resume, changed) only here, once the executor could start."""
    opts = options or CompareOptions()
    if plan.mode is RunMode.DRY_RUN:
        raise ValueError("a dry run's plan is estimated (estimate_compare), never run")
    if plan.finished is not None:
        return finished_run(plan, opts)
    assert plan.client is not None
    if plan.run_dir is None:
        _writable_or_refused(plan.out)  # before the executor starts: a refusal is one line, nothing logged
    executor = NothingRuns() if plan.exact_replay else run_executor(
        plan.config, plan.target, clocks_locked=plan.lock_clocks is not None, tasks=plan.tasks)
    try:
        run_dir, out_made = _run_folder(plan)
    except BaseException:
        executor.close()
        raise
    # A replay that fails (calls that part from the record, a task this version lacks) leaves
    # nothing behind: the folder it made is removed; an interrupted one stays for --resume.
    with _discarded_on_failure(run_dir, out_made, plan.replay_of is not None and not plan.resumed):
        started = time.perf_counter()
        run = CompareRun(plan.config, run_dir, plan.client, plan.target, progress=opts.on_progress,
                         executor=executor, retry_errors=plan.retry_errors,
                         recorded_evaluations=plan.recorded_evaluations, tasks=plan.tasks,
                         method_opts=plan.method_options, oneshot=plan.oneshot)
        try:
            with run_log(RunFolder(run_dir).log_path):
                try:
                    summary, errored = _run_logged(run, plan, opts)
                finally:
                    run.close()
        finally:
            run.close()
        stats = getattr(plan.client, "stats", None)
        return RunResult(run_dir, plan.resumed, summary, plan.target, stats() if callable(stats) else None,
                         time.perf_counter() - started, errored)


def _writable_or_refused(out: Path) -> None:
    """An output folder that cannot be written is refused before anything starts (the probe
    leaves nothing: a folder it had to make is removed again)."""
    made = not out.exists()
    try:
        ensure_writable(out)
    except OSError as exc:
        raise ConfigError(f"output folder {out} is not writable: {exc.strerror or exc}") from None
    if made:
        with contextlib.suppress(OSError):
            out.rmdir()


def _run_folder(plan: RunPlan) -> tuple[Path, bool]:
    """The plan's run folder: a resume's, its changed options written to config.json, or a new
    one under `plan.out`; and whether this made the output folder."""
    if plan.run_dir is not None:
        if plan.changed:
            RunFolder(plan.run_dir).update_options({k: c["to"] for k, c in plan.changed.items()})
        return plan.run_dir, False
    out_made = not plan.out.exists()
    try:
        return RunFolder.create(plan.out, plan.config.to_json()).path, out_made
    except RunFolderError as exc:
        raise ConfigError(str(exc)) from None


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


def finished_run(plan: RunPlan, opts: CompareOptions) -> RunResult:
    """A `--resume` of a run whose every unit is finished (and, with --retry-errors, none ended on
    an error; `RunPlan.finished`): it says so and returns the recorded result, starting no worker
    and changing no file but a missing summary.json (a run stopped between its last unit and its
    summary)."""
    from results.summary import build_summary

    assert plan.finished is not None and plan.run_dir is not None
    run_dir, errored = plan.run_dir, plan.finished.errored
    folder = RunFolder(run_dir)
    summary = folder.read_summary()
    if summary is None:
        summary = build_summary(run_dir)
        folder.write_summary(summary)
    opts.on_message(f"{run_dir} is complete: all {plan.finished.units_done} units finished; nothing to resume"
                    + (f" ({len(errored)} ended on an error: add --retry-errors to run them again)" if errored
                       else ""))
    return RunResult(run_dir, True, summary, plan.target, None, 0.0, errored)


def _run_logged(run: CompareRun, plan: RunPlan,
                opts: CompareOptions) -> tuple[dict[str, Any], list[tuple[str, str, int]]]:
    """The run itself, with its run folder's log open: every line the user is told goes there too.
    Returns summary.json's content and the units that ended on an error."""
    from results.summary import build_summary

    config, run_dir, client = run.config, run.run_dir, run.client

    def say(message: str) -> None:
        log.info(message)
        opts.on_message(message)

    resumed = plan.resumed
    log.info("%s %s; command line: %s", "resumed" if resumed else "started", run_dir,
             " ".join(opts.command_line or []) or "(library call)")
    log.info("budget %d %s; methods %s; tasks %s; repeats %d; seed %d; model %s%s", config.budget, config.budget_unit,
             ",".join(config.methods), ",".join(config.tasks or []) or config.suite or "(default suite)",
             config.repeats, config.seed, client.model, " (simulated)" if client.simulated else "")
    record_run_files(run, resumed, opts.command_line, plan.changed, plan.machine)
    say(f"run folder: {run_dir}" + (" (resumed)" if resumed else ""))
    if plan.replay_of is not None:
        run.store.set_meta("replay_of", str(plan.replay_of))
        run.store.set_meta("replay_mode", "exact" if plan.exact_replay else "rejudge")
        what = ("recorded responses and evaluations, no network, no GPU" if plan.exact_replay
                else "recorded responses, no network; evaluations judged anew")
        say(f"model: REPLAY of {plan.replay_of} ({what})")
    elif client.simulated:
        where = getattr(client, "base_url", None)
        say("model: built-in SIMULATED model " + (f"served by {where}" if where else "(no endpoint configured)"))
    opts.on_start(RunStarted(run_dir, resumed, len(config.methods) * len(run.tasks) * config.repeats,
                             config.budget_unit))
    try:
        with plan.clock_lock:  # entered before the workers start, so their timings say clocks were locked
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


def estimate_compare(config: CompareConfig, options: CompareOptions | None = None) -> DryRunEstimate:
    """`compare --dry-run`: the calls, tokens and cost the run would spend, planned as the run
    would be (`plan_run(dry_run=True)`: every option applied); nothing is spent, started or made."""
    from modelio.dryrun import estimate

    plan = plan_run(config, options, dry_run=True)
    config, tasks, library = plan.config, plan.tasks, plan.oneshot
    assert library is not None
    methods = {name: create_method(name, opts) for name, opts in plan.method_options.items()}
    by_id = {t.id: t for t in tasks}
    try:
        return estimate(config.budget, config.budget_unit, methods, [t.view() for t in tasks], config.repeats,
                        plan.target.vendor, config.endpoint.model or "", config.endpoint.simulated,
                        answer_format=config.answer_format, retrievers=lambda tid: library.for_task(by_id[tid]))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
