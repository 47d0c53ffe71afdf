"""GEAK-eval layout: TritonBench-revised (`TritonBench_G_v1/*.py`) and the ROCm benchmark
(`ROCm_v1/*.py`), from a GEAK-eval checkout or the data folder of an installed package.

Each file is reference code, a line of 146 '#', then the suite's test section. The task's
entry point is the function the test section calls (TritonBench: a wrapper in the code
part; ROCm: usually a launcher in the test part, which the adapted task then asks for
too). Instruction records come from a JSON beside the folders when one is present
(`TritonBench_G_comp_alpac_v1.json`, `ROCm_eval_complex_instruct_v1.json`, ...);
otherwise the task is code-to-code (rewrite the reference) and marked so.

Hidden cases are differential: the suite's test is run once, in the evaluation worker,
with the entry point wrapped so its arguments are recorded; visible cases replay the first
recorded calls, hidden cases replay them all and add five seeded permutations of each
call's floating-point inputs (same shapes, dtypes and value distribution, new order).
The expected output is the suite's reference run on the same inputs. A call whose inputs
are all integers or Python scalars can only be replayed: that is the suite's own test. An
entry point that draws random numbers itself is skipped: no input can be shared with it.
Files with AMD-only constructs (`tl.extra.hip`, `waves_per_eu`, HIP-only config keys) are
skipped anywhere but on AMD, with the reason recorded.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bench.adapters import AdapterError, AdapterReport, Skipped
from bench.adapters._adapted import (
    ADAPTED_TOLERANCES,
    AdaptedTask,
    for_interpreter,
    function_signature,
    import_text,
    module_name,
    run_in_namespace,
)
from bench.task import Case, case

SEPARATOR = "#" * 146
LAYOUTS = {"TritonBench_G_v1": "tritonbench", "ROCm_v1": "rocm"}
AMD_ONLY = (
    (re.compile(r"tl\.extra\.hip"), "tl.extra.hip (HIP libdevice)"),
    (re.compile(r"\bwaves_per_eu\b"), "waves_per_eu (HIP-only config key)"),
    (re.compile(r"\bmatrix_instr_nonkdim\b"), "matrix_instr_nonkdim (HIP-only config key)"),
    (re.compile(r"""['"]kpack['"]|\bkpack\s*="""), "kpack (HIP-only config key)"),
    (re.compile(r"float8_e4m3fnuz|float8_e5m2fnuz"), "fnuz fp8 dtypes (AMD only)"),
)
_RNG = re.compile(r"\btorch\.(randn|rand|randint|randperm|normal|bernoulli|multinomial)\b|\.(normal_|uniform_|"
                  r"random_|bernoulli_|exponential_)\(|\bdropout\b")
MAX_CALLS = 8
CPU_MAX_ELEMENTS = 1 << 18
SEEDS = range(1, 6)
_NOT_TESTS = ("perf", "bench", "save")


# ---------------------------------------------------------------- parsing


@dataclass(frozen=True)
class SuiteFile:
    path: Path
    kind: str
    code: str
    test: str
    entry: str
    entry_in_test: bool
    signature: str
    n_calls: int
    launcher: str
    also_called: tuple[str, ...]
    test_callers: tuple[str, ...]


def split_sections(text: str) -> tuple[str, str] | None:
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.strip() == SEPARATOR:
            return "".join(lines[:i]), "".join(lines[i + 1:])
    return None


def amd_only_constructs(text: str) -> list[str]:
    return [label for pattern, label in AMD_ONLY if pattern.search(text)]


def _is_jit(fn: ast.FunctionDef) -> bool:
    return any("jit" in ast.unparse(d) or "autotune" in ast.unparse(d) or "heuristics" in ast.unparse(d)
               for d in fn.decorator_list)


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _called_names(node: ast.AST) -> list[str]:
    return [n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]


def _launches(fn: ast.FunctionDef, jit_names: set[str]) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) and isinstance(n.func.value, ast.Name)
               and n.func.value.id in jit_names for n in ast.walk(fn))


