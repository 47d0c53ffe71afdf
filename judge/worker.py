"""Judge worker process: `python -m judge.worker`. The trusted side: it holds the task registry,
makes inputs, computes the references, compares and decides. It never runs candidate code.

Each candidate runs in a process of its own, forked from a warm template (judge/template.py,
judge/remote.py) and contained (judge/containment.py); this worker sends it inputs, gets
plain output tensors back (judge/candidate/server.py) and enforces the job's time limit itself, so a
hang, a crash or a forged message costs that candidate its verdict and its process, never
this worker. A spare candidate process is forked ahead of need, so its start (and on a GPU
its context) overlaps with the current job (judge/spares.py); each source's Triton cache is lent
to the process that judges it (judge/source_caches.py).

The protocol with the parent runs on private duplicates of the original stdin and stdout, and
every reply carries the job's nonce plus a digest confirmation: candidate code never runs in
this process, but the channel stays strict.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from bench.thread_share import take_thread_share
from judge.device import physical_device
from judge.gate import gpu_gate, on_waiting_behind_alone
from judge.job import DEVICE_ERROR, Job, JobReply

if TYPE_CHECKING:
    from judge.template import Launched

INPUT_CACHE_ENV = "KMC_INPUT_CACHE_MB"  # device memory kept for cached case inputs and reference outputs
KEEP_TASK_INPUTS_ENV = "KMC_KEEP_TASK_INPUTS"
""""0": a task's kept inputs and answers are dropped at each job's end (judge/case_inputs.py
`forget_task`). For a run that judges each task once (runners/check.py), where nothing kept is
used again, while GPU memory is short: on an H100 (2026-12-06) twelve workers, each keeping up to
3.3 GiB of its last task's, and their probing children filled the GPU."""
PREPARE_ENV = "KMC_PREPARE_TASKS"  # the run's task ids: their hidden inputs drawn while the template starts
TMP_CAP_ENV = "KMC_CANDIDATE_TMP_MB"  # size cap of a candidate's private /tmp and folder
ALONE_STEP = "gpu:alone"
"""The step (`$KMC_JOB_STEPS`) of a job's seconds holding the GPU exclusively to time: summed
over a run's jobs, the busy time of the GPU's one timing lane, which no number of judging
workers shortens (benchmarks/bench_compare_gpu.py --steps prints it against the wall time)."""
_dumps = json.dumps  # bound at start: a candidate replacing json.dumps cannot rewrite replies
_loads = json.loads
_sha256 = hashlib.sha256


def _protocol_streams() -> tuple[TextIO, TextIO]:
    in_fd, out_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process
    return os.fdopen(in_fd, "r"), os.fdopen(out_fd, "w", buffering=1)


def _reset_timers() -> None:
    """A candidate's `signal.alarm` must not fire during the next candidate's job."""
    signal.alarm(0)
    for timer in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF):
        signal.setitimer(timer, 0)
    for sig in (signal.SIGALRM, signal.SIGVTALRM, signal.SIGPROF, signal.SIGTERM, signal.SIGINT, signal.SIGUSR1,
                signal.SIGUSR2):
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)


def candidate_device_guess() -> str:
    """The device this worker's candidates will run on, as far as its environment says before
    torch is imported: the pool gives interpreter workers TRITON_INTERPRET=1. `Worker` checks it
    against what it detects and starts another template where they differ (no GPU after all)."""
    return "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"


