"""GEAK-eval layout: TritonBench-revised (`TritonBench_G_v1/*.py`) and the ROCm benchmark
(`ROCm_v1/*.py`), from a GEAK-eval checkout or the data folder of an installed package. A
folder pointed at directly may also be a variant of those (`ROCm_v1_autotune/`, `ROCm_v1.1/`).

Each file is reference code, a line of 146 '#', then the suite's test section. The task's
entry point is the function the test section calls that leads to a kernel of the reference
code (TritonBench: a wrapper in the code part, or `name = _Fn.apply` over an autograd
Function; ROCm: usually a launcher in the test part, which the adapted task then asks for
too). Test helpers (`set_seed`, torch references, GB/s calculators) never qualify. Instruction
records come from a JSON beside the folders when one is present (GEAK-eval's
`TritonBench_G_comp_alpac_v1_fixed_with_difficulty.json` and
`ROCm_eval_complex_instruct_v1.json`, or TritonBench's own `TritonBench_G_v1.json`, whose
text is under `comp_instru`); otherwise the task is code-to-code (rewrite the reference) and
marked so.

Hidden cases are differential: the suite's test is run once, in the evaluation worker,
with the entry point wrapped so its arguments are recorded; visible cases replay the first
recorded calls, hidden cases replay them all and add five seeded permutations of each
call's floating-point inputs (same shapes, dtypes and value distribution, new order).
The expected output is the suite's reference run on the same inputs. A call whose inputs
are all integers or Python scalars can only be replayed: that is the suite's own test.
Skipped, each with its reason: an entry point that draws random numbers itself (no input
can be shared with it); one that writes its result into a tensor it is given (lightllm-style
wrappers that `return` nothing: the judge compares returned values and requires inputs
unchanged); a test that launches the kernel itself with no wrapper to call (much of the ROCm
set); and, anywhere but on AMD, files with AMD-only constructs (`tl.extra.hip`,
`waves_per_eu`, HIP-only config keys).
"""

from __future__ import annotations

import ast
import copy
import inspect
import itertools
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def _definitions(tree: ast.Module) -> dict[str, ast.stmt]:
    """Top-level functions, classes and single-name assignments (`f = _Fn.apply`,
    `k = triton.autotune(...)(_kernel)`): what a name used by the tests can resolve to."""
    defs: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defs[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            defs[node.targets[0].id] = node
    return defs


def _apply_alias(node: ast.stmt, defs: dict[str, ast.stmt]) -> ast.ClassDef | None:
    """The autograd Function class of `name = SomeFunction.apply`, TritonBench's usual way
    to publish a forward+backward operator; None for anything else."""
    if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and node.value.attr == "apply"
            and isinstance(node.value.value, ast.Name)):
        cls = defs.get(node.value.value.id)
        return cls if isinstance(cls, ast.ClassDef) else None
    return None


def _forward(cls: ast.ClassDef) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)


def _called_names(node: ast.AST) -> list[str]:
    return [n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]


def _launches(fn: ast.AST, jit_names: set[str]) -> bool:
    return bool(_launched(fn, jit_names))


def _launched(node: ast.AST, jit_names: set[str]) -> list[str]:
    """Kernels of the reference code launched as `kernel[grid](...)` inside `node`."""
    return [n.func.value.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
            and isinstance(n.func.value, ast.Name) and n.func.value.id in jit_names]


def _reaches_kernel(name: str, defs: dict[str, ast.stmt], jit_names: set[str], seen: set[str]) -> bool:
    """Whether `name` is, or refers (through the file's own definitions) to, a kernel of the
    reference code. A test helper (`set_seed`, a torch reference, a GB/s calculator) does
    not, and must never become the entry point."""
    if name in jit_names:
        return True
    if name in seen or name not in defs:
        return False
    seen.add(name)
    return any(_reaches_kernel(n.id, defs, jit_names, seen) for n in ast.walk(defs[name]) if isinstance(n, ast.Name))


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


def _own_returns(fn: ast.FunctionDef) -> list[ast.Return]:
    """`return` statements of `fn` itself, not of the functions and lambdas nested in it."""
    out: list[ast.Return] = []
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return):
            out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _in_place_output(fn: ast.FunctionDef, skip_first: bool = False) -> str:
    """How `fn` hands its result back through an argument, or ''. lightllm-style TritonBench
    wrappers take the output buffer and `return` nothing; some ROCm autograd forwards return
    the buffer they were given. The judge compares return values and checks that inputs are
    left unchanged, so such an entry point fails even with the suite's own code."""
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)][1 if skip_first else 0:]
    values = [r.value for r in _own_returns(fn)
              if r.value is not None and not (isinstance(r.value, ast.Constant) and r.value.value is None)]
    if not values:
        return "returns nothing"
    stored = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    passed = [v.id for v in values if isinstance(v, ast.Name) and v.id in params and v.id not in stored]
    if len(passed) == len(values):
        return f"returns its argument {passed[0]!r}"
    return ""


