"""The Task record: everything a method may see, and everything the judge keeps to itself.

A task is split on purpose into what a method may read (`TaskView`: instruction, entry
point, signature, the *descriptions* of visible cases) and what only the evaluator uses
(reference, input maker, hidden cases, tolerances). Methods receive the view alone, so
held-out evaluation (design invariant 2) is enforced by the type rather than by habit.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KERNELS_DIR = Path(__file__).resolve().parent / "kernels"

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")

GEAK_EVAL_PROFILE = "geak-eval"
"""The judging profile (Task.profile) that reproduces GEAK-eval's own check of an adapted task."""


@dataclass(frozen=True)
class Case:
    """One input configuration: named sizes, a dtype and a seed.

    Sizes are a sorted tuple of pairs so the case is hashable and its JSON form is stable,
    which the evaluation cache and the resume logic key on.
    """

    name: str
    sizes: tuple[tuple[str, int], ...]
    dtype: str
    seed: int
    layout: str = "contiguous"  # or one of STRIDED_LAYOUTS: every tensor input a non-contiguous view (same values)

    def size(self, key: str) -> int:
        for name, value in self.sizes:
            if name == key:
                return value
        raise KeyError(f"case {self.name!r} has no size {key!r}")

    @property
    def dims(self) -> dict[str, int]:
        return dict(self.sizes)

    def describe(self) -> str:
        dims = ", ".join(f"{k}={v}" for k, v in self.sizes)
        layout = "" if self.layout == "contiguous" else f", {self.layout} inputs"
        return f"{dims}, dtype={self.dtype}{layout}"

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "sizes": dict(self.sizes), "dtype": self.dtype, "seed": self.seed}
        if self.layout != "contiguous":
            d["layout"] = self.layout
        return d


LAYOUTS = ("contiguous", "strided", "inner_strided")
STRIDED_LAYOUTS = LAYOUTS[1:]
"""Layouts whose inputs are non-contiguous views: "strided" pads rows (the last stride stays 1),
"inner_strided" also steps the last dimension by 2. Both, because each catches a kernel the other
misses: one that ignores the inner stride passes padded rows, and one that copies to contiguous
only when the inner stride is not 1 (and ignores the row stride) passes the stepped view."""


def case(name: str, dtype: str, seed: int = 0, **sizes: int) -> Case:
    return Case(name=name, sizes=tuple(sorted(sizes.items())), dtype=dtype, seed=seed)


