"""Re-scoring published outputs: a folder of generated files in GEAK-eval's output layout,
judged by the toolkit's oracle, with GEAK-eval's metrics beside the strict one.

GEAK-eval reads either a folder of `<task file>.py` (its `--run_on_code` mode; GEAK-agent's
`exec/` folders hold the same, code plus the suite's test section) or a folder of JSON files,
one per pass, each a list of `{"predict": <model response>, "file": <task file>}` (or a
`label` holding the reference code instead of the file name). Both are read here; a file's
code is its code blocks when the response has any, cut at the suite's separator line (the
test section is the suite's, not the answer).

Per answer: **call** (GEAK-eval's call accuracy: the code imports and its entry point runs on
the suite's own calls), **exec** (GEAK-eval's execution accuracy: correct on the suite's own
calls at atol 1e-2 / rtol 1e-1; the `geak-eval` profile of the task) and **strict** (the
toolkit's hidden cases: permutations, new shapes, per-dtype tolerances). On a GPU, answers
that pass strictly are timed on the task's perf inputs (the suite's perf scripts where it
ships them) against the suite's reference. Nothing is posted anywhere.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.registry import profile_id
from bench.task import GEAK_EVAL_PROFILE, Task
from judge.device import Target
from judge.policy import TimingPolicy
from runners.pool import LocalPool

SEPARATOR = "#" * 146
RAN = ("correct", "wrong_result", "no_kernel")
"""Verdicts of code that imported and whose entry point ran to the end (GEAK-eval's "call")."""


class ScoreError(ValueError):
    """The folder cannot be scored at all (missing, empty, no task to match)."""


@dataclass(frozen=True)
class Output:
    """One generated answer: which pass it belongs to, the suite file it answers, its code."""

    pass_index: int
    file: str
    code: str
    origin: str


_BLOCK = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)```", re.S)


def extract_code(text: str) -> str:
    """The answer's code: its fenced code blocks joined when it has any (GEAK-eval joins them
    too), everything before the suite's separator line, without the answer's own tests
    (`strip_tests`)."""
    blocks = _BLOCK.findall(text)
    code = "\n".join(blocks) if blocks else text
    lines = code.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.strip() == SEPARATOR:
            code = "".join(lines[:i])
            break
    return strip_tests(code)


def _calls_a_test(node: ast.stmt) -> bool:
    value = getattr(node, "value", None)
    if not isinstance(node, (ast.Expr, ast.Assign, ast.AnnAssign)) or not isinstance(value, ast.Call):
        return False
    f = value.func
    return (isinstance(f, ast.Name) and f.id.startswith("test_")) or \
        (isinstance(f, ast.Attribute) and f.attr.startswith("test_"))


def strip_tests(code: str) -> str:
    """Top-level `def test_*` functions and statements calling them removed (models often end
    their answer with a test that runs at import; GEAK-eval strips them too). Code that does
    not parse is returned as it is: the judge reports the syntax error."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    drop: set[int] = set()
    for node in tree.body:
        if (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")) or _calls_a_test(node):
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            drop.update(range(start, (node.end_lineno or node.lineno) + 1))
    if not drop:
        return code
    return "".join(line for i, line in enumerate(code.splitlines(keepends=True), start=1) if i not in drop)


def read_outputs(folder: Path, label_to_file: dict[str, str] | None = None) -> tuple[list[Output], list[str]]:
    """Answers in `folder` (`*.py`: one pass; each `*.json`: one pass more), and one note per
    item that could not be read."""
    if not folder.is_dir():
        raise ScoreError(f"{folder} is not a folder")
    outputs: list[Output] = []
    notes: list[str] = []
    py_files = sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")
    for p in py_files:
        outputs.append(Output(0, p.name, extract_code(p.read_text(errors="replace")), str(p)))
    first_json_pass = 1 if py_files else 0
    for i, js in enumerate(sorted(folder.glob("*.json"))):
        try:
            items = json.loads(js.read_text())
        except (OSError, ValueError) as exc:
            notes.append(f"{js.name}: not JSON ({exc})")
            continue
        if not isinstance(items, list):
            notes.append(f"{js.name}: not a list of answers")
            continue
        for n, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("predict"), str):
                notes.append(f"{js.name}[{n}]: no 'predict' text")
                continue
            name = item.get("file")
            if not isinstance(name, str) and isinstance(item.get("label"), str) and label_to_file:
                name = label_to_file.get(item["label"].strip())
            if not isinstance(name, str):
                notes.append(f"{js.name}[{n}]: names no task file ('file' missing, 'label' matches no reference)")
                continue
            outputs.append(Output(first_json_pass + i, Path(name).name, extract_code(item["predict"]), f"{js}[{n}]"))
    if not outputs:
        raise ScoreError(f"{folder} holds no generated files (*.py) or GEAK-eval answer lists (*.json)")
    return outputs, notes


@dataclass(frozen=True)
class Scored:
    pass_index: int
    file: str
    task: str
    call: bool
    exec: bool
    strict: bool
    exec_verdict: str
    strict_verdict: str
    message: str
    speedup: float | None = None


@dataclass
class ScoreReport:
    folder: str
    suite: str
    tasks: list[str]
    device: str
    rows: list[Scored] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passes(self) -> list[int]:
        return sorted({r.pass_index for r in self.rows}) or [0]

    def per_pass(self) -> list[dict[str, Any]]:
        """Accuracies per pass over every task of the suite (a task with no answer fails)."""
        out = []
        n = len(self.tasks)
        for p in self.passes:
            rows = {r.task: r for r in self.rows if r.pass_index == p}
            out.append({"pass": p, "answers": len(rows),
                        "call_accuracy": sum(r.call for r in rows.values()) / n,
                        "exec_accuracy": sum(r.exec for r in rows.values()) / n,
                        "strict_pass": sum(r.strict for r in rows.values()) / n})
        return out

    def pass_at_k(self) -> dict[str, dict[int, float]]:
        """Unbiased pass@k over passes (k up to the number of passes), per metric."""
        from stats.passk import pass_at_k

        n_pass = len(self.passes)
        out: dict[str, dict[int, float]] = {}
        for metric in ("call", "exec", "strict"):
            counts = [sum(getattr(r, metric) for r in self.rows if r.task == t) for t in self.tasks]
            out[metric] = {k: float(sum(pass_at_k(n_pass, c, k) for c in counts) / len(self.tasks))
                           for k in range(1, n_pass + 1)}
        return out

    def speedup(self) -> dict[str, Any]:
        """Geometric mean speedup over the suite's reference, over answers that pass strictly and
        were timed; and GEAK-eval's own aggregate beside it (arithmetic mean over the same answers,
        dropping ratios of 10 or more, as its script does)."""
        values = [r.speedup for r in self.rows if r.strict and r.speedup is not None and r.speedup > 0]
        if not values:
            return {"timed": 0, "geomean": None, "geak_eval_mean": None}
        kept = [v for v in values if v < 10]
        return {"timed": len(values), "geomean": math.exp(sum(math.log(v) for v in values) / len(values)),
                "geak_eval_mean": sum(kept) / len(kept) if kept else None}

    def to_json(self) -> dict[str, Any]:
        return {"folder": self.folder, "suite": self.suite, "device": self.device, "tasks": len(self.tasks),
                "per_pass": self.per_pass(), "pass_at_k": self.pass_at_k(), "speedup": self.speedup(),
                "rows": [asdict(r) for r in self.rows], "unmatched": list(self.unmatched), "notes": list(self.notes)}


def format_score(report: ScoreReport) -> str:
    lines = [f"{report.folder}: {len(report.tasks)} tasks of suite {report.suite} on {report.device}"]
    lines.append(f"{'pass':>4} {'answers':>7} {'call acc':>9} {'exec acc':>9} {'strict':>7}   "
                 "(exec: GEAK-eval's check, the suite's calls at atol 1e-2 / rtol 1e-1; strict: hidden cases)")
    for row in report.per_pass():
        lines.append(f"{row['pass']:>4} {row['answers']:>7} {row['call_accuracy']:>9.1%} {row['exec_accuracy']:>9.1%} "
                     f"{row['strict_pass']:>7.1%}")
    if len(report.passes) > 1:
        pk = report.pass_at_k()
        for k in pk["call"]:
            lines.append(f"pass@{k}: call {pk['call'][k]:.1%}, exec {pk['exec'][k]:.1%}, strict {pk['strict'][k]:.1%}")
    gap = [r for r in report.rows if r.exec and not r.strict]
    if gap:
        lines.append(f"{len(gap)} answers pass GEAK-eval's check but fail the hidden cases:")
        lines += [f"  {r.file} (pass {r.pass_index}): {r.strict_verdict}: {r.message[:150]}" for r in gap[:20]]
        if len(gap) > 20:
            lines.append(f"  ... and {len(gap) - 20} more (see --json)")
    s = report.speedup()
    if s["timed"]:
        mean = f"{s['geak_eval_mean']:.3f}x" if s["geak_eval_mean"] is not None else "n/a"
        lines.append(f"speedup vs the suite's reference over {s['timed']} timed answers: geometric mean "
                     f"{s['geomean']:.3f}x (GEAK-eval's arithmetic mean without ratios >= 10: {mean})")
    elif report.device == "cpu-interpreter":
        lines.append("speedup: not measured on the CPU interpreter")
    for u in report.unmatched:
        lines.append(f"unmatched: {u}")
    for n in report.notes:
        lines.append(f"note: {n}")
    return "\n".join(lines)


def _task_files(tasks: Iterable[Task]) -> dict[str, Task]:
    return {Path(str(getattr(t, "origin", ""))).name: t for t in tasks if getattr(t, "origin", "")}


def score_outputs(outputs: list[Output], tasks: list[Task], evaluate: Callable[..., Any], timed: bool,
                  on_row: Callable[[Scored], None] | None = None, workers: int = 1) -> tuple[list[Scored], list[str]]:
    """Judge every answer that names a task of `tasks`; `evaluate(task_id, source, case_set,
    timing=...)` is an executor's. Returns the rows (in input order) and the unmatched answers."""
    by_file = _task_files(tasks)
    unmatched = [f"{o.origin}: {o.file} is not a task of this suite" for o in outputs if o.file not in by_file]
    todo = [o for o in outputs if o.file in by_file]

    def one(o: Output) -> Scored:
        task = by_file[o.file]
        source = task.complete_source(o.code)
        suite_check = evaluate(profile_id(task.id, GEAK_EVAL_PROFILE), source, "hidden").verdict \
            if task.profile(GEAK_EVAL_PROFILE) is not None else None
        ev = evaluate(task.id, source, "hidden", timing=timed)
        v = ev.verdict
        ran = suite_check.kind in RAN if suite_check is not None else v.kind in RAN
        speedup = ev.timing.speedup_vs_baseline if ev.timing is not None else None
        message = v.message if not v.correct else (suite_check.message if suite_check and not suite_check.correct else "")
        row = Scored(o.pass_index, o.file, task.id, ran, bool(suite_check is not None and suite_check.correct),
                     v.correct, suite_check.kind if suite_check is not None else "n/a", v.kind, message, speedup)
        if on_row is not None:
            on_row(row)
        return row

    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        rows = list(ex.map(one, todo))
    return rows, unmatched


def score_suite(folder: Path, suite: str, sources: list[str] | None = None, workers: int | None = None,
                device: str | None = None, on_row: Callable[[Scored], None] | None = None) -> ScoreReport:
    """`cli.py score` as a library call: the answers in `folder` for the tasks of `suite`, after
    loading `sources` [$KMC_TASK_SOURCES]; `device` "auto" or "cpu" [$KMC_FORCE_CPU's default].
    ScoreError (one line) for a folder that cannot be scored; ConfigError for bad options."""
    from bench.registry import load_sources, resolve_sources, suite_tasks
    from judge.device import default_device, detect_target
    from runners.config import ConfigError

    if workers is not None and workers < 1:
        raise ConfigError("--workers must be at least 1")
    target = detect_target(force_cpu=(device or default_device()) == "cpu")
    task_sources = resolve_sources(sources)
    reports = load_sources(task_sources, target.vendor)
    report = score_folder(folder, suite, suite_tasks(suite), target, workers=workers, on_row=on_row,
                          task_sources=task_sources)
    report.notes += sorted({n for r in reports for n in getattr(r, "notes", ()) if n.startswith("warning")})
    return report


def score_folder(folder: Path, suite: str, tasks: list[Task], target: Target, workers: int | None = None,
                 timing_policy: TimingPolicy | None = None, on_row: Callable[[Scored], None] | None = None,
                 task_sources: list[str] | tuple[str, ...] = ()) -> ScoreReport:
    if not tasks:
        raise ScoreError(f"suite {suite!r} has no tasks")
    label_to_file = {_code_section(Path(str(getattr(t, "origin", "")))): Path(str(getattr(t, "origin", ""))).name
                     for t in tasks if getattr(t, "origin", "")}
    outputs, notes = read_outputs(folder, label_to_file)
    report = ScoreReport(str(folder), suite, [t.id for t in tasks], target.device_name if not target.interpreter
                         else "cpu-interpreter", notes=notes)
    timed = not target.interpreter
    with LocalPool(target, workers=workers, task_sources=task_sources) as pool:
        pool.warm_up()

        def evaluate(task_id: str, source: str, case_set: str, timing: bool = False) -> Any:
            return pool.evaluate(task_id, source, case_set, timing=timing, timing_policy=timing_policy)

        report.rows, report.unmatched = score_outputs(outputs, tasks, evaluate, timed, on_row, workers=pool.size)
    return report


def _code_section(path: Path) -> str:
    """A suite file's reference code (what GEAK-eval's `label` holds), for matching answers."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return extract_code(text).strip()
