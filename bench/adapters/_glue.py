"""Glue: the few lines that turn a suite's own way of calling its code into a function the
judge can call with positional arguments.

Three shapes need it. A wrapper with keyword-only (or `*args`/`**kwargs`) parameters is
called through `call_<name>(...)`, which passes each recorded value the way the suite's test
passed it (a keyword-only argument replayed positionally would land in the wrong parameter).
An autograd Function the test calls as `Cls.apply(...)` gets a plain function. A kernel the
test launches itself (`kernel[grid](...)`) gets `launch_<kernel>(..., grid)`: the launch as
the test wrote it, with the grid and arguments the judge recorded from the test.

The glue is part of the reference (the baseline) and of the task's instruction; a candidate
that does not define the entry point gets it appended (`complete_source`), exactly as the
suite itself appends its test section to generated code.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Glue:
    """The entry point the judge calls and, when it is not the suite's own function, its text."""

    entry: str
    text: str = ""
    signature: str = ""


def _free_name(base: str, taken: set[str]) -> str:
    name = base
    while name in taken:
        name += "_entry"
    return name


def snake(name: str) -> str:
    """`AttentionFunction` -> `attention_function`."""
    out = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower().strip("_")
    return re.sub(r"_+", "_", out) or "entry"


def needs_call_glue(args: ast.arguments) -> bool:
    """Keyword-only, `*args` or `**kwargs` parameters: positional replay would be wrong."""
    return bool(args.kwonlyargs or args.vararg or args.kwarg)


def call_glue(fn: ast.FunctionDef, taken: set[str]) -> Glue:
    """`call_<fn>(a, b, eps)` calling `fn(a, b, eps=eps)`; `*args` and `**kwargs` are passed
    as one tuple and one dict parameter."""
    a = fn.args
    params = [p.arg for p in (*a.posonlyargs, *a.args)]
    passed = list(params)
    if a.vararg is not None:
        params.append(a.vararg.arg)
        passed.append(f"*{a.vararg.arg}")
    for kw in a.kwonlyargs:
        params.append(kw.arg)
        passed.append(f"{kw.arg}={kw.arg}")
    if a.kwarg is not None:
        params.append(a.kwarg.arg)
        passed.append(f"**{a.kwarg.arg}")
    name = _free_name(f"call_{fn.name}", taken)
    sig = f"def {name}({', '.join(params)})"
    text = (f"{sig}:\n"
            f'    """Calls `{fn.name}` as the suite\'s test does (keyword arguments by keyword)."""\n'
            f"    return {fn.name}({', '.join(passed)})\n")
    return Glue(name, text, sig)


def call_glue_order(fn: ast.FunctionDef) -> tuple[str, ...]:
    """The parameter names of `call_glue(fn)`, in the order the judge passes values."""
    a = fn.args
    names = [p.arg for p in (*a.posonlyargs, *a.args)]
    if a.vararg is not None:
        names.append(a.vararg.arg)
    names += [kw.arg for kw in a.kwonlyargs]
    if a.kwarg is not None:
        names.append(a.kwarg.arg)
    return tuple(names)


def apply_glue(cls: str, forward: ast.FunctionDef | None, taken: set[str]) -> Glue:
    """A plain function over `Cls.apply`, named after the class."""
    name = _free_name(snake(cls), taken)
    params = "*args"
    if forward is not None:
        fa = forward.args
        names = [p.arg for p in (*fa.posonlyargs, *fa.args)][1:]
        if names and not fa.vararg and not fa.kwonlyargs and not fa.kwarg:
            defaults = [None] * (len(names) - len(fa.defaults)) + list(fa.defaults)
            params = ", ".join(n if d is None else f"{n}={ast.unparse(d)}" for n, d in zip(names, defaults, strict=True))
            sig = f"def {name}({params})"
            text = (f"{sig}:\n"
                    f'    """The suite\'s test calls `{cls}.apply(...)`: this is that call."""\n'
                    f"    return {cls}.apply({', '.join(names)})\n")
            return Glue(name, text, sig)
    sig = f"def {name}(*args)"
    return Glue(name, f"{sig}:\n    return {cls}.apply(*args)\n", sig)