def _is_test(name: str) -> bool:
    return name.startswith("test_") and not any(word in name for word in _NOT_TESTS)


def _parametrize_count(fn: ast.FunctionDef) -> int:
    total = 1
    for d in fn.decorator_list:
        if isinstance(d, ast.Call) and ast.unparse(d.func).endswith("parametrize") and len(d.args) >= 2:
            try:
                total *= max(1, len(ast.literal_eval(d.args[1])))
            except (ValueError, SyntaxError, TypeError):
                total *= 4  # not a literal (a named list): assume a few
    return total


def _call_count(tree: ast.Module, name: str) -> int:
    """Calls of `name` the test section makes, counting a call inside `for ... in <literal>`
    (or enumerate/zip of literals) once per element."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    total = 0
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name):
            continue
        times, up = 1, parents.get(node)
        while up is not None:
            if isinstance(up, ast.For):
                it = up.iter
                if isinstance(it, ast.Call) and it.args and ast.unparse(it.func) in ("enumerate", "zip", "list"):
                    it = it.args[0]
                if isinstance(it, (ast.Tuple, ast.List)):
                    times *= max(1, len(it.elts))
            up = parents.get(up)
        total += times
    return total


def _dependencies(name: str, defs: dict[str, ast.stmt], seen: set[str]) -> list[str]:
    """Top-level definitions of the test part that `name` needs, in dependency order."""
    if name in seen or name not in defs:
        return []
    seen.add(name)
    out: list[str] = []
    for ref in {n.id for n in ast.walk(defs[name]) if isinstance(n, ast.Name)}:
        out += _dependencies(ref, defs, seen)
    return out + [name]


def parse_file(path: Path, kind: str) -> SuiteFile | str:
    """A SuiteFile, or the reason the file cannot be adapted."""
    text = path.read_text(errors="replace")
    sections = split_sections(text)
    if sections is None:
        return "no separator line of 146 '#' between reference code and test"
    code, test = sections
    try:
        code_tree, test_tree = ast.parse(code), ast.parse(test)
    except SyntaxError as exc:
        return f"does not parse: {exc.msg} (line {exc.lineno})"
    code_fns, test_fns = _functions(code_tree), _functions(test_tree)
    jit_names = {n for n, f in code_fns.items() if _is_jit(f)}
    wrappers = {n: f for n, f in {**code_fns, **test_fns}.items() if n not in jit_names and not n.startswith("test_")}
    if kind == "tritonbench" and not any(_is_test(n) for n in test_fns):
        callers: list[ast.AST] = [test_tree]
    else:
        callers = [f for n, f in test_fns.items() if _is_test(n)] or [test_tree]
    counts = Counter(n for c in callers for n in _called_names(c) if n in wrappers)
    # A function that launches a kernel of the reference code is the entry point; failing that,
    # a wrapper of the code part that the test calls.
    ranked = sorted(counts, key=lambda n: (not _launches(wrappers[n], jit_names), n not in code_fns, -counts[n]))
    if not ranked:
        return "the test section calls no wrapper of the reference code"
    entry = ranked[0]
    if _RNG.search(ast.get_source_segment(code if entry in code_fns else test, wrappers[entry]) or ""):
        return (f"{entry} draws random numbers itself: candidate and reference cannot be given the same inputs "
                "(and timing moves the RNG on), so there is no deterministic differential test")
    entry_in_test = entry not in code_fns
    launcher = ""
    if entry_in_test:
        defs: dict[str, ast.stmt] = {}
        for node in test_tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                defs[node.name] = node
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                defs[node.targets[0].id] = node
        names = _dependencies(entry, {k: v for k, v in defs.items() if not k.startswith("test_")}, set())
        launcher = "\n\n".join(ast.get_source_segment(test, defs[n]) or "" for n in names)
    if kind == "rocm" or entry_in_test:
        n_calls = sum(_parametrize_count(f) for f in callers
                      if isinstance(f, ast.FunctionDef) and entry in _called_names(f)) or 1
    else:
        n_calls = _call_count(test_tree, entry)
    test_callers = tuple(n for n, f in test_fns.items() if _is_test(n) and entry in _called_names(f))
    return SuiteFile(path, kind, code, test, entry, entry_in_test, function_signature(wrappers[entry]),
                     max(1, min(n_calls, MAX_CALLS)), launcher, tuple(n for n in ranked[1:]), test_callers)


def instruction_records(folder: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Records keyed by file name, from JSON lists of {"file", "instruction", ...} found in
    the folder, its parent or grandparent. The first record per file wins (files sorted)."""
    records: dict[str, dict[str, Any]] = {}
    used: list[str] = []
    seen: set[Path] = set()
    for where in (folder, folder.parent, folder.parent.parent):
        for js in sorted(where.glob("*.json")):
            if js in seen:
                continue
            seen.add(js)
            try:
                data = json.loads(js.read_text())
            except (OSError, ValueError):
                continue
            if not isinstance(data, list):
                continue
            found = 0
            for rec in data:
                if isinstance(rec, dict) and isinstance(rec.get("file"), str) and isinstance(rec.get("instruction"), str):
                    records.setdefault(Path(rec["file"]).name, rec)
                    found += 1
            if found:
                used.append(str(js))
    return records, used


