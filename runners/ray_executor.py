"""The `ray` executor: the local pool's work spread over a Ray cluster (optional extra `cluster`).

Same interface as `LocalPool` (`evaluate(task_id, source, case_set, timing, timing_policy,
timeout) -> Evaluation`, thread-safe and blocking per call), so the evaluator and the
scheduler cannot tell them apart. Each unit of Ray work is an actor that runs one sandboxed
judge worker through a one-worker `LocalPool` for as long as it lives: the pool inside it keeps
every guarantee of the local executor (scrubbed environment, time limits, restarts after
crashes and device errors). Actors rather than one Ray task per candidate, because a task per
candidate would pay the torch and triton import on every candidate, the very cost persistent
workers exist to avoid.

The same two lanes as the local pool. *Judging actors* take the untimed jobs (import, compile,
correctness), in parallel; *one timing actor per GPU* takes the timed ones (a final
submission's correctness, then its timing). On a GPU every actor holds a fraction of one GPU
(`1 / (judging actors per GPU + 1)`), and all actors Ray placed on the same GPU of a node share
that GPU's fair gate (judge/gate.py, a folder in the node's temporary directory named by this
executor and the GPU's id): judging holds it shared, a measurement alone and in ticket order.
Wherever Ray places the actors, no judging job can disturb a measurement on its GPU; two timing
actors Ray happened to put on one GPU take turns there. On the CPU interpreter nothing is timed,
so there are only judging actors, unless `lanes_on_cpu` asks for the lanes there too (tests).

Ray itself is imported lazily: without the extra installed, only constructing a
`RayExecutor` fails, with an install hint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import queue
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from judge.candidate.internal_tests import InternalTestReport
from judge.candidate.verdict import Evaluation, Verdict
from judge.device import Target
from judge.policy import TimingPolicy

PROJECT_ROOT = Path(__file__).resolve().parent.parent
JUDGING, TIMING = "judging", "timing"


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError("the ray executor needs Ray: pip install 'kernel-method-compare[cluster]' "
                          "(or pip install 'ray>=2.9')") from None
    return ray


def gate_folder(token: str, device: str) -> Path:
    """The fair gate of one GPU (or of the CPU, for `lanes_on_cpu`) on this node, for the actors
    of the executor named by `token`."""
    return Path(tempfile.gettempdir()) / f"kmc-gates-{token}" / f"gate-{device}"


class _EvalActor:
    """Lives in a Ray worker process; owns one sandboxed evaluation worker, in one lane."""

    def __init__(self, target_json: dict[str, Any], job_timeout: float, startup_timeout: float,
                 task_sources: tuple[str, ...] = (), role: str = JUDGING, gate_token: str | None = None,
                 clocks_locked: bool = False, sanitize: bool = False, unsandboxed: bool = False) -> None:
        from runners.pool import LocalPool, visible_devices

        target = Target(**{**target_json, "device_count": 0 if target_json["interpreter"] else 1})
        self.role = role
        devices = visible_devices(target)  # the GPU Ray gave this actor (it set *_VISIBLE_DEVICES)
        self.gate = gate_folder(gate_token, devices[0] if devices else "cpu") if gate_token else None
        self.pool = LocalPool(target, workers=1, job_timeout=job_timeout, startup_timeout=startup_timeout,
                              task_sources=task_sources, gate_on_cpu=self.gate is not None, gate_folder=self.gate,
                              clocks_locked=clocks_locked, sanitize=sanitize, unsandboxed=unsandboxed)

    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool,
                 timing_policy: dict[str, Any] | None, timeout: float | None,
                 compile_through: str = "") -> dict[str, Any]:
        policy = TimingPolicy.from_json(timing_policy) if timing_policy is not None else None
        return self.pool.evaluate(task_id, source, case_set, timing, policy, timeout, compile_through).to_json()

    def run_tests(self, task_id: str, source: str, tests: str, timeout: float | None,
                  per_test_timeout: float | None) -> dict[str, Any]:
        return self.pool.run_tests(task_id, source, tests, timeout, per_test_timeout).to_json()

    def stats(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self.pool.stats), "role": self.role, "gate": str(self.gate or "")}

    def close(self) -> None:
        self.pool.close()
        if self.gate is not None and not any(p.name != "counter" for p in self.gate.glob("*")):
            with contextlib.suppress(OSError):  # nobody inside: the gate goes (another actor recreates it)
                shutil.rmtree(self.gate)
                self.gate.parent.rmdir()


def _queued(record: Any, queued: float) -> Any:
    """An evaluation or test report with the seconds it waited for an actor added to its queue phase."""
    phases = dict(record.phases or {})
    phases["queue"] = phases.get("queue", 0.0) + queued
    return dataclasses.replace(record, phases=phases)


class RayExecutor:
    """Evaluate candidates on Ray actors: judging actors, and one timing actor per GPU."""

    def __init__(self, target: Target, actors: int | None = None, address: str | None = None,
                 job_timeout: float | None = None, startup_timeout: float = 300.0,
                 ray_init_kwargs: dict[str, Any] | None = None, task_sources: list[str] | tuple[str, ...] = (),
                 timing_actors: int | None = None, lanes_on_cpu: bool = False, clocks_locked: bool = False,
                 sanitize: bool = False, unsandboxed: bool = False) -> None:
        """`actors`: judging actors (default: per GPU, the cluster's CPUs per GPU less one for
        the timer; on the interpreter, its CPUs less the timing actors). `timing_actors`: one per
        GPU by default (on the interpreter none, or one with `lanes_on_cpu`). `clocks_locked` and
        `sanitize` and `unsandboxed`: as the local pool's (the clocks are locked by whoever runs
        the nodes; each actor's pool probes its node for the sandbox)."""
        ray = _import_ray()
        self._ray = ray
        self.target = target
        self.task_sources = tuple(task_sources)  # each actor's worker loads them (the paths must exist there)
        self.job_timeout = job_timeout or (600.0 if target.interpreter else 180.0)
        self.startup_timeout = startup_timeout
        self.clocks_locked, self.sanitize, self.unsandboxed = clocks_locked, sanitize, unsandboxed
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
        cpus, gpus = max(1, int(resources.get("CPU", 1))), int(resources.get("GPU", 0))
        self.lanes = not target.interpreter or lanes_on_cpu
        self._gate_token = secrets.token_hex(6) if self.lanes else None
        if target.interpreter:
            timers = (timing_actors if timing_actors is not None else 1) if lanes_on_cpu else 0
            judging = actors if actors is not None else max(1, cpus - timers)
            why = f"{cpus} CPU(s) in the cluster" + (f", {timers} for the timing lane" if timers else "")
            share = 0.0
        else:
            if gpus < 1:
                raise RuntimeError("the Ray cluster has no GPU for a GPU target (start it with GPUs, or use --device cpu)")
            timers = timing_actors if timing_actors is not None else gpus
            judging = actors if actors is not None else gpus * max(1, cpus // gpus - 1)
            share = 1.0 / (math.ceil(judging / gpus) + math.ceil(timers / gpus))
            why = (f"{cpus} CPU(s) and {gpus} GPU(s) in the cluster: {judging} judging actor(s) and {timers} timing "
                   f"actor(s), each holding {share:.3g} of a GPU")
        if judging < 1:
            raise RuntimeError(f"the Ray executor needs at least 1 judging actor, got {judging}")
        self._layout = {"kind": "ray", "workers": judging, "timing_lanes": timers,
                        "chosen": "given" if actors is not None else "default", "why": why}
        self._options = {"num_cpus": 1, "num_gpus": share}
        self._actor_cls = ray.remote(_EvalActor)
        self._idle: dict[str, queue.Queue[Any]] = {JUDGING: queue.Queue(), TIMING: queue.Queue()}
        self._all: list[tuple[str, Any]] = []
        self._lock = threading.Lock()
        for role, count in ((JUDGING, judging), (TIMING, timers)):
            for _ in range(count):
                actor = self._new_actor(role)
                self._all.append((role, actor))
                self._idle[role].put(actor)

    @property
    def size(self) -> int:
        return len(self._all)

    def layout(self) -> dict[str, Any]:
        return dict(self._layout)

    def _new_actor(self, role: str) -> Any:
        return self._actor_cls.options(**self._options).remote(
            self.target.to_json(), self.job_timeout, self.startup_timeout, self.task_sources, role, self._gate_token,
            self.clocks_locked, self.sanitize, self.unsandboxed)

    def warm_up(self) -> None:
        """Nothing to do: the actors start their workers when they are created."""

    def _call(self, role: str, limit: float, call: Callable[[Any], Any]) -> tuple[dict[str, Any] | Verdict, float]:
        """One call on an idle actor of the lane: its JSON reply, or the verdict its failure earns,
        and the seconds it waited for the actor. The pool inside the actor enforces `limit`; the
        margin covers a worker restart. Past it the actor itself is stuck, and is replaced."""
        ray = self._ray
        asked = time.perf_counter()
        actor = self._idle[role].get()
        queued = time.perf_counter() - asked
        try:
            try:
                result: dict[str, Any] = ray.get(call(actor), timeout=limit + self.startup_timeout + 30)
                return result, queued
            except ray.exceptions.GetTimeoutError:
                actor = self._replace(role, actor)
                return Verdict("timeout", f"the Ray actor gave no verdict within {limit:.0f} s; replaced",
                               worker_restarted=True), queued
            except ray.exceptions.RayActorError as exc:
                actor = self._replace(role, actor)
                return Verdict("crash", f"the Ray actor died: {str(exc)[:500]}", worker_restarted=True), queued
        finally:
            self._idle[role].put(actor)

    def _lane(self, timing: bool) -> str:
        """Timed jobs go to the timing lane (where there is one); everything else is judging."""
        return TIMING if timing and self.lanes and self._layout["timing_lanes"] else JUDGING

    def evaluate(self, task_id: str, source: str, case_set: str, timing: bool = False,
                 timing_policy: TimingPolicy | None = None, timeout: float | None = None,
                 compile_through: str = "") -> Evaluation:
        limit = timeout or self.job_timeout
        policy = timing_policy.to_json() if timing_policy is not None else None
        reply, queued = self._call(self._lane(timing), limit,
                                   lambda a: a.evaluate.remote(task_id, source, case_set, timing, policy, limit,
                                                               compile_through))
        if isinstance(reply, Verdict):
            return Evaluation(reply, phases={"queue": queued})
        return _queued(Evaluation.from_json(reply), queued)

    def run_tests(self, task_id: str, source: str, tests: str, timeout: float | None = None,
                  per_test_timeout: float | None = None) -> InternalTestReport:
        limit = timeout or self.job_timeout
        reply, queued = self._call(JUDGING, limit,
                                   lambda a: a.run_tests.remote(task_id, source, tests, limit, per_test_timeout))
        if isinstance(reply, Verdict):
            return InternalTestReport(reply, phases={"queue": queued})
        return _queued(InternalTestReport.from_json(reply), queued)

    def abort(self) -> None:
        """Kill every actor now: in-flight calls end as RayActorError and earn a crash verdict."""
        for _, actor in list(self._all):
            self._ray.kill(actor, no_restart=True)

    def _replace(self, role: str, actor: Any) -> Any:
        self._ray.kill(actor, no_restart=True)
        fresh = self._new_actor(role)
        with self._lock:
            self._all = [(r, fresh if a is actor else a) for r, a in self._all]
        return fresh

    def stats(self) -> list[dict[str, Any]]:
        """Per actor, judging first: its pool's counts, its lane (`role`) and its gate folder."""
        return self._ray.get([a.stats.remote() for _, a in self._all])

    def close(self) -> None:
        ray = self._ray
        for _, actor in self._all:
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
