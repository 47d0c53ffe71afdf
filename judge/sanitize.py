"""`--sanitize` (config `sanitize: true`): a final submission that passed is judged again under
NVIDIA's compute-sanitizer, memcheck then racecheck, each in a candidate template of its own run
under the tool; any error the tool reports makes the verdict a wrong result with its first lines.

Why a second judging rather than the verdict's own run: under the tool a kernel runs tens of
times slower, and the races and stray writes it finds are ones the hidden cases' comparison can
miss (a write past an output that lands in memory nobody reads). Why its own template: the tool
follows the processes it starts (`--target-processes all`), so the candidate forked from that
template is the one it watches, inside the same sandbox as any other.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from judge.candidate.verdict import Verdict
from judge.gate import gpu_gate
from judge.job import Job
from judge.phases import PhaseClock

TOOLS = ("memcheck", "racecheck")
READY_S = 600.0  # how long a candidate under the tool may take to make its context and say it is ready
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) error")


def sanitized(task: Any, job: Job, cases: Sequence[Any], verdict: Verdict, *, device: str, interpreter: bool,
              folder: Path, caches: Any, clock: PhaseClock) -> Verdict:
    """`verdict` (correct) as it stands when compute-sanitizer finds nothing on `cases` under
    either tool; a wrong result naming the tool, its error count and its first report lines
    otherwise; `verdict` with a message saying so where the tool is not installed. `folder`: where
    the tool's logs go (made here). `caches`: the worker's source caches, which lend the
    candidate's process its Triton cache as for any hidden judging."""
    from judge.oracle import judge_cases
    from judge.remote import RemoteRunner, TemplateProcess

    tool_path = shutil.which("compute-sanitizer")
    if tool_path is None:
        return dataclasses.replace(verdict, message="compute-sanitizer not found; not sanitized")
    folder.mkdir(parents=True, exist_ok=True)
    for tool in TOOLS:
        log = folder / f"{tool}.log"
        template = TemplateProcess(device, prefix=(tool_path, "--tool", tool, "--target-processes", "all",
                                                   "--print-limit", "10", "--log-file", str(log)))
        proc = template.spawn()
        try:
            proc.start_clock(float(job.timeout) * 4)
            with gpu_gate(exclusive=False, clock=clock):
                proc.start_device()
                proc.wait_ready(READY_S)
            caches.lend(proc, job.source, hidden=True)
            reply, _ = proc.request({"op": "load", "source": job.source, "entry_point": task.entry_point,
                                     "allowed_ops": list(task.allowed_torch_ops),
                                     "judges_overruns": task.judges_overruns})
            if reply.get("ok") is True:
                judge_cases(task, RemoteRunner(proc), tuple(cases), device, interpreter)
        finally:
            proc.close()
            template.close()
        found = tool_errors(tool, log.read_text(errors="replace") if log.exists() else "")
        if found is not None:
            return Verdict("wrong_result", found, cases_run=verdict.cases_run, kernel_launched=True)
    return verdict


def tool_errors(tool: str, log: str) -> str | None:
    """The verdict's message for a compute-sanitizer log that reports errors (its largest error
    summary and its first report lines), None for one that reports none."""
    errors = [int(n) for n in _SUMMARY.findall(log)]
    if not any(errors):
        return None
    first = "; ".join(line.strip() for line in log.splitlines()
                      if line.strip().startswith("=========") and "ERROR SUMMARY" not in line)[:600]
    return f"compute-sanitizer {tool}: {max(errors)} error(s): {first}"