def case_grid(
    prefix: str, sizes: Iterable[Mapping[str, int]], dtypes: Iterable[str], seeds: Iterable[int],
    layout: str = "contiguous",
) -> tuple[Case, ...]:
    """Every (sizes x dtype x seed) combination, named so a failing case is self-describing."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r} ({', '.join(LAYOUTS)})")
    out = []
    tag = "" if layout == "contiguous" else f"-{layout}"
    for dims, dtype, seed in itertools.product(list(sizes), list(dtypes), list(seeds)):
        label = "x".join(f"{k}{v}" for k, v in sorted(dims.items()))
        c = case(f"{prefix}-{label}-{dtype}-s{seed}{tag}", dtype, seed, **dims)
        out.append(dataclasses.replace(c, layout=layout))
    return tuple(out)


def strided_view(t: Any, inner: bool = False) -> Any:
    """The same values as `t` in non-contiguous memory: rows padded (2-D and up) or every
    other element (1-D). A kernel that assumes unit strides or packed rows reads garbage.
    `inner`: 2-D and up also step the last dimension by 2 (`x[:, ::2]` of padded rows), so a
    kernel that honours the row stride but assumes the last one is 1 reads the padding too;
    1-D steps by 3 (not a repeat of the plain strided case)."""
    import torch

    if not isinstance(t, torch.Tensor) or t.dim() == 0 or t.numel() == 0:
        return t
    if t.dim() == 1:
        base = torch.empty((t.shape[0], 3 if inner else 2), dtype=t.dtype, device=t.device)
        view = base[:, 0]
    elif inner:
        base = torch.empty((*t.shape[:-1], 2 * t.shape[-1] + 3), dtype=t.dtype, device=t.device)
        view = base[..., : 2 * t.shape[-1] : 2]
    else:
        base = torch.empty((*t.shape[:-1], t.shape[-1] + 3), dtype=t.dtype, device=t.device)
        view = base[..., : t.shape[-1]]
    # Padding a kernel must never read: NaN shows up in any float result; integers (indices) get
    # 0, a valid index, so a kernel ignoring the strides gives wrong values rather than a crash.
    base.fill_(float("nan") if t.is_floating_point() or t.is_complex() else 0)
    view.copy_(t)
    return view


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float16": Tolerance(atol=1e-2, rtol=1e-2),
    "bfloat16": Tolerance(atol=2e-2, rtol=2e-2),
    "float32": Tolerance(atol=1e-4, rtol=1e-4),
    "float64": Tolerance(atol=1e-8, rtol=1e-8),
    "int8": Tolerance(atol=0, rtol=0),
    "int32": Tolerance(atol=0, rtol=0),
    "int64": Tolerance(atol=0, rtol=0),
}


class CaseUnavailable(Exception):
    """Raised by `make_inputs` for a case that cannot be built here: a new-shape case of an
    adapted task whose every perturbation the reference rejects. The judge counts the case as
    skipped, with this message as the reason, instead of judging a candidate on it."""


class NothingToCompare(RuntimeError):
    """Raised by an adapted task's reference that returns nothing and writes no argument on a
    call (TritonBench-revised matrix_reduction and nested_loops_processing make their own
    tensors and only assert or print: GEAK-eval compares the strings their tests return).
    A differential oracle has no answer to judge any candidate against there: `bench check`
    reports such a task as `unscorable`, not as a reference that fails (runners/check.py)."""


@dataclass(frozen=True)
class OutputArgs:
    """Arguments an entry point writes its result into (positions in the inputs tuple).

    `written` are compared after the call, beside the return value, and exempt from the
    inputs-unchanged check; `poisoned` (a subset) are those whose initial contents the
    reference ignores, so the judge fills them with NaN (or an integer sentinel) before the
    candidate runs: a candidate that leaves part of such an output unwritten cannot pass on
    stale values. The others keep their initial values (a cache that is updated in place).
    `aliases` are (output path, argument position) pairs where the reference itself returns (a
    view of) an input, e.g. `("output[4]", 0)` for a wrapper returning `x` as its residual: a
    candidate's output may share memory with that argument there, and nowhere else."""

    written: tuple[int, ...] = ()
    poisoned: tuple[int, ...] = ()
    aliases: tuple[tuple[str, int], ...] = ()


NO_OUTPUT_ARGS = OutputArgs()


def no_output_args(case: Case) -> OutputArgs:
    return NO_OUTPUT_ARGS


@dataclass(frozen=True)
class Mutation:
    """A source edit the simulated model may apply to the expert kernel.

    `breaks` says whether the edit makes the kernel wrong (a bug) or only changes its speed
    (a tuning change); the simulated model's ground-truth success rates rest on it, and a
    test checks that every breaking mutation is caught by the hidden cases.
    """

    kind: str
    find: str
    replace: str
    breaks: bool = True
    note: str = ""


