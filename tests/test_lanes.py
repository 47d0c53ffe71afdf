"""The two lanes of the local pool: how many judging workers (chosen from cores, GPU memory and
host memory, and recorded with why), a GPU out-of-memory verdict judged again alone, and on
the CPU interpreter, with the gate the GPU's workers share and a fake timer holding it:
judging waits behind a timer, a job retried alone waits for the GPU to itself."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.registry import get_task
from judge.candidate.verdict import Verdict
from judge.device import Target
from judge.gate import FairGate
from judge.job import DEVICE_ERROR, Job, JobReply
from runners.pool import LocalPool, out_of_memory
from runners.sizing import GPU_MIB_PER_WORKER, HOST_MIB_PER_WORKER, MAX_WORKERS_PER_GPU, plan_workers

CPU = Target("cpu", True, "Triton CPU interpreter", 0)
GPU = Target("nvidia", False, "NVIDIA H200", 2)


# ---------------------------------------------------------------------------- worker counts
def test_interpreter_workers_follow_the_cores_and_host_memory() -> None:
    plan = plan_workers(CPU, [], cores=16, host_mib=64 * 1024)
    assert (plan.workers, plan.timing_lanes, plan.chosen) == (16, 0, "default")
    assert "16 usable core(s)" in plan.why
    tight = plan_workers(CPU, [], cores=16, host_mib=3 * HOST_MIB_PER_WORKER)
    assert tight.workers == 3 and "host memory allows 3" in tight.why


def test_gpu_workers_are_bounded_by_cores_and_free_memory_per_device() -> None:
    roomy = plan_workers(GPU, ["0"], cores=16, free_mib={"0": 140_000}, host_mib=None)
    assert (roomy.workers, roomy.per_device, roomy.timing_lanes) == (MAX_WORKERS_PER_GPU, {"0": MAX_WORKERS_PER_GPU}, 1)
    assert f"at most {MAX_WORKERS_PER_GPU} per GPU" in roomy.why
    cramped = plan_workers(GPU, ["0", "1"], cores=16, free_mib={"0": 2 * GPU_MIB_PER_WORKER, "1": 100_000},
                           host_mib=None)
    assert cramped.per_device == {"0": 2, "1": MAX_WORKERS_PER_GPU} and cramped.timing_lanes == 2
    assert "GPU 0: 8 by cores, 2 by free memory" in cramped.why
    assert cramped.input_cache_mib is not None and cramped.input_cache_mib <= 4096
    unknown = plan_workers(GPU, ["0"], cores=3, free_mib={"0": None}, host_mib=None)
    assert unknown.workers == 3 and "free memory unknown" in unknown.why


def test_a_given_count_is_kept_spread_over_the_gpus_and_told_against_the_default() -> None:
    plan = plan_workers(GPU, ["0", "1"], 5, cores=16, free_mib={"0": 140_000, "1": 140_000}, host_mib=None)
    assert (plan.workers, plan.per_device, plan.chosen) == (5, {"0": 3, "1": 2}, "given")
    assert plan.why.startswith("16 usable core(s) over 2 GPU(s); given; the machine would choose 8")
    one = plan_workers(GPU, ["0", "1"], 1, cores=16, free_mib={"0": 140_000, "1": 140_000}, host_mib=None)
    assert one.per_device == {"0": 1} and one.timing_lanes == 1


def test_the_pool_takes_its_plan_and_reports_its_layout() -> None:
    with LocalPool(CPU) as pool:  # nothing starts until a job or warm_up
        layout = pool.layout()
        assert layout["kind"] == "local" and layout["workers"] == pool.size >= 1
        assert layout["chosen"] == "default" and "usable core" in layout["why"]
    with LocalPool(CPU, workers=3) as pool:
        assert pool.size == 3 and pool.layout()["chosen"] == "given"
    with pytest.raises(ValueError, match="at least 1 worker"):
        LocalPool(CPU, workers=0)


# ---------------------------------------------------------------------------- out of memory
def test_out_of_memory_verdicts_are_told_apart() -> None:
    assert out_of_memory(Verdict("runtime_error", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"))
    assert out_of_memory(Verdict("runtime_error", "the judge could not judge this candidate: "
                                                  "RuntimeError: CUDA error: out of memory"))
    assert not out_of_memory(Verdict("compile_error", "triton.runtime.errors.OutOfResources: out of resource: "
                                                      "shared memory, Required: 262144"))
    assert not out_of_memory(Verdict("wrong_result", "max |out - expected| = 3"))


def test_a_long_out_of_memory_message_keeps_what_makes_it_one() -> None:
    """PyTorch's message lists every process on the GPU (seen on an H200 with 12 judging
    workers: thousands of characters); the judge's verdict text kept only its tail, so the
    pool never recognised it and never retried the job alone."""
    from judge.candidate.loading import format_exception

    processes = " ".join(f"Process {1800 + i} has {i}.00 GiB memory in use." for i in range(200))
    exc = RuntimeError(f"CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
                       f"139.80 GiB of which 193.69 MiB is free. {processes} Of the allocated memory ...")
    text = format_exception(exc)
    assert len(text) <= 2000 and text.endswith("Of the allocated memory ...")
    assert out_of_memory(Verdict("runtime_error", f"the judge could not judge this candidate: {text}"))
    assert format_exception(RuntimeError("short")) == "RuntimeError: short"


class ScriptedWorker:
    """Stands in for a judge worker: answers each job from a script and keeps the jobs."""

    device = None  # a CPU pool's workers

    def __init__(self, verdicts: list[Verdict]) -> None:
        self.verdicts = list(verdicts)
        self.jobs: list[Job] = []
        self._lock = threading.Lock()
        self.closed = False
        self.judged: set[str] = set()
        self.measures: list[dict[str, Any]] = []  # reference timings its next replies bring back, one each

    def run(self, job: Job, timeout: float) -> JobReply:
        self.jobs.append(job)
        time.sleep(0.05)
        verdict = self.verdicts.pop(0)
        measured = (self.measures.pop(0),) if self.measures else ()
        return JobReply(job.id, job.nonce, {"verdict": verdict.to_json(), "timing": None,
                                            "phases": {"correctness": 0.01}}, references=measured)

    def kill(self) -> None:
        pass

    def ensure_started(self) -> None:
        pass


def scripted_pool(verdicts: list[Verdict], gated: bool = True) -> tuple[LocalPool, ScriptedWorker]:
    pool = LocalPool(CPU, workers=1, gate_on_cpu=gated)
    worker = ScriptedWorker(verdicts)
    pool._all = [worker]  # type: ignore[list-item]
    pool._idle.get_nowait()
    pool._idle.put(worker)  # type: ignore[arg-type]
    return pool, worker


def test_the_workers_time_beyond_its_named_phases_is_the_phase_other() -> None:
    """The scripted worker names 0.01 s of correctness and takes at least 0.05 s: the rest is
    `other`, so a job's phases add up to the seconds the worker had it."""
    pool, _ = scripted_pool([Verdict("correct", ""), Verdict("correct", "")])
    with pool:
        evaluation = pool.evaluate("vector_add", "src", "visible")
        report = pool.run_tests("vector_add", "src", "def test_a():\n    pass\n")
    for phases in (evaluation.phases, report.phases):
        assert phases is not None and phases["correctness"] == 0.01
        assert 0.035 <= phases["other"] < 5.0


