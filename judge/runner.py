"""What a runner of the candidate's entry point is asked (`Call`) and gives back (`CallReport`),
the interface both runners keep (`Runner`), and the runner in this very process (`LocalRunner`:
the naive benchmark harness, `bench strength` and unit tests). The runner a judge worker uses,
the candidate in a process of its own, is judge/remote.py `RemoteRunner`; judge/oracle.py sends
calls to either and judges what comes back. Kept apart from the oracle so the judging pipeline
reads on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from bench.slack import padded_copy
from judge.candidate.kernel_trace import TraceFindings
from judge.candidate.verdict import capped_traceback


@dataclass
class CallReport:
    """What one call of the entry point gave back (judge/candidate/server.py `run_call`)."""

    ok: bool
    kind: str = ""
    message: str = ""
    traceback: str = ""  # the candidate's own frames when it raised (judge/candidate/tracebacks.py)
    launched: int = 0
    fallback: dict[str, int] = field(default_factory=dict)
    unwritten: list[str] = field(default_factory=list)
    aliased: list[str] = field(default_factory=list)
    modified: list[int] = field(default_factory=list)  # inputs the call changed (numbered among tensors)
    inputs_after: tuple = ()  # the arguments after the call: output arguments as written, the rest as given
    output: Any = None  # as it was when the call returned
    trace: TraceFindings | None = None  # on a GPU, what the device's trace showed (judge/candidate/kernel_trace.py)

    @classmethod
    def from_reply(cls, reply: dict[str, Any], inputs_after: tuple = (), output: Any = None) -> CallReport:
        def strings(v: Any) -> list[str]:
            return [str(x)[:300] for x in v] if isinstance(v, list) else []

        raw = reply.get("fallback")
        fallback: dict[Any, Any] = raw if isinstance(raw, dict) else {}
        return cls(ok=reply.get("ok") is True, kind=str(reply.get("kind", "runtime_error")),
                   message=str(reply.get("message", ""))[:4000],
                   traceback=capped_traceback(reply.get("traceback")), launched=int(reply.get("launched") or 0),
                   fallback={str(k)[:80]: int(v) for k, v in fallback.items() if isinstance(v, int)},
                   unwritten=strings(reply.get("unwritten")), aliased=strings(reply.get("aliased")),
                   modified=_ints(reply.get("modified")), inputs_after=inputs_after, output=output,
                   trace=TraceFindings.from_wire(reply["trace"]) if reply.get("trace") is not None else None)


def _ints(v: Any) -> list[int]:
    return [int(x) for x in v if isinstance(x, int) and not isinstance(x, bool)][:64] if isinstance(v, list) else []


@dataclass(frozen=True)
class Call:
    """One call of the entry point, as a runner is asked for it: on `args` (copied into the
    runner's own tensors, or with `refill` copied into the tensors of the slot's previous call);
    `seed`: torch's generators seeded right before it (Task.seeded_rng); `written`: output
    arguments (an output may alias them)."""

    slot: int
    args: tuple
    refill: bool = False
    seed: int | None = None
    written: tuple[int, ...] = ()


class Runner(Protocol):
    """Runs the candidate's entry point: in its own process (judge/remote.py `RemoteRunner`) or
    in this one (`LocalRunner`, the naive harness and unit tests). Calls are submitted in
    batches and their reports taken in the same order; a runner may run later calls while an
    earlier one is judged, and runs none after a call that failed."""

    def submit(self, calls: list[Call]) -> None:
        """These calls, in order, once every report of the last batch has been taken."""
        ...

    def result(self) -> CallReport:
        """The report of the oldest call submitted and not yet taken."""
        ...

    def discard(self) -> None:
        """Calls submitted and no longer wanted (a verdict came first): dropped once done."""
        ...

    def collect(self) -> tuple[int, list[int]]:
        """(calls held since the last reset, indices of those whose output is no longer what
        the call returned: a buffer reused by a later call), forgetting them."""
        ...

    def reset(self) -> None:
        """Forget held outputs and inputs: a new case set begins."""
        ...


class LocalRunner:
    """The candidate in this very process: for the naive benchmark harness and unit tests only."""

    def __init__(self, entry: Callable[..., Any], device: str, interpreter: bool, allowed_ops: tuple[str, ...] = (),
                 source_path: Path | None = None, guard: bool = True):
        """`source_path`: the candidate's file, whose frames a failure's traceback shows. `guard`:
        writes past a CPU allocation are judged (the task's `judges_overruns`)."""
        from judge.candidate import launches

        launches.set_allowed_ops(allowed_ops)
        self.entry, self.device, self.interpreter = entry, device, interpreter
        self.source_path = source_path
        self.guard = guard
        self.inputs: dict[int, tuple] = {}
        from judge.candidate.server import HeldOutputs

        self.held = HeldOutputs()
        self.reports: list[CallReport] = []  # of calls run and not yet taken (`result`)

    def submit(self, calls: list[Call]) -> None:
        """Run now, in order, up to the first that fails (as a candidate process stops there):
        in this process nothing can run beside the judge."""
        for c in calls:
            self.reports.append(self.call(c.slot, c.args, c.refill, c.seed, c.written))
            if not self.reports[-1].ok:
                break

    def result(self) -> CallReport:
        return self.reports.pop(0)

    def discard(self) -> None:
        self.reports.clear()

    def call(self, slot: int, args: tuple, refill: bool, seed: int | None = None,
             written: tuple[int, ...] = ()) -> CallReport:
        """The same steps as the candidate process's `call` (judge/candidate/server.py), so both
        judge alike."""
        from judge.candidate.server import changed_inputs, copy_output, input_copies, run_call
        from judge.candidate.server import refill as refill_in_place

        if refill and slot in self.inputs:
            self.inputs[slot] = refill_in_place(self.inputs[slot], args)
        else:
            self.inputs[slot] = tuple(padded_copy(a) for a in args)  # as a candidate process receives them
        mine = self.inputs[slot]
        before = input_copies(mine, written)
        reply, out = run_call(self.entry, mine, self.device, self.interpreter, seed=seed, written=written,
                              source_path=self.source_path, guard=self.guard)
        if not reply["ok"]:
            return CallReport.from_reply(reply)
        reply["modified"] = changed_inputs(before, mine)
        self.held.add(out, mine, written)
        return CallReport.from_reply(reply, _after_call(args, mine, written), copy_output(out))

    def collect(self) -> tuple[int, list[int]]:
        return self.held.take()

    def reset(self) -> None:
        self.held.clear()
        self.inputs = {}


def _after_call(given: tuple, after: tuple | list, written: tuple[int, ...]) -> tuple:
    """The arguments as a call left them: output arguments from `after` (copied), the rest as
    `given` (an input the call changed fails on the runner's `modified` report instead)."""
    def left(i: int, g: Any) -> Any:
        if i not in written:
            return g
        return after[i].clone() if isinstance(after[i], torch.Tensor) else after[i]

    return tuple(left(i, g) for i, g in enumerate(given))
