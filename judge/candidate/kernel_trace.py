"""What the GPU actually ran during one judged call, from CUDA's activity trace (CUPTI, as
torch's Kineto profiler drives it; roctracer on ROCm), checked against the launch record.
Runs in the candidate process.

Why: the launch and dispatch records (judge/candidate/launches.py) are kept by the process that runs
candidate code, from Python: PyTorch run with the dispatch modes off or on a helper thread,
kernels of another compiler (NVRTC, CuPy, `load_inline`, Inductor's), CUDA graphs captured at
import and launchers called directly all leave them unseen or forged. The device's own trace
of the call does not depend on what Python saw. Each compute kernel the GPU ran during the
call must be one of the candidate's own Triton kernels (by the names of the kernels Triton
compiled for the launches the record holds, launch for launch) or a kernel launched under an
aten operation the judge allows (a copy, a fill: the judge side decides, with the task's own
allow-list); copies and memsets are not kernels and are always allowed. A kernel of the
candidate's name that ran more often than the record says was launched outside the recorder
(a graph replay, a direct launcher call); one the record says ran and the trace lacks means
the record was forged.

The trace is a Kineto session per call (its cost is measured by scripts/gpu_trace_probe.py);
CUPTI is warmed once per process (`prepare`), before any candidate code runs. Opt-in
(`KMC_DEVICE_TRACE=1`) until verified on a GPU: see `TRACE_ENV`.
"""

from __future__ import annotations

import collections
import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

KERNEL_ACTIVITY = "kernel"
# Off unless set to 1. On its first H200 run the per-call Kineto sessions caught PyTorch computing
# with the dispatch modes off (which the records miss on a GPU) but also ended five candidates
# with SIGSEGV (autotune, libdevice, a PyTorch last step, a helper thread, a CUDA graph): most
# likely CUPTI torn down and set up again between sessions (Kineto's TEARDOWN_CUPTI, now 0 in the
# sandbox). It stays opt-in until a GPU run judges the whole hostile corpus with it cleanly.
TRACE_ENV = "KMC_DEVICE_TRACE"


def enabled() -> bool:
    return os.environ.get(TRACE_ENV) == "1"


@dataclass(frozen=True)
class TracedKernel:
    """One compute kernel the device ran: its name, and the innermost operation on the CPU
    that launched it ("" where no operation enclosed the launch: a direct launcher call)."""

    name: str
    op: str


@dataclass(frozen=True)
class TraceFindings:
    """What a call's trace shows beyond the launch record: kernels not the candidate's own
    (name, launching op), and own kernels whose counts disagree with the record
    (name, launches recorded, kernels traced)."""

    foreign: tuple[tuple[str, str], ...] = ()
    miscounted: tuple[tuple[str, int, int], ...] = ()

    def to_wire(self) -> dict[str, list[list[Any]]]:
        return {"foreign": [list(f) for f in self.foreign], "miscounted": [list(m) for m in self.miscounted]}

    @classmethod
    def from_wire(cls, raw: Any) -> TraceFindings:
        if not isinstance(raw, dict):
            return cls()
        foreign = tuple((str(n)[:200], str(o)[:80]) for n, o in raw.get("foreign") or ())
        miscounted = tuple((str(n)[:200], int(r), int(t)) for n, r, t in raw.get("miscounted") or ())
        return cls(foreign, miscounted)


def findings(traced: list[TracedKernel], launched: dict[str, int], sure: dict[str, int] | None = None) -> TraceFindings:
    """Compare the kernels a call's trace holds with the launches its record counted by kernel
    name: `launched`, every launch (the most each kernel may run); `sure`, those that must have
    run (a grid given and not empty; all of `launched` when None). Pure: events in, findings out."""
    sure = launched if sure is None else sure
    own = collections.Counter(k.name for k in traced if k.name in launched)
    foreign = tuple(dict.fromkeys((k.name, k.op) for k in traced if k.name not in launched))
    miscounted = tuple((name, n, own.get(name, 0)) for name, n in sorted(launched.items())
                       if own.get(name, 0) > n or own.get(name, 0) < sure.get(name, 0))
    return TraceFindings(foreign, miscounted)