def test_a_worker_restart_is_logged_with_its_reason(caplog: pytest.LogCaptureFixture) -> None:
    pool, worker = scripted_pool([Verdict("runtime_error", "the judge could not judge this candidate")])
    real_run = worker.run

    def fatal(job: Job, timeout: float) -> JobReply:
        return dataclasses.replace(real_run(job, timeout), fatal=True, restart_reason="the worker asked for it")

    worker.run = fatal  # type: ignore[method-assign]
    with caplog.at_level("INFO", logger="kmc.pool"), pool:
        pool.evaluate("softmax", "src", "hidden")
    assert "judge worker restarted after a job (evaluation) of softmax: the worker asked for it" in caplog.text
    assert "1 worker restarts" in caplog.text and len(worker.jobs) == 1


def test_a_job_whose_judge_lost_its_gpu_context_is_judged_again_on_a_restarted_worker(
        caplog: pytest.LogCaptureFixture) -> None:
    """A CUDA error surfaces at the context's next synchronisation, maybe in a later job than the
    work that caused it: the first verdict is not yet the candidate's. The second one stands."""
    lost = Verdict("runtime_error", "the judge could not judge this candidate: torch.AcceleratorError: CUDA error: "
                   "an illegal memory access was encountered")
    for second, restarts in ((Verdict("correct", ""), 1), (lost, 2)):
        pool, worker = scripted_pool([lost, second])

        def failing_first(job: Job, timeout: float, real_run: Any = worker.run) -> JobReply:
            reply = real_run(job, timeout)
            judged = Verdict.from_json(reply.evaluation["verdict"])
            return dataclasses.replace(reply, fatal=True, restart_reason=DEVICE_ERROR) if judged.kind != "correct" \
                else reply

        worker.run = failing_first  # type: ignore[method-assign]
        with caplog.at_level("INFO", logger="kmc.pool"), pool:
            evaluation = pool.evaluate("softmax", "src", "hidden")
        assert evaluation.verdict.kind == second.kind and len(worker.jobs) == 2
        assert [job.alone for job in worker.jobs] == [False, False]
        assert evaluation.phases is not None and "retry" in evaluation.phases
        assert pool.stats.device_retries == 1 and pool.stats.restarts == restarts
    assert "the judge's own GPU context failed" in caplog.text
    assert "1 retries after the judge's device error" in caplog.text

    pool, worker = scripted_pool([lost, Verdict("correct", "")])  # no restart asked for: the verdict stands
    with pool:
        assert pool.evaluate("softmax", "src", "hidden").verdict.kind == "runtime_error"
    assert len(worker.jobs) == 1 and pool.stats.device_retries == 0


