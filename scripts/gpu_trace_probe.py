#!/usr/bin/env python
"""What CUDA's activity trace (CUPTI, through torch's Kineto profiler) shows of a candidate's
calls, inside the candidate sandbox: the events, their kinds and links, and what a trace costs.

Why: issue 41 item 3 makes the kernels the GPU ran the ground truth for "Triton did the work".
Before building the check on Kineto's events, this prints, from a sandboxed child on a GPU:
every event of a traced call mixing a Triton kernel, a torch op, a copy, a fill and a memset
(name, device type, activity type, correlation and linked correlation, external id, times), and
the seconds a trace's start and stop cost over repeated sessions. Root only (as the tests).

    python scripts/gpu_trace_probe.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def probe_twice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
'''


def _events(prof_result: object) -> list[dict[str, object]]:
    rows = []
    for e in prof_result.events():  # type: ignore[attr-defined]
        rows.append({"name": e.name()[:160], "device_type": str(e.device_type()), "activity": str(e.activity_type()) if hasattr(e, "activity_type") else "",
                     "corr": e.correlation_id(), "linked": e.linked_correlation_id(), "ext": e.external_id(),
                     "start_ns": e.start_ns(), "dur_ns": e.duration_ns(), "thread": e.start_thread_id(),
                     "user_annotation": e.is_user_annotation()})
    return rows


def probe() -> dict[str, object]:
    import importlib.util

    os.environ["TRITON_CACHE_DIR"] = "/var/cache/kmc-triton"
    os.environ["HOME"] = os.environ["TMPDIR"] = "/tmp"
    path = Path("/tmp/kmc-candidate/probe_kernel.py")
    path.write_text(KERNEL)
    spec = importlib.util.spec_from_file_location("probe_kernel", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    import torch
    from torch.autograd import profiler as ap
    from torch.profiler import ProfilerActivity

    x = torch.randn(4096, device="cuda")
    out = torch.empty_like(x)
    module.probe_twice[(16,)](x, out, 4096, BLOCK=256)  # compile outside the trace
    torch.cuda.synchronize()
    config = torch._C._profiler._ExperimentalConfig()
    activities = {ProfilerActivity.CUDA, ProfilerActivity.CPU}
    t0 = time.perf_counter()
    torch._C._autograd._prepare_profiler(ap.ProfilerConfig(ap.ProfilerState.KINETO, False, False, False, False, False,
                                                           config), activities)
    prepare_s = time.perf_counter() - t0
    costs = []
    sample: list[dict[str, object]] = []
    for round_ in range(6):
        cfg = ap.ProfilerConfig(ap.ProfilerState.KINETO, False, False, False, False, False, config)
        t0 = time.perf_counter()
        torch._C._autograd._enable_profiler(cfg, activities)
        t1 = time.perf_counter()
        with torch.profiler.record_function("kmc-call-0"):
            module.probe_twice[(16,)](x, out, 4096, BLOCK=256)
            y = x + 1  # a torch compute op
            z = y.clone()  # a copy
            z.fill_(3.0)  # a fill
            z.zero_()  # a memset, or a fill kernel
            out[:10].copy_(torch.ones(10))  # host to device
        with torch.profiler.record_function("kmc-call-1"):
            module.probe_twice[(16,)](x, out, 4096, BLOCK=256)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        result = torch._C._autograd._disable_profiler()
        t3 = time.perf_counter()
        events = _events(result)
        t4 = time.perf_counter()
        costs.append({"enable_ms": 1e3 * (t1 - t0), "traced_ms": 1e3 * (t2 - t1), "disable_ms": 1e3 * (t3 - t2),
                      "read_ms": 1e3 * (t4 - t3), "events": len(events)})
        if round_ == 0:
            sample = events
    return {"prepare_ms": 1e3 * prepare_s, "rounds": costs, "events": sample}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    from judge import sandbox, sandbox_layout

    forker = sandbox.Forker()
    read_fd, write_fd = os.pipe()
    pid = forker.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            spec = sandbox_layout.Spec.from_environment(True, hidden=[sandbox_layout.PROJECT_ROOT])
            entered = sandbox.enter(spec, write_fd, write_fd, "/tmp/kmc-probe-cache")
            try:
                answer: dict[str, object] = {"ok": probe()}
            except BaseException:  # noqa: BLE001 - reported
                import traceback

                answer = {"error": traceback.format_exc()}
            os.write(entered.channel, json.dumps(answer).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 1 << 20):
        chunks.append(chunk)
    os.waitpid(pid, 0)
    got = json.loads(b"".join(chunks) or b'{"error": "no answer"}')
    args.json.write_text(json.dumps(got, indent=1))
    if "error" in got:
        print(got["error"])
        sys.exit(1)
    ok = got["ok"]
    print(f"prepare {ok['prepare_ms']:.1f} ms")
    for r in ok["rounds"]:
        print({k: round(v, 2) for k, v in r.items()})
    for e in ok["events"]:
        print(e)


if __name__ == "__main__":
    main()
