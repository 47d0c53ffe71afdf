"""Running `bench strength` (issue 44): each mutant of each expert kernel judged by the suite's
own tests, the hidden cases and a seeded stress set, in worker processes that use the judge's
own path (judge/oracle.py `judge_cases` over a judge/runner.py `LocalRunner`, as the naive
harness and the unit tests do).

Why not the worker pool (runners/pool.py): its jobs name a case set ("visible", "hidden",
"perf"); the stress and differential sets are drawn per run and exist in no task. Why
processes at all: a mutant is the toolkit's own expert code with one operator changed, not an
untrusted candidate, so containment is not the point, but a mask off by one can read or write
past a buffer and take the interpreter down, and a changed loop can hang. Each worker is a
spawned process; a job that kills it or outlives `job_timeout` is that judge's verdict
(`crashed`, `timeout`: both kill the mutant), and a fresh worker takes the next job.

Steps per task: the expert kernel is judged on each drawn stress case and only the cases it
passes are kept (`prepare`); each mutant is judged on the three sets; a mutant no judge kills
is run beside the expert, bit for bit, on every case drawn and then on the differential set
(`compare`): identical everywhere is `equivalent`, else `tolerated` (bench/strength/report.py).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench.strength.mutate import Mutant, mutants
from bench.strength.report import (
    CORRECT,
    EQUIVALENT,
    JUDGES,
    NON_EQUIVALENT,
    TOLERATED,
    MutantOutcome,
    StrengthReport,
    TaskNote,
)
from bench.task import Case

JOB_TIMEOUT_S = 600.0
CRASHED = "crashed"
TIMEOUT = "timeout"


@dataclass(frozen=True)
class StrengthOptions:
    """What a run depends on; the same options give the same mutants and the same table."""

    suite: str | None = None
    task_ids: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    mutants: int = 10
    seed: int = 0
    workers: int | None = None
    device: str | None = None
    job_timeout: float = JOB_TIMEOUT_S
    stress_factor: int = 3
    differential_factor: int = 5


@dataclass
class _Prepared:
    """A task's stress set after the expert's filter, or why the task is left out."""

    task: str
    stress: tuple[Case, ...] = ()
    dropped: int = 0
    skip: str = ""


# ---------------------------------------------------------------- the worker process


class _Judging:
    """The worker side: tasks registered from the run's sources, expert modules and expert
    outputs cached per task, the judge's `judge_cases` over a `LocalRunner` per job."""

    def __init__(self, sources: tuple[str, ...], interpreter: bool):
        import warnings

        from bench.registry import load_sources
        from judge.candidate.loading import prepare_process

        warnings.simplefilter("ignore")
        self.interpreter = interpreter
        self.device = "cpu" if interpreter else "cuda"
        load_sources(list(sources), "cpu" if interpreter else None)
        prepare_process()
        self.folder = Path(tempfile.mkdtemp(prefix="kmc-strength-"))
        self.loaded = 0
        self.expert_entry: dict[str, Any] = {}
        self.expert_out: dict[tuple[str, str], Any] = {}

    def entry(self, task: Any, source: str) -> Any:
        from judge.candidate.loading import load_module

        self.loaded += 1
        path = self.folder / f"m{self.loaded}.py"
        path.write_text(task.complete_source(source))
        return getattr(load_module(path, f"kmc_strength_{os.getpid()}_{self.loaded}"), task.entry_point), path

    def runner(self, task: Any, source: str) -> Any:
        """A `LocalRunner` over `source`'s entry point, or the verdict of a source that does not import."""
        from judge.candidate.loading import CandidateLoadError
        from judge.runner import LocalRunner

        try:
            fn, path = self.entry(task, source)
        except CandidateLoadError as exc:
            return {"kind": exc.kind, "message": str(exc)[:300], "case": ""}
        except Exception as exc:  # noqa: BLE001 - a mutant that cannot even be imported is killed
            return {"kind": "compile_error", "message": f"{type(exc).__name__}: {exc}"[:300], "case": ""}
        return LocalRunner(fn, self.device, self.interpreter, task.allowed_torch_ops, source_path=path,
                           guard=task.judges_overruns)

    def verdict(self, task: Any, source: str | Any, cases: tuple[Case, ...]) -> dict[str, Any]:
        """The judge's verdict on `cases` (`source`: text, or a runner made by `runner`)."""
        from judge.oracle import judge_cases

        runner = self.runner(task, source) if isinstance(source, str) else source
        if isinstance(runner, dict):
            return runner
        v = judge_cases(task, runner, cases, self.device, self.interpreter)
        return {"kind": v.kind, "message": v.message[:300], "case": v.failing_case or ""}

    def judge(self, job: dict[str, Any]) -> dict[str, Any]:
        from bench.registry import get_task
        from bench.task import GEAK_EVAL_PROFILE
        from runners.score import RAN

        task = get_task(job["task"])
        which = job["judge"]
        if which == "suite":
            profile = task.profile(GEAK_EVAL_PROFILE)
            if profile is not None:
                reply = self.verdict(profile, job["source"], profile.cases("hidden", self.interpreter))
                reply["call"] = reply["kind"] in RAN
                return reply
            return self.verdict(task, job["source"], task.visible)
        if which == "hidden":
            return self.verdict(task, job["source"], task.cases("hidden", self.interpreter))
        return self.verdict(task, job["source"], tuple(job["cases"]))

    def prepare(self, job: dict[str, Any]) -> dict[str, Any]:
        """The expert on its own hidden cases (a task whose expert fails them is left out), then
        on each drawn stress case alone: the cases it passes are the stress set."""
        from bench.registry import get_task
        from bench.strength.stress import stress_cases

        task = get_task(job["task"])
        source = task.baseline_source()
        own = self.verdict(task, source, task.cases("hidden", self.interpreter))
        if own["kind"] != CORRECT:
            return {"skip": f"the expert kernel fails its own hidden cases ({own['kind']} on {own['case']}: "
                            f"{own['message'][:120]})"}
        kept = []
        drawn = stress_cases(task, job["seed"], self.interpreter, job["factor"])
        expert = self.runner(task, source)
        for c in drawn:
            try:
                passed = self.verdict(task, expert, (c,))["kind"] == CORRECT
            except Exception:  # noqa: BLE001 - the reference rejects the drawn sizes (rotary's odd dim): no case
                passed = False
            if passed:
                kept.append(c)
        return {"stress": kept, "dropped": len(drawn) - len(kept)}

    def outputs(self, task: Any, fn: Any, c: Case) -> Any:
        """`fn`'s judged outputs on the case's inputs (drawn afresh: a strided case's layout
        survives no clone), the exception's type name when it raises, None for a case that
        cannot be built here."""
        import torch

        from bench.task import CaseUnavailable
        from judge.candidate.allocations import poisoned_allocations

        try:
            args = task.inputs(c, self.device)
        except CaseUnavailable:
            return None
        if task.seeded_rng:
            torch.manual_seed(c.seed)
        try:
            # Poisoned as the judge's runs are: an output a mutant leaves partly unwritten must
            # not borrow the expert's bits from memory the allocator hands back.
            with poisoned_allocations(guard=False):
                returned = fn(*args)
                out = task.judged_output(returned, args, c)
        except Exception as exc:  # noqa: BLE001 - raising is an output too, compared by its type
            return f"raised {type(exc).__name__}"
        return out

    def compare(self, job: dict[str, Any]) -> dict[str, Any]:
        """The first case (of the cases sent, then the differential set) where the mutant's
        outputs differ from the expert's bit for bit; "" when none does."""
        from bench.registry import get_task
        from bench.strength.stress import differential_cases
        from judge.candidate.bit_equality import same_bits

        task = get_task(job["task"])
        if task.id not in self.expert_entry:
            self.expert_entry[task.id] = self.entry(task, task.baseline_source())[0]
        expert = self.expert_entry[task.id]
        try:
            mutant = self.entry(task, job["source"])[0]
        except Exception as exc:  # noqa: BLE001
            return {"differs_on": f"import ({type(exc).__name__})"}
        cases = tuple(job["cases"]) + differential_cases(task, job["seed"], self.interpreter, job["factor"])
        for c in cases:
            key = (task.id, f"{c.name}:{c.seed}:{c.sizes}:{c.dtype}:{c.layout}")
            if key not in self.expert_out:
                self.expert_out[key] = self.outputs(task, expert, c)
            want = self.expert_out[key]
            if want is None:  # a case this task cannot build here (an adapted task's missing shape slot)
                continue
            got = self.outputs(task, mutant, c)
            if isinstance(want, str) or isinstance(got, str):
                if want != got:
                    return {"differs_on": c.name}
                continue
            if not same_bits(want, got):
                return {"differs_on": c.name}
        return {"differs_on": ""}


