"""A comparison's setup, settled once: `plan_run` turns a config and its options into a `RunPlan`.

Every choice and check a run makes before its first unit is made here, in one pass: which of
the five modes it is (new, resume, replay, rejudge, dry run), the configuration it runs with
(validated once; a resume's is the recorded one), the device (detected once), the tasks and
method options it resolves to, the sandbox and clock-lock checks, that the registered statistics
load, and the model client (an endpoint is checked reachable last, after every local check). Bad
input of any kind is one `ConfigError` with a one-line message. Nothing is written: a plan that
cannot be made leaves no run folder, and `runners.compare.run_plan` creates the folder only from a
complete plan.
"""

from __future__ import annotations

import contextlib
import copy
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.oneshot import CorpusError, OneShotLibrary, open_library
from bench.registry import UnknownTaskError, get_task, load_sources, suite_tasks
from bench.task import Task
from judge.device import Target, detect_target
from judge.sandbox import SandboxRefused
from judge.sandbox import require as require_sandbox
from methods.registry import (
    UnknownMethodError,
    create_method,
    load_method_modules,
    method_class,
    method_options,
)
from modelio.replay import ReplayClient
from modelio.types import ModelClient
from record.provenance import recorded_version, this_version
from record.recorded import RecordedEvaluations
from record.run_folder import RecordedConfig, ResolvedRun, RunFolder, RunFolderError
from record.store import Store
from runners.config import RESUMABLE_OPTIONS, CompareConfig, ConfigError
from runners.progress import Progress, RunStarted

Message = Callable[[str], None]


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


class RunMode(enum.Enum):
    NEW = "new"  # a new run folder under `out`
    RESUME = "resume"  # finish `run_dir` with its recorded config (an interrupted replay goes on replaying)
    REPLAY = "replay"  # a new run answered from a recorded one's calls and evaluations: nothing is judged
    REJUDGE = "rejudge"  # a new run answered from a recorded one's calls, its candidates judged anew here
    DRY_RUN = "dry_run"  # the estimate only: nothing is spent, started or made


@dataclass(frozen=True)
class FinishedRun:
    """A resumed run with nothing left to run: its finished units, and those that ended on an error."""

    units_done: int
    errored: list[tuple[str, str, int]]


@dataclass(frozen=True)
class RunPlan:
    """Everything a run needs decided before its first unit. `config` is the plan's own copy,
    validated (the caller's object is left alone); change nothing in it."""

    mode: RunMode
    config: CompareConfig
    machine: Target  # this machine's device, detected once (env.json)
    target: Target  # the device the run judges as: the recorded run's for an exact replay, else `machine`
    out: Path  # where a new run folder is made
    run_dir: Path | None = None  # the folder a resume finishes (a new run's is made from the plan)
    replay_of: Path | None = None  # the recorded run answering model calls (replay, rejudge, or a resume of one)
    rejudge: bool = False  # with replay_of: candidates judged anew instead of answered from the record
    retry_errors: bool = False
    changed: dict[str, dict[str, Any]] = field(default_factory=dict)  # resumable options a resume changes
    lock_clocks: tuple[int | None, int | None] | None = None
    # Resolved from `config` (empty for a finished resume, which runs nothing):
    tasks: tuple[Task, ...] = ()
    method_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    oneshot: OneShotLibrary | None = None
    # Ready to use (None for a dry run and a finished resume):
    client: ModelClient | None = None
    recorded_evaluations: RecordedEvaluations | None = None  # an exact replay's answers to evaluations
    clock_lock: Any = field(default_factory=contextlib.nullcontext)  # entered around the run
    finished: FinishedRun | None = None  # a resume with nothing left to run

    @property
    def resumed(self) -> bool:
        return self.mode is RunMode.RESUME

    @property
    def exact_replay(self) -> bool:
        """Answered from the record, evaluations included: no worker, no GPU, no network."""
        return self.replay_of is not None and not self.rejudge