def test_an_out_of_memory_verdict_is_judged_again_alone_and_recorded(caplog: pytest.LogCaptureFixture) -> None:
    oom = Verdict("runtime_error", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB")
    pool, worker = scripted_pool([oom, Verdict("correct", "")])
    with caplog.at_level("INFO", logger="kmc.pool"), pool:
        evaluation = pool.evaluate("vector_add", "src", "visible")
    assert "pool closed: 2 jobs, 0 worker restarts, 0 timeouts, 0 crashes, 1 out-of-memory retries, 0 retries" in caplog.text
    assert evaluation.verdict.kind == "correct"
    assert [job.alone for job in worker.jobs] == [False, True]
    assert evaluation.phases is not None and evaluation.phases["retry"] >= 0.05
    assert pool.stats.oom_retries == 1

    pool, worker = scripted_pool([oom, oom])  # out of memory alone too: now it is the candidate's verdict
    with pool:
        again = pool.run_tests("vector_add", "src", "def test_a():\n    pass\n")
    assert again.verdict.kind == "runtime_error" and len(worker.jobs) == 2
    assert again.phases is not None and "retry" in again.phases

    pool, worker = scripted_pool([oom], gated=False)  # no GPU shared, no neighbours: nothing to retry
    with pool:
        assert pool.evaluate("vector_add", "src", "visible").verdict.kind == "runtime_error"
    assert len(worker.jobs) == 1 and pool.stats.oom_retries == 0


class BlockingWorker(ScriptedWorker):
    """A worker whose jobs run until released: a long job beside the others (a GEAK-eval
    reference's 100-250 s), in flight while they run out of memory."""

    def __init__(self) -> None:
        super().__init__([Verdict("correct", "")] * 4)
        self.started, self.release = threading.Event(), threading.Event()

    def run(self, job: Job, timeout: float) -> JobReply:
        self.started.set()
        self.release.wait(30)
        return super().run(job, timeout)


@contextlib.contextmanager
def a_long_job_beside(pool: LocalPool, blocker: BlockingWorker) -> Iterator[None]:
    """`blocker` (first in the pool's idle queue) judging a job until the block ends."""
    thread = threading.Thread(target=pool.evaluate, args=("softmax", "src", "hidden"), daemon=True)
    thread.start()
    assert blocker.started.wait(10)
    try:
        yield
    finally:
        blocker.release.set()
        thread.join(10)


def scripted_workers(scripts: list[list[Verdict]], shrink_on_oom: bool = True,
                     blocker: BlockingWorker | None = None) -> tuple[LocalPool, list[ScriptedWorker]]:
    """A gated pool of scripted workers, taken in order while each is idle (`blocker` first)."""
    pool = LocalPool(CPU, workers=len(scripts) + (blocker is not None), gate_on_cpu=True,
                     shrink_on_oom=shrink_on_oom)
    workers = [ScriptedWorker(v) for v in scripts]
    if blocker is not None:
        workers.insert(0, blocker)
    pool._all = workers  # type: ignore[assignment]
    while not pool._idle.empty():
        pool._idle.get_nowait()
    for w in workers:
        pool._idle.put(w)  # type: ignore[arg-type]
    return pool, workers[1:] if blocker is not None else workers


def test_a_job_out_of_memory_beside_others_retires_its_worker_and_is_judged_again_beside_the_rest(
        caplog: pytest.LogCaptureFixture) -> None:
    """Each job judged again alone drains the whole pool for its length (GEAK-eval references:
    30-150 s each, an H100 with 12 workers, 2026-12-06); with a worker fewer, the retry first
    goes beside the others. The retired worker takes no more jobs until the jobs in flight beside
    it have ended (a long job here); then it is back in service."""
    oom = Verdict("runtime_error", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB")
    ok = Verdict("correct", "")
    blocker = BlockingWorker()
    pool, (w0, w1, w2) = scripted_workers([[oom, ok], [ok, ok], [ok, ok]], blocker=blocker)
    with caplog.at_level("INFO", logger="kmc.pool"), pool:
        with a_long_job_beside(pool, blocker):
            assert pool.evaluate("vector_add", "src", "visible").verdict.kind == "correct"
            assert pool.evaluate("vector_add", "src", "visible").verdict.kind == "correct"
            assert w0.closed and not (w1.closed or w2.closed)  # benched while the long job runs
            assert [j.alone for j in w0.jobs] == [False] and pool.stats.recalled == 0
        assert not w0.closed and pool.stats.recalled == 1  # the long job ended: back in service
        for _ in range(4):  # it takes jobs again (the idle queue's last)
            assert pool.evaluate("vector_add", "src", "visible").verdict.kind == "correct"
        assert len(w0.jobs) == 2
    assert [j.alone for j in w1.jobs + w2.jobs] == [False] * 4
    assert pool.stats.retired == 1 and pool.stats.oom_retries == 1
    assert ("1 out-of-memory retries, 0 retries after the judge's device error, 1 workers retired (1 back in "
            "service)") in caplog.text
    assert "a retired judge worker back in service" in caplog.text

    # Out of memory beside the others again: alone now; the GPU keeps half its workers.
    blocker = BlockingWorker()
    pool, (w0, w1, w2) = scripted_workers([[oom], [oom], [ok, oom, ok]], blocker=blocker)
    with pool, a_long_job_beside(pool, blocker):
        evaluation = pool.evaluate("vector_add", "src", "visible")
        assert w0.closed and w1.closed and not w2.closed  # 2 of 4 left: the floor
        assert pool.evaluate("vector_add", "src", "visible").verdict.kind == "correct"
        assert not w2.closed and pool.stats.retired == 2  # at the floor: not retired, judged again alone
    assert evaluation.verdict.kind == "correct" and [j.alone for j in w2.jobs] == [True, False, True]

    # Nothing in flight beside it (the job that ran out was alone on the GPU's workers): back at once.
    pool, (w0, w1) = scripted_workers([[oom], [ok]])
    with pool:
        assert pool.evaluate("vector_add", "src", "visible").verdict.kind == "correct"
        assert not w0.closed and pool.stats.retired == 1 and pool.stats.recalled == 1

    # A pool of short jobs (compare) keeps its workers: a retry alone drains it for seconds only.
    pool, (w0, w1) = scripted_workers([[oom, ok], [ok]], shrink_on_oom=False)
    with pool:
        assert pool.evaluate("vector_add", "src", "visible").verdict.kind == "correct"
        assert not w0.closed
    assert [j.alone for j in w0.jobs + w1.jobs] == [False, True] and pool.stats.retired == 0
    assert evaluation.phases is not None and evaluation.phases["retry"] >= 0.1  # both lost attempts


def test_a_retired_worker_comes_back_one_at_a_time_once_the_gpu_has_room_though_a_long_job_runs_on(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """On an H100 (2026-12-06) one job of 250 s beside the retirements kept six workers out for
    the rest of a GEAK-eval check while 30-58 GB of the GPU's 80 stood free: memory read through
    NVML brings one back per `RECALL_SPACING_S` where `RECALL_FREE_MIB` are free."""
    import runners.pool as pool_module

    oom = Verdict("runtime_error", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB")
    ok = Verdict("correct", "")
    free = {"mib": pool_module.RECALL_FREE_MIB - 1}
    asked: list[Any] = []
    monkeypatch.setattr(pool_module, "device_free_mib", lambda device, vendor: asked.append(device) or free["mib"])
    monkeypatch.setattr(pool_module, "RECALL_SPACING_S", 0.0)
    blocker = BlockingWorker()
    pool, (w0, w1, w2) = scripted_workers([[oom, ok], [oom, ok], [ok] * 6], blocker=blocker)
    with caplog.at_level("INFO", logger="kmc.pool"), pool:
        with a_long_job_beside(pool, blocker):
            assert pool.evaluate("vector_add", "src", "visible").verdict.kind == "correct"
            assert w0.closed and w1.closed and pool.stats.retired == 2  # the floor: 2 of 4
            assert pool.evaluate("vector_add", "src", "visible").verdict.kind == "correct"
            assert w0.closed and w1.closed and asked  # too little room: both stay out
            free["mib"] = pool_module.RECALL_FREE_MIB
            assert pool.evaluate("vector_add", "src", "visible").verdict.kind == "correct"
            assert pool.stats.recalled == 1 and not w0.closed and w1.closed  # one at a time, the long job still on
            monkeypatch.setattr(pool_module, "RECALL_SPACING_S", 3600.0)
            assert pool.evaluate("vector_add", "src", "visible").verdict.kind == "correct"
            assert pool.stats.recalled == 1 and w1.closed  # not again until the spacing has passed
            assert not blocker.release.is_set()
        assert pool.stats.recalled == 2 and not w1.closed  # the long job ended: the other one back too
    assert f"a retired judge worker back in service, {pool_module.RECALL_FREE_MIB} MiB of the GPU free" in caplog.text


def test_a_cpu_pool_or_a_gpu_without_nvml_reads_no_free_memory() -> None:
    from runners.pool import device_free_mib

    assert device_free_mib(None, "nvidia") is None
    assert device_free_mib("0", "amd") is None  # only the jobs' end recalls there


def test_a_deferring_pool_hands_a_job_out_of_memory_back_instead_of_judging_it_alone() -> None:
    """`bench check` judges such jobs again once the rest are done (runners/check.py): mid-run, a
    retry alone waits for every job in flight and then holds the GPU by itself, idling the pool."""
    oom = Verdict("runtime_error", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB")
    ok = Verdict("correct", "")
    blocker = BlockingWorker()
    pool, (w0, w1, w2) = scripted_workers([[oom], [oom], [ok]], blocker=blocker)
    pool.defer_alone = True
    with pool, a_long_job_beside(pool, blocker):
        handed_back = pool.evaluate("vector_add", "src", "visible")
        assert w0.closed and w1.closed and not w2.closed  # each retired (the floor: 2 of 4), never alone
    assert handed_back.verdict.kind == "runtime_error" and "out of memory" in handed_back.verdict.message
    assert [j.alone for w in (w0, w1, w2) for j in w.jobs] == [False, False]  # never alone
    assert pool.stats.oom_deferred == 1 and pool.stats.oom_retries == 1 and pool.stats.retired == 2
    assert handed_back.phases is not None and handed_back.phases["retry"] >= 0.0

    pool, (w0, w1) = scripted_workers([[oom, ok], [ok]], shrink_on_oom=False)
    pool.defer_alone = False  # the default: judged again alone at once
    with pool:
        assert pool.evaluate("vector_add", "src", "visible").verdict.kind == "correct"
    assert [j.alone for w in (w0, w1) for j in w.jobs] == [False, True] and pool.stats.oom_deferred == 0


def test_feedback_timing_jobs_carry_the_runs_reference_timings_and_bring_new_ones_back() -> None:
    """Through the pool's channel (runners/references.py): the first timed job of a task goes
    alone, carries none and primes them; what its worker measured rides on every later job of that task,
    whichever worker takes it; other tasks' timings stay out; final (full-protocol) jobs carry none."""
    from judge.baselines import BaselineKey, ReferenceTiming, Shared
    from judge.policy import FEEDBACK_SHORT, TimingPolicy

    measured = Shared(BaselineKey("0", "softmax", "perf-0", "boost"),
                      ReferenceTiming((1.0, 1.1), (2.0,), 1, False, "plain")).to_json()
    pool = LocalPool(GPU, workers=2)
    workers = [ScriptedWorker([Verdict("correct", "")] * 4) for _ in range(2)]
    workers[0].measures.append(measured)
    pool._all = workers  # type: ignore[assignment]
    while not pool._idle.empty():
        pool._idle.get_nowait()
    for w in workers:
        pool._idle.put(w)  # type: ignore[arg-type]
    short = TimingPolicy().for_protocol(FEEDBACK_SHORT)
    with pool:
        pool.evaluate("softmax", "a", "visible", timing=True, timing_policy=short)
        threads = [threading.Thread(target=pool.evaluate, args=("softmax", src, "visible"),
                                    kwargs={"timing": True, "timing_policy": short}) for src in ("b", "c")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        pool.evaluate("softmax", "d", "hidden", timing=True)  # final: the full protocol, no cached references
        pool.evaluate("flip", "e", "visible", timing=True, timing_policy=short)
    jobs = sorted((j for w in workers for j in w.jobs), key=lambda j: j.source)
    assert [j.references for j in jobs] == [(), (measured,), (measured,), (), ()]
    # The first timed job of each task primes the references, whatever its verdict turns out to be.
    assert [j.prime_references for j in jobs] == [True, False, False, False, True]
    assert {w.jobs[0].source for w in workers if w.jobs} >= {"a"} and all(w.jobs for w in workers)
    assert len(pool.references) == 1


# ---------------------------------------------------------------------------- lanes through real workers
@pytest.mark.slow
def test_judging_waits_behind_a_timer_and_a_job_alone_waits_for_the_judging(tmp_path: Path) -> None:
    """Interpreter workers sharing one gate, as one GPU's workers do; the test holds the gate
    as a fake timer would, then as a judging job would."""
    expert = get_task("vector_add").baseline_source()
    with LocalPool(CPU, workers=2, gate_on_cpu=True, job_timeout=120) as pool:
        pool.warm_up()
        for _ in range(2):  # both workers started and warm
            assert pool.evaluate("vector_add", expert, "visible").verdict.kind == "correct"
        gate = FairGate(pool.workdir / "gate-cpu")
        results: list[Any] = [None, None]

        def judge(i: int) -> None:
            results[i] = pool.evaluate("vector_add", expert, "visible")

        with gate.enter(exclusive=True):  # the fake timer measures for 3 s
            threads = [threading.Thread(target=judge, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            time.sleep(3.0)
        for t in threads:
            t.join()
        for evaluation in results:
            assert evaluation.verdict.kind == "correct"
            assert evaluation.phases["gate"] >= 1.0  # held back while the timer measured
        free = pool.evaluate("vector_add", expert, "visible")
        assert free.phases["gate"] < 1.0  # no timer: judging goes straight in

        held = threading.Event()

        def judging_job() -> None:  # a judging job on the GPU when the job alone asks
            with gate.enter(exclusive=False):
                held.set()
                time.sleep(2.5)

        other = threading.Thread(target=judging_job)
        other.start()
        held.wait(5)
        reply = pool._run_job(Job("vector_add", expert, case_set="visible", alone=True), 120, "timeout").reply
        other.join()
        assert isinstance(reply, JobReply) and reply.evaluation["verdict"]["kind"] == "correct"
        assert reply.evaluation["phases"]["gate"] >= 1.0


# ---------------------------------------------------------------------------- on a GPU (the lead's runs)
@pytest.mark.gpu
def test_on_a_gpu_the_plan_reads_free_memory_per_device() -> None:
    from judge.device import detect_target
    from runners.pool import visible_devices

    target = detect_target()
    devices = visible_devices(target)
    plan = plan_workers(target, devices)
    assert all(plan.free_gpu_mib[d] is not None for d in devices), plan
    assert plan.timing_lanes == len(devices) and "by free memory" in plan.why


@pytest.mark.gpu
@pytest.mark.slow
def test_on_a_gpu_a_timed_evaluation_beside_busy_judging_is_correct_and_waits_at_the_gate() -> None:
    from judge.device import detect_target

    target = detect_target()
    timed_source = get_task("softmax").baseline_source()
    judged_source = get_task("layer_norm").baseline_source()
    with LocalPool(target, workers=3, job_timeout=300) as pool:
        assert pool.plan.timing_lanes >= 1
        stop, kinds = threading.Event(), []

        def judge() -> None:
            while not stop.is_set():
                kinds.append(pool.evaluate("layer_norm", judged_source, "hidden").verdict.kind)

        threads = [threading.Thread(target=judge) for _ in range(2)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        timed = pool.evaluate("softmax", timed_source, "hidden", timing=True)
        stop.set()
        for t in threads:
            t.join()
    assert timed.verdict.kind == "correct" and timed.timing is not None
    assert timed.phases is not None and "gate" in timed.phases and "timing" in timed.phases
    assert kinds and set(kinds) == {"correct"}


@pytest.mark.slow  # starts processes: a few seconds on 2 cores
def test_jobs_killed_by_a_stopping_run_are_not_counted_as_restarts(caplog: pytest.LogCaptureFixture) -> None:
    """`abort` (Ctrl-C, or a run cut at its time limit) kills the workers under their jobs: those
    end as WorkerDied, but no candidate crashed and no worker is restarted. An H200 run cut at
    its limit had counted and logged every job in flight as a crash and a restart."""
    sleeper = "import time\n\n\ndef vector_add(x, y):\n    time.sleep(60)\n    return x + y\n"
    with caplog.at_level("INFO", logger="kmc.pool"), LocalPool(CPU, workers=1, job_timeout=120.0) as pool:
        pool.warm_up()
        done: list[Any] = []
        thread = threading.Thread(target=lambda: done.append(pool.evaluate("vector_add", sleeper, "visible")))
        thread.start()
        time.sleep(3.0)  # the candidate is asleep in its call
        pool.abort()
        thread.join(30)
    assert done and done[0].verdict.kind == "crash"
    assert pool.stats.jobs == 1 and pool.stats.restarts == 0 and pool.stats.crashes == 0
    assert "restarted" not in caplog.text