# ---------------------------------------------------------------- recording and judging


class _Captured(Exception):
    """Raised by the recorder to stop a pytest-style test once its inputs are captured."""


class _Request:
    """Stands in for pytest's `request` fixture (tests read request.node.name)."""

    def __init__(self, name: str):
        self.node = type("Node", (), {"name": name, "nodeid": name})()


def _param_sets(fn: Callable[..., Any]) -> list[dict[str, Any]]:
    sets: list[dict[str, Any]] = [{}]
    for mark in reversed(getattr(fn, "pytestmark", [])):
        if getattr(mark, "name", "") != "parametrize" or len(mark.args) < 2:
            continue
        names = mark.args[0] if not isinstance(mark.args[0], str) else [n.strip() for n in mark.args[0].split(",")]
        combos = []
        for value in mark.args[1]:
            if hasattr(value, "values") and hasattr(value, "marks"):  # pytest.param(...)
                values = tuple(value.values)
            else:
                values = tuple(value) if len(names) > 1 else (value,)
            if len(values) == len(names):
                combos.append(dict(zip(names, values, strict=True)))
        sets = [{**a, **b} for a, b in itertools.product(sets, combos)]
    return sets


def _clone(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    return value


class GeakSuite:
    """One adapted file: lazily imports the reference and records the suite's calls, once
    per process (in the evaluation worker, on the device the cases run on)."""

    def __init__(self, sf: SuiteFile, interpreter: bool):
        self.sf = sf
        self.interpreter = interpreter
        fix = for_interpreter if interpreter else (lambda t: t)
        self.code, self.test, self.launcher = fix(sf.code), fix(sf.test), fix(sf.launcher)
        self._reference: Any = None
        self._calls: list[tuple] | None = None
        self.rng_seed = 0

    @property
    def baseline(self) -> str:
        return self.code + ("\n\n# the suite's launcher, from its test section\n" + self.launcher if self.launcher else "")

    def reference_fn(self) -> Callable[..., Any]:
        if self._reference is None:
            module = import_text(self.baseline, module_name("ref", str(self.sf.path), self.baseline))
            self._reference = getattr(module, self.sf.entry)
        return self._reference

    def calls(self) -> list[tuple]:
        if self._calls is None:
            self._calls = self._record()
        return self._calls

    def _record(self) -> list[tuple]:
        import torch

        module = import_text(self.code, module_name("rec", str(self.sf.path), self.code))
        ns = module.__dict__
        recorded: list[tuple] = []
        stop_after_capture = self.sf.entry_in_test or self.sf.kind == "rocm"

        def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
            sig = inspect.signature(original)

            def recorder(*args: Any, **kwargs: Any) -> Any:
                if len(recorded) < MAX_CALLS:
                    bound = sig.bind(*args, **kwargs)
                    bound.apply_defaults()
                    recorded.append(tuple(_clone(v) for v in bound.arguments.values()))
                    if stop_after_capture:
                        raise _Captured()
                return original(*args, **kwargs)

            return recorder

        torch.manual_seed(0)
        failure = ""
        if not self.sf.entry_in_test:
            ns[self.sf.entry] = wrap(ns[self.sf.entry])
        try:
            run_in_namespace(self.test, module_name("test", str(self.sf.path), self.test), ns)
        except _Captured:
            pass
        except Exception as exc:  # noqa: BLE001 - the suite's own test may fail; keep what was recorded
            failure = f"{type(exc).__name__}: {exc}"
        if self.sf.entry_in_test:
            ns[self.sf.entry] = wrap(ns[self.sf.entry])
        # pytest-style tests (the ROCm layout) do not run at import: call them, parameter set by set.
        for name in self.sf.test_callers if not recorded else ():
            fn = ns.get(name)
            if not callable(fn):
                continue
            params = inspect.signature(fn).parameters
            for kwargs in _param_sets(fn):
                if len(recorded) >= MAX_CALLS:
                    break
                if "request" in params:
                    kwargs = {**kwargs, "request": _Request(name)}
                if set(params) - set(kwargs):
                    break  # a fixture we cannot provide
                try:
                    fn(**kwargs)
                except _Captured:
                    pass
                except Exception as exc:  # noqa: BLE001 - recorded inputs are what we need
                    failure = failure or f"{type(exc).__name__}: {exc}"
        if not recorded:
            raise RuntimeError(f"the suite's test recorded no call of {self.sf.entry}"
                               + (f" ({failure})" if failure else ""))
        if self.interpreter:
            small = [c for c in recorded if _elements(c) <= CPU_MAX_ELEMENTS]
            recorded = small or [min(recorded, key=_elements)]
        return recorded

    # -- the Task's callables

    def make_inputs(self, c: Case, device: str) -> tuple:
        import torch

        calls = self.calls()
        call = calls[c.size("call") % len(calls)]
        out = []
        for pos, value in enumerate(call):
            if isinstance(value, torch.Tensor):
                t = value.to(device).clone()
                if c.seed > 0 and t.is_floating_point() and t.numel() > 1:
                    g = torch.Generator().manual_seed(c.seed * 7919 + pos)
                    perm = torch.randperm(t.numel(), generator=g).to(device)
                    t = t.contiguous().reshape(-1)[perm].reshape(t.shape)
                out.append(t)
            elif isinstance(value, (list, tuple)):
                out.append(type(value)(v.to(device).clone() if isinstance(v, torch.Tensor) else v for v in value))
            else:
                out.append(value)
        # Wrappers that draw random tensors themselves get the same draws for candidate and reference.
        self.rng_seed = c.seed
        torch.manual_seed(c.seed)
        return tuple(out)

    def reference(self, *args: Any) -> Any:
        import torch

        args = self._native(args)
        torch.manual_seed(self.rng_seed)
        return self.reference_fn()(*args)

    def _native(self, args: tuple) -> tuple:
        """The judge also runs the reference on float64 copies; the suite's kernels do not take
        float64, so those are cast back to the dtypes of the recorded call of the same shapes."""
        import torch

        if not any(isinstance(a, torch.Tensor) and a.dtype == torch.float64 for a in args):
            return args
        shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in args]
        match = next((call for call in self.calls()
                      if [tuple(v.shape) if isinstance(v, torch.Tensor) else None for v in call] == shapes), None)
        out = []
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor) and a.dtype == torch.float64:
                want = match[i].dtype if match is not None and isinstance(match[i], torch.Tensor) else torch.float32
                a = a.to(want)
            out.append(a)
        return tuple(out)


