"""Reading a GEAK-eval file without running it: its two sections, the entry point the judge
will call, and the glue that entry point needs.

A file is reference code, a line of 146 '#', then the suite's test section. The entry point
is what the correctness test calls that leads to a kernel of the reference code, in this order:

1. a wrapper (a function of the code part, or a launcher the test part defines), or
   `name = _Fn.apply` over an autograd Function; among several, one that launches a kernel
   itself, then one of the code part, then the most called. Test helpers never qualify: a
   name that reaches no kernel (`set_seed`, a GB/s calculator) or that says it computes the
   expected value (`*_ref`, `torch_*`, `naive_*`, ...).
2. `Cls.apply(...)` called by the test on an autograd Function of the code part: the entry is
   a plain function over it (glue).
3. a kernel the test launches itself (`kernel[grid](...)`, most of the ROCm set): the entry is
   that launch (glue), replayed with the grid and arguments the test used.
4. a wrapper only the performance test calls (ROCm `test_performance`).

Whether the entry writes into arguments, draws random numbers or returns anything is learnt
when the calls are recorded (geak_calls.py) and the reference is run on them (geak_record.py),
not guessed from the text.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.adapters._adapted import function_signature
from bench.adapters._glue import (
    Glue,
    LaunchShape,
    apply_glue,
    call_glue,
    call_glue_order,
    launch_glue,
    launch_shape,
    needs_call_glue,
)
from bench.adapters._segments import source_segments

SEPARATOR = "#" * 146
MAX_CALLS = 8
_NOT_TESTS = ("perf", "bench", "save")
_RANDOM = re.compile(r"\btorch\.(randn|rand|randint|randperm|normal|bernoulli|multinomial|rand_like|randn_like|"
                     r"randint_like)\b|\.(normal_|uniform_|random_|bernoulli_|exponential_|cauchy_|geometric_)\(|"
                     r"\bnp\.random\.|\brandom\.(random|randint|uniform|choice|shuffle)\(|"
                     r"\bdefault_generators\b|\bget_rng_state\b|\.get_state\(\)|\btorch\.Generator\b")
_REFERENCE_NAME = re.compile(r"(^|_)(ref|reference|torch|golden|expected|naive|baseline|pytorch|gold)(_|$)", re.I)


@dataclass(frozen=True)
class SuiteFile:
    """One file, parsed. `entry` is the name the judge calls; `target` the suite's callable it
    reaches (the same name for a plain wrapper); `order` names the values of a recorded call
    for glue entries (empty: the wrapper's own signature binds them)."""

    path: Path
    kind: str
    code: str
    test: str
    entry: str
    target: str
    entry_kind: str  # function | apply | class_apply | launch
    signature: str
    n_calls: int
    launcher: str
    glue: str
    order: tuple[str, ...]
    launch: LaunchShape | None
    test_callers: tuple[str, ...]
    perf_callers: tuple[str, ...]
    entry_in_test: bool
    from_perf_only: bool
    also_called: tuple[str, ...] = ()
    draws_random: bool = False

    @property
    def appended(self) -> str:
        """What the judge appends to a candidate lacking the entry point: the suite's launcher
        from its test section and the glue."""
        return "\n\n".join(t for t in (self.launcher, self.glue) if t)


def split_sections(text: str) -> tuple[str, str] | None:
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.strip() == SEPARATOR:
            return "".join(lines[:i]), "".join(lines[i + 1:])
    return None


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
    """The autograd Function class of `name = SomeFunction.apply`; None for anything else."""
    if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and node.value.attr == "apply"
            and isinstance(node.value.value, ast.Name)):
        cls = defs.get(node.value.value.id)
        return cls if isinstance(cls, ast.ClassDef) else None
    return None


def _forward(cls: ast.ClassDef) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)


def _called_names(node: ast.AST) -> list[str]:
    return [n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]


def _launch_sites(node: ast.AST, jit_names: set[str]) -> list[ast.Call]:
    """`kernel[grid](...)` calls of reference kernels inside `node`, in source order."""
    sites = [n for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
             and isinstance(n.func.value, ast.Name) and n.func.value.id in jit_names]
    return sorted(sites, key=lambda n: (n.lineno, n.col_offset))


