"""New shapes probed in a process of their own, once per run.

To find an adapted task's new shapes the adapter runs the suite's reference on perturbed
sizes (geak_record.py `_find_shapes`) and keeps those where it runs and answers the same
twice. On a GPU some references fault on a perturbed size (an unmasked load past a tensor
they assume is a multiple of their block): the fault ends the CUDA context of the process
that ran the probe, which was the judge's worker, so the whole task failed (seen on an H200:
TritonBench-revised matmul_kernel, decay_cumsum, chunk_gla_fwd). A fault there says only
that the reference does not run on that size, which is what a probe asks.

The suite's perf inputs are probed the same way (decay_cumsum faulted at its perf script's
32x8x256x128). So on a GPU the probes run in a child process (`python -m bench.adapters.shape_probe`),
which reports each shape before trying it and its outcome after. When the child dies, or
reports a fault, the shape it was trying is recorded as rejected and a fresh child goes on
from there with every decision so far, skipping what is decided. The worker then walks the
same search with the decisions alone (the search is a pure function of the recorded calls
and the decisions), so it never runs a probe itself. The worker starts the children as a job
that needs them begins, and records the suite's calls and perf inputs while they probe
(geak_record.py `GeakSuite.start_ahead`; `AHEAD_ENV`=0 waits idle, for A/B measurement).

A probe that runs longer than `PROBE_LIMIT_S` is stopped and its shape rejected as well:
a wrapper that sizes its block from the input (`next_power_of_2(N)`) compiles a huge tile at
the large perturbation, which took minutes per shape on an H200 (bgmv_expand_slice,
bgmv_shrink_kernel, chunk_retention_ops, fused_recurrent_delta never finished a check), and
every candidate would pay the same for that case within its own time limit. Probing as a
whole stops after `PROBING_BUDGET_S` (the shapes not decided by then are left out): it is
the judge's work inside a job, and the job's backstop (runners/pool.py) restarted the worker
of two such references at 90 s per probe. Both make the kept shapes depend on the machine's
speed for references that slow, so the notes say so; within a run they cannot split the
workers, because the decisions are taken once.

The decisions are a file in the run's probe folder (`PROBE_DIR_ENV`, set by the pool), keyed
by the file's code and test: every worker of a run judges the same new shapes, and only the
first to need them pays for the probes (the others wait on a lock beside the file, so two
workers never take their own, possibly different, decisions).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pickle
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.orphan_watch import end_when_orphaned
from bench.thread_share import take_thread_share

PROBE_IN_CHILD_ENV = "KMC_PROBE_IN_CHILD"  # "1" always, "0" never; unset: on a GPU only
PROBE_DIR_ENV = "KMC_PROBE_DIR"  # where a run keeps its decisions (runners/pool.py)
AHEAD_ENV = "KMC_PROBE_AHEAD"  # "0": the worker waits for its children idle, then records (A/B measurement)
PROFILE_ENV = "KMC_PROBE_CPROFILE"  # a folder: each probing child's cProfile summary there (`_profiled`)
CHILD_TIMEOUT_S = 300.0  # until the child's first report: loading the suite and recording its calls
PROBE_LIMIT_S = 30.0  # from each report to the next: one probe (a compile, an autotune, two runs)
PROBING_BUDGET_S = 150.0  # every child's probes together; what is not decided by then is left out
MAX_CHILDREN = 12  # a fresh child per fault; a reference faulting on more shapes than this keeps what was decided
PROBING_WALL_S = max(CHILD_TIMEOUT_S, PROBING_BUDGET_S) + 30.0
"""The longest a task's probing can hold up the job that needed it: the first child's start
(later children start within the budget), or the budget, and the last child's end. The pool
(runners/pool.py) allows this much more to a worker's first job of an adapted task."""

TRY, RUNS, REJECTED, DONE = "try", "runs", "rejected", "done"
TOO_LONG = "the probe ran over"
OVER_BUDGET = "probing stopped after"
MARK = "kmc-shape-probe:"  # starts every line the child reports: the suite's own prints share its stdout


def in_child(interpreter: bool) -> bool:
    """Whether probes run in a child process here: on a GPU unless told otherwise."""
    told = os.environ.get(PROBE_IN_CHILD_ENV, "")
    return told == "1" if told in ("0", "1") else not interpreter


def works_ahead() -> bool:
    """Whether a worker starts its probing children as a job begins and records its perf inputs
    while they probe (geak_record.py `GeakSuite.start_ahead`): on unless `AHEAD_ENV` is "0"."""
    return os.environ.get(AHEAD_ENV, "") != "0"