def judged_findings(found: TraceFindings, allowed_ops: frozenset[str]) -> str:
    """The judge's reading of a call's findings: "" when the GPU ran only the candidate's own
    kernels (as often as recorded) and kernels under allowed aten operations, else why not.
    `allowed_ops`: aten overload-packet names (`fill_`, `copy_`) and the task's own."""
    def allowed(op: str) -> bool:
        return op.startswith("aten::") and op.removeprefix("aten::") in allowed_ops

    foreign = [(name, op) for name, op in found.foreign if not allowed(op)]
    if foreign:
        shown = ", ".join(f"{name[:80]} (launched {'under ' + op if op else 'outside any operation'})"
                          for name, op in foreign[:3])
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        return f"the GPU ran kernels that are not the candidate's Triton kernels: {shown}{more}"
    if found.miscounted:
        shown = ", ".join(f"{name[:80]} recorded {r}x, ran {t}x" for name, r, t in found.miscounted[:3])
        return f"the GPU's trace disagrees with the launch record: {shown}"
    return ""


class _Kineto:
    """torch's Kineto profiler with device activity, driven directly (no trace files, no
    Python stacks): enabled around one call, read once."""

    def __init__(self) -> None:
        import torch
        from torch.autograd import profiler as autograd_profiler
        from torch.profiler import ProfilerActivity

        self.torch = torch
        self.activities = {ProfilerActivity.CPU, ProfilerActivity.CUDA}
        self.config = autograd_profiler.ProfilerConfig(autograd_profiler.ProfilerState.KINETO, False, False, False,
                                                       False, False, torch._C._profiler._ExperimentalConfig())

    def prepare(self) -> None:
        with _quiet():
            self.torch._C._autograd._prepare_profiler(self.config, self.activities)

    def start(self) -> None:
        with _quiet():
            self.torch._C._autograd._enable_profiler(self.config, self.activities)

    def stop(self) -> list[TracedKernel]:
        with _quiet():
            result = self.torch._C._autograd._disable_profiler()
        return kernels_of(result.events())


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The profiler's own start and stop lines (Kineto prints them on stderr, twice a call) kept
    out of the candidate's relayed stderr, which is for what the candidate says."""
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def kernels_of(events: Any) -> list[TracedKernel]:
    """The compute kernels among Kineto's events, each with the innermost CPU operation it was
    linked to (Kineto links a device event to the operation open on the launching thread)."""
    from torch.autograd import DeviceType

    frontend = {}  # correlation id -> (name, start) of CPU events a device event can link to
    ops = []  # (start, end, name) of operations ("aten::fill_", "ns::op")
    kernels = []
    for e in events:
        if e.device_type() == DeviceType.CPU:
            if e.linked_correlation_id() == 0:
                frontend[e.correlation_id()] = (e.name(), e.start_ns())
                if "::" in e.name():
                    ops.append((e.start_ns(), e.end_ns(), e.name()))
        elif _is_kernel(e):
            kernels.append(e)
    return [TracedKernel(k.name(), _launching_op(frontend.get(k.linked_correlation_id()), ops)) for k in kernels]


def _launching_op(linked: tuple[str, int] | None, ops: list[tuple[int, int, str]]) -> str:
    """The operation a kernel was launched under: the event it links to where that is an
    operation, else (the driver's own events, such as "Lazy Function Loading" on a kernel's
    first use, come between) the innermost operation open when that event began."""
    if linked is None:
        return ""
    name, start = linked
    if "::" in name:
        return name
    open_then = [(s, n) for s, e, n in ops if s <= start <= e]
    return max(open_then)[1] if open_then else ""


def _is_kernel(e: Any) -> bool:
    """A device event that is a compute kernel: by its activity type where torch's events
    carry one (newer torch), else by name (copies and memsets are named "Memcpy ...",
    "Memset ..." by CUPTI)."""
    activity = getattr(e, "activity_type", None)
    if activity is not None:
        return bool(activity() == KERNEL_ACTIVITY)
    return not e.name().startswith(("Memcpy", "Memset"))


class CallTracer:
    """One per candidate process on a GPU: `prepare()` once before candidate code runs, then
    `trace()` around each judged call. Where the device's trace cannot be had (no CUPTI, a
    profiler already running) `problem` says why and calls are judged without it."""

    def __init__(self) -> None:
        self.problem = ""
        self.kineto: _Kineto | None = None

    def prepare(self) -> None:
        try:
            self.kineto = _Kineto()
            self.kineto.prepare()
        except Exception as exc:  # noqa: BLE001 - reported as the tracer's problem, the judge decides
            self.kineto, self.problem = None, f"no device trace: {type(exc).__name__}: {exc}"[:300]

    def start(self) -> bool:
        if self.kineto is None:
            return False
        self.kineto.start()
        return True

    def stop(self, launched: dict[str, int], sure: dict[str, int]) -> TraceFindings:
        assert self.kineto is not None
        return findings(self.kineto.stop(), launched, sure)
