#!/usr/bin/env python
"""GPU memory a judge worker holds, job by job: one judge worker in this process judges the
experts of the given tasks (hidden cases, timed as a final submission), and after each job this
prints the worker's allocated and reserved bytes, the job's peaks, and the GPU's memory in use.
With `--history`, torch's allocator records every allocation of the job with its Python stack,
and this prints what was live at the job's peak, by the line of this project that allocated it.

Why: a full-suite run filled an H100 (79 GiB) with four workers and candidates were judged out
of memory; this run showed one worker peaking at 15.8-18.6 GiB reserved and keeping 2.1-5.7 GiB of
idle cached blocks between jobs (judge/device_memory.py says what the worker does about it). The
peak itself was not explained: `--history` says which of the judge's allocations make it up
(the reference's float64 run, input copies, timing's sides), so it can be bounded or planned for.

`--live-inputs`: every tensor a task's `inputs` draws is watched (a weak reference), and a thread
samples how many bytes of them are alive beyond what the input cache keeps; at the worst sample
it names the cases those belong to and what refers to them. Why: on an H100 (2026-12-06) 7-13
GiB of drawn inputs were live at embedding's peak beside a 4 GiB cache and a 1 GiB plan, while
the same watch on the CPU (an in-process judge worker, the interpreter) finds none beyond the
cache and the case being judged.

Usage: python scripts/judge_memory_probe.py [swiglu,axpby,gather,embedding,transpose] [--history]
           [--live-inputs] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench.registry import get_task  # noqa: E402
from judge.case_inputs import set_input_cache_bytes  # noqa: E402
from judge.job import Job  # noqa: E402
from judge.policy import FINAL_FULL, TimingPolicy  # noqa: E402
from runners.sizing import INPUT_CACHE_MIB  # noqa: E402

DEFAULT_TASKS = "swiglu,axpby,gather,embedding,transpose"
HISTORY_ENTRIES = 2_000_000
"""The allocator's trace keeps this many events, the oldest dropped first (`JobPeak.wrapped`)."""
GIB = 2**30


@dataclass(frozen=True)
class PeakPart:
    """Bytes live at a job's peak that one line allocated (`where`), in how many blocks."""

    where: str
    bytes: int
    blocks: int


@dataclass
class JobPeak:
    """A job's most allocated bytes and what made them up. `before`: allocated when the job
    began (the input cache, mostly), which the trace does not describe; what of it the job
    freed before its peak is taken off it."""

    before: int
    peak: int
    parts: list[PeakPart] = field(default_factory=list)
    entries: int = 0
    wrapped: bool = False


def allocating_line(frames: list[dict[str, Any]], root: Path = ROOT) -> str:
    """The innermost frame in this project's code (not this script) that led to an allocation,
    as `path:line function`; the innermost frame at all where none is ours."""
    me = Path(__file__).resolve()
    for frame in frames:
        path = Path(str(frame.get("filename", "")))
        try:
            resolved = path.resolve()
            relative = resolved.relative_to(root)
        except (OSError, ValueError):
            continue
        if resolved != me and not str(relative).startswith((".venv", "site-packages")):
            return f"{relative}:{frame.get('line')} {frame.get('name')}"
    if frames:
        return f"outside the project: {frames[0].get('filename')}:{frames[0].get('line')} {frames[0].get('name')}"
    return "no stack recorded"


def peak_parts(entries: Iterable[dict[str, Any]], before: int, wrapped: bool = False,
               root: Path = ROOT) -> JobPeak:
    """Replay an allocator trace (torch.cuda.memory._snapshot()'s `device_traces` of one device,
    recorded from the job's start): the moment the most bytes were allocated, and the blocks
    live then, by the line that allocated them. Bytes count at `alloc` and `free_completed`,
    as torch's own viewer counts them."""
    events = [e for e in entries if e.get("action") in ("alloc", "free_completed")]
    best_at = _replay(events, len(events), before, root)[3]
    live, held, best, _ = _replay(events, best_at + 1, before, root)
    by_line: dict[str, list[int]] = {}
    for size, where in live.values():
        by_line.setdefault(where, []).append(size)
    parts = [PeakPart(where, sum(sizes), len(sizes)) for where, sizes in by_line.items()]
    if held > 0:
        parts.append(PeakPart("held before the job (the input cache and earlier jobs' tensors)", held, 0))
    parts.sort(key=lambda p: -p.bytes)
    return JobPeak(before, best, parts, len(events), wrapped)


def _replay(events: list[dict[str, Any]], stop: int, before: int,
            root: Path) -> tuple[dict[int, tuple[int, str]], int, int, int]:
    """The first `stop` events replayed: the blocks live after them (address: size, line), the
    bytes still held of those allocated before the job, and the most allocated on the way with
    the index of the event that reached it (-1: none rose above `before`)."""
    live: dict[int, tuple[int, str]] = {}
    held = current = best = before
    best_at = -1
    for i, e in enumerate(events[:stop]):
        size, addr = int(e.get("size", 0)), int(e["addr"])
        if e["action"] == "alloc":
            live[addr] = (size, allocating_line(e.get("frames") or [], root))
            current += size
        elif addr in live:
            current -= live.pop(addr)[0]
        else:  # a block allocated before the job
            held -= size
            current -= size
        if current > best:
            best, best_at = current, i
    return live, held, best, best_at