def decision_file(key_text: str) -> Path | None:
    folder = os.environ.get(PROBE_DIR_ENV)
    if not folder:
        return None
    return Path(folder) / (hashlib.sha256(key_text.encode()).hexdigest()[:32] + ".json")


def decide_in_children(suite_state: tuple, key_text: str,
                       run_child: Callable[[bytes, float, bool], tuple[str, str, int]] | None = None
                       ) -> tuple[dict[str, bool], list[str]]:
    """Every probe decision for the suite whose state (`GeakSuite.probe_state()`) is given, made
    in child processes; with the run's decision file when there is one. Returns (decisions
    keyed by shape, notes on shapes that faulted or ran too long). RuntimeError when a child
    fails before its first probe (the reference cannot even be recorded there)."""
    stored = decision_file(key_text)
    with _held(stored):
        saved = _read_decisions(stored)
        if saved is not None:
            return saved
        decisions, notes = _probe_in_children(suite_state, run_child or _run_child)
        if stored is not None:
            fd, partial = tempfile.mkstemp(dir=stored.parent, suffix=".partial")
            with os.fdopen(fd, "w") as f:
                json.dump({"decisions": decisions, "notes": notes}, f)
            os.replace(partial, stored)
    return decisions, notes


@contextlib.contextmanager
def _held(stored: Path | None) -> Iterator[None]:
    """The run's lock on one decision file: a second worker waits for the first's decisions."""
    if stored is None:
        yield
        return
    stored.parent.mkdir(parents=True, exist_ok=True)
    with open(stored.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _read_decisions(stored: Path | None) -> tuple[dict[str, bool], list[str]] | None:
    if stored is None or not stored.exists():
        return None
    try:
        saved = json.loads(stored.read_text())
        return {str(k): bool(v) for k, v in saved["decisions"].items()}, list(saved.get("notes", []))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a file cut short: probe again


def _probe_in_children(suite_state: tuple, run: Callable[[bytes, float, bool], tuple[str, str, int]]
                       ) -> tuple[dict[str, bool], list[str]]:
    decisions: dict[str, bool] = {}
    notes: list[str] = []
    budget_ends = time.monotonic() + PROBING_BUDGET_S
    for child in range(MAX_CHILDREN):
        out, err, code = run(pickle.dumps((suite_state, decisions)), budget_ends, child == 0)
        pending = None
        finished = False
        before = len(decisions)
        for line in out.splitlines():
            if not line.startswith(MARK):
                continue  # the suite's test printing (nested_loops_processing prints its tensors)
            word, _, rest = line.removeprefix(MARK).partition(" ")
            if word == TRY:
                pending = rest
            elif word in (RUNS, REJECTED):
                decisions[rest] = word == RUNS
                pending = None
            elif word == DONE:
                finished = True
        if finished and code == 0:
            break
        tail = _ending(err, code)
        if pending is not None:
            decisions[pending] = False
            if tail.startswith(TOO_LONG):
                notes.append(f"{pending}: {tail[:200]}; a slower machine may keep fewer shapes")
            elif not tail.startswith(OVER_BUDGET):
                notes.append(f"{pending}: the reference ended its process there ({tail[:200]})")
        elif len(decisions) == before and not tail.startswith(OVER_BUDGET):
            raise RuntimeError(f"the shape probe ended before its first probe: {tail[:300]}")
        # else: it died between two probes, after deciding some: a fresh child goes on from there
        if tail.startswith(OVER_BUDGET):
            notes.append(f"{tail}: the shapes not decided by then are left out; a slower machine may keep fewer")
            break
    return decisions, notes


_ROOT = Path(__file__).resolve().parent.parent.parent
_EXCEPTION_HEAD = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Fault)\b")


def _ending(err: str, code: int) -> str:
    """Why a child ended, in one line: the stop the parent appended (`_run_child`), else the
    last exception's header with whatever of its message followed it, else stderr's last line.
    Stderr's last line alone was ")" for a child that ran out of GPU memory beside 12 workers
    (an H100, 2026-12-06: torch's message ends in a parenthesised link), so the task's verdict
    did not say "out of memory" and the pool did not judge it again alone (runners/pool.py)."""
    lines = [line.strip() for line in err.strip().splitlines() if line.strip()]
    if not lines:
        return f"exit status {code}"
    if lines[-1].startswith((TOO_LONG, OVER_BUDGET, "no answer within")):
        return lines[-1]
    heads = [i for i, line in enumerate(lines) if _EXCEPTION_HEAD.match(line)]
    return " ".join(lines[heads[-1]:])[:500] if heads else lines[-1]


