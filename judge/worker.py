"""Worker process: `python -m judge.worker`. Imports torch and triton once, then judges
candidates sent as JSON lines, one at a time.

The parent owns every limit (time, restarts); the worker only has to be honest about what
it saw. The protocol runs on private duplicates of the original stdin and stdout: fd 0 is
pointed at /dev/null and fd 1 at stderr, so a candidate that prints or reads stdin cannot
corrupt or steal the conversation, and every reply carries the job's nonce, so a forged
line written to the reply channel is recognised by the parent. Each candidate is written
to its own temporary directory, which is also the working directory while it runs.

A reply asks for a restart (`fatal`) when the process can no longer be trusted: a device
error (illegal memory access poisons the CUDA context), a candidate that tampered with the
judge or a library, or one that left a thread running behind it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

GPU_LOCK_ENV = "KMC_GPU_LOCK"
THREADS_ENV = "KMC_TORCH_THREADS"
INPUT_CACHE_ENV = "KMC_INPUT_CACHE_MB"  # device memory kept for cached case inputs and reference outputs

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


@contextlib.contextmanager
def gpu_gate(exclusive: bool) -> Iterator[None]:
    """Several workers may share one GPU so compilation overlaps with execution; timing
    takes the GPU alone (exclusive lock) while correctness runs share it (shared lock)."""
    path = os.environ.get(GPU_LOCK_ENV)
    if not path:
        yield
        return
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def physical_device() -> int | str:
    """The device this worker is bound to, as NVML/amdsmi number it (they ignore
    CUDA_VISIBLE_DEVICES, so index 0 inside the worker is not index 0 for them)."""
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        value = os.environ.get(var, "").split(",")[0].strip()
        if value:
            return int(value) if value.isdigit() else value
    return 0


def _reset_timers() -> None:
    """A candidate's `signal.alarm` must not fire during the next candidate's job."""
    signal.alarm(0)
    for timer in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF):
        signal.setitimer(timer, 0)
    for sig in (signal.SIGALRM, signal.SIGVTALRM, signal.SIGPROF, signal.SIGTERM, signal.SIGINT, signal.SIGUSR1,
                signal.SIGUSR2):
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)


def _library_thread(t: threading.Thread) -> bool:
    """A thread torch or triton started for itself (a compile pool, say) may outlive a job;
    one running candidate code, or a bare builtin such as `os._exit` on a timer, may not."""
    target = getattr(t, "_target", None) or getattr(t, "function", None)
    code = getattr(target, "__code__", None)
    filename = code.co_filename.replace(os.sep, "/") if code is not None else ""
    return "-packages/" in filename and "kmc-worker-" not in filename


class Worker:
    def __init__(self, task_sources: list[str] | tuple[str, ...] = ()) -> None:
        import torch

        threads = int(os.environ.get(THREADS_ENV, "0") or 0)
        if threads > 0:
            # Interpreter workers share few cores; torch's default thread pool then spins
            # against itself and the other workers (measured: 300x slower small ops).
            torch.set_num_threads(threads)
        # Importing torch._dynamo replaces torch.manual_seed with a wrapped one; suite code that
        # imports it later (torch.compile, ...) would read as tampering. Settle it before the snapshot.
        import torch._dynamo  # noqa: F401
        import triton  # noqa: F401 - import once, up front: that is the point of a persistent worker

        import bench.registry
        import judge.timing  # noqa: F401 - imported before the integrity snapshot is taken
        from judge.device import detect_target
        from judge.oracle import judge_cases, load_module, prepare_process, set_input_cache_bytes
        from judge.privileges import drop_privileges_if_asked
        from judge.sandbox import IntegritySnapshot, default_namespaces, install_process_guards

        self.target = detect_target()  # TRITON_INTERPRET=1 in this worker's environment: the interpreter
        bench.registry.load_sources(task_sources, self.target.vendor)  # the run's sources, as the parent loaded them
        self.device = "cpu" if self.target.interpreter else "cuda"
        prepare_process()
        default_mb = 256 if self.target.interpreter else 4096
        set_input_cache_bytes(int(os.environ.get(INPUT_CACHE_ENV, default_mb)) << 20)
        drop_privileges_if_asked()  # after the imports (root may own them), before any candidate code
        install_process_guards()
        # Bound now, so a candidate replacing the module attributes later cannot swap them.
        self._judge = judge_cases
        self._load_module = load_module
        self._check = IntegritySnapshot(default_namespaces()).check
        self.tmp = Path(tempfile.mkdtemp(prefix="kmc-worker-"))
        os.chdir(self.tmp)
        self.baselines: dict[str, Any] = {}
        self.counter = 0

    def _tampered(self) -> str:
        report = self._check()
        return report.message() if report else ""

    def _load(self, source: str, stem: str, folder: Path, prefix: str = "kmc_candidate") -> Any:
        self.counter += 1
        path = folder / f"{stem}.py"
        path.write_text(source)
        return self._load_module(path, f"{prefix}_{os.getpid()}_{self.counter}")

    def _baseline(self, task: Any) -> Any:
        if task.id not in self.baselines:
            folder = Path(tempfile.mkdtemp(prefix=f"baseline-{task.id}-", dir=self.tmp))
            module = self._load(task.baseline_source(), f"baseline_{task.id}", folder, prefix="kmc_baseline")
            self.baselines[task.id] = getattr(module, task.entry_point)
        return self.baselines[task.id]

    def handle(self, job: dict[str, Any]) -> dict[str, Any]:
        from judge.phases import PhaseClock
        from judge.verdict import Evaluation

        self.clock = PhaseClock()  # seconds per phase of this job, sent back with the evaluation
        folder = Path(tempfile.mkdtemp(prefix="cand-", dir=self.tmp))
        threads_before = set(threading.enumerate())
        modules_before = set(sys.modules)
        os.chdir(folder)
        tests: list[dict[str, Any]] | None = None
        try:
            if job.get("kind") == "internal_tests":
                verdict, tests, restart = self._internal_tests_job(job, folder)
                timing = None
            else:
                verdict, timing, restart = self._judge_job(job, folder)
        finally:
            os.chdir(self.tmp)
            shutil.rmtree(folder, ignore_errors=True)
            for name in set(sys.modules) - modules_before:
                if name.startswith("kmc_candidate_"):
                    sys.modules.pop(name, None)
            _reset_timers()
        leftover = [t for t in set(threading.enumerate()) - threads_before if t.is_alive() and not _library_thread(t)]
        if leftover and not restart:
            restart = f"the candidate left {len(leftover)} thread(s) running"
        tampered = self._tampered()
        evaluation: dict[str, Any]
        if tampered:
            # Built by hand: the record classes' own serialisers may be what was replaced.
            restart = "tampering"
            evaluation = {"verdict": {"kind": "runtime_error", "message": tampered, "worker_restarted": True},
                          "timing": None}
        else:
            evaluation = Evaluation(verdict, timing, dict(self.clock.seconds)).to_json()
            if tests is not None:
                evaluation["tests"] = tests
        return {"id": job["id"], "nonce": job.get("nonce"), "evaluation": evaluation, "fatal": bool(restart),
                "restart_reason": restart}

    def _judge_job(self, job: dict[str, Any], folder: Path) -> tuple[Any, Any, str]:
        from bench.registry import get_task
        from judge.oracle import CandidateLoadError, format_exception, is_device_error, mentions_device_error
        from judge.steady import steady_verdict
        from judge.timing import TimingPolicy, time_candidate
        from judge.verdict import Verdict, missing_entry_point

        task = get_task(job["task"])
        cases = task.cases(job["case_set"], self.target.interpreter)
        timing = None
        restart = ""
        try:
            with self.clock("compile"):
                module = self._load(job["source"], f"candidate_{task.id}", folder)
            tampered = self._tampered()
            entry = getattr(module, task.entry_point, None)
            if tampered:
                verdict, restart = Verdict("runtime_error", f"at import: {tampered}"), "tampering"
            elif not callable(entry):
                verdict = missing_entry_point(task.entry_point, module)
            else:
                with gpu_gate(exclusive=False), self.clock("correctness"):
                    verdict = self._judge(task, entry, cases, self.device, self.target.interpreter,
                                          integrity=self._tampered)
                    verdict = steady_verdict(verdict, lambda name: self._judge_alone(task, entry, cases, name),
                                             self.device)
                if verdict.correct and job.get("timing") and not self.target.interpreter:
                    with self.clock("timing"):  # the perf-case check, then the timing protocol
                        verdict, timing = self._time(task, entry, verdict, job, TimingPolicy, time_candidate)
        except CandidateLoadError as exc:
            verdict = Verdict(exc.kind, str(exc))
        except Exception as exc:  # noqa: BLE001 - a failure inside timing is still a verdict
            verdict = Verdict("runtime_error", f"during timing: {format_exception(exc)}")
            if is_device_error(exc):
                restart = "device error"
        if verdict.kind == "runtime_error" and mentions_device_error(verdict.message):
            restart = "device error"
        if verdict.kind == "runtime_error" and "altered the evaluator" in verdict.message:
            restart = "tampering"
        return verdict, timing, restart

    def _judge_alone(self, task: Any, entry: Any, cases: Any, name: str) -> Any:
        """The named case judged again on its own (judge/steady.py); None when it is not one of `cases`."""
        chosen = tuple(c for c in cases if name == c.name or name.startswith(c.name + "+"))
        return self._judge(task, entry, chosen, self.device, self.target.interpreter,
                           integrity=self._tampered) if chosen else None

    def _internal_tests_job(self, job: dict[str, Any], folder: Path) -> tuple[Any, list[dict[str, Any]], str]:
        """A method's own unit tests (Reflexion) against the candidate: judge/internal_tests.py."""
        from dataclasses import asdict

        from bench.registry import get_task
        from judge.internal_tests import DEFAULT_TEST_TIMEOUT_S, judge_internal_tests
        from judge.oracle import CandidateLoadError, mentions_device_error
        from judge.verdict import Verdict

        task = get_task(job["task"])
        try:
            with self.clock("compile"):
                module = self._load(job["source"], f"candidate_{task.id}", folder)
        except CandidateLoadError as exc:
            return Verdict(exc.kind, str(exc)), [], ""
        tampered = self._tampered()
        if tampered:
            return Verdict("runtime_error", f"at import: {tampered}"), [], "tampering"
        with gpu_gate(exclusive=False), self.clock("correctness"):
            report = judge_internal_tests(module, task.entry_point, job["tests"], self.device,
                                          job.get("per_test_timeout", DEFAULT_TEST_TIMEOUT_S))
        restart = "device error" if any(mentions_device_error(t.message) for t in report.tests) else ""
        return report.verdict, [asdict(t) for t in report.tests], restart

    def _time(self, task: Any, entry: Any, verdict: Any, job: dict[str, Any], policy_cls: Any,
              time_candidate: Any) -> tuple[Any, Any]:
        """Check the timing cases first (they are larger than the hidden ones), then time
        candidate, expert baseline and eager PyTorch interleaved, alone on the GPU."""
        import dataclasses

        from judge.timing import OutputChangedDuringTiming
        from judge.verdict import Verdict

        with gpu_gate(exclusive=False):
            perf_verdict = self._judge(task, entry, task.perf, self.device, False, integrity=self._tampered)
        if not perf_verdict.correct:
            return dataclasses.replace(perf_verdict, message=f"on a timing case: {perf_verdict.message}",
                                       cases_run=verdict.cases_run), None
        policy = policy_cls.from_json(job.get("timing_policy"))
        baseline = self._baseline(task)
        try:
            with gpu_gate(exclusive=True):
                timing = time_candidate(task, entry, baseline, task.perf, self.target.vendor, physical_device(), policy)
        except OutputChangedDuringTiming as exc:
            return Verdict("wrong_result", str(exc), exc.case, cases_run=verdict.cases_run,
                           kernel_launched=True), None
        return verdict, timing

    def close(self) -> None:
        os.chdir("/")
        shutil.rmtree(self.tmp, ignore_errors=True)


def _task_sources(argv: list[str]) -> list[str]:
    """`--task-source ADAPTER:PATH`, repeatable: the run's task sources (runners/pool.py)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m judge.worker")
    parser.add_argument("--task-source", action="append", default=[])
    return list(parser.parse_args(argv).task_source)


def main() -> None:
    task_sources = _task_sources(sys.argv[1:])
    inp, out = _protocol_streams()
    worker = Worker(task_sources)
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
            text = _dumps(worker.handle(message))
            last_digest = _sha256(text.encode()).hexdigest()
            exit_after_confirm = _loads(text)["fatal"]
            out.write(text + "\n")
    finally:
        worker.close()


if __name__ == "__main__":
    main()