def plan_run(config: CompareConfig, options: CompareOptions | None = None, dry_run: bool = False) -> RunPlan:
    """The run `config` and `options` describe, every check made once; ConfigError (one line) for
    bad input, nothing written either way. A resume takes the configuration its folder recorded
    (`config` is then ignored, as the CLI notes). `dry_run`: plan the estimate only."""
    opts = options or CompareOptions()
    try:
        mode = _mode(opts, dry_run)
        check_statistics()
        if mode is RunMode.RESUME:
            assert opts.resume is not None
            return _plan_resume(Path(opts.resume), opts)
        config = copy.deepcopy(config)
        config.validate()
        replay_of = Path(opts.replay) if opts.replay is not None and mode is not RunMode.DRY_RUN else None
        return _completed(mode, config, opts, detect(config), replay_of=replay_of, rejudge=mode is RunMode.REJUDGE)
    except (UnknownTaskError, UnknownMethodError, RunFolderError, SandboxRefused) as exc:
        raise ConfigError(str(exc)) from None  # the registries' and the sandbox's refusals, as one type


def check_statistics() -> None:
    """Every registered statistic loads (results/statistics.py; installed plugins included):
    summary.json, written when the run ends, computes them all, so a broken plugin is refused
    before the first unit, not after the last."""
    from results.plugins import PluginError
    from results.statistics import statistic_classes

    try:
        statistic_classes()
    except PluginError as exc:
        raise ConfigError(str(exc)) from None


def _mode(opts: CompareOptions, dry_run: bool) -> RunMode:
    """The mode the options ask for, refusing combinations that mean nothing."""
    if opts.replay is not None and opts.resume is not None:
        raise ConfigError("--replay and --resume cannot be combined")
    if opts.retry_errors and opts.resume is None:
        raise ConfigError("--retry-errors goes with --resume RUN_DIR")
    if opts.rejudge and opts.replay is None:
        raise ConfigError("--rejudge goes with --replay RUN_DIR")
    if opts.resume_with and opts.resume is None:
        raise ConfigError("resume_with changes a resumed run's options; it goes with resume")
    if dry_run:
        if opts.resume is not None:
            raise ConfigError("--dry-run estimates a new run; it cannot be combined with --resume")
        return RunMode.DRY_RUN
    if opts.resume is not None:
        return RunMode.RESUME
    if opts.replay is not None:
        return RunMode.REJUDGE if opts.rejudge else RunMode.REPLAY
    return RunMode.NEW


def detect(config: CompareConfig) -> Target:
    """This machine's device for the run (the CPU interpreter for --device cpu): the plan's one
    detection. Sets nothing in the environment."""
    return detect_target(force_cpu=config.device == "cpu")


def _plan_resume(run_dir: Path, opts: CompareOptions) -> RunPlan:
    """A resume: the recorded configuration (with `resume_with`'s resumable options changed), the
    recorded tasks, and the replay it was, if it was one; finished runs are planned to run nothing."""
    replayed = resumed_replay(run_dir)  # an interrupted replay resumes as the replay it was
    recorded = _read_config(run_dir)
    config, changed = _resumed_config(run_dir, recorded, opts.resume_with)
    machine = detect(config)
    finished = _finished(run_dir, opts.retry_errors)
    if finished is not None:
        load_sources(config.task_sources, machine.vendor)
        return RunPlan(RunMode.RESUME, config, machine, recorded_target(recorded.resolved, machine),
                       Path(opts.out or "runs"), run_dir=run_dir, retry_errors=opts.retry_errors, changed=changed,
                       finished=finished)
    config.tasks = list(recorded.resolved.tasks)
    replay_of, rejudge = replayed or (None, False)
    return _completed(RunMode.RESUME, config, opts, machine, replay_of=replay_of, rejudge=rejudge, run_dir=run_dir,
                      changed=changed, recorded_vendor=recorded.resolved.vendor)


