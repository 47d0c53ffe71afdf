"""A pool of persistent worker processes: the local executor.

Each worker is a separate process (`python -m judge.worker`, never a fork of the parent), the
trusted judge: it forks a fresh, contained process per candidate from a warm template and
never runs candidate code itself (judge/worker.py; runners/worker_process.py starts one and
holds the conversation with it). Each worker is in its own session, bound to one GPU through
CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES, with an environment built from an allow-list, so
API keys and tokens never reach candidate code. The parent enforces every limit: a job that
runs past its time limit, a worker that dies (segfault, `os._exit`), or a reply asking for a
restart (device error) costs that one verdict and one worker restart, never the run. So does
a reply that is not the one asked for (garbage or a forged line on the reply channel: every
job carries a random nonce the reply must echo).

Two lanes. Judging runs on as many workers as the machine allows (runners/sizing.py: cores,
free GPU memory per device, host memory; the plan and why are `LocalPool.plan`); the workers
bound to one GPU share it through that GPU's fair gate (judge/gate.py, a folder in the pool's
own): judging jobs hold it shared, a timing measurement holds it alone and in ticket order,
so each GPU has one timing lane that no judging job can starve or disturb. A candidate that
runs out of GPU memory beside other workers' jobs is judged again alone (the gate held
exclusively for the whole job), once (with `shrink_on_oom`, for long jobs, its worker is first
retired, until the jobs then in flight have ended or NVML finds room on the GPU, while the GPU
keeps half its workers, and the job judged again beside the others; with
`defer_alone`, it then comes back to its caller, to be judged again after the rest); a job
during which the judge's own GPU context failed is judged again on a restarted worker, once;
the lost attempt's seconds are its `retry` phase.
Interpreter workers get one torch thread each: on a shared CPU the default thread pool
spins against itself and makes small tensor ops hundreds of times slower.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import os
import queue
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.adapters.shape_probe import PROBE_DIR_ENV, PROBING_WALL_S
from bench.faults import mentions_out_of_memory
from bench.registry import get_task
from judge.candidate.internal_tests import DEFAULT_TEST_TIMEOUT_S, JOB_KIND, InternalTestReport
from judge.candidate.verdict import Evaluation, Verdict
from judge.clocks import CLOCKS_LOCKED_ENV
from judge.device import Target
from judge.job import DEVICE_ERROR, Job, JobReply
from judge.policy import FEEDBACK_SHORT, TimingPolicy
from judge.privileges import hand_over, resolve_worker_user, worker_environment
from judge.sandbox import UNSANDBOXED_ENV, risk_accepted
from judge.sandbox import require as require_sandbox
from judge.sandbox_layout import AUTOTUNE_CACHE_ENV
from judge.worker import INPUT_CACHE_ENV, KEEP_TASK_INPUTS_ENV, PREPARE_ENV
from runners.bytecode import run_bytecode_environment
from runners.compile_ahead import CompileAhead, lane_workers_per_device
from runners.references import RunReferences
from runners.sizing import GPU_MIB_PER_WORKER, WorkerPlan, device_free_mib, plan_workers
from runners.worker_process import (
    ProtocolViolation,
    WorkerDied,
    WorkerProcess,
    WorkerStartError,
    WorkerTimeout,
)

log = logging.getLogger("kmc.pool")

RECALL_FREE_MIB = 2 * GPU_MIB_PER_WORKER
"""Free GPU memory (NVML) at which `_recall` brings one retired worker back before the jobs
beside its retirement have all ended: room for its processes and a job's peak beside the rest."""
RECALL_SPACING_S = 60.0
"""Seconds after a retirement or recall on a GPU before memory alone brings a worker back: a
job's peak passes and a retired worker's memory is freed at once, so the free memory right
after a retirement says little; a recalled worker takes seconds to start and grow."""


def visible_devices(target: Target) -> list[str]:
    """Device ids the workers may bind to, as the parent's own *_VISIBLE_DEVICES lists them:
    a user who restricted the toolkit to GPUs 2,3 gets workers on 2 and 3, not 0 and 1."""
    if target.interpreter or not target.visible_devices_var:
        return []
    listed = os.environ.get(target.visible_devices_var)
    if listed:
        ids = [d.strip() for d in listed.split(",") if d.strip()]
        if ids:
            return ids[: max(target.device_count, 1)]
    return [str(i) for i in range(max(target.device_count, 1))]