class LiveInputs:
    """Drawn input tensors still alive beyond the input cache's entries, sampled on a thread
    (`--live-inputs`). `watch` wraps a task's `inputs`; `worst` is the sample with the most
    such bytes: the cases they belong to and the types of what refers to them."""

    def __init__(self, cache_entries: Any, every_s: float = 0.05) -> None:
        self.cache_entries, self.every_s = cache_entries, every_s
        self.drawn: list[tuple[weakref.ref[torch.Tensor], int, str]] = []
        self.worst: dict[str, Any] = {"bytes": 0}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watched: list[tuple[Any, bool]] = []  # (task, whether it had its own `inputs` before)

    def watch(self, task: Any) -> None:
        """`task.inputs` wrapped until this watch ends (the registry's task objects are shared)."""
        real = task.inputs
        self._watched.append((task, "inputs" in vars(task)))

        def inputs(case: Any, device: str) -> Any:
            value = real(case, device)
            for t in value if isinstance(value, tuple) else ():
                if isinstance(t, torch.Tensor):
                    self.drawn.append((weakref.ref(t), t.untyped_storage().nbytes(), case.name))
            return value

        object.__setattr__(task, "inputs", inputs)

    def sample(self) -> int:
        """Bytes of drawn tensors alive and not kept by the cache, now; the worst kept."""
        cached = {id(t) for value in list(self.cache_entries.values()) if isinstance(value, tuple)
                  for t in value if isinstance(t, torch.Tensor)}
        loose = [(t, size, case) for ref, size, case in list(self.drawn)
                 if (t := ref()) is not None and id(t) not in cached]
        total = sum(size for _, size, _ in loose)
        if total > self.worst["bytes"]:
            biggest = sorted(loose, key=lambda x: -x[1])[:5]
            self.worst = {"bytes": total, "tensors": len(loose),
                          "cases": sorted({case for _, _, case in loose})[:20],
                          "referrers": [sorted({type(r).__name__ for r in gc.get_referrers(t)}) for t, _, _ in biggest]}
        return total

    def __enter__(self) -> LiveInputs:
        def loop() -> None:
            while not self._stop.wait(self.every_s):
                self.sample()

        self._thread = threading.Thread(target=loop, name="live-inputs", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for task, had_own in reversed(self._watched):
            if not had_own:
                object.__delattr__(task, "inputs")  # the class's method again
        self._watched.clear()


def gpu_used() -> str:
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown"


def describe(peak: JobPeak, top: int = 8) -> str:
    lines = [f"    peak allocated within the job {peak.peak / GIB:.2f} GiB (held when it began "
             f"{peak.before / GIB:.2f} GiB; {peak.entries} events"
             + ("; the trace wrapped, its oldest events lost" if peak.wrapped else "") + "), live then:"]
    lines += [f"      {p.bytes / GIB:7.3f} GiB in {p.blocks:4d} block(s)  {p.where}" for p in peak.parts[:top]]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tasks", nargs="?", default=DEFAULT_TASKS)
    p.add_argument("--history", action="store_true", help="what was live at each job's peak, by allocating line")
    p.add_argument("--live-inputs", action="store_true",
                   help="drawn inputs alive beyond the input cache during each job, and what holds them")
    p.add_argument("--json", type=Path, help="write every job's figures here too")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("judge_memory_probe: needs a GPU (torch sees none)", file=sys.stderr)
        return 2
    from judge.worker import Worker

    set_input_cache_bytes(INPUT_CACHE_MIB << 20)  # the pool's bound for one worker
    worker = Worker()
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    try:
        for i, task_id in enumerate(args.tasks.split(",")):
            job = Job(task_id, get_task(task_id).baseline_source(), case_set="hidden", timing=True,
                      timing_policy=TimingPolicy(protocol=FINAL_FULL).to_json(), id=i)
            before = torch.cuda.memory_allocated()
            if args.history:  # off and on again: a fresh trace for this job (torch clears it on either)
                torch.cuda.memory._record_memory_history(enabled=None)
                torch.cuda.memory._record_memory_history(context="alloc", stacks="python",
                                                         max_entries=HISTORY_ENTRIES)
            watch = contextlib.nullcontext()
            if args.live_inputs:
                from judge import case_inputs

                watch = LiveInputs(case_inputs._CACHE.entries)
                watch.watch(get_task(task_id))
            with watch:
                reply = worker.handle(job)
            verdict = reply["evaluation"]["verdict"]["kind"]
            row: dict[str, Any] = {
                "task": task_id, "verdict": verdict, "seconds": round(time.perf_counter() - started, 1),
                "allocated_mib": torch.cuda.memory_allocated() >> 20,
                "reserved_mib": torch.cuda.memory_reserved() >> 20,
                "job_peak_allocated_mib": torch.cuda.max_memory_allocated() >> 20,  # the worker resets them per job
                "job_peak_reserved_mib": torch.cuda.max_memory_reserved() >> 20, "gpu_in_use": gpu_used()}
            print(f"{row['seconds']:6.1f} s {task_id:14s} {verdict:12s} judge allocated {row['allocated_mib']} MiB, "
                  f"reserved {row['reserved_mib']} MiB (after the job's release); the job's peaks: allocated "
                  f"{row['job_peak_allocated_mib']} MiB, reserved {row['job_peak_reserved_mib']} MiB; "
                  f"GPU in use {row['gpu_in_use']}", flush=True)
            if isinstance(watch, LiveInputs):
                row["live_inputs"] = watch.worst
                print(f"    drawn inputs alive beyond the cache, at worst: {watch.worst['bytes'] / GIB:.2f} GiB "
                      f"in {watch.worst.get('tensors', 0)} tensor(s) of {len(watch.worst.get('cases', []))} case(s); "
                      f"held by {watch.worst.get('referrers', [])}", flush=True)
            if args.history:
                trace = torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()]
                peak = peak_parts(trace, before, wrapped=len(trace) >= HISTORY_ENTRIES)
                row["peak"] = asdict(peak)
                print(describe(peak), flush=True)
            rows.append(row)
    finally:
        if args.history:
            torch.cuda.memory._record_memory_history(enabled=None)
        worker.close()
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
