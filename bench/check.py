"""`bench check`: every expert baseline of a suite, judged on its hidden cases through the
same sandboxed workers that judge candidates, and on a GPU timed on its perf cases and
placed on the roofline.

Why: the simulated model's ground truth and every speedup in a report rest on the
baselines being right and reasonably fast on the machine at hand. This command re-checks
both; it exits 1 when any baseline fails, so CI and a new GPU both catch a broken one.

Roofline ceilings are a table keyed by device name. The H200 figures were measured on
this project's lent H200 machines (device-to-device copy through PyTorch: about 4.3 TB/s
counting bytes read and written; an 8192^3 bf16 matrix product: about 790 TFLOP/s on
random data); its fp32 figure and every other device's are vendor datasheet numbers, i.e.
leads, not measurements, and are labelled so. An unknown device falls back to the H200
row and the report says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.task import Case, Task


@dataclass(frozen=True)
class Ceilings:
    """Peak memory bandwidth (bytes/s, read + written) and dense FLOP/s per dtype."""

    device: str
    bandwidth: float
    flops: Mapping[str, float]
    source: str

    def peak_flops(self, dtype: str) -> float:
        # int8 tasks here do their arithmetic in float32; float64 falls back to the fp32 figure.
        return self.flops.get(dtype) or self.flops["float32"]

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "bandwidth_bytes_per_s": self.bandwidth, "flops_per_s": dict(self.flops),
                "source": self.source}


_H200_SOURCE = ("bandwidth and bf16 measured on this project's lent H200 (copy 4.3 TB/s; 8192^3 bf16 matmul "
                "~790 TFLOP/s); fp16 assumed equal to bf16 and fp32 (67 TFLOP/s) from the datasheet: leads")

CEILINGS: dict[str, Ceilings] = {
    "NVIDIA H200": Ceilings("NVIDIA H200", 4.3e12, {"bfloat16": 790e12, "float16": 790e12, "float32": 67e12},
                            _H200_SOURCE),
    "NVIDIA H100 80GB HBM3": Ceilings("NVIDIA H100 80GB HBM3", 3.35e12,
                                      {"bfloat16": 989e12, "float16": 989e12, "float32": 67e12},
                                      "datasheet (SXM, dense): leads, not measured here"),
    "AMD Instinct MI300X": Ceilings("AMD Instinct MI300X", 5.3e12,
                                    {"bfloat16": 1307e12, "float16": 1307e12, "float32": 163e12},
                                    "datasheet (dense): leads, not measured here"),
}
FALLBACK = "NVIDIA H200"


def ceilings_for(device_name: str) -> tuple[Ceilings, bool]:
    """The row for a device: its exact name, else a row whose name it contains (a variant
    such as 'NVIDIA H200 NVL' gets the H200 row, flagged as not exact), else the fallback row.
    The flag is False unless the name matched exactly."""
    if device_name in CEILINGS:
        return CEILINGS[device_name], True
    for name, row in CEILINGS.items():
        if name in device_name:
            return row, False
    return CEILINGS[FALLBACK], False


@dataclass(frozen=True)
class PerfRow:
    """One perf case of one baseline: median time and where it sits under the roofline."""

    case: str
    dtype: str
    median_ms: float
    eager_ms: float | None
    bytes_moved: int
    flops: int
    achieved_gbps: float
    achieved_tflops: float
    bound: str
    roofline_fraction: float


def new_shape_cases(task: Task, interpreter: bool, skip_reasons: tuple[str, ...]) -> int | None:
    """How many of the task's new-shape hidden cases were judged: those declared, less those
    skipped because the reference runs on no perturbation for that slot."""
    declared = [c for c in task.hidden(interpreter) if "shape" in c.dims]
    if not declared:
        return None
    unused = sum(1 for r in skip_reasons if r.startswith("hidden-shape"))
    return max(0, len(declared) - unused)


def roofline_row(task: Task, case: Case, median_ms: float, eager_ms: float | None, ceilings: Ceilings) -> PerfRow:
    """Fraction of the roofline = (the time the roofline allows) / (the time measured), where
    the roofline time is max(bytes / bandwidth, flops / peak FLOP/s): 1.0 is at the ceiling."""
    nbytes, nflops = int(task.bytes_moved(case)), int(task.flops(case))
    seconds = median_ms / 1e3
    t_mem = nbytes / ceilings.bandwidth
    t_flop = nflops / ceilings.peak_flops(case.dtype)
    bound = "memory" if t_mem >= t_flop else "compute"
    fraction = max(t_mem, t_flop) / seconds if seconds > 0 else math.nan
    if nbytes == 0 and nflops == 0:
        bound, fraction = "n/a", math.nan  # adapted tasks: the suite gives no byte or FLOP counts
    return PerfRow(case.name, case.dtype, median_ms, eager_ms, nbytes, nflops,
                   nbytes / seconds / 1e9 if seconds > 0 else math.nan,
                   nflops / seconds / 1e12 if seconds > 0 else math.nan, bound, fraction)


UNSCORABLE = "unscorable"
"""A check's verdict for a task no candidate can be judged on (bench/task.py `NothingToCompare`):
neither a pass nor a failure of the reference; counted apart, like a task with no baseline."""


@dataclass(frozen=True)
class TaskCheck:
    task: str
    verdict: str
    message: str = ""
    failing_case: str | None = None
    cases_run: int = 0
    cases_skipped: int = 0
    skip_reasons: tuple[str, ...] = ()
    seconds: float = 0.0
    perf: tuple[PerfRow, ...] = ()
    note: str = ""
    new_shapes: int | None = None
    """Hidden cases at shapes the suite never records (adapted tasks), as judged: None where
    the task has no such cases."""
    phases: dict[str, float] = field(default_factory=dict)
    """The job's seconds by phase (judge/phases.py: queue, start, compile, correctness, gate,
    timing, other, retry): where a slow check's time went (GEAK-eval's TritonBench-revised
    references took 1-300 s each on an H100, 2026-12-06, with nothing recorded to say why)."""

    @property
    def passed(self) -> bool:
        """Not a failure: correct, skipped (no baseline to check) or unscorable."""
        return self.verdict in ("correct", "skipped", UNSCORABLE)

    @property
    def skipped(self) -> bool:
        """Not checked: no baseline, or nothing a candidate could be compared on."""
        return self.verdict in ("skipped", UNSCORABLE)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["skip_reasons"] = list(self.skip_reasons)
        d["perf"] = [asdict(p) for p in self.perf]
        d["passed"] = self.passed
        return d


@dataclass
class CheckReport:
    device: str
    interpreter: bool
    ceilings: Ceilings | None
    ceilings_exact: bool
    rows: list[TaskCheck] = field(default_factory=list)

    @property
    def failed(self) -> list[TaskCheck]:
        return [r for r in self.rows if not r.passed]

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "interpreter": self.interpreter,
            "timing": "unavailable on the CPU interpreter" if self.interpreter else "median of interleaved samples",
            "ceilings": self.ceilings.to_json() if self.ceilings else None,
            "ceilings_note": "" if self.ceilings_exact or self.ceilings is None
            else f"no ceilings for {self.device}; the {self.ceilings.device} row stands in",
            "tasks": [r.to_json() for r in self.rows],
            "passed": sum(r.passed and not r.skipped for r in self.rows),
            "failed": len(self.failed),
            "skipped": sum(r.skipped for r in self.rows),
            "unscorable": sum(r.verdict == UNSCORABLE for r in self.rows),
        }


def format_report(report: CheckReport) -> str:
    lines = [f"device: {report.device}" + (" (timing unavailable on the CPU interpreter)" if report.interpreter else "")]
    if report.ceilings is not None:
        c = report.ceilings
        lines.append(f"ceilings: {c.bandwidth / 1e12:.2f} TB/s, bf16 {c.flops.get('bfloat16', 0) / 1e12:.0f} TFLOP/s, "
                     f"fp32 {c.flops['float32'] / 1e12:.0f} TFLOP/s ({c.source})")
        if not report.ceilings_exact:
            lines.append(f"note: no ceilings for {report.device}; the {c.device} row stands in")
    shapes = any(r.new_shapes is not None for r in report.rows)
    header = f"{'task':<20} {'verdict':<13} {'cases':>9} {'judge s':>8}" + (f" {'new shapes':>10}" if shapes else "")
    if not report.interpreter:
        header += f"  {'perf case':<28} {'ms':>9} {'eager ms':>9} {'GB/s':>8} {'TFLOP/s':>8} {'bound':<7} {'roofline':>8}"
    lines.append(header)
    for r in report.rows:
        cases = f"{r.cases_run}+{r.cases_skipped}s" if r.cases_skipped else str(r.cases_run)
        head = f"{r.task:<20} {r.verdict:<13} {cases:>9} {r.seconds:8.1f}"
        if shapes:
            head += f" {r.new_shapes if r.new_shapes is not None else '-':>10}"
        if r.perf:
            for i, p in enumerate(r.perf):
                eager = f"{p.eager_ms:9.4f}" if p.eager_ms is not None else f"{'-':>9}"
                frac = f"{p.roofline_fraction:8.1%}" if not math.isnan(p.roofline_fraction) else f"{'-':>8}"
                lines.append((head if i == 0 else " " * len(head))
                             + f"  {p.case[:28]:<28} {p.median_ms:9.4f} {eager} {p.achieved_gbps:8.0f} "
                               f"{p.achieved_tflops:8.1f} {p.bound:<7} {frac}")
        else:
            extra = ""
            if not r.passed:
                extra = f"  {r.failing_case or ''}: {r.message.splitlines()[0][:160] if r.message else ''}"
            elif r.note and not report.interpreter:
                extra = f"  {r.note}"
            lines.append(head + extra)
    lines.append(summary_line(report))
    return "\n".join(lines)


def summary_line(report: CheckReport) -> str:
    """'N/M baselines pass', counting only the baselines that were checked: a task with no
    baseline (KernelBench: eager PyTorch only) is skipped, and an unscorable one counted apart,
    neither passed."""
    failed = report.failed
    unscorable = [r.task for r in report.rows if r.verdict == UNSCORABLE]
    skipped = sum(r.skipped for r in report.rows) - len(unscorable)
    checked = len(report.rows) - skipped - len(unscorable)
    if checked == 0 and not unscorable:
        line = (f"no baseline checked: all {skipped} tasks skipped (no Triton baseline to check)" if skipped
                else "no baseline checked: no task was left to check")
    else:
        parts = [f"{checked - len(failed)}/{checked} baselines pass" if checked else "no baseline checked"]
        if skipped:
            parts.append(f"{skipped} skipped (no Triton baseline to check)")
        if unscorable:
            parts.append(f"{len(unscorable)} unscorable (the entry point returns nothing and writes no argument: "
                         f"{', '.join(unscorable)})")
        line = "; ".join(parts)
    return line + (f"; FAILED: {', '.join(r.task for r in failed)}" if failed else "")