def _launched(node: ast.AST, jit_names: set[str]) -> list[str]:
    return [s.func.value.id for s in _launch_sites(node, jit_names)]  # type: ignore[attr-defined]


def _apply_calls(node: ast.AST, classes: set[str]) -> list[str]:
    """Classes called as `Cls.apply(...)` inside `node`."""
    return [n.func.value.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "apply" and isinstance(n.func.value, ast.Name) and n.func.value.id in classes]


def _reaches_kernel(name: str, defs: dict[str, ast.stmt], jit_names: set[str], seen: set[str]) -> bool:
    """Whether `name` is, or refers (through the file's own definitions) to, a kernel of the
    reference code."""
    if name in jit_names:
        return True
    if name in seen or name not in defs:
        return False
    seen.add(name)
    return any(_reaches_kernel(n.id, defs, jit_names, seen) for n in ast.walk(defs[name]) if isinstance(n, ast.Name))


def _is_test(name: str) -> bool:
    return name.startswith("test_") and not any(word in name for word in _NOT_TESTS)


def _is_perf_test(name: str) -> bool:
    return name.startswith("test_") and ("perf" in name or "bench" in name) and "save" not in name


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
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        hit = ((isinstance(f, ast.Name) and f.id == name)
               or (isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name) and f.value.id == name)
               or (isinstance(f, ast.Attribute) and f.attr == "apply" and isinstance(f.value, ast.Name)
                   and f.value.id == name))
        if not hit:
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
    for ref in sorted({n.id for n in ast.walk(defs[name]) if isinstance(n, ast.Name)}):
        out += _dependencies(ref, defs, seen)
    return out + [name]


def _entry_signature(name: str, node: ast.stmt, defs: dict[str, ast.stmt]) -> str:
    if isinstance(node, ast.FunctionDef):
        return function_signature(node)
    cls = _apply_alias(node, defs)
    fwd = _forward(cls) if cls is not None else None
    if fwd is None:
        return f"def {name}(*args)"
    args = fwd.args
    names = [p.arg for p in (*args.posonlyargs, *args.args)][1:]
    defaults = [None] * (len(names) - len(args.defaults)) + list(args.defaults)
    return f"def {name}({', '.join(n if d is None else f'{n}={ast.unparse(d)}' for n, d in zip(names, defaults, strict=True))})"


def _kernel_params(node: ast.stmt) -> list[str] | None:
    if isinstance(node, ast.FunctionDef):
        return [p.arg for p in (*node.args.posonlyargs, *node.args.args)]
    return None


@dataclass(frozen=True)
class _Context:
    code: str
    test: str
    code_defs: dict[str, ast.stmt]
    test_defs: dict[str, ast.stmt]
    defs: dict[str, ast.stmt]
    jit_names: set[str]
    taken: set[str]


def _kernel_names(code_tree: ast.Module, code_defs: dict[str, ast.stmt]) -> set[str]:
    names = {n for n, f in _functions(code_tree).items() if _is_jit(f)}
    for n, d in code_defs.items():  # `k = triton.autotune(...)(_kernel)` / `k = triton.jit(_fn)`
        if isinstance(d, ast.Assign) and isinstance(d.value, ast.Call) and re.search(r"\b(jit|autotune|heuristics)\b",
                                                                                      ast.unparse(d.value.func)):
            names.add(n)
    return names