@dataclass(frozen=True)
class Task:
    id: str
    instruction: str
    entry_point: str
    signature: str
    reference: Callable[..., Any]
    make_inputs: Callable[[Case, str], tuple]
    dtypes: tuple[str, ...]
    visible: tuple[Case, ...]
    hidden_gpu: tuple[Case, ...]
    hidden_cpu: tuple[Case, ...]
    perf: tuple[Case, ...]
    baseline_file: str
    difficulty: int
    bytes_moved: Callable[[Case], int]
    flops: Callable[[Case], int]
    suites: tuple[str, ...] = ("full",)
    tolerances: Mapping[str, Tolerance] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    mutations: tuple[Mutation, ...] = ()
    interpreter_skips: Mapping[str, str] = field(default_factory=dict)
    category: str = "misc"
    source: str = "builtin"
    output_args: Callable[[Case], OutputArgs] = no_output_args
    seeded_rng: bool = False
    """The entry point draws random numbers itself: the judge seeds torch's generators with the
    case's seed right before each candidate and reference call, so both draw the same values."""
    triton_reference: bool = False
    """The reference is Triton code (an adapted suite's own), which may leave part of its output
    unwritten: the judge finds those elements and does not judge a candidate on them."""
    # The contiguity contract, stated in the instruction a method sees: with strided_inputs,
    # hidden cases also pass non-contiguous views (same values), which the kernel must honour.
    strided_inputs: bool = False
    # Outputs may alias inputs only when the task says it works in place.
    in_place: bool = False
    # PyTorch operations a wrapper may run besides allocation, views and copies (judge/candidate/launches.py
    # holds the common allow-list), e.g. a final scalar step; anything else is `torch_fallback`.
    allowed_torch_ops: tuple[str, ...] = ()
    # Writes past the end of a CPU tensor the call allocated are judged (judge/candidate/allocations.py
    # `overruns`); off only where the toolkit emulates a suite's own checker, which does not
    # (GEAK-eval's profile: its call and execution accuracy as GEAK-eval would count them).
    judges_overruns: bool = True
    # The reference gives the same bits on every run: on a GPU the final submission runs each
    # hidden case twice and a difference flags a race.
    deterministic: bool = True

    def __post_init__(self) -> None:
        strided = [c.name for c in (*self.visible, *self.hidden_gpu, *self.hidden_cpu) if c.layout in STRIDED_LAYOUTS]
        if strided and not self.strided_inputs:
            raise ValueError(f"task {self.id}: case {strided[0]} passes strided inputs, but the task's contract says "
                             "inputs are contiguous (set strided_inputs=True)")

    @property
    def baseline_path(self) -> Path:
        return KERNELS_DIR / self.baseline_file

    def baseline_source(self) -> str:
        return self.baseline_path.read_text()

    def contract(self) -> str:
        """The contiguity sentence appended to the instruction a method reads."""
        if self.strided_inputs:
            return "Input tensors may be non-contiguous (arbitrary strides); the output must be a new tensor."
        return "Input tensors are contiguous; the output must be a new tensor."

    def inputs(self, c: Case, device: str) -> tuple:
        """The case's inputs, laid out as the case says (the judge's only way to make them)."""
        args = self.make_inputs(c, device)
        if c.layout in STRIDED_LAYOUTS:
            args = tuple(strided_view(a, inner=c.layout == "inner_strided") for a in args)
        return args

    def hidden(self, interpreter: bool) -> tuple[Case, ...]:
        return self.hidden_cpu if interpreter else self.hidden_gpu

    def cases(self, case_set: str, interpreter: bool) -> tuple[Case, ...]:
        if case_set == "visible":
            return self.visible
        if case_set == "hidden":
            # Hidden testing is at least as strict as anything a method was shown: the visible
            # cases, and on a GPU the perf cases too (timed visible feedback re-checks them), so
            # a kernel wrong only at perf sizes never counts as correct. The CPU interpreter
            # runs no perf case for anyone (they are GPU-sized and nothing is timed there).
            return self.visible + self.hidden(interpreter) + (() if interpreter else self.perf)
        if case_set == "perf":
            return self.perf
        raise ValueError(f"unknown case set {case_set!r} (visible, hidden, perf)")

    def tolerance(self, dtype: str) -> Tolerance:
        """The task's own, else the default; a dtype neither names (bool, uint8, ...) compares exactly."""
        try:
            return self.tolerances[dtype]
        except KeyError:
            return DEFAULT_TOLERANCES.get(dtype, Tolerance(atol=0, rtol=0))

    def start_ahead(self, cases: tuple[Case, ...]) -> None:
        """A judge job is about to judge `cases`: work their inputs will need that can start
        before the job draws any (an adapted suite's probing children). Nothing for a task
        whose inputs are drawn directly."""

    def judged_output(self, returned: Any, args: tuple, case: Case) -> Any:
        """What the judge compares for a call that returned `returned` on `args`: the return
        value, plus the written output arguments for tasks that have them. `reference` returns
        this same form, so candidate and reference are compared alike."""
        return returned

    def profile(self, name: str) -> Task | None:
        """A judging profile of this task: the same reference under other cases or tolerances,
        registered under an id of its own, `<id>@<name>` (see bench/registry.py), or None. Adapted
        GEAK-eval tasks have `geak-eval` (the suite's own calls at GEAK-eval's tolerance)."""
        return None

    def complete_source(self, source: str) -> str:
        """A candidate's file as the judge imports it. Built-in tasks take it as written; an
        adapted task whose entry point is the suite's own launch code appends that code when
        the candidate does not define the entry point (see bench/adapters/_glue.py)."""
        return source

    def view(self) -> TaskView:
        return TaskView(
            id=self.id,
            instruction=" ".join(part for part in (self.instruction, self.contract()) if part),
            entry_point=self.entry_point,
            signature=self.signature,
            dtypes=self.dtypes,
            visible_cases=tuple(c.describe() for c in self.visible),
            difficulty=self.difficulty,
        )


@dataclass(frozen=True)
class TaskView:
    """What a method is allowed to know about a task: no reference, no hidden cases."""

    id: str
    instruction: str
    entry_point: str
    signature: str
    dtypes: tuple[str, ...]
    visible_cases: tuple[str, ...]
    difficulty: int