def _run_child(payload: bytes, budget_ends: float, first: bool = True) -> tuple[str, str, int]:
    """(stdout, stderr, exit status) of one probing child, stopped (status -9, the reason as
    stderr's last line) when it reports nothing for `CHILD_TIMEOUT_S` before its first report
    or `PROBE_LIMIT_S` after any later one, or is still probing (or, unless it is the `first`
    child, still starting) at `budget_ends` (monotonic seconds). The child leads its own process
    group, so the compilers a probe started go with it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(_ROOT), os.environ.get("PYTHONPATH", ""))
                                                        if p)}
    with tempfile.TemporaryFile() as err_file:
        child = subprocess.Popen([sys.executable, "-m", "bench.adapters.shape_probe"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=err_file, env=env, cwd=str(_ROOT),
                                 start_new_session=True)
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_pump, args=(child.stdout, lines), daemon=True).start()
        assert child.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            child.stdin.write(payload)
            child.stdin.close()
        out: list[str] = []
        stopped = ""
        reported = False
        while True:
            left = budget_ends - time.monotonic()
            limit = PROBE_LIMIT_S if reported else CHILD_TIMEOUT_S
            # Only the first child's start-up may outlast the budget: a reference that faults at
            # every shape must not cost a whole start-up allowance per child.
            over_budget = (reported or not first) and left < limit
            wait = max(0.0, left) if over_budget else limit
            try:
                line = lines.get(timeout=wait)
            except queue.Empty:
                stopped = (f"{OVER_BUDGET} {PROBING_BUDGET_S:.0f} s" if over_budget
                           else f"{TOO_LONG} {PROBE_LIMIT_S:.0f} s and was stopped" if reported
                           else f"no answer within {CHILD_TIMEOUT_S:.0f} s")
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.pid, signal.SIGKILL)
                break
            if line is None:
                break
            out.append(line)
            reported = reported or line.startswith(MARK)
        code = child.wait()
        err_file.seek(0)
        err = err_file.read().decode(errors="replace")
    if stopped:
        return "".join(out), f"{err}\n{stopped}", -9
    return "".join(out), err, code


def _pump(stream: object, lines: queue.Queue[str | None]) -> None:
    for raw in stream:  # type: ignore[attr-defined]
        lines.put(raw.decode(errors="replace"))
    lines.put(None)


def _child_main() -> int:
    # A child leads a session of its own (its compilers go with it when stopped), so a worker
    # killed mid-probe took nothing of it along: it probed on for up to PROBE_LIMIT_S, on the GPU.
    end_when_orphaned()
    with _profiled(os.environ.get(PROFILE_ENV, "")):
        take_thread_share()  # beside a dozen workers and their children, not every core
        from bench.adapters.geak_record import GeakSuite

        state, decisions = pickle.loads(sys.stdin.buffer.read())

        def report(word: str, shape: str) -> None:
            print(f"{MARK}{word} {shape}", flush=True)

        suite = GeakSuite.from_probe_state(state)
        suite.probe_here(decisions, report)
    print(f"{MARK}{DONE}", flush=True)
    os._exit(0)  # a suite's threads or a dead context must not hold the exit up


@contextlib.contextmanager
def _profiled(folder: str, top: int = 30) -> Iterator[None]:
    """The child's imports and probes under cProfile, their costliest functions written to
    `folder` (`PROFILE_ENV`, set by scripts/reference_diagnose.py --cprofile): the worker that
    waits for a child sees only the wait."""
    if not folder:
        yield
        return
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        with contextlib.suppress(OSError):
            Path(folder, f"probe-{os.getpid()}.txt").write_text(profile_summary(profiler, top))


def profile_summary(profiler: Any, top: int) -> str:
    """A cProfile run's `top` costliest functions, by cumulative and by own time, one per line
    (capped at 220 characters): this child's and scripts/reference_diagnose.py's own."""
    import io
    import pstats

    text = io.StringIO()
    for order in ("cumulative", "tottime"):
        pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(top)
    # Who sleeps: on an H100 (2026-12-06) a probing child's main thread slept 11 times, 2.1 s of
    # its 12.7, and the summary above named no caller.
    pstats.Stats(profiler, stream=text).print_callers(r"\{built-in method time\.sleep\}")
    return "\n".join(line[:220] for line in text.getvalue().splitlines() if line.strip())


if __name__ == "__main__":
    sys.exit(_child_main())