def _in_a_strength_worker(interpreter: bool) -> None:
    """The spawned worker's own environment, before any kernel is decorated (Triton's `@jit`
    reads TRITON_INTERPRET then): the interpreter where the plan runs on it. Written here, in
    the worker, never in the process that started it (tests/test_recorded_config.py allows it
    by name)."""
    if interpreter:
        os.environ["TRITON_INTERPRET"] = "1"


def _serve(conn: Connection, sources: tuple[str, ...], interpreter: bool) -> None:
    """A worker's loop: one job in, one reply out, until the parent closes the pipe."""
    _in_a_strength_worker(interpreter)
    judging = _Judging(sources, interpreter)
    conn.send({"ready": True})
    handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        "judge": judging.judge, "prepare": judging.prepare, "compare": judging.compare}
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        try:
            reply = handlers[job["op"]](job)
        except Exception as exc:  # noqa: BLE001 - the judge's own side failed: said, not hidden
            reply = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        try:
            conn.send(reply)
        except (BrokenPipeError, OSError):  # the parent is gone (killed, or gave up on this job)
            return


class _Worker:
    """The parent's handle on one worker process, started on first use and after a death."""

    def __init__(self, sources: tuple[str, ...], interpreter: bool, timeout: float):
        self.sources, self.interpreter, self.timeout = sources, interpreter, timeout
        self.proc: Any = None
        self.conn: Connection | None = None

    def _start(self) -> Connection:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, self.sources, self.interpreter), daemon=True)
        self.proc.start()
        child.close()
        if not parent.poll(300):
            self.stop()
            raise RuntimeError("a strength worker did not start within 300 s")
        parent.recv()
        self.conn = parent
        return parent

    def ask(self, job: dict[str, Any]) -> dict[str, Any]:
        conn = self.conn or self._start()
        conn.send(job)
        try:
            if conn.poll(self.timeout):
                return dict(conn.recv())
            verdict = TIMEOUT
        except (EOFError, OSError):
            verdict = CRASHED
        self.stop()
        return {"kind": verdict, "message": f"the worker {'ran out of time' if verdict == TIMEOUT else 'died'}",
                "case": "", "crashed": True}

    def stop(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.proc is not None:
            self.proc.kill()
            self.proc.join(10)
            self.proc = None


# ---------------------------------------------------------------- the parent's side


@dataclass
class _Plan:
    tasks: list[Any]
    suite_name: str
    device: str
    interpreter: bool
    sources: tuple[str, ...]
    by_task: dict[str, list[Mutant]] = field(default_factory=dict)


def _plan(options: StrengthOptions) -> _Plan:
    from bench.registry import get_task, load_sources, resolve_sources, suite_tasks
    from judge.device import default_device, detect_target
    from runners.config import ConfigError

    if options.mutants < 1:
        raise ConfigError("--mutants must be at least 1")
    if options.workers is not None and options.workers < 1:
        raise ConfigError("--workers must be at least 1")
    target = detect_target(force_cpu=(options.device or default_device()) == "cpu")
    sources = tuple(resolve_sources(list(options.sources)))
    reports = load_sources(list(sources), target.vendor)
    if options.task_ids:
        tasks = [get_task(t) for t in options.task_ids]
        name = options.suite or "selected"
    elif options.suite:
        tasks, name = suite_tasks(options.suite), options.suite
    elif sources:
        tasks = [t for r in reports for t in getattr(r, "tasks", [])]
        name = ",".join(f"{spec.split(':', 1)[0]}:{Path(spec.split(':', 1)[-1]).name}" for spec in sources)
    else:
        tasks, name = suite_tasks("full"), "full"
    plan = _Plan(tasks, name, "cpu-interpreter" if target.interpreter else target.device_name, target.interpreter,
                 sources)
    for t in tasks:
        if getattr(t, "triton_baseline", True):
            plan.by_task[t.id] = mutants(t.id, t.baseline_source(), options.mutants, options.seed)
    return plan


def _classify(mutant: Mutant, verdicts: dict[str, dict[str, Any]], differs_on: str | None,
              suite_name: str) -> MutantOutcome:
    killed_by_any = any(verdicts[j]["kind"] != CORRECT for j in JUDGES)
    status = NON_EQUIVALENT if killed_by_any else (EQUIVALENT if not differs_on else TOLERATED)
    first = next((f"{j}: {verdicts[j]['case']} {verdicts[j]['message'][:100]}".strip()
                  for j in JUDGES if verdicts[j]["kind"] != CORRECT), "")
    call = verdicts["suite"].get("call")
    return MutantOutcome(suite_name, mutant.task, mutant.id, mutant.operator, mutant.line, mutant.description,
                         verdicts["suite"]["kind"], verdicts["hidden"]["kind"], verdicts["stress"]["kind"], status,
                         differs_on or "", call if isinstance(call, bool) else None, first)


def run_strength(options: StrengthOptions, on_outcome: Callable[[MutantOutcome], None] | None = None,
                 on_message: Callable[[str], None] | None = None) -> StrengthReport:
    """`cli.py bench strength` as a library call. Results keep the order of the tasks and of
    each task's mutants, whatever order the workers finish in."""
    started = time.perf_counter()
    plan = _plan(options)
    say = on_message or (lambda _m: None)
    report = StrengthReport(plan.suite_name, plan.device, options.seed, options.mutants, [t.id for t in plan.tasks])
    for t in plan.tasks:
        if t.id not in plan.by_task:
            report.notes.append(TaskNote(t.id, "no expert Triton kernel to mutate"))
        elif not plan.by_task[t.id]:
            report.notes.append(TaskNote(t.id, "no mutation operator applies to its kernel"))
    n_workers = options.workers or max(1, min(2, os.cpu_count() or 1))
    pool: queue.Queue[_Worker] = queue.Queue()
    workers = [_Worker(plan.sources, plan.interpreter, options.job_timeout) for _ in range(n_workers)]
    for w in workers:
        pool.put(w)

    def ask(job: dict[str, Any]) -> dict[str, Any]:
        w = pool.get()
        try:
            return w.ask(job)
        finally:
            pool.put(w)

    def prepare(task_id: str) -> _Prepared:
        reply = ask({"op": "prepare", "task": task_id, "seed": options.seed, "factor": options.stress_factor})
        if "error" in reply or reply.get("crashed"):
            return _Prepared(task_id, skip=f"preparing its stress set failed: {reply.get('error') or reply['kind']}")
        if "skip" in reply:
            return _Prepared(task_id, skip=reply["skip"])
        return _Prepared(task_id, tuple(reply["stress"]), int(reply["dropped"]))

    def verdicts_of(mutant: Mutant, stress: tuple[Case, ...], fresh: bool) -> dict[str, dict[str, Any]]:
        w = pool.get()
        try:
            if fresh:
                w.stop()
            verdicts: dict[str, dict[str, Any]] = {}
            for j in JUDGES:
                reply = w.ask({"op": "judge", "task": mutant.task, "source": mutant.source, "judge": j,
                               "cases": stress if j == "stress" else ()})
                if "error" in reply:
                    raise RuntimeError(f"judging {mutant.id} ({j}) failed on the judge's side: {reply['error']}")
                verdicts[j] = reply
            return verdicts
        finally:
            pool.put(w)

    def judge(mutant: Mutant, stress: tuple[Case, ...]) -> MutantOutcome:
        verdicts = verdicts_of(mutant, stress, fresh=False)
        if any(v.get("crashed") for v in verdicts.values()):
            # A worker that died may have been corrupted by an earlier mutant's stray write: the
            # mutant's judges run again from a fresh worker, whose verdicts stand.
            verdicts = verdicts_of(mutant, stress, fresh=True)
        differs_on = None
        if all(verdicts[j]["kind"] == CORRECT for j in JUDGES):
            reply = ask({"op": "compare", "task": mutant.task, "source": mutant.source, "seed": options.seed,
                         "factor": options.differential_factor, "cases": stress})
            differs_on = reply.get("differs_on",
                                   f"(no comparison: {reply.get('error') or reply.get('kind')})")
        outcome = _classify(mutant, verdicts, differs_on, plan.suite_name)
        if on_outcome is not None:
            on_outcome(outcome)
        return outcome

    try:
        with ThreadPoolExecutor(max_workers=n_workers) as ex:
            ids = [t for t in report.tasks if plan.by_task.get(t)]
            prepared = dict(zip(ids, ex.map(prepare, ids), strict=True))
            todo: list[tuple[Mutant, tuple[Case, ...]]] = []
            for task_id in ids:
                p = prepared[task_id]
                if p.skip:
                    report.notes.append(TaskNote(task_id, p.skip))
                    continue
                report.stress_cases[task_id] = len(p.stress)
                if p.dropped:
                    report.notes.append(TaskNote(task_id, f"{p.dropped} drawn stress cases dropped: the expert "
                                                          f"kernel or the reference does not pass them"))
                say(f"{task_id}: {len(plan.by_task[task_id])} mutants, {len(p.stress)} stress cases")
                todo += [(m, p.stress) for m in plan.by_task[task_id]]
            report.outcomes = list(ex.map(lambda item: judge(*item), todo))
    finally:
        for w in workers:
            w.stop()
    report.seconds = time.perf_counter() - started
    return report