class Worker:
    """One judge worker: its template and the candidate processes forked ahead of need (`spares`),
    its Triton caches (`caches`), the run's inputs drawn ahead, and the jobs it judges (`handle`)."""

    def __init__(self, task_sources: list[str] | tuple[str, ...] = (), launched: Launched | None = None) -> None:
        """`launched`: the template already started (judge/template.py `launch`, by `main` before
        anything imports torch); None: started here."""
        take_thread_share()
        import bench.registry
        from judge.case_inputs import set_input_cache_bytes
        from judge.compile_ahead import compile_worker
        from judge.device import detect_target
        from judge.hidden_warmup import HiddenWarmups
        from judge.privileges import check_worker_user
        from judge.remote import TemplateProcess
        from judge.source_caches import SourceCaches, build_helpers
        from judge.spares import Spares

        self.target = detect_target()  # TRITON_INTERPRET=1 in this worker's environment: the interpreter
        self.device = "cpu" if self.target.interpreter else "cuda"
        # Behind a job retried alone (out of GPU memory beside others), idle cached blocks go back first.
        from judge.device_memory import release_cached_blocks

        on_waiting_behind_alone(functools.partial(release_cached_blocks, self.device, 0))
        # The template starts (imports, warm-up: seconds) while this process loads the task
        # sources and builds Triton's helpers: neither needs the other.
        starting = ThreadPoolExecutor(max_workers=1, thread_name_prefix="template-start")
        template = starting.submit(TemplateProcess, self.device, launched=launched)
        starting.shutdown(wait=False)
        bench.registry.load_sources(task_sources, self.target.vendor)  # the run's sources, as the parent loaded them
        default_mb = 256 if self.target.interpreter else 4096
        set_input_cache_bytes(int(os.environ.get(INPUT_CACHE_ENV, default_mb)) << 20)
        self.keeps_task_inputs = os.environ.get(KEEP_TASK_INPUTS_ENV, "1") != "0"
        self.user = check_worker_user()  # (uid, gid) the candidate processes drop to, or None
        self.tmp = Path(tempfile.mkdtemp(prefix="kmc-worker-"))
        triton_cache = Path(os.environ.get("TRITON_CACHE_DIR") or self.tmp / "triton-cache")
        # Triton's helpers, the launchers built for signatures candidates noted, the sources' caches
        self.caches = SourceCaches(triton_cache, build_helpers(triton_cache, self.target.interpreter), self.user,
                                   self.target.interpreter)
        self.prepared = self._prepare_cases(template.done)
        self.compile_worker = compile_worker()  # judges nothing: compiles ahead (judge/compile_ahead.py)
        # Candidate processes forked ahead of need (judge/spares.py), and the template they fork from.
        self.spares = Spares(template.result(), self.device, self.target.interpreter, contexts=not self.compile_worker)
        # Passing jobs' processes compiling their sources' hidden cases in the background (opt-in).
        self.warmups = HiddenWarmups(self.caches, self.device, self.target.interpreter)
        self.closing = False
        self.preparing: threading.Thread | None = None
        if not self.target.interpreter:  # an interpreter worker's few cores are the candidates'
            self.preparing = threading.Thread(target=self._prepare_rest, name="prepare-rest", daemon=True)
            self.preparing.start()
        self.counter = 0
        self.baselines: dict[str, Any] = {}
        # Reference timings (expert baseline, eager PyTorch) for the short feedback protocol,
        # measured once per (case, clock state) and kept for this worker's life: in the judge,
        # out of every candidate's reach, per device (judge/baselines.py says why here).
        self.references: Any = None
        self.contained = ""
        self.fatal = ""  # why this worker must not judge the next candidate ("" when it may)
        from judge.phases import PhaseClock

        self.clock = PhaseClock()
        self.compile_pass: dict[str, Any] = {}
        self.spares.refill()
        self.spares.check_boundary()

    @property
    def template(self) -> Any:
        """The template this worker's candidate processes are forked from (judge/remote.py
        `TemplateProcess`; replaced when it dies: `Spares.restart_template`)."""
        return self.spares.template

    def _prepare_cases(self, stop: Callable[[], bool]) -> int:
        """The hidden inputs of the run's built-in tasks (`PREPARE_ENV`; on a GPU their timing
        cases' too), drawn into the oracle's cache as its first evaluation of each task would
        draw them (seconds per task while they were drawn on the CPU; far less since a GPU judge
        draws them on the GPU, bench/builtin/_common.py), until `stop()` says so: first while the template
        starts (`stop`: it is ready), then on a GPU in the background (`_prepare_rest`). Cases
        already drawn cost nothing. Suite tasks are left to their first job (drawing their
        inputs runs the suite's code, which can fault the GPU). Returns how many cases."""
        from bench.registry import get_task
        from judge.case_inputs import prepare_inputs

        done = 0
        for task_id in filter(None, os.environ.get(PREPARE_ENV, "").split(",")):
            try:
                task = get_task(task_id)
            except KeyError:
                continue
            if task.source != "builtin":
                continue
            # On a GPU the timing cases too: drawn, they are in the compile pass of a task's first
            # timed job (judge/precompile.py describes drawn inputs only).
            perf = () if self.target.interpreter else tuple(task.perf)
            for case in (*task.cases("hidden", self.target.interpreter), *perf):
                if stop():
                    return done
                try:
                    with gpu_gate(exclusive=False):  # device copies wait for a timing in progress
                        done += prepare_inputs(task, case, self.device, self.target.interpreter)
                except Exception as exc:  # noqa: BLE001 - an optimisation: the first job draws them instead
                    print(f"judge worker: inputs of {task_id} {case.name} not prepared ({type(exc).__name__}: {exc})",
                          file=sys.stderr)
                    return done
        return done

    def _prepare_rest(self) -> None:
        """The run's remaining hidden inputs, drawn beside the first jobs rather than in each
        worker's first job of each task (`_prepare_cases` had only some of a run's tasks drawn
        when the template was ready, and a new source's first evaluation took several times a
        repeat's): torch draws without the GIL, and a key a job
        asks for while it is being drawn is waited for, not drawn twice (judge/case_inputs.py
        `_InputCache`). Stops when the worker closes or the input cache is nearly full."""
        from judge import fused_compare
        from judge.case_inputs import input_cache_full

        fused_compare.prepare(self.device)  # the comparison's kernel compiled and checked now, not under a ticket
        self._prepare_cases(lambda: self.closing or input_cache_full())

    def handle(self, job: Job | dict[str, Any]) -> dict[str, Any]:
        """One job (a `Job`, or its JSON), answered as a `JobReply`'s JSON."""
        from judge.candidate.verdict import Evaluation, Verdict
        from judge.compile_ahead import REFUSED, compiled_only
        from judge.device_memory import job_memory, start_job
        from judge.phases import PhaseClock

        job = job if isinstance(job, Job) else Job.from_json(job)

        self.clock = PhaseClock()  # seconds per phase of this job, sent back with the evaluation
        self.compile_pass = {}  # what the compile pass did (judge/precompile.py), for `record`
        start_job(self.device)
        tests: list[dict[str, Any]] | None = None
        timing = None
        # A job retried alone (it ran out of GPU memory beside other workers' jobs: runners/pool.py)
        # holds the GPU's gate exclusively from start to end; its inner requests are then served.
        alone = gpu_gate(exclusive=True, clock=self.clock, alone=True) if job.alone else contextlib.nullcontext()
        try:
            with alone:
                if job.compile_only:  # only the pass (judge/compile_ahead.py)
                    verdict, _ = self._run(job, compiled_only)
                elif self.compile_worker:  # its processes have no GPU context: nothing loaded, nothing judged
                    verdict = Verdict("runtime_error", REFUSED)
                elif job.tests_job:
                    verdict, tests = self._run(job, self._internal_tests)
                else:
                    verdict, timing = self._run(job, self._judge_job)
        finally:
            _reset_timers()
            if not self.keeps_task_inputs:
                from judge.case_inputs import forget_task

                forget_task(job.task)  # before the job's end hands idle blocks back
            ended = self._job_memory(job_memory)
        if ended:
            verdict, timing = Verdict("runtime_error", f"the judge could not judge this candidate: {ended}"), None
        if job.prime_references and not self.target.interpreter and not self.fatal:
            with self.clock("timing"):
                self._prime_references(job)
        evaluation = Evaluation(verdict, timing, dict(self.clock.seconds)).to_json() | (
            {"tests": tests} if tests is not None else {})
        fatal, self.fatal = self.fatal, ""
        measured = [s.to_json() for s in self.references.take_new()] if self.references is not None else []
        return JobReply(job.id, job.nonce, evaluation, bool(fatal), fatal, self.contained, tuple(measured)).to_json()

    def _job_memory(self, read: Callable[[str], dict[str, float]]) -> str:
        """The job's memory steps read, and idle blocks released, at its end; where that finds the
        judge's GPU context gone, why (and the worker is to be restarted, the job judged again:
        `DEVICE_ERROR`), else "". A fault of the job's last kernels, or of an earlier job's,
        surfaces at the next synchronisation, which can be this one: on an H100 (2026-12-06) it
        raised here, out of the job, and ended the worker, and the task was recorded as a crash."""
        from judge.candidate.loading import format_exception, is_device_error

        try:
            self.clock.steps.update(read(self.device))
        except Exception as exc:
            if not is_device_error(exc):
                raise
            self.fatal = DEVICE_ERROR
            return format_exception(exc)
        return ""

    def record(self, job: Job, wall: float) -> None:
        """The job's phases, steps and wall seconds here, when `$KMC_JOB_STEPS` asks for them."""
        from judge.phases import record_steps

        record_steps({"task": job.task, "kind": job.kind, "case_set": job.case_set if not job.tests_job else None,
                      "timing": job.timing, "wall": round(wall, 4),
                      "phases": {k: round(v, 4) for k, v in self.clock.seconds.items()},
                      "steps": {k: round(v, 4) for k, v in self.clock.steps.items()},
                      "compile_pass": self.compile_pass})

    def _run(self, job: Job, body: Any) -> tuple[Any, Any]:
        """Fork-fresh candidate process, load the source, run `body`; every failure of the
        candidate's process becomes the verdict, and the process is gone afterwards."""
        from bench.registry import get_task
        from judge.candidate.loading import format_exception, is_device_error
        from judge.candidate.verdict import Verdict, capped_traceback
        from judge.candidate.wire import WireError
        from judge.remote import CandidateDied, CandidateTimeout

        task = get_task(job.task)
        limit = float(job.timeout)
        proc = None
        try:
            if not job.tests_job and not job.compile_only:  # an adapted suite's probing children start before the load
                task.start_ahead(task.cases(job.case_set, self.target.interpreter) + (task.perf if job.timing else ()))
            for with_pass in (True, False):
                with self.clock("start"):
                    proc = self.spares.take(limit, self.clock)
                proc.steps = self.clock
                self.caches.lend(proc, job.source, hidden=job.case_set == "hidden" and not job.tests_job)
                with self.clock("compile"):  # writing and importing the candidate, in its process
                    reply, _ = proc.request({"op": "load", "source": job.source, "entry_point": task.entry_point,
                                             "allowed_ops": list(task.allowed_torch_ops),
                                             "judges_overruns": task.judges_overruns})
                self.contained = str(reply.get("contained", ""))[:500]
                if reply.get("ok") is not True:
                    return Verdict(str(reply.get("kind", "runtime_error")), str(reply.get("message", ""))[:4000],
                                   traceback=capped_traceback(reply.get("traceback"))), None
                if not with_pass or self._compile_pass(task, job, proc):
                    break
                proc.close()  # lost to the pass: judged in a fresh process, as without it
                proc = None
            assert proc is not None
            outcome = body(task, job, proc)
            if self._warm_hidden(task, job, proc, outcome[0]):
                proc = None  # it compiles the hidden cases now, and `self.warmups` closes it
            return outcome
        except CandidateTimeout:
            return Verdict("timeout", f"no verdict within {limit:.0f} s; the candidate process was killed"), None
        except CandidateDied as exc:
            return Verdict("crash", str(exc)), None
        except (WireError, ValueError, KeyError, TypeError) as exc:
            return Verdict("runtime_error", f"protocol violation by the candidate process: {format_exception(exc)}"), None
        except Exception as exc:  # noqa: BLE001 - the judge's own side failed (a suite reference raising): a verdict, not a dead worker
            if is_device_error(exc):
                self.fatal = DEVICE_ERROR  # its own GPU context is gone: the pool restarts it, then judges again
            return Verdict("runtime_error", f"the judge could not judge this candidate: {format_exception(exc)}"), None
        finally:
            if proc is not None:
                with self.clock.step("close"):
                    proc.close()

    def _warm_hidden(self, task: Any, job: Job, proc: Any, verdict: Any) -> bool:
        """A passing visible or own-test job's process handed to `self.warmups` to compile the
        hidden cases in the background (judge/hidden_warmup.py); False where it stays the caller's.
        Never the verdict's business: any failure here just closes the process as before."""
        from judge.hidden_warmup import worth_warming

        if not worth_warming(job, verdict):
            return False
        try:
            handed = self.warmups.start(proc, task, job.source)
        except Exception as exc:  # noqa: BLE001 - an optimisation: the process is closed as usual
            print(f"judge worker: hidden cases not compiled ahead ({type(exc).__name__}: {exc})"[:300],
                  file=sys.stderr)
            return False
        if handed:
            self.clock.steps["warmup:started"] = 1.0
        return handed

    def _compile_pass(self, task: Any, job: Job, proc: Any) -> bool:
        """Every kernel the job's cases (or a method's tests) need compiled now, before any ticket
        (judge/precompile.py), on the judge's time: the candidate's clock stops meanwhile. False
        when the process was lost to the pass (it died or overstayed): the caller then judges
        in a fresh process without it, so the pass can never decide a verdict."""
        from judge.candidate.precompile import PASS_WAIT_S, enabled
        from judge.candidate.wire import WireError
        from judge.precompile import cases_to_compile, precompile, reported_counts
        from judge.remote import CandidateDied, CandidateTimeout

        if not enabled(self.target.interpreter) or (job.tests_job and not job.tests.strip()):
            return True
        timed = job.timing and not self.target.interpreter
        try:
            with self.clock("compile"), self.clock.step("compile pass"), proc.judge_side(), proc.limited(PASS_WAIT_S):
                if job.tests_job:
                    reply, _ = proc.request({"op": "compile_tests", "tests": job.tests})
                    self.compile_pass = reported_counts(reply.get("pass"))
                else:
                    cases = cases_to_compile(task, job.case_set, self.target.interpreter, timed, job.compile_through)
                    self.clock.steps["pass:through"] = 1.0 if job.compile_through else 0.0  # the hint's share of jobs
                    self.compile_pass = precompile(proc, task, cases, self.device, self.target.interpreter)
        except (CandidateDied, CandidateTimeout, WireError) as exc:
            self.compile_pass = {"lost": f"{type(exc).__name__}: {exc}"[:300]}
            return False
        return True

    def _judge_job(self, task: Any, job: Job, proc: Any) -> tuple[Any, Any]:
        from judge.candidate.reruns import steady_verdict
        from judge.oracle import judge_cases
        from judge.remote import RemoteRunner

        cases = task.cases(job.case_set, self.target.interpreter)
        runner = RemoteRunner(proc)
        shared = self._shared_ticket

        def alone(name: str) -> Any:
            """The named case judged again on its own (judge/candidate/reruns.py), in the same candidate
            process; None where it cannot be: no such case alone, or the process was lost to a
            call sent ahead of the failure (judge/remote.py `RemoteRunner.discard`)."""
            chosen = tuple(c for c in cases if name == c.name or name.startswith(c.name + "+"))
            if not chosen or runner.lost:
                return None
            return judge_cases(task, runner, chosen, self.device, self.target.interpreter, hold=shared)

        def disturb(rerun: int) -> None:
            if runner.lost:
                return
            with shared():
                runner.disturb(rerun)

        timed = job.timing and not self.target.interpreter
        with self.clock("correctness"):
            # A final submission (timed) on a GPU runs each case a third time on the first inputs.
            # The GPU's gate is held case by case (`hold`), so a timer waits for one case, not the set.
            verdict = judge_cases(task, runner, cases, self.device, self.target.interpreter, repeat_for_races=timed,
                                  hold=shared)
            # Memory is disturbed where the candidate runs, in its process, before each re-run.
            verdict = steady_verdict(verdict, alone, self.device, disturb=disturb)
        if not self.target.interpreter:
            self.caches.launchers.learn(runner.launchers)  # built in the background, for the next sources
        timing = None
        if verdict.correct and timed:
            with self.clock("timing"):  # the perf-case check, then the timing protocol
                verdict, timing = self._time(task, runner, verdict, job)
        if verdict.correct and job.sanitize and job.timing and self.target.vendor == "nvidia":
            from judge.sanitize import sanitized

            self.counter += 1
            with gpu_gate(exclusive=False, clock=self.clock):
                verdict = sanitized(task, job, cases, verdict, device=self.device, interpreter=self.target.interpreter,
                                    folder=self.tmp / f"sanitize-{self.counter}", caches=self.caches, clock=self.clock)
        return verdict, timing

    def _shared_ticket(self) -> Any:
        """A judging job's ticket at the GPU's fair gate (judge/gate.py), its wait counted as `gate`."""
        return gpu_gate(exclusive=False, clock=self.clock)

    @contextlib.contextmanager
    def _alone(self) -> Iterator[None]:
        """The GPU held exclusively to time: the wait counted as `gate`, the hold as `ALONE_STEP`."""
        with gpu_gate(exclusive=True, clock=self.clock), self.clock.step(ALONE_STEP):
            yield

    def _internal_tests(self, task: Any, job: Job, proc: Any) -> tuple[Any, list[dict[str, Any]]]:
        """A method's own unit tests, run in the candidate's process (where neither hidden
        cases nor references can be imported): judge/candidate/internal_tests.py."""
        from judge.candidate.internal_tests import DEFAULT_TEST_TIMEOUT_S, InternalTestReport, test_names
        from judge.candidate.verdict import TestOutcome, Verdict

        if not job.tests.strip():
            return Verdict("correct", "no tests to run; the candidate imported"), []
        # Its tests use the GPU too: a shared ticket per test function, so a timer waits for one
        # test, not them all (their kernels compiled before, without a ticket).
        try:
            names: list[str | None] = list(test_names(job.tests)) or [None]
        except SyntaxError:
            names = [None]  # the candidate's process says so, as one failed test
        found: list[Any] = []
        for name in names:
            with gpu_gate(exclusive=False, clock=self.clock), self.clock("correctness"):
                reply, _ = proc.request({"op": "tests", "tests": job.tests, **({"only": [name]} if name else {}),
                                         "per_test_timeout": job.per_test_timeout or DEFAULT_TEST_TIMEOUT_S})
            found += reply.get("tests", [])
        outcomes = tuple(TestOutcome(str(t["name"])[:200], t["passed"] is True, str(t.get("message", ""))[:2000])
                         for t in found if isinstance(t, dict))
        report = InternalTestReport.from_outcomes(outcomes)
        return report.verdict, [dataclasses.asdict(t) for t in report.tests]

    def _baseline(self, task: Any) -> Any:
        """The expert baseline, imported here in the judge: trusted code, timed by the judge."""
        from judge.candidate.loading import load_module

        if task.id not in self.baselines:
            folder = Path(tempfile.mkdtemp(prefix=f"baseline-{task.id}-", dir=self.tmp))
            path = folder / f"baseline_{task.id}.py"
            path.write_text(task.baseline_source())
            module = load_module(path, f"kmc_baseline_{task.id}")
            self.baselines[task.id] = getattr(module, task.entry_point)
        return self.baselines[task.id]

    def _time(self, task: Any, runner: Any, verdict: Any, job: Job) -> tuple[Any, Any]:
        """Check the timing cases first (they are larger than the hidden ones), then time the
        candidate (in its process, on the judge's command) alone on the GPU, by the job's
        protocol: final-full interleaves it round by round with the expert baseline and eager
        PyTorch (here); feedback-short samples it briefly against their timings from this
        worker's cache (`self.references`, judge/baselines.py)."""
        from bench.task import CaseUnavailable
        from judge.candidate.verdict import Verdict
        from judge.oracle import judge_cases
        from judge.timing import Holds, OutputChangedDuringTiming, TimingPolicy
        from judge.timing_job import TIMING_HOLD_ENV, time_candidate

        perf_verdict = judge_cases(task, runner, task.perf, self.device, False, hold=self._shared_ticket)
        if not perf_verdict.correct:
            return dataclasses.replace(perf_verdict, message=f"on a timing case: {perf_verdict.message}",
                                       cases_run=verdict.cases_run), None
        from judge.baselines import BaselineCache, Shared

        policy = TimingPolicy.from_json(job.timing_policy)
        if self.references is None:
            self.references = BaselineCache()
        self.references.adopt([Shared.from_json(s) for s in job.references])
        try:
            # Alone only while measuring (judge/timing.py `Holds`); `KMC_TIMING_HOLD=job`: alone
            # for the whole timing, as before (kept to measure the difference).
            whole = os.environ.get(TIMING_HOLD_ENV, "samples") == "job"
            holds = None if whole else Holds(shared=self._shared_ticket, alone=self._alone)
            with self._alone() if whole else contextlib.nullcontext():
                timing = time_candidate(task, runner.proc, self._baseline(task), task.perf, self.target.vendor,
                                        physical_device(), policy, self.references, holds)
        except OutputChangedDuringTiming as exc:
            return Verdict("wrong_result", str(exc), exc.case, cases_run=verdict.cases_run,
                           kernel_launched=True), None
        except CaseUnavailable as exc:  # correct, but nothing the reference answers can be timed
            return dataclasses.replace(verdict, message=f"not timed: {exc}"), None
        return verdict, timing

    def _prime_references(self, job: Job) -> None:
        """The run's first feedback timing of a task: its references measured whatever the
        candidate's verdict (judge/timing_job.py `prime_references`), for the pool to hand every
        later job of the task (runners/references.py). An optimisation only: if it fails, the
        timings that need the references measure them."""
        from bench.registry import get_task
        from judge.baselines import BaselineCache
        from judge.candidate.loading import is_device_error
        from judge.timing import TimingPolicy
        from judge.timing_job import prime_references

        try:
            task = get_task(job.task)
            if self.references is None:
                self.references = BaselineCache()
            with self._alone():
                prime_references(task, self._baseline(task), task.perf, self.target.vendor, physical_device(),
                                 TimingPolicy.from_json(job.timing_policy), self.references)
        except Exception as exc:  # noqa: BLE001 - see the docstring
            print(f"judge worker: references of {job.task} not primed ({type(exc).__name__}: {exc})",
                  file=sys.stderr)
            if is_device_error(exc):
                self.fatal = DEVICE_ERROR

    def close(self) -> None:
        self.closing = True
        if self.preparing is not None:
            self.preparing.join(timeout=10)
        self.warmups.close()
        self.caches.close()
        self.spares.close()
        os.chdir("/")
        shutil.rmtree(self.tmp, ignore_errors=True)


