#!/usr/bin/env python
"""Why an adapted suite's reference fails its own hidden cases here: each task in a process of
its own (a fault kills only that one), every step the judge takes timed and printed as it
happens: the case list, the output arguments learnt, each case's inputs (where new shapes are
probed), the reference on them, a second run on fresh inputs (determinism), which returned
tensors the launch recorder sees no kernel write, and the judge's own answer as the oracle
makes it (poisoned and marked allocations, a run with NaN past the inputs). With `--blocking` (CUDA_LAUNCH_BLOCKING=1) a device fault is
reported at the step that caused it. A diagnostic, not a verdict: `bench check` is the verdict.

    python scripts/reference_diagnose.py --source geak-eval:DIR tb-decay_cumsum tb-destindex_copy ...
        [--timeout 90] [--parallel 8] [--blocking] [--case-set hidden] [--cprofile 25]

Like the pool, the tasks share a Triton cache made for this run (unless TRITON_CACHE_DIR is
set), in which the judge's processes keep autotuning choices.

With `--cprofile N` each task's process runs under cProfile and ends with its N costliest
functions by cumulative and by own time: whether a slow task's seconds go to compiling, autotuning,
recording the suite's calls or probing new shapes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.adapters.shape_probe import PROFILE_ENV, profile_summary  # noqa: E402


def _say(started: float, text: str) -> None:
    print(f"[{time.perf_counter() - started:7.2f}s] {text}", flush=True)


def _describe(out: Any) -> str:
    import torch

    from judge.candidate.call_record import flatten

    parts = []
    for path, t in flatten(out):
        if isinstance(t, torch.Tensor):
            parts.append(f"{path}={tuple(t.shape)}:{str(t.dtype).removeprefix('torch.')}"
                         f"{'' if t.is_contiguous() else ':strided'}{':view' if t._base is not None else ''}")
        else:
            parts.append(f"{path}={type(t).__name__}")
    return ", ".join(parts)


def diagnose(task_id: str, case_set: str) -> int:
    """In this process: the judge's steps for one task, each timed; the first failure's
    traceback ends it (exit 1)."""
    import torch

    from bench.registry import get_task, load_sources, resolve_sources
    from judge.candidate import call_record, launches
    from judge.candidate.bit_equality import same_bits
    from judge.device import detect_target

    started = time.perf_counter()
    target = detect_target()
    device = "cpu" if target.interpreter else "cuda"
    step = "loading the task sources"
    try:
        load_sources(resolve_sources(None), target.vendor)  # --source, handed over as $KMC_TASK_SOURCES
        task = get_task(task_id)
        _say(started, "task loaded")
        step = "listing the cases"
        cases = task.cases(case_set, target.interpreter)
        _say(started, f"{len(cases)} {case_set} cases")
        task.start_ahead(cases)  # as a judge worker begins a job: an adapted suite's probing children start now
        launches.install_launch_recorder()
        from judge.reference_habits import expected_and_unwritten

        step = "learning which arguments are outputs (the reference on the recorded calls, poisoned trials)"
        if cases:
            spec = task.output_args(cases[0])
            _say(started, f"output arguments: {spec}")
        for c in cases:
            step = f"{c.name}: making its inputs"
            try:
                args = task.inputs(c, device)
            except Exception as exc:  # noqa: BLE001 - a case the task cannot make (CaseUnavailable) is skipped by the judge too
                _say(started, f"{c.name}: no inputs ({type(exc).__name__}: {str(exc)[:200]})")
                continue
            _say(started, f"{c.name}: inputs ready")
            step = f"{c.name}: the reference"
            with launches.recording(args) as rec:
                out = task.reference(*args)
            if device == "cuda":
                torch.cuda.synchronize()
            missing = call_record.unwritten_outputs(out, rec, target.interpreter)
            _say(started, f"{c.name}: reference ran: {_describe(out)}"
                 + (f"; NOT KERNEL-WRITTEN: {missing}" if missing else ""))
            step = f"{c.name}: the reference again on fresh inputs"
            again = task.reference(*task.inputs(c, device))
            if device == "cuda":
                torch.cuda.synchronize()
            if not same_bits(out, again):
                _say(started, f"{c.name}: THE REFERENCE GAVE OTHER BITS ON A SECOND RUN")
            step = f"{c.name}: the judge's answer (poisoned and marked allocations, a run with NaN past the inputs)"
            _expected, unwritten = expected_and_unwritten(task, task.inputs(c, device), c)
            if device == "cuda":
                torch.cuda.synchronize()
            _say(started, f"{c.name}: judge's answer made" + ("; some elements unwritten or unsteady"
                                                             if unwritten is not None else ""))
        _say(started, "done")
        return 0
    except Exception:  # noqa: BLE001 - the point of the script: say where and why
        _say(started, f"FAILED while {step}:\n{traceback.format_exc()[-3000:]}")
        return 1


def _profiled(task_id: str, case_set: str, top: int) -> int:
    import cProfile

    profiler = cProfile.Profile()
    code = profiler.runcall(diagnose, task_id, case_set)
    print(profile_summary(profiler, top), flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="+")
    ap.add_argument("--source", action="append", default=[], help="ADAPTER:PATH, as for bench check")
    ap.add_argument("--case-set", default="hidden")
    ap.add_argument("--timeout", type=float, default=90.0)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--blocking", action="store_true", help="CUDA_LAUNCH_BLOCKING=1: faults at their step")
    ap.add_argument("--cprofile", type=int, default=0, metavar="N",
                    help="each task under cProfile: its N costliest functions (cumulative) at the end")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # the per-task child
    args = ap.parse_args(argv)
    if args.one:
        return _profiled(args.tasks[0], args.case_set, args.cprofile) if args.cprofile else diagnose(
            args.tasks[0], args.case_set)
    env = dict(os.environ)
    made_cache = ""
    if not env.get("TRITON_CACHE_DIR"):
        # As the pool does (runners/pool.py): a Triton cache of this run's own, in which the
        # task's process and its probing children share autotuning choices.
        from judge.sandbox_layout import AUTOTUNE_CACHE_ENV

        env["TRITON_CACHE_DIR"] = made_cache = tempfile.mkdtemp(prefix="kmc-diagnose-triton-")
        env[AUTOTUNE_CACHE_ENV] = "1"
    if args.source:
        env["KMC_TASK_SOURCES"] = ";".join(args.source)
    if args.blocking:
        env["CUDA_LAUNCH_BLOCKING"] = "1"

    def one(task_id: str) -> str:
        cmd = [sys.executable, __file__, "--one", "--case-set", args.case_set, "--cprofile", str(args.cprofile),
               task_id]
        # With --cprofile, the task's probing children (bench/adapters/shape_probe.py) profile themselves too.
        children = tempfile.mkdtemp(prefix="kmc-diagnose-probes-") if args.cprofile else ""
        try:
            done = subprocess.run(cmd, env={**env, PROFILE_ENV: children} if children else env, capture_output=True,
                                  text=True, timeout=args.timeout)
            text, end = done.stdout + done.stderr[-2000:], f"exit {done.returncode}"
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            text, end = out, f"TIMED OUT after {args.timeout:.0f} s"
        if children:
            for profile in sorted(Path(children).glob("probe-*.txt")):
                text += f"\n----- its probing child {profile.stem}:\n" + profile.read_text()
            shutil.rmtree(children, ignore_errors=True)
        return f"===== {task_id}: {end}\n{text}"

    try:
        with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as ex:
            for report in ex.map(one, args.tasks):
                print(report, flush=True)
    finally:
        if made_cache:
            shutil.rmtree(made_cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
