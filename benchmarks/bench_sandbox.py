#!/usr/bin/env python
"""What the candidate sandbox costs per candidate (issue 41: median and p90 under 20 ms).

Two measurements, each interleaved (one of each kind per round, so drifts in the machine's
load fall on both alike):

1. `fork` against `sandbox`: in a process that has imported torch and triton (as the template
   has), the seconds from fork to the child's first byte on a pipe, without and with the
   sandbox (a fork into a PID namespace of its own, then `judge.sandbox.enter` before that
   byte; the allow-list read once beforehand, as the template does). Their paired difference
   is the sandbox's own cost.
2. `template`: through the real template (judge/template.py), the seconds from a spawn request
   to the candidate process's answer to `load` of the expert vector_add, for a sandboxed and an
   unsandboxed template: what a candidate's start costs the judge end to end (a spare is
   forked ahead of need, so this is mostly off the judging path).

Usage (repository root; about a minute on a 2-core machine):
    python benchmarks/bench_sandbox.py --json benchmarks/results/<date>-<machine>-sandbox-cost.json
On a GPU the sandbox also binds the device nodes, and the candidate makes its context after
entering it (timed apart as `context` when a GPU is present).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {"n": len(ms), "median_ms": round(statistics.median(ms), 3),
            "p90_ms": round(ms[min(len(ms) - 1, int(0.9 * len(ms)))], 3), "max_ms": round(ms[-1], 3)}


FORKER: Any = None


def _fork_once(sandboxed: bool, layout: Any, spec: Any) -> float:
    from judge import sandbox

    read_fd, write_fd = os.pipe()
    started = time.perf_counter()
    pid = FORKER.fork() if sandboxed else os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            fd = sandbox.enter(spec, write_fd, write_fd, None, layout).channel if sandboxed else write_fd
            os.write(fd, b"1")
        finally:
            os._exit(0)
    os.close(write_fd)
    os.read(read_fd, 1)
    elapsed = time.perf_counter() - started
    os.close(read_fd)
    os.waitpid(pid, 0)
    return elapsed


def measure_fork(rounds: int, gpu: bool) -> dict[str, Any]:
    import torch  # noqa: F401 - the forked process is as large as a template's
    import triton  # noqa: F401

    from judge import sandbox, sandbox_layout

    global FORKER
    sandbox.Forker.claim()  # as the template does where the toolkit is not root
    FORKER = sandbox.Forker()
    spec = sandbox_layout.Spec.from_environment(gpu, hidden=[sandbox_layout.PROJECT_ROOT])
    started = time.perf_counter()
    import tempfile

    layout = sandbox_layout.Layout.for_spec(spec, None,
                                            sandbox_layout.copy_etc(tempfile.mkdtemp(prefix="kmc-bench-sandbox-")))
    layout_s = time.perf_counter() - started
    plain, boxed = [], []
    for _ in range(rounds):
        plain.append(_fork_once(False, layout, spec))
        boxed.append(_fork_once(True, layout, spec))
    return {"fork": _summary(plain), "sandbox": _summary(boxed),
            "sandbox_cost": _summary([b - p for b, p in zip(boxed, plain, strict=True)]),
            "layout_read_once_ms": round(layout_s * 1000, 3), "binds": len(layout.binds)}


def measure_template(rounds: int) -> dict[str, Any]:
    from bench.registry import get_task
    from judge.device import detect_target
    from judge.remote import TemplateProcess

    target = detect_target()
    device = "cpu" if target.interpreter else "cuda"
    task = get_task("vector_add")
    source = task.complete_source(task.baseline_source())
    results: dict[str, list[float]] = {"sandboxed": [], "unsandboxed": []}
    contexts: dict[str, list[float]] = {"sandboxed": [], "unsandboxed": []}
    templates = {}
    for kind in results:
        env = {**os.environ, "KMC_UNSANDBOXED": "1" if kind == "unsandboxed" else "0"}
        if target.interpreter:
            env["TRITON_INTERPRET"] = "1"
        templates[kind] = TemplateProcess(device, env=env)
    try:
        for _ in range(rounds):
            for kind, template in templates.items():
                started = time.perf_counter()
                proc = template.spawn()
                proc.start_clock(120)
                made = time.perf_counter()
                proc.start_device()
                proc.wait_ready(120)
                context = time.perf_counter() - made
                reply, _ = proc.request({"op": "load", "source": source, "entry_point": task.entry_point,
                                         "allowed_ops": list(task.allowed_torch_ops)})
                results[kind].append(time.perf_counter() - started)
                contexts[kind].append(context)
                assert reply.get("ok") is True, reply
                proc.close()
    finally:
        for template in templates.values():
            template.close()
    return {"device": device, **{kind: _summary(s) for kind, s in results.items()},
            "difference": _summary([a - b for a, b in zip(results["sandboxed"], results["unsandboxed"], strict=True)]),
            **({"context": {k: _summary(v) for k, v in contexts.items()}} if device != "cpu" else {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--template-rounds", type=int, default=15)
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    args = parser.parse_args()
    from judge import sandbox
    from judge.device import detect_target

    problem = sandbox.probe()
    if problem is not None:
        print(f"the sandbox cannot be built here: {problem}", file=sys.stderr)
        raise SystemExit(2)
    target = detect_target()
    figures = {"machine": target.device_name if not target.interpreter else f"cpu ({os.cpu_count()} cores)",
               "as_root": os.geteuid() == 0,
               "fork_and_enter": measure_fork(args.rounds, not target.interpreter),
               "template_spawn_to_loaded": measure_template(args.template_rounds)}
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