def _task_sources(argv: list[str]) -> list[str]:
    """`--task-source ADAPTER:PATH`, repeatable: the run's task sources (runners/pool.py)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m judge.worker")
    parser.add_argument("--task-source", action="append", default=[])
    return list(parser.parse_args(argv).task_source)


def main() -> None:
    from bench.orphan_watch import end_when_orphaned
    from judge.containment import undumpable

    undumpable()
    end_when_orphaned()
    task_sources = _task_sources(sys.argv[1:])
    inp, out = _protocol_streams()
    from judge.phases import process_age, record_steps
    from judge.template import launch

    worker = Worker(task_sources, launched=launch(candidate_device_guess()))
    record_steps({"kind": "worker_start", "wall": process_age()})  # imports, template, helpers: once a run
    out.write(_dumps({"ready": True, "pid": os.getpid(), "target": worker.target.to_json()}) + "\n")
    last_digest = ""
    exit_after_confirm = False
    try:
        for line in inp:
            if not line.strip():
                continue
            message = _loads(line)
            if "confirm" in message:
                # Sent by the parent after it has read a reply, with a nonce the candidate could
                # not have known: the digest proves the line it read is the one written here.
                out.write(_dumps({"confirm": message["confirm"], "digest": last_digest}) + "\n")
                if exit_after_confirm:
                    break  # a poisoned device context or tampered process must not judge the next candidate
                continue
            received = time.perf_counter()
            job = Job.from_json(message)
            text = _dumps(worker.handle(job))
            last_digest = _sha256(text.encode()).hexdigest()
            exit_after_confirm = _loads(text)["fatal"]
            out.write(text + "\n")
            worker.record(job, time.perf_counter() - received)
    finally:
        worker.close()


if __name__ == "__main__":
    main()