def parse_file(path: Path, kind: str) -> SuiteFile | str:
    """A SuiteFile, or the reason the file cannot be adapted."""
    text = path.read_text(errors="replace")
    sections = split_sections(text)
    if sections is None:
        return "no separator line of 146 '#' between reference code and test"
    code, test = sections
    try:
        code_tree, test_tree = ast.parse(code), ast.parse(test)
        test = _without_redefinitions(code_tree, test_tree, test)
        test_tree = ast.parse(test)
    except SyntaxError as exc:
        return f"does not parse: {exc.msg} (line {exc.lineno})"
    code_defs, test_defs = _definitions(code_tree), _definitions(test_tree)
    defs = {**code_defs, **test_defs}
    ctx = _Context(code, test, code_defs, test_defs, defs, _kernel_names(code_tree, code_defs), set(defs))
    if not ctx.jit_names:
        return "the reference code defines no Triton kernel"
    test_fns = _functions(test_tree)
    if kind == "tritonbench" and not any(_is_test(n) for n in test_fns):
        callers: list[ast.AST] = [test_tree]
        caller_names: tuple[str, ...] = ()
    else:
        named = [n for n in test_fns if _is_test(n)]
        callers = [test_fns[n] for n in named] or [test_tree]
        caller_names = tuple(named)
    perf_names = tuple(n for n in test_fns if _is_perf_test(n))
    found = (_wrapper_entry(ctx, callers, test_tree, kind)
             or _class_apply_entry(ctx, callers, test_tree)
             or _launch_entry(ctx, callers, test_tree, kind))
    from_perf = False
    if found is None and perf_names:
        found = _wrapper_entry(ctx, [test_fns[n] for n in perf_names], test_tree, "rocm")
        from_perf = found is not None
    if found is None:
        direct = sorted(set(_launched(test_tree, ctx.jit_names)))
        if direct:
            return (f"the test launches {', '.join(direct)} only in ways the judge cannot replay "
                    "(no launch site it can read)")
        return "the test section calls no wrapper of the reference code and launches no kernel"
    sf = SuiteFile(path=path, kind=kind, code=code, test=test, test_callers=caller_names,
                   perf_callers=perf_names, from_perf_only=from_perf, **found)
    return dataclasses.replace(sf, draws_random=_draws_random(sf, code_tree, ctx.jit_names))