def _entry_signature(name: str, node: ast.stmt, defs: dict[str, ast.stmt]) -> str:
    if isinstance(node, ast.FunctionDef):
        return function_signature(node)
    cls = _apply_alias(node, defs)
    fwd = _forward(cls) if cls is not None else None
    if fwd is None:
        return f"def {name}(*args)"
    args = copy.copy(fwd.args)
    if args.posonlyargs:
        args.posonlyargs = args.posonlyargs[1:]
    else:
        args.args = args.args[1:]
    return f"def {name}({ast.unparse(args)})"


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
    code_defs, test_defs = _definitions(code_tree), _definitions(test_tree)
    defs = {**code_defs, **test_defs}
    jit_names = {n for n, f in code_fns.items() if _is_jit(f)}
    # Callable definitions the tests may call: plain functions and `name = _Fn.apply` aliases.
    wrappers = {n: d for n, d in defs.items() if n not in jit_names and not n.startswith("test_")
                and (isinstance(d, ast.FunctionDef) or _apply_alias(d, defs) is not None)}
    if kind == "tritonbench" and not any(_is_test(n) for n in test_fns):
        callers: list[ast.AST] = [test_tree]
    else:
        callers = [f for n, f in test_fns.items() if _is_test(n)] or [test_tree]
    counts = Counter(n for c in callers for n in _called_names(c) if n in wrappers)
    # The entry point must lead to a kernel of the reference code; among those, one that
    # launches a kernel itself, then one of the code part, then the most called.
    reaching = [n for n in counts if _reaches_kernel(n, defs, jit_names, set())]
    ranked = sorted(reaching, key=lambda n: (not _launches(wrappers[n], jit_names), n not in code_defs, -counts[n]))
    if not ranked:
        direct = sorted({k for c in callers for k in _launched(c, jit_names)})
        if direct:
            return (f"the test launches {', '.join(direct)} directly (kernel[grid](...)) and calls no wrapper: "
                    "there is no entry point to hand a candidate")
        return "the test section calls no wrapper of the reference code"
    entry = ranked[0]
    node = wrappers[entry]
    cls = _apply_alias(node, defs)
    source = code if entry in code_defs else test
    segments = [ast.get_source_segment(source, node) or ""]
    if cls is not None:
        segments.append(ast.get_source_segment(code if cls.name in code_defs else test, cls) or "")
    if _RNG.search("\n".join(segments)):
        return (f"{entry} draws random numbers itself: candidate and reference cannot be given the same inputs "
                "(and timing moves the RNG on), so there is no deterministic differential test")
    fwd = _forward(cls) if cls is not None else None
    in_place = (_in_place_output(node) if isinstance(node, ast.FunctionDef)
                else _in_place_output(fwd, skip_first=True) if fwd is not None else "")
    if in_place:
        return (f"{entry} {in_place}: it writes its result into a tensor it is given (an in-place output), "
                "but the judge compares returned values and requires inputs unchanged")
    entry_in_test = entry not in code_defs
    launcher = ""
    if entry_in_test:
        names = _dependencies(entry, {k: v for k, v in test_defs.items() if not k.startswith("test_")}, set())
        launcher = "\n\n".join(ast.get_source_segment(test, test_defs[n]) or "" for n in names)
    if kind == "rocm" or entry_in_test:
        n_calls = sum(_parametrize_count(f) for f in callers
                      if isinstance(f, ast.FunctionDef) and entry in _called_names(f)) or 1
    else:
        n_calls = _call_count(test_tree, entry)
    test_callers = tuple(n for n, f in test_fns.items() if _is_test(n) and entry in _called_names(f))
    return SuiteFile(path, kind, code, test, entry, entry_in_test, _entry_signature(entry, node, defs),
                     max(1, min(n_calls, MAX_CALLS)), launcher, tuple(n for n in ranked[1:]), test_callers)


# Instruction records: GEAK-eval's own JSONs ({"file", "instruction", "difficulty", ...}) and
# TritonBench's statistics file TritonBench_G_v1.json ({"file", "comp_instru", "simp_instru",
# ...}). TritonBench's alpaca JSONs ({"instruction", "input", "output"}) name no file and
# cannot be matched to one.
_INSTRUCTION_KEYS = ("instruction", "comp_instru")


def instruction_records(folder: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Records keyed by file name, from JSON lists of {"file", "instruction" or "comp_instru",
    ...} found in the folder, its parent or grandparent. The first record per file wins
    (files sorted); each record comes back with its text under "instruction"."""
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
                if not (isinstance(rec, dict) and isinstance(rec.get("file"), str)):
                    continue
                text = next((rec[k] for k in _INSTRUCTION_KEYS if isinstance(rec.get(k), str) and rec[k].strip()), None)
                if text is not None:
                    records.setdefault(Path(rec["file"]).name, {**rec, "instruction": text})
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
            # `_Fn.apply` (an autograd Function's entry) takes (*args, **kwargs): record the
            # values as passed, not the packed tuple and dict.
            packed = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values())

            def recorder(*args: Any, **kwargs: Any) -> Any:
                if len(recorded) < MAX_CALLS:
                    if packed:
                        values: tuple = (*args, *kwargs.values())
                    else:
                        bound = sig.bind(*args, **kwargs)
                        bound.apply_defaults()
                        values = tuple(bound.arguments.values())
                    recorded.append(tuple(_clone(v) for v in values))
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
            # ROCm tests take `request` and often `device='cuda'`: a parameter with a default is
            # not a fixture we must provide.
            required = {n for n, p in params.items()
                        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
            for kwargs in _param_sets(fn):
                if len(recorded) >= MAX_CALLS:
                    break
                if "request" in params:
                    kwargs = {**kwargs, "request": _Request(name)}
                if required - set(kwargs):
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
        out: list[Any] = []
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


# GEAK-eval ships variants of the ROCm set beside ROCm_v1/ (ROCm_v1_autotune/, ROCm_v1.1/):
# searched from above, only the canonical folder is taken; pointed at, a variant is read too.
_LAYOUT_VARIANTS = (("ROCm_v1", "rocm"), ("TritonBench_G_v1", "tritonbench"))


def find_layout_folders(root: Path) -> list[tuple[Path, str]]:
    if root.name in LAYOUTS and root.is_dir():
        return [(root, LAYOUTS[root.name])]
    for prefix, kind in _LAYOUT_VARIANTS:
        if root.is_dir() and re.fullmatch(re.escape(prefix) + r"[._][\w.]+", root.name):
            return [(root, kind)]
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
