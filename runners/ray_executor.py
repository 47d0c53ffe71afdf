"""The `ray` executor: the local pool's work spread over a Ray cluster (optional extra `cluster`).

Same interface as `LocalPool` (`evaluate(task_id, source, case_set, timing, timing_policy,
timeout) -> Evaluation`, thread-safe and blocking per call), so the evaluator and the
scheduler cannot tell them apart. Each unit of Ray work is an actor that holds
`num_gpus=1` (or `num_cpus=1` on the CPU interpreter) for as long as it lives and runs one
sandboxed worker process through a one-worker `LocalPool`: Ray places it and sets
CUDA_VISIBLE_DEVICES, the pool inside it keeps every guarantee of the local executor
(scrubbed environment, time limits, restarts after crashes and device errors). Actors
rather than one Ray task per candidate, because a task per candidate would pay the torch
and triton import on every candidate, the very cost persistent workers exist to avoid.

Ray itself is imported lazily: without the extra installed, only constructing a
`RayExecutor` fails, with an install hint.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from judge.device import Target
from judge.internal_tests import InternalTestReport
from judge.policy import TimingPolicy
from judge.verdict import Evaluation, Verdict

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError("the ray executor needs Ray: pip install 'kernel-method-compare[cluster]' "
                          "(or pip install 'ray>=2.9')") from None
    return ray


class _EvalActor:
    """Lives in a Ray worker process; owns one sandboxed evaluation worker."""

    def __init__(self, target_json: dict[str, Any], job_timeout: float, startup_timeout: float,
                 task_sources: tuple[str, ...] = ()) -> None:
        from runners.pool import LocalPool

        target = Target(**{**target_json, "device_count": 0 if target_json["interpreter"] else 1})
        self.pool = LocalPool(target, workers=1, job_timeout=job_timeout, startup_timeout=startup_timeout,
                              task_sources=task_sources)

    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool,
                 timing_policy: dict[str, Any] | None, timeout: float | None) -> dict[str, Any]:
        policy = TimingPolicy.from_json(timing_policy) if timing_policy is not None else None
        return self.pool.evaluate(task_id, source, case_set, timing, policy, timeout).to_json()

    def run_tests(self, task_id: str, source: str, tests: str, timeout: float | None,
                  per_test_timeout: float | None) -> dict[str, Any]:
        return self.pool.run_tests(task_id, source, tests, timeout, per_test_timeout).to_json()

    def stats(self) -> dict[str, int]:
        return dataclasses.asdict(self.pool.stats)

    def close(self) -> None:
        self.pool.close()


class RayExecutor:
    """Evaluate candidates on Ray actors, one GPU (or one CPU) each."""

    def __init__(self, target: Target, actors: int | None = None, address: str | None = None,
                 job_timeout: float | None = None, startup_timeout: float = 300.0,
                 ray_init_kwargs: dict[str, Any] | None = None, task_sources: list[str] | tuple[str, ...] = ()) -> None:
        ray = _import_ray()
        self._ray = ray
        self.target = target
        self.task_sources = tuple(task_sources)  # each actor's worker loads them (the paths must exist there)
        self.job_timeout = job_timeout or (600.0 if target.interpreter else 180.0)
        self.startup_timeout = startup_timeout
        self._started_ray = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"address": address, "include_dashboard": False, "log_to_driver": False}
            if address is None:
                # A local instance: its workers must import this checkout. On a real cluster the
                # package is installed on every node instead.
                kwargs["runtime_env"] = {"env_vars": {"PYTHONPATH": str(PROJECT_ROOT)}}
            kwargs.update(ray_init_kwargs or {})
            ray.init(**kwargs)
            self._started_ray = True
        resources = ray.cluster_resources()
        if actors is None:
            actors = int(resources.get("GPU", 0)) if not target.interpreter else max(1, int(resources.get("CPU", 1)) // 2)
        if actors < 1:
            raise RuntimeError("the Ray cluster has no GPU for a GPU target (start it with GPUs, or use --device cpu)")
        options = {"num_cpus": 1, "num_gpus": 0} if target.interpreter else {"num_cpus": 1, "num_gpus": 1}
        self._actor_cls = ray.remote(**options)(_EvalActor)
        self._idle: queue.Queue[Any] = queue.Queue()
        self._all: list[Any] = []
        self._lock = threading.Lock()
        for _ in range(actors):
            actor = self._new_actor()
            self._all.append(actor)
            self._idle.put(actor)

    @property
    def size(self) -> int:
        return len(self._all)

    def _new_actor(self) -> Any:
        return self._actor_cls.remote(self.target.to_json(), self.job_timeout, self.startup_timeout,
                                      self.task_sources)

    def warm_up(self) -> None:
        """Nothing to do: the actors start their workers when they are created."""

    def _call(self, limit: float, call: Callable[[Any], Any]) -> dict[str, Any] | Verdict:
        """One call on an idle actor: its JSON reply, or the verdict its failure earns. The
        pool inside the actor enforces `limit`; the margin covers a worker restart. Past it
        the actor itself is stuck, and is replaced."""
        ray = self._ray
        actor = self._idle.get()
        try:
            try:
                result: dict[str, Any] = ray.get(call(actor), timeout=limit + self.startup_timeout + 30)
                return result
            except ray.exceptions.GetTimeoutError:
                actor = self._replace(actor)
                return Verdict("timeout", f"the Ray actor gave no verdict within {limit:.0f} s; replaced",
                               worker_restarted=True)
            except ray.exceptions.RayActorError as exc:
                actor = self._replace(actor)
                return Verdict("crash", f"the Ray actor died: {str(exc)[:500]}", worker_restarted=True)
        finally:
            self._idle.put(actor)

    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool = False,
                 timing_policy: TimingPolicy | None = None, timeout: float | None = None) -> Evaluation:
        limit = timeout or self.job_timeout
        policy = timing_policy.to_json() if timing_policy is not None else None
        reply = self._call(limit, lambda a: a.evaluate.remote(task_id, source, case_set, timing, policy, limit))
        return Evaluation(reply) if isinstance(reply, Verdict) else Evaluation.from_json(reply)

    def run_tests(self, task_id: str, source: str, tests: str, timeout: float | None = None,
                  per_test_timeout: float | None = None) -> InternalTestReport:
        limit = timeout or self.job_timeout
        reply = self._call(limit, lambda a: a.run_tests.remote(task_id, source, tests, limit, per_test_timeout))
        return InternalTestReport(reply) if isinstance(reply, Verdict) else InternalTestReport.from_json(reply)

    def abort(self) -> None:
        """Kill every actor now: in-flight calls end as RayActorError and earn a crash verdict."""
        for actor in list(self._all):
            self._ray.kill(actor, no_restart=True)

    def _replace(self, actor: Any) -> Any:
        self._ray.kill(actor, no_restart=True)
        fresh = self._new_actor()
        with self._lock:
            self._all = [fresh if a is actor else a for a in self._all]
        return fresh

    def stats(self) -> list[dict[str, int]]:
        return self._ray.get([a.stats.remote() for a in self._all])

    def close(self) -> None:
        ray = self._ray
        for actor in self._all:
            try:
                ray.get(actor.close.remote(), timeout=60)
            except Exception:  # noqa: BLE001 - closing is best effort; the kill below ends it anyway
                pass
            ray.kill(actor, no_restart=True)
        self._all = []
        if self._started_ray:
            ray.shutdown()

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