def _without_redefinitions(code_tree: ast.Module, test_tree: ast.Module, test: str) -> str:
    """The test section without its own top-level definitions of functions or classes the
    reference code defines (blank lines in their place, so line numbers stay). A test that
    redefines the code under test calls its own copy: nothing it does reaches the code the
    task is about, so the adapter recorded no call of it (TritonBench-revised
    quantize_kv_copy redefines its kernel and wrapper), and a candidate's code would be
    shadowed the same way."""
    defined = {n.name for n in code_tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    lines = test.splitlines(keepends=True)
    for node in test_tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in defined:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            for i in range(first - 1, (node.end_lineno or node.lineno)):
                lines[i] = "\n"
    return "".join(lines)


def _draws_random(sf: SuiteFile, code_tree: ast.Module, jit_names: set[str]) -> bool:
    """Whether host code the entry point may run draws random numbers with torch, numpy or
    random (kernels' `tl.rand` is seeded by its arguments and does not count): the code part
    outside its kernels, and the suite's launcher."""
    host = source_segments(sf.code, (n for n in code_tree.body
                                     if not (isinstance(n, ast.FunctionDef) and n.name in jit_names)))
    return bool(_RANDOM.search("\n".join(host) + "\n" + sf.launcher))


def _counts(callers: list[ast.AST], names: set[str]) -> Counter[str]:
    return Counter(n for c in callers for n in _called_names(c) if n in names)


def _wrapper_entry(ctx: _Context, callers: list[ast.AST], test_tree: ast.Module, kind: str) -> dict | None:
    wrappers = {n: d for n, d in ctx.defs.items() if n not in ctx.jit_names and not n.startswith("test_")
                and not _REFERENCE_NAME.search(n)
                and (isinstance(d, ast.FunctionDef) or _apply_alias(d, ctx.defs) is not None)}
    counts = _counts(callers, set(wrappers))
    reaching = [n for n in counts if _reaches_kernel(n, ctx.defs, ctx.jit_names, set())]
    ranked = sorted(reaching, key=lambda n: (not _launched(wrappers[n], ctx.jit_names), n not in ctx.code_defs,
                                             -counts[n]))
    if not ranked:
        return None
    target = ranked[0]
    node = wrappers[target]
    in_test = target not in ctx.code_defs
    launcher = ""
    if in_test:
        deps = _dependencies(target, {k: v for k, v in ctx.test_defs.items() if not k.startswith("test_")}, set())
        launcher = "\n\n".join(source_segments(ctx.test, (ctx.test_defs[n] for n in deps)))
    glue = Glue(target)
    order: tuple[str, ...] = ()
    if isinstance(node, ast.FunctionDef) and needs_call_glue(node.args):
        glue = call_glue(node, ctx.taken)
        order = call_glue_order(node)
    if kind == "rocm" or in_test:
        n_calls = sum(_parametrize_count(f) for f in callers
                      if isinstance(f, ast.FunctionDef) and target in _called_names(f)) or 1
    else:
        n_calls = _call_count(test_tree, target)
    return {"entry": glue.entry, "target": target,
            "entry_kind": "apply" if _apply_alias(node, ctx.defs) is not None else "function",
            "signature": glue.signature or _entry_signature(target, node, ctx.defs),
            "n_calls": max(1, min(n_calls, MAX_CALLS)), "launcher": launcher, "glue": glue.text, "order": order,
            "launch": None, "entry_in_test": in_test, "also_called": tuple(ranked[1:])}


def _class_apply_entry(ctx: _Context, callers: list[ast.AST], test_tree: ast.Module) -> dict | None:
    classes = {n for n, d in ctx.code_defs.items() if isinstance(d, ast.ClassDef) and _forward(d) is not None
               and _reaches_kernel(n, ctx.defs, ctx.jit_names, set())}
    called = Counter(c for caller in callers for c in _apply_calls(caller, classes))
    if not called:
        return None
    cls = called.most_common(1)[0][0]
    node = ctx.code_defs[cls]
    assert isinstance(node, ast.ClassDef)
    glue = apply_glue(cls, _forward(node), ctx.taken)
    return {"entry": glue.entry, "target": cls, "entry_kind": "class_apply", "signature": glue.signature,
            "n_calls": max(1, min(_call_count(test_tree, cls), MAX_CALLS)), "launcher": "", "glue": glue.text,
            "order": (), "launch": None, "entry_in_test": False}


def _launch_entry(ctx: _Context, callers: list[ast.AST], test_tree: ast.Module, kind: str) -> dict | None:
    sites = [s for c in callers for s in _launch_sites(c, ctx.jit_names)]
    if not sites:
        return None
    counts = Counter(s.func.value.id for s in sites)  # type: ignore[attr-defined]
    kernel = max(counts, key=lambda k: (counts[k], -min(s.lineno for s in sites if s.func.value.id == k)))  # type: ignore[attr-defined]
    params = _kernel_params(_underlying_kernel(kernel, ctx))
    if params is None:
        return None
    mine = [s for s in sites if s.func.value.id == kernel]  # type: ignore[attr-defined]
    site = next((s for s in mine if not any(isinstance(a, ast.Starred) for a in s.args)), mine[0])
    shape = launch_shape(kernel, params, site)
    glue = launch_glue(shape, ctx.taken)
    if kind == "rocm":
        n_calls = sum(_parametrize_count(f) for f in callers
                      if isinstance(f, ast.FunctionDef) and kernel in _launched(f, ctx.jit_names)) or 1
    else:
        n_calls = _call_count(test_tree, kernel)
    return {"entry": glue.entry, "target": kernel, "entry_kind": "launch", "signature": glue.signature,
            "n_calls": max(1, min(n_calls, MAX_CALLS)), "launcher": "", "glue": glue.text, "order": shape.order,
            "launch": shape, "entry_in_test": False}


def _underlying_kernel(name: str, ctx: _Context) -> ast.stmt:
    """The `def` of a kernel, following `k = triton.autotune(...)(_kernel)`."""
    node = ctx.code_defs[name]
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and node.value.args:
        inner = node.value.args[0]
        if isinstance(inner, ast.Name) and inner.id in ctx.code_defs:
            return _underlying_kernel(inner.id, ctx)
    return node