def _completed(mode: RunMode, config: CompareConfig, opts: CompareOptions, machine: Target, *,
               replay_of: Path | None = None, rejudge: bool = False, run_dir: Path | None = None,
               changed: dict[str, dict[str, Any]] | None = None, recorded_vendor: str | None = None) -> RunPlan:
    """The rest of every plan but a finished resume's, cheapest checks first and the endpoint last."""
    exact = replay_of is not None and not rejudge
    if exact and opts.lock_clocks is not None:
        raise ConfigError("an exact replay times nothing, so --lock-clocks has nothing to lock (add --rejudge to "
                          "judge anew)")
    # Judged as the recorded run was, on its device: the same evaluation keys and timing rule.
    target = recorded_target(_read_config(replay_of).resolved, machine) if exact and replay_of else machine
    if recorded_vendor is not None and recorded_vendor != target.vendor:
        raise ConfigError(f"{run_dir} ran on {recorded_vendor}; this machine is {target.vendor}")
    load_sources(config.task_sources, target.vendor)  # so the run's (or the recorded run's) task names resolve
    tasks, methods, oneshot = tuple(resolve_tasks(config, target)), resolve_methods(config), open_oneshot(config)
    client: ModelClient | None = None
    clock_lock: Any = contextlib.nullcontext()
    if mode is not RunMode.DRY_RUN:
        if not exact:
            require_sandbox(config.unsandboxed)  # an exact replay runs no candidate code
            clock_lock = _clock_lock(target, opts.lock_clocks, opts.on_message)
        # Last: reaching an endpoint is the slowest check.
        client = _replay_client(replay_of, positional=exact) if replay_of is not None else make_run_client(config)
    return RunPlan(mode, config, machine, target, Path(opts.out or "runs"), run_dir=run_dir, replay_of=replay_of,
                   rejudge=rejudge, retry_errors=opts.retry_errors, changed=changed or {},
                   lock_clocks=opts.lock_clocks, tasks=tasks, method_options=methods, oneshot=oneshot, client=client,
                   recorded_evaluations=_recorded_evaluations(replay_of) if exact and replay_of else None,
                   clock_lock=clock_lock)


# ---------------------------------------------------------------------------- resolving names
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


# ---------------------------------------------------------------------------- a resumed run
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


def _resumed_config(run_dir: Path, recorded: RecordedConfig,
                    resume_with: dict[str, Any]) -> tuple[CompareConfig, dict[str, dict[str, Any]]]:
    """The recorded configuration with the options in `resume_with` (only RESUMABLE_OPTIONS: how
    to run, never what is compared) changed and validated, and the changes ({option: {from, to}})
    that the run writes back to config.json once it starts."""
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
        raise ConfigError(f"{run_dir}: recorded {exc}{hint}") from None
    _check_same_corpus(config, recorded.resolved.oneshot)
    return config, changed


def _check_same_corpus(config: CompareConfig, recorded: dict[str, Any]) -> None:
    """A resumed run must show the examples the interrupted one showed: same corpus file."""
    from bench.oneshot import file_digest

    if config.oneshot_corpus and recorded.get("sha256") and file_digest(config.oneshot_corpus) != recorded["sha256"]:
        raise ConfigError(f"the one-shot corpus {config.oneshot_corpus} changed since this run started "
                          "(its sha256 differs from config.json's); restore it to resume")


def _finished(run_dir: Path, retry_errors: bool) -> FinishedRun | None:
    """A resumed run whose every unit is finished (and, with retry_errors, none ended on an
    error): there is nothing to run. None when there is."""
    from record.progress import run_progress

    progress = run_progress(run_dir)
    if not progress.complete:
        return None
    store = Store.for_reading(RunFolder(run_dir).store_path)
    try:
        errored = store.errored_units()
    finally:
        store.close()
    return None if retry_errors and errored else FinishedRun(progress.units_done, errored)


# ---------------------------------------------------------------------------- recorded runs
def _read_config(run_dir: Path) -> RecordedConfig:
    try:
        return RunFolder(run_dir).read_config()
    except RunFolderError as exc:
        raise ConfigError(str(exc)) from None


def recorded_target(resolved: ResolvedRun, machine: Target) -> Target:
    """The device a recorded run was judged on (config.json `resolved.target`); a run recorded
    before the target was kept is taken to have run on this machine's kind of device."""
    t = resolved.target
    if not t.get("vendor"):
        return machine
    vendor = str(t["vendor"])
    return Target(vendor, bool(t.get("interpreter", vendor == "cpu")), str(t.get("device_name", "")),
                  int(t.get("device_count", 0)))


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


def _recorded_evaluations(run_dir: Path) -> RecordedEvaluations:
    try:
        return RecordedEvaluations(RunFolder(run_dir).store_path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot replay {run_dir}: {exc}") from None


# ---------------------------------------------------------------------------- the machine and the endpoint
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


def make_run_client(config: CompareConfig) -> ModelClient:
    """The configured endpoint (checked reachable) or the simulated model; ConfigError otherwise."""
    from modelio.clients import EndpointUnreachable, make_client

    ep = config.endpoint
    try:
        return make_client(ep.base_url, ep.model, ep.api_key_env, ep.timeout_s, ep.max_retries, config.sim_params,
                           max_concurrency=ep.max_concurrency)
    except (EndpointUnreachable, ValueError) as exc:
        raise ConfigError(str(exc)) from None