def _elements(call: tuple) -> int:
    import torch

    return sum(v.numel() for v in call if isinstance(v, torch.Tensor))


# ---------------------------------------------------------------- tasks


def _instruction(sf: SuiteFile, record: dict[str, Any] | None) -> tuple[str, str]:
    launcher_note = ""
    if sf.launcher:
        launcher_note = (f"\n\nThe judge calls `{sf.entry}`, which the suite's test defines; include it (with any "
                         f"helpers it needs) in your file, unchanged or improved:\n```python\n{sf.launcher}\n```")
    if record is not None:
        return record["instruction"] + launcher_note, "instruction"
    text = (f"Rewrite the following Triton program as a correct and faster Triton implementation. Keep the "
            f"function `{sf.entry}` with the same signature and behaviour; the judge calls it on the suite's own "
            f"inputs and on permutations of them, and compares with this reference. Allocate on the inputs' device."
            f"\n```python\n{sf.code}\n```" + launcher_note)
    return text, "code-to-code"


def _make_task(sf: SuiteFile, record: dict[str, Any] | None, interpreter: bool) -> AdaptedTask:
    suite = GeakSuite(sf, interpreter)
    prefix = "tb" if sf.kind == "tritonbench" else "rocm"
    instruction, mode = _instruction(sf, record)
    calls = range(sf.n_calls)
    visible = tuple(case(f"visible-call{i}", "recorded", 0, call=i) for i in range(min(sf.n_calls, 2)))
    replays = tuple(case(f"hidden-call{i}-suite", "recorded", 0, call=i) for i in calls if i >= 2)
    permuted = tuple(case(f"hidden-call{i}-perm-s{s}", "recorded", s, call=i) for i in calls for s in SEEDS)
    difficulty = record.get("difficulty") if record else None
    return AdaptedTask(
        id=f"{prefix}-{sf.path.stem}",
        instruction=instruction,
        entry_point=sf.entry,
        signature=sf.signature,
        reference=suite.reference,
        make_inputs=suite.make_inputs,
        dtypes=("recorded",),
        visible=visible,
        hidden_gpu=replays + permuted,
        hidden_cpu=replays + permuted,
        perf=(case("perf-call0", "recorded", 0, call=0),),
        baseline_file="",
        difficulty=int(difficulty) if isinstance(difficulty, (int, float)) and 1 <= difficulty <= 5 else 3,
        bytes_moved=lambda c: 0,
        flops=lambda c: 0,
        suites=("geak-eval", "tritonbench" if sf.kind == "tritonbench" else "rocm"),
        tolerances=dict(ADAPTED_TOLERANCES),
        category="adapted",
        source=f"geak-eval:{sf.kind}",
        origin=str(sf.path),
        mode=mode,
        test_mode="differential: the suite's recorded calls replayed, plus 5 seeded permutations of their "
                  "floating-point inputs, against the suite's reference",
        baseline_text=suite.baseline,
    )