JUDGE_MARGIN_S = 60.0  # the parent's backstop beyond the job limit the judge worker enforces


def backstop_seconds(limit: float) -> float:
    """How long the parent waits for a judge worker's reply to a job of `limit` seconds before
    it counts the worker as stuck: the candidate's own limit, as long again for the judge's work
    that stops the candidate's clock (judge/remote.py `judge_side`: inputs, reference answers),
    and a margin."""
    return 2 * limit + JUDGE_MARGIN_S


def first_job_allowance(task_id: str, judged_before: set[str]) -> float:
    """Seconds more the parent waits for a worker's first job of an adapted task: the worker
    records the suite's calls and, on a GPU, waits for (or runs) the probes of its new shapes
    (bench/adapters/shape_probe.py, at most `PROBING_WALL_S`), judge's work the candidate's
    clock does not count, and which restarted the worker of TritonBench-revised
    chunk_retention_ops and fused_recurrent_delta on an H200 before the job had judged anything."""
    if task_id in judged_before:
        return 0.0
    try:
        adapted = get_task(task_id).source != "builtin"
    except KeyError:
        return 0.0
    return PROBING_WALL_S if adapted else 0.0


@dataclass
class PoolStats:
    jobs: int = 0
    restarts: int = 0
    timeouts: int = 0
    crashes: int = 0
    oom_retries: int = 0
    device_retries: int = 0
    retired: int = 0  # workers retired after running out of GPU memory beside others (`_retire`)
    recalled: int = 0  # retired workers back in service once the jobs beside them had ended (`_recall`)
    oom_deferred: int = 0  # jobs out of memory handed back to be judged again after the rest (`defer_alone`)


@dataclasses.dataclass(frozen=True)
class _Attempt:
    """One job sent to a worker (`LocalPool._run_job`): the reply, or the verdict the worker's
    failure earned; seconds waiting for a worker and seconds the worker had it; whether that
    worker was retired for running out of GPU memory beside other jobs (`LocalPool._retire`)."""

    reply: JobReply | Verdict
    queued: float
    ran: float
    retired: bool = False

    @property
    def verdict(self) -> Verdict:
        reply = self.reply
        return reply if isinstance(reply, Verdict) else Verdict.from_json(reply.evaluation["verdict"])


def out_of_memory(verdict: Verdict) -> bool:
    """A verdict a GPU out-of-memory error decided (the candidate's, or the judge's own side):
    possibly the doing of other jobs on the same GPU, so not yet the candidate's verdict.
    Triton's "out of resource: shared memory" is the kernel's own and does not match."""
    return out_of_memory_kind(verdict.kind, verdict.message)


def out_of_memory_kind(kind: str, message: str) -> bool:
    """`out_of_memory` on a verdict's kind and message, for records whose kinds are not all a
    `Verdict`'s (a check row's "unscorable", "skipped": building a Verdict of one raises)."""
    return kind in ("runtime_error", "crash") and mentions_out_of_memory(message)


def _with_other(pool_phases: dict[str, float], worker_phases: dict[str, float], ran: float) -> dict[str, float]:
    """All of a job's phases: the pool's, the worker's, and `other`, the seconds the worker had
    the job beyond its named phases (messages both ways, the worker's own bookkeeping; the
    candidate process's start is a phase of its own). Why: in a full-suite GPU run the named phases
    left about a third of the workers' seconds unaccounted for, which could not be told apart
    from idling."""
    named = sum(worker_phases.values())
    return {**pool_phases, **worker_phases, "other": max(0.0, ran - named)}


