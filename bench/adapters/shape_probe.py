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
and the decisions), so it never runs a probe itself.

The decisions are a file in the run's probe folder (`PROBE_DIR_ENV`, set by the pool), keyed
by the file's code and test: every worker of a run judges the same new shapes, and only the
first to need them pays for the probes.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

PROBE_IN_CHILD_ENV = "KMC_PROBE_IN_CHILD"  # "1" always, "0" never; unset: on a GPU only
PROBE_DIR_ENV = "KMC_PROBE_DIR"  # where a run keeps its decisions (runners/pool.py)
CHILD_TIMEOUT_S = 300.0
MAX_CHILDREN = 12  # a fresh child per fault; a reference faulting on more shapes than this keeps what was decided

TRY, RUNS, REJECTED, DONE = "try", "runs", "rejected", "done"
MARK = "kmc-shape-probe:"  # starts every line the child reports: the suite's own prints share its stdout


def in_child(interpreter: bool) -> bool:
    """Whether probes run in a child process here: on a GPU unless told otherwise."""
    told = os.environ.get(PROBE_IN_CHILD_ENV, "")
    return told == "1" if told in ("0", "1") else not interpreter


def decision_file(key_text: str) -> Path | None:
    folder = os.environ.get(PROBE_DIR_ENV)
    if not folder:
        return None
    return Path(folder) / (hashlib.sha256(key_text.encode()).hexdigest()[:32] + ".json")


def decide_in_children(suite_state: tuple, key_text: str,
                       run_child: Callable[[bytes], tuple[str, str, int]] | None = None) -> tuple[dict[str, bool], list[str]]:
    """Every probe decision for the suite whose state (`GeakSuite.probe_state()`) is given, made
    in child processes; with the run's decision file when there is one. Returns (decisions
    keyed by shape, notes on shapes that faulted). RuntimeError when a child fails before
    its first probe (the reference cannot even be recorded there)."""
    stored = decision_file(key_text)
    if stored is not None and stored.exists():
        try:
            saved = json.loads(stored.read_text())
            return {str(k): bool(v) for k, v in saved["decisions"].items()}, list(saved.get("notes", []))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a file cut short: probe again
    run = run_child or _run_child
    decisions: dict[str, bool] = {}
    notes: list[str] = []
    for _ in range(MAX_CHILDREN):
        out, err, code = run(pickle.dumps((suite_state, decisions)))
        pending = None
        finished = False
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
        tail = (err.strip().splitlines() or [f"exit status {code}"])[-1]
        if pending is None:
            raise RuntimeError(f"the shape probe ended before its first probe: {tail[:300]}")
        decisions[pending] = False
        notes.append(f"{pending}: the reference ended its process there ({tail[:200]})")
    if stored is not None:
        stored.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(dir=stored.parent, suffix=".partial")
        with os.fdopen(fd, "w") as f:
            json.dump({"decisions": decisions, "notes": notes}, f)
        os.replace(partial, stored)
    return decisions, notes


_ROOT = Path(__file__).resolve().parent.parent.parent


def _run_child(payload: bytes) -> tuple[str, str, int]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(_ROOT), os.environ.get("PYTHONPATH", ""))
                                                        if p)}
    try:
        done = subprocess.run([sys.executable, "-m", "bench.adapters.shape_probe"], input=payload,
                              capture_output=True, timeout=CHILD_TIMEOUT_S, env=env, cwd=str(_ROOT))
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        return out, f"no answer within {CHILD_TIMEOUT_S:.0f} s", -9
    return done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"), done.returncode


def _child_main() -> int:
    from bench.adapters.geak_record import GeakSuite

    state, decisions = pickle.loads(sys.stdin.buffer.read())

    def report(word: str, shape: str) -> None:
        print(f"{MARK}{word} {shape}", flush=True)

    suite = GeakSuite.from_probe_state(state)
    suite.probe_here(decisions, report)
    print(f"{MARK}{DONE}", flush=True)
    os._exit(0)  # a suite's threads or a dead context must not hold the exit up


if __name__ == "__main__":
    sys.exit(_child_main())