def find_layout_folders(root: Path) -> list[tuple[Path, str]]:
    if root.name in LAYOUTS and root.is_dir():
        return [(root, LAYOUTS[root.name])]
    found = []
    for name, kind in LAYOUTS.items():
        matches = sorted((p for p in root.rglob(name) if p.is_dir()), key=lambda p: (len(p.parts), str(p)))
        if matches:
            found.append((matches[0], kind))
    return found


def load(root: Path, vendor: str) -> AdapterReport:
    folders = find_layout_folders(root)
    if not folders:
        raise AdapterError(f"{root} holds no TritonBench_G_v1/ or ROCm_v1/ folder (the GEAK-eval layout)")
    report = AdapterReport("geak-eval", str(root), vendor)
    for folder, kind in folders:
        records, used = instruction_records(folder)
        report.notes.append(f"{kind}: {folder}" + (f"; instructions from {', '.join(used)}" if used
                                                     else "; no instruction JSON: tasks are code-to-code"))
        for path in sorted(folder.glob("*.py")):
            text = path.read_text(errors="replace")
            amd = amd_only_constructs(text)
            if amd and vendor != "amd":
                report.skipped.append(Skipped(str(path), f"AMD-only construct(s): {', '.join(amd)}; runs on ROCm only "
                                                         f"(this machine: {vendor})"))
                continue
            parsed = parse_file(path, kind)
            if isinstance(parsed, str):
                report.skipped.append(Skipped(str(path), parsed))
                continue
            report.tasks.append(_make_task(parsed, records.get(path.name), interpreter=vendor == "cpu"))
    return report