class LocalPool:
    """Evaluate candidates on persistent local workers; thread-safe and blocking per call."""

    def __init__(self, target: Target, workers: int | None = None, job_timeout: float | None = None,
                 startup_timeout: float = 300.0, worker_user: str | None = None,
                 task_sources: list[str] | tuple[str, ...] = (), clocks_locked: bool = False,
                 sanitize: bool = False, plan: WorkerPlan | None = None, gate_on_cpu: bool = False,
                 gate_folder: Path | None = None, prepare: tuple[str, ...] = (),
                 extra_env: dict[str, str] | None = None, unsandboxed: bool | None = None,
                 keep_task_inputs: bool = True, shrink_on_oom: bool = False, compile_ahead: int | None = None):
        """`workers`: how many judging workers (default: as many as the machine allows,
        runners/sizing.py; `plan` gives a layout already made). `gate_on_cpu`: interpreter
        workers share one fair gate too, as one GPU's workers do (the lanes tested on the CPU).
        `gate_folder`: the gate of this pool's one device lives there instead of in the pool's
        folder (a Ray actor's pool: every actor on that GPU of the node shares it).
        `worker_user`: run the candidate processes as this unprivileged user (judge/privileges.py);
        PrivilegeError, before anything starts, when that is not possible here. `task_sources`:
        the run's `ADAPTER:PATH` task sources, which every worker loads at start-up.
        `clocks_locked`: the GPU clocks are locked for as long as the pool lives (--lock-clocks),
        which the workers' timings record. `sanitize`: timed (final) evaluations are also run
        under compute-sanitizer on NVIDIA. `prepare`: the run's task ids, whose hidden inputs
        each worker draws while its template starts (judge/worker.py `PREPARE_ENV`). `extra_env`:
        variables for the workers beyond the allow-listed ones this process passes on
        (`scrubbed_env`), e.g. the throughput benchmark's bytecode folder; the pool's own
        settings win over them. `unsandboxed`: candidates run without the sandbox
        (judge/sandbox.py), only the best-effort containment: the user accepted that risk
        (`--unsandboxed`; None: as this process's command said, judge/sandbox.py `accept_risk`).
        `keep_task_inputs=False`: a worker drops a task's inputs and answers at each job's end, for
        a run that judges each task once (judge/worker.py `KEEP_TASK_INPUTS_ENV`). `shrink_on_oom`:
        a job out of GPU memory beside others retires its worker until the jobs beside it have ended
        (`_retire`, `_recall`), for long jobs, where a retry alone drains the pool for long; short
        jobs drain it in seconds, and a worker fewer for a while would cost more. `compile_ahead`:
        workers per device that only compile waiting jobs' kernels (runners/compile_ahead.py;
        None: `KMC_COMPILE_AHEAD`, default 0)."""
        unsandboxed = risk_accepted() if unsandboxed is None else unsandboxed
        require_sandbox(unsandboxed)  # SandboxRefused, before any worker or folder exists
        self.sanitize = sanitize
        self.unsandboxed = unsandboxed
        self.target = target
        user = resolve_worker_user(worker_user) if worker_user else None
        devices = visible_devices(target)
        if workers is not None and workers < 1:
            raise ValueError(f"a pool needs at least 1 worker, got {workers}")  # none would wait forever for one
        self.plan = plan or plan_workers(target, devices, workers)
        self.gated = not target.interpreter or gate_on_cpu  # workers that share a fair gate (one per GPU)
        workers = self.plan.workers
        self.job_timeout = job_timeout or (600.0 if target.interpreter else 180.0)
        self.stats = PoolStats()
        self.references = RunReferences()  # the run's reference timings, which every worker follows
        self.contained = ""  # the candidate processes' one-line containment statement, once known
        self._stats_lock = threading.Lock()
        self._idle: queue.Queue[WorkerProcess] = queue.Queue()
        self.workdir = Path(tempfile.mkdtemp(prefix="kmc-pool-"))
        # What the workers must know goes into their own environment or command line, never this process's.
        extra_env = {**(extra_env or {}), **(worker_environment(hand_over(self.workdir, user), user) if user else {})}
        if not target.interpreter and not os.environ.get("TRITON_CACHE_DIR"):
            # One Triton cache root for all the workers (judge/source_caches.py keeps a cache per
            # candidate source under it): a source judged again by another worker compiles nothing.
            extra_env.setdefault("TRITON_CACHE_DIR", str(self.workdir / "triton-cache"))
            # The run's own cache: the judge's processes share autotuning choices in it (never candidates').
            extra_env[AUTOTUNE_CACHE_ENV] = "1"
        extra_env[CLOCKS_LOCKED_ENV] = "1" if clocks_locked else "0"  # never a value inherited from our shell
        extra_env[UNSANDBOXED_ENV] = "1" if unsandboxed else "0"  # likewise
        extra_env[PREPARE_ENV] = ",".join(prepare)
        extra_env[KEEP_TASK_INPUTS_ENV] = "1" if keep_task_inputs else "0"
        extra_env[PROBE_DIR_ENV] = str(self.workdir / "probes")  # adapted tasks' new shapes, decided once per pool
        extra_env.update(run_bytecode_environment(self.workdir / "bytecode", extra_env))
        if self.plan.input_cache_mib is not None and not target.interpreter:
            extra_env[INPUT_CACHE_ENV] = str(self.plan.input_cache_mib)
        threads = 1 if target.interpreter else max(1, min(4, self.plan.cores // max(workers, 1)))
        # Devices taken in turn, so the first idle workers (the queue is FIFO) spread over the GPUs.
        most = max(self.plan.per_device.values(), default=0)
        slots = ([d for k in range(most) for d, n in self.plan.per_device.items() if k < n] if devices
                 else [None] * workers)
        self._all = []
        for i, device in enumerate(slots):
            # One gate per GPU, shared by the workers bound to it: the GPU's timing lane.
            gate = ((gate_folder or self.workdir / f"gate-{device or 'cpu'}") if device is not None or gate_on_cpu
                    else None)
            self._all.append(WorkerProcess(i, target, startup_timeout, device=device, gpu_gate=gate,
                                           torch_threads=threads, workdir=self.workdir, extra_env=extra_env,
                                           task_sources=tuple(task_sources)))
        for w in self._all:
            self._idle.put(w)
        # Workers that only compile the kernels of jobs waiting for one of these (runners/compile_ahead.py).
        # On the CPU only when asked for by argument: nothing compiles under the interpreter.
        per_device = lane_workers_per_device() if compile_ahead is None and devices else compile_ahead or 0
        self.ahead = CompileAhead.beside(self._all, per_device)
        self._serving = collections.Counter(w.device for w in self._all)  # workers in service per device
        self._serving_floor = {d: max(1, n // 2) if shrink_on_oom else n for d, n in self._serving.items()}
        self._jobs_started = 0
        self._in_flight: dict[str | None, set[int]] = collections.defaultdict(set)  # job numbers, per device
        self._benched: list[tuple[WorkerProcess, int]] = []  # retired, back once no job up to this number runs
        self._last_change: dict[str | None, float] = {}  # per device: its last retirement or recall (monotonic)
        self._closing = False
        self.defer_alone = False
        """True: a job that would be judged again alone (out of GPU memory beside others) comes back
        with that verdict instead, for its caller to judge again once the other jobs are done
        (runners/check.py): a retry alone waits for every job in flight and then holds the GPU by
        itself, so mid-run it idles the whole pool for a long job's length."""

    @property
    def size(self) -> int:
        return len(self._all)

    def layout(self) -> dict[str, Any]:
        """How this pool runs (config.json's `executor`): workers per device, timing lanes, why."""
        lane = {"compile_ahead_workers": len(self.ahead.workers)} if self.ahead is not None else {}
        return {"kind": "local", **self.plan.to_json(), **lane}

    def warm_up(self) -> None:
        """Start every worker now, in parallel, so imports overlap with other work."""
        def start(w: WorkerProcess) -> None:
            try:
                w.ensure_started()
            except WorkerStartError:
                pass  # raised again, with its message, when the worker is first used

        threads = [threading.Thread(target=start, args=(w,), daemon=True) for w in self._all]
        for t in threads:
            t.start()
        if self.ahead is not None:
            self.ahead.start()

    def _count(self, field: str) -> None:
        with self._stats_lock:
            setattr(self.stats, field, getattr(self.stats, field) + 1)

    def _run_job(self, job: Job, limit: float, timeout_message: str) -> _Attempt:
        """Send one job to an idle worker (`_Attempt`).

        The judge worker enforces `limit` on the candidate's process itself (a hang costs that
        process, not the worker); the parent waits `limit` plus a margin as the backstop for a
        judge that is itself stuck, and restarts the worker after that, a crash, a protocol
        violation or a reply that asks for it."""
        asked = time.perf_counter()
        ahead = self.ahead.submit(job) if self.ahead is not None and self._idle.empty() else None
        worker = self._idle.get()
        if ahead is not None:
            ahead.drop()  # a lane worker that has not started on it never will
        given = asked
        retire = False
        number = 0  # the job's number among those started on this pool, once given

        def ran() -> float:
            return time.perf_counter() - given

        try:
            # A worker still starting (the pool's warm-up, a restart in the background) is not
            # idle yet: waiting for it is queue time. Before, it was the job's `other`: the first
            # job of each worker carried the worker's whole start-up, which read as a large
            # `other` per timed feedback in a short run. A failed start is
            # raised again, with its message, by the job itself below.
            with contextlib.suppress(WorkerStartError):
                worker.ensure_started()
            given = time.perf_counter()
            queued = given - asked
            self._count("jobs")
            with self._stats_lock:
                self._jobs_started += 1
                number = self._jobs_started
                self._in_flight[worker.device].add(number)
            try:
                backstop = (backstop_seconds(limit) + first_job_allowance(job.task, worker.judged)
                            + (backstop_seconds(limit) if job.alone else 0.0))  # alone: the drain first
                reply = worker.run(job.with_(timeout=limit), backstop)
                worker.judged.add(job.task)
            except WorkerTimeout:
                self._restart(worker, job, f"no reply within {backstop:.0f} s", counted="timeouts")
                return _Attempt(Verdict("timeout", timeout_message, worker_restarted=True), queued, ran())
            except WorkerDied as exc:
                self._restart(worker, job, str(exc), counted="crashes")
                return _Attempt(Verdict("crash", str(exc), worker_restarted=True), queued, ran())
            except ProtocolViolation as exc:
                self._restart(worker, job, f"protocol violation: {exc}")
                return _Attempt(Verdict("runtime_error", f"protocol violation: {exc}", worker_restarted=True), queued,
                                ran())
            if reply.fatal:
                self._restart(worker, job, reply.restart_reason or "the worker asked for it")
            kind = (reply.evaluation.get("verdict") or {}).get("kind")
            if kind in ("timeout", "crash"):
                self._count("timeouts" if kind == "timeout" else "crashes")
            self.contained = reply.contained or self.contained
            attempt = _Attempt(reply, queued, ran())
            retire = (self.gated and not job.alone and not reply.fatal and out_of_memory(attempt.verdict)
                      and self._retire(worker))
            return dataclasses.replace(attempt, retired=retire)
        finally:
            with self._stats_lock:
                self._in_flight[worker.device].discard(number)
            if not retire:
                self._idle.put(worker)
            self._recall(worker.device)

    def _retire(self, worker: WorkerProcess) -> bool:
        """Take `worker` out of service until every job in flight on its GPU now has ended, where
        its GPU keeps at least half its workers: a job ran out of GPU memory beside others there.
        Its processes end, so their contexts and caches go back now. Why: on an H100 (2026-12-06),
        `bench check` of GEAK-eval's references with 12 workers ran the GPU out of memory again and
        again, and each job judged again alone drained the whole pool for its 30-150 s; with a
        worker fewer, the retry and the jobs after it find room beside the others. Not for the
        rest of the run (`_recall`): six retirements in 45 s, beside jobs of 100-250 s, left the
        pool at half its workers and the CPU 60% idle for the remaining 4.5 minutes (an H100,
        2026-12-06); what filled the memory was those jobs, and they end."""
        with self._stats_lock:
            if self._closing or self._serving[worker.device] <= self._serving_floor[worker.device]:
                return False
            self._serving[worker.device] -= 1
            left = self._serving[worker.device]
            self.stats.retired += 1
            self._benched.append((worker, max(self._in_flight[worker.device], default=0)))
            self._last_change[worker.device] = time.monotonic()
        worker.closed = True
        worker.kill()
        log.warning("a judge worker retired after running out of GPU memory beside other jobs: %d left on %s",
                    left, worker.device or "the CPU")
        return True

    def _recall(self, device: str | None) -> None:
        """Put back into service the workers `_retire` took off `device` once no job that was in
        flight there at their retirement still runs (a job started since does not hold them back),
        or one of them at a time where the GPU has `RECALL_FREE_MIB` free and nothing was retired
        or recalled there for `RECALL_SPACING_S`: on an H100 (2026-12-06) one job of 250 s beside
        the retirements kept six workers out for the rest of a GEAK-eval check while 30-58 GB of
        the GPU's 80 stood free. The worker starts in the background, as after a restart."""
        with self._stats_lock:
            if self._closing:
                return
            running = self._in_flight[device]
            benched = [(w, last) for w, last in self._benched if w.device == device]
            back = [(w, last) for w, last in benched if not any(n <= last for n in running)]
            ask_memory = bool(benched) and not back and self._spaced(device)
        free = device_free_mib(device, self.target.vendor) if ask_memory else None
        with self._stats_lock:
            if self._closing:
                return
            roomy = free is not None and free >= RECALL_FREE_MIB and self._spaced(device)
            if roomy:  # the spacing again: another job's end may have recalled one since
                back = [e for e in self._benched if e[0].device == device][:1]
            back = [e for e in back if e in self._benched]  # none recalled twice by two jobs' ends
            for entry in back:
                self._benched.remove(entry)
                self._serving[device] += 1
                self.stats.recalled += 1
                entry[0].closed = False  # under the lock `close` marks the pool closing with, so it ends this one
            if back:
                self._last_change[device] = time.monotonic()
            serving = self._serving[device]
        if back:  # one line for those that come back together (four at once on an H100, 2026-12-06)
            why = (f"{free} MiB of the GPU free" if roomy else
                   f"the jobs beside which {'it was' if len(back) == 1 else 'they were'} retired having ended")
            log.warning("%s back in service, %s: %d on %s",
                        "a retired judge worker" if len(back) == 1 else f"{len(back)} retired judge workers",
                        why, serving, device or "the CPU")
        for worker, _ in back:
            self._start_in_background(worker)
            self._idle.put(worker)

    def _spaced(self, device: str | None) -> bool:
        """`RECALL_SPACING_S` since the last retirement or recall on `device` (under the lock)."""
        return time.monotonic() - self._last_change.get(device, float("-inf")) >= RECALL_SPACING_S

    def _run_job_retried(self, job: Job, limit: float,
                         timeout_message: str) -> tuple[JobReply | Verdict, dict[str, float], float]:
        """`_run_job`, and once more when the first attempt may not be the candidate's doing: a
        GPU out-of-memory error (other workers' jobs may have held the memory: judged again alone;
        where its worker was retired, `_retire`, first judged again beside the others, and alone
        only if that runs out too; with `defer_alone`, handed back instead of alone), or the
        judge's own GPU context failing (a CUDA error is raised at the context's
        next synchronisation, which can be a later job's: on an H100, TritonBench-revised
        context_attn_llama's reference got "illegal memory access" 2.5 s into its job beside 12
        workers, and passed in three runs with fresh workers; judged again on a restarted worker).
        The second verdict stands.
        Returns the reply, the pool's phases, `queue` (both waits) and `retry` (the lost attempt's
        seconds), and the seconds the worker had the attempt that stands (`_with_other`)."""
        attempt = self._run_job(job, limit, timeout_message)
        reply, first = attempt.reply, attempt.verdict
        queued, lost = attempt.queued, attempt.ran
        judge_failed = isinstance(reply, JobReply) and reply.fatal and reply.restart_reason == DEVICE_ERROR
        what = f"{job.kind} on {job.task} ({job.case_set if not job.tests_job else 'tests'})"
        if judge_failed:
            self._count("device_retries")
            log.warning("%s: the judge's own GPU context failed (%s); judged again on a restarted worker",
                        what, first.message[:200])
            again = job
        elif self.gated and not job.alone and out_of_memory(first):
            if attempt.retired:  # a worker fewer now: judged again beside the others first
                self._count("oom_retries")
                log.warning("%s: out of GPU memory beside other jobs (%s); judged again with a worker fewer", what,
                            first.message[:200])
                attempt = self._run_job(job, limit, timeout_message)
                queued += attempt.queued
                if not out_of_memory(attempt.verdict):
                    return attempt.reply, {"queue": queued, "retry": lost}, attempt.ran
                lost += attempt.ran
            if self.defer_alone:  # the caller judges it again once the other jobs are done
                self._count("oom_deferred")
                log.warning("%s: out of GPU memory beside other jobs (%s); to be judged again after the rest", what,
                            first.message[:200])
                return attempt.reply, {"queue": queued, "retry": lost - attempt.ran}, attempt.ran
            self._count("oom_retries")
            log.warning("%s: out of GPU memory beside other jobs (%s); judged again alone", what, first.message[:200])
            again = job.with_(alone=True)
        else:
            return reply, {"queue": queued}, attempt.ran
        last = self._run_job(again, limit, timeout_message)
        return last.reply, {"queue": queued + last.queued, "retry": lost}, last.ran

    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool = False,
                 timing_policy: TimingPolicy | None = None, timeout: float | None = None,
                 compile_through: str = "") -> Evaluation:
        policy = timing_policy or TimingPolicy()
        job = Job(task_id, source, case_set=case_set, timing=timing, timing_policy=policy.to_json(),
                  sanitize=self.sanitize, compile_through=compile_through)
        limit = timeout or self.job_timeout
        short = timing and policy.protocol == FEEDBACK_SHORT and not self.target.interpreter
        with self.references.first_of(task_id) if short else contextlib.nullcontext(False) as first:
            if short:
                job = job.with_(references=tuple(self.references.of(task_id)), prime_references=bool(first))
            reply, pool_phases, ran = self._run_job_retried(job, limit,
                                                             f"no verdict within {limit:.0f} s; worker restarted")
            if not isinstance(reply, Verdict):
                self.references.keep(list(reply.references))
        if isinstance(reply, Verdict):
            return Evaluation(reply, phases=_with_other(pool_phases, {}, ran))
        evaluation = Evaluation.from_json(reply.evaluation)
        if reply.fatal and not evaluation.verdict.worker_restarted:
            evaluation = dataclasses.replace(evaluation, verdict=dataclasses.replace(evaluation.verdict,
                                                                                     worker_restarted=True))
        return dataclasses.replace(evaluation, phases=_with_other(pool_phases, evaluation.phases or {}, ran))

    def run_tests(self, task_id: str, source: str, tests: str, timeout: float | None = None,
                  per_test_timeout: float | None = None) -> InternalTestReport:
        """A method's own unit tests against a candidate (job kind "internal_tests", see
        judge/candidate/internal_tests.py); returns an InternalTestReport. A worker that times out,
        dies or breaks the protocol gives the report that verdict, as `evaluate` does."""
        job = Job(task_id, source, kind=JOB_KIND, tests=tests, per_test_timeout=per_test_timeout or DEFAULT_TEST_TIMEOUT_S)
        limit = timeout or self.job_timeout
        reply, pool_phases, ran = self._run_job_retried(job, limit, f"the tests did not finish within {limit:.0f} s")
        if isinstance(reply, Verdict):
            return InternalTestReport(reply, phases=_with_other(pool_phases, {}, ran))
        report = InternalTestReport.from_json(reply.evaluation)
        return dataclasses.replace(report, phases=_with_other(pool_phases, report.phases or {}, ran))

    def _restart(self, worker: WorkerProcess, job: Job, why: str, counted: str = "") -> None:
        """Kill now; start the replacement in the background so its imports overlap; `counted`:
        the failure it is counted as (`PoolStats` field). The log (run.log in a run) says why:
        a worker out of service while it restarts costs a full run seconds of capacity, and a
        full-suite GPU run once counted restarts with no reason kept. Nothing, neither counted nor
        restarted, for a worker the pool has closed or aborted: a stopping run killed its job."""
        if worker.closed:
            return
        if counted:
            self._count(counted)
        self._count("restarts")
        log.warning("judge worker restarted after a job (%s) of %s: %s", job.kind, job.task, why[:500])
        worker.kill()
        self._start_in_background(worker)

    @staticmethod
    def _start_in_background(worker: WorkerProcess) -> None:
        """Start `worker` on a thread of its own, so its imports overlap the jobs running."""

        def start() -> None:
            try:
                worker.ensure_started()
            except WorkerStartError:
                pass  # raised again, with its message, when the worker is next used

        threading.Thread(target=start, daemon=True).start()

    def abort(self) -> None:
        """Kill every worker now, without waiting for the jobs they are running (those end as
        WorkerDied at once): for a run that is stopping. `close` still cleans up after it."""
        with self._stats_lock:
            self._closing = True
        if self.ahead is not None:
            self.ahead.close()
        for w in self._all:
            w.closed = True
            proc = w.proc
            if proc is not None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def close(self) -> None:
        """Stop every worker and remove the pool's folder; the pool's counts go to the log
        (run.log in a run), where a slow run's restarts and retries can be read."""
        with self._stats_lock:
            self._closing = True
        if self.ahead is not None:
            self.ahead.close()
        for w in self._all:
            with w._lock:
                w.closed = True
                w.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)
        s = self.stats
        log.info("pool closed: %d jobs, %d worker restarts, %d timeouts, %d crashes, %d out-of-memory retries, "
                 "%d retries after the judge's device error, %d workers retired (%d back in service), %d jobs left "
                 "to judge after the rest", s.jobs, s.restarts, s.timeouts, s.crashes, s.oom_retries,
                 s.device_retries, s.retired, s.recalled, s.oom_deferred)

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