@dataclass(frozen=True)
class LaunchShape:
    """How the judge's recorded values map onto a launch: kernel parameters passed by position,
    kernel parameters passed by keyword, and whether launch options (num_warps, ...) travel as
    one dict. The grid is always the last value."""

    kernel: str
    positional: tuple[str, ...]
    keywords: tuple[str, ...]
    options: bool

    @property
    def order(self) -> tuple[str, ...]:
        return self.positional + self.keywords + (("options",) if self.options else ()) + ("grid",)


def launch_shape(kernel: str, params: list[str], site: ast.Call) -> LaunchShape:
    """The launch as the test's first launch site writes it."""
    starred = any(isinstance(a, ast.Starred) for a in site.args)
    given_kw = [k.arg for k in site.keywords if k.arg is not None]
    if starred:
        first_kw = min((params.index(k) for k in given_kw if k in params), default=len(params))
        n_pos = first_kw
    else:
        n_pos = min(len(site.args), len(params))
    positional = tuple(params[:n_pos])
    keywords = tuple(k for k in params[n_pos:] if k in given_kw)
    options = any(k not in params for k in given_kw) or any(k.arg is None for k in site.keywords)
    return LaunchShape(kernel, positional, keywords, options)


def launch_glue(shape: LaunchShape, taken: set[str]) -> Glue:
    name = _free_name(f"launch_{shape.kernel.lstrip('_')}", taken)
    params = shape.order
    passed = list(shape.positional) + [f"{k}={k}" for k in shape.keywords] + (["**options"] if shape.options else [])
    sig = f"def {name}({', '.join(params)})"
    text = (f"{sig}:\n"
            f'    """The suite\'s test launches `{shape.kernel}` itself: this is that launch, with the grid and\n'
            f'    arguments the test used. The judge compares the tensors the kernel writes."""\n'
            f"    {shape.kernel}[grid]({', '.join(passed)})\n")
    return Glue(name, text, sig)


def defines(source: str, name: str) -> bool:
    """Whether `source` defines `name` at its top level (a def, class or assignment)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == name for a in node.names):
            return True
    return False


def complete(source: str, entry: str, glue: str, test_imports: str = "") -> str:
    """`source` with the glue appended when it does not define the entry point itself, and the
    imports of the suite's test section it lacks (`missing_imports`)."""
    if glue and not defines(source, entry):
        source = source.rstrip("\n") + "\n\n\n# the suite's own call of your code (added by the judge)\n" + glue
    lacking = missing_imports(source, test_imports)
    if lacking:
        source = source.rstrip("\n") + "\n\n\n# imports of the suite's test section (added by the judge)\n" + lacking
    return source


def missing_imports(code: str, section: str) -> str:
    """The module-level imports of `section` (a suite file's test section) that `code` does not
    make, one per line. GEAK-eval runs generated code with the test section appended to the
    same module, so a name the test section imports (block_sparse_attn.py imports torch only
    there) is in scope when the code's functions run; the judge appends those imports too,
    those of modules installed here (GEAK-eval's own helper modules, which its ROCm tests
    import, are not: appended, they would fail every candidate's import)."""
    made = set(_installed_imports(code))
    return "\n".join(dict.fromkeys(i for i in _installed_imports(section) if i not in made))


@functools.lru_cache(maxsize=1024)
def _installed_imports(text: str) -> tuple[str, ...]:
    """`text`'s module-level imports of installed modules, as source lines. Cached: loading a
    suite asks twice per file for the same texts (parsing them took 0.6 s of GEAK-eval's 4.8)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return ()
    return tuple(ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) and _installed(n))


def _installed(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        names = [node.module or ""] if not node.level else []
    else:
        names = [a.name for a in node.names]
    return bool(names) and all(_installed_root(n) for n in names)


def _installed_root(name: str) -> bool:
    import importlib.util

    from bench.adapters._adapted import _STUB_ROOTS

    root = name.split(".")[0]
    if not root or root in _STUB_ROOTS:  # stood in for while the adapter records, absent in a candidate
        return False
    try:
        return importlib.util.find_spec(root) is not None
    except (ImportError, ValueError):
        return False
