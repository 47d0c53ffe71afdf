"""KernelBench level-1 layout: one file per problem defining `class Model(nn.Module)`,
`get_inputs()` and `get_init_inputs()`, with sizes as module-level integer constants.

Each file becomes a "write a Triton implementation" task. The entry point is a function
named after the file (`19_ReLU.py` -> `relu`) taking the forward inputs, then the init
inputs, then the module's parameters and buffers (in `named_parameters()` /
`named_buffers()` order), so the reference is stateless: it builds the Model from the
init inputs and runs it with those tensors through `torch.func.functional_call`. The
reference is the suite's own PyTorch code, and it runs in float64.

Hidden cases are differential on generated inputs: `get_inputs()` under five seeds, at the
suite's sizes (GPU) and at a shrunk variant where every size constant above 16 becomes 17
(a prime: tail blocks and masks are exercised), or a sixteenth of itself, or 16, whichever
variant the reference accepts first (checked on the CPU when the file is loaded). Size
constants are written as the suite writes them: `N = 2048 * 2`, `input_shape = (32768,)`
(each element a size of its own, `input_shape[0]`), or from other constants
(`input_shape = (num_classes,)`), which follow the constants they are made of. Files
whose module draws random numbers in forward (dropout) are skipped: no deterministic
reference exists. The baseline is the suite's eager PyTorch (`triton_baseline=False`): it
gives speedups, and `bench check` skips it. The folder is `level1/` under the path given, or
under its `KernelBench/` (the upstream repository's own layout), or the path itself.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.adapters._adapted import AdaptedTask, import_text, module_name
from bench.adapters.base import AdapterError, AdapterReport, Skipped
from bench.adapters.registry import register_adapter
from bench.task import DEFAULT_TOLERANCES, Case, Tolerance, case

SEEDS = range(5)
SHRINK_ABOVE = 16
_RANDOM_FORWARD = re.compile(r"\b(Dropout\w*|dropout\w*|rand_like|randn_like|bernoulli|multinomial)\b")
_REQUIRED = ("Model", "get_inputs", "get_init_inputs")


_ABBREVIATIONS = {
    "transposed": "tr", "asymmetric": "asym", "square": "sq", "input": "in", "kernel": "k", "dilated": "dil",
    "padded": "pad", "strided": "str", "grouped": "grp", "convolution": "conv", "standard": "std",
    "depthwise": "dw", "separable": "sep", "pointwise": "pw", "matrix": "mat", "multiplication": "mul",
    "dimension": "dim", "reduction": "red", "normalization": "norm", "product": "prod", "diagonal": "diag",
    "independent": "ind", "triangular": "tri", "matrices": "mats", "batched": "bat", "scalar": "scal",
}
MAX_SLUG = 32


def task_id(stem: str, level: str) -> str:
    """A short, readable id: `kb-l1-<number>-<name>`, the name lower-cased, common words of
    convolution names abbreviated and cut at a word boundary to MAX_SLUG characters
    (`81_conv_transposed_2D_asymmetric_input_square_kernel___dilated____padded____strided__`
    becomes `kb-l1-81-conv_tr_2d_asym_in_sq_k_dil_pad`). The number keeps it unique."""
    m = re.match(r"(\d+)_(.*)", stem)
    number, rest = (m.group(1), m.group(2)) if m else ("", stem)
    words = [_ABBREVIATIONS.get(w, w) for w in re.split(r"[^a-z0-9]+", rest.lower()) if w]
    slug = ""
    for w in words:
        if len(slug) + len(w) + (1 if slug else 0) > MAX_SLUG:
            break
        slug = f"{slug}_{w}" if slug else w
    slug = slug or (words[0][:MAX_SLUG] if words else "task")
    return f"kb-{level}-{number}-{slug}" if number else f"kb-{level}-{slug}"


def entry_name(stem: str) -> str:
    name = re.sub(r"^\d+_", "", stem)
    name = re.sub(r"\W+", "_", name).strip("_").lower()
    name = re.sub(r"_+", "_", name)
    return name if name and not name[0].isdigit() else f"kb_{name}"


_INT_OPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.Pow: lambda a, b: a ** b,
}
SizeValue = int | tuple[int, ...]


def _int_value(node: ast.expr, env: dict[str, SizeValue]) -> SizeValue | None:
    """The value of an integer expression over earlier constants (`2048 * 2`, `(num_classes,)`),
    or None for anything else (floats, calls, strings)."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _int_value(node.operand, env)
        return -v if isinstance(v, int) else None
    if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
        a, b = _int_value(node.left, env), _int_value(node.right, env)
        if isinstance(a, int) and isinstance(b, int) and not (type(node.op) is ast.Pow and abs(b) > 64):
            try:
                return _INT_OPS[type(node.op)](a, b)
            except ZeroDivisionError:
                return None
        return None
    if isinstance(node, ast.Tuple):
        elts = [_int_value(e, env) for e in node.elts]
        return tuple(elts) if all(type(e) is int for e in elts) else None  # type: ignore[arg-type]
    return None


@dataclass
class SizeConstants:
    """A file's module-level integer constants. `free` are those written from literals alone
    (tuples flattened to `name[i]`): the sizes a case sets. The others are recomputed from
    their expression, in file order, so `input_shape = (num_classes,)` follows `num_classes`."""

    exprs: list[tuple[str, ast.expr]]
    free: dict[str, int]
    free_names: set[str]

    def module_values(self, sizes: dict[str, int]) -> dict[str, SizeValue]:
        env: dict[str, SizeValue] = {}
        for name, expr in self.exprs:
            value = _int_value(expr, env)
            if name in self.free_names and isinstance(value, tuple):
                value = tuple(sizes.get(f"{name}[{i}]", v) for i, v in enumerate(value))
            elif name in self.free_names and isinstance(value, int):
                value = sizes.get(name, value)
            if value is not None:
                env[name] = value
        return env


def size_constants(tree: ast.Module) -> SizeConstants:
    exprs: list[tuple[str, ast.expr]] = []
    free: dict[str, int] = {}
    free_names: set[str] = set()
    env: dict[str, SizeValue] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        value = _int_value(node.value, env)
        if value is None:
            env.pop(name, None)
            continue
        env[name] = value
        exprs.append((name, node.value))
        if any(isinstance(n, ast.Name) for n in ast.walk(node.value)):
            continue  # made of other constants: recomputed, not set
        free_names.add(name)
        if isinstance(value, tuple):
            free.update({f"{name}[{i}]": v for i, v in enumerate(value)})
        else:
            free[name] = value
    return SizeConstants(exprs, free, free_names)


def _variants(sizes: dict[str, int]) -> list[dict[str, int]]:
    rules: list[Callable[[int], int]] = [lambda v: 17, lambda v: max(SHRINK_ABOVE, v // 16), lambda v: SHRINK_ABOVE]
    out = []
    for rule in rules:
        shrunk = {k: (rule(v) if v > SHRINK_ABOVE else v) for k, v in sizes.items()}
        if shrunk not in out:
            out.append(shrunk)
    return out


class KernelBenchProblem:
    """One file: its module (imported once per process), sizes, and the task's callables."""

    def __init__(self, path: Path, constants: SizeConstants):
        self.path = path
        self.text = path.read_text()
        self.constants = constants
        self.sizes = dict(constants.free)
        self._module: Any = None
        self.n_inputs = 0
        self.n_init = 0
        self.state_names: list[str] = []

    @property
    def module(self) -> Any:
        if self._module is None:
            self._module = import_text(self.text, module_name("kb", str(self.path), self.text))
        return self._module

    def _with_sizes(self, sizes: dict[str, int], fn: Callable[[], Any]) -> Any:
        m = self.module
        values = self.constants.module_values(sizes)
        saved = {k: getattr(m, k) for k in values if hasattr(m, k)}
        try:
            for k, v in values.items():
                setattr(m, k, v)
            return fn()
        finally:
            for k, v in saved.items():
                setattr(m, k, v)

    def build(self, sizes: dict[str, int], seed: int) -> tuple[list[Any], list[Any], Any]:
        import torch

        def make() -> tuple[list[Any], list[Any], Any]:
            torch.manual_seed(seed)
            inputs = list(self.module.get_inputs())
            init = list(self.module.get_init_inputs())
            torch.manual_seed(seed + 10_007)
            model = self.module.Model(*init)
            return inputs, init, model

        return self._with_sizes(sizes, make)

    def probe(self, sizes: dict[str, int]) -> str:
        """'' if the reference runs at these sizes on the CPU; else why not. Also learns the
        argument layout (inputs, init inputs, state tensors)."""
        import torch

        try:
            inputs, init, model = self.build(sizes, 0)
            state = dict(model.named_parameters())
            state.update(dict(model.named_buffers()))
            with torch.no_grad():
                model(*inputs)
        except Exception as exc:  # noqa: BLE001 - any failure means this variant is unusable
            return f"{type(exc).__name__}: {str(exc)[:200]}"
        self.n_inputs, self.n_init, self.state_names = len(inputs), len(init), list(state)
        return ""

    def make_inputs(self, c: Case, device: str) -> tuple:
        import torch

        inputs, init, model = self.build(dict(c.sizes), c.seed)
        state = [t.detach() for t in [*dict(model.named_parameters()).values(), *dict(model.named_buffers()).values()]]

        def place(v: Any) -> Any:
            if isinstance(v, torch.Tensor):
                v = v.to(device)
                return v.to(getattr(torch, c.dtype)) if v.is_floating_point() else v
            return v

        return tuple(place(v) for v in [*inputs, *init, *state])

    def reference(self, *args: Any) -> Any:
        import torch
        from torch.func import functional_call

        inputs = args[: self.n_inputs]
        init = args[self.n_inputs: self.n_inputs + self.n_init]
        state = dict(zip(self.state_names, args[self.n_inputs + self.n_init:], strict=True))
        model = self.module.Model(*init)
        ref = next((a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
        if ref is not None:
            model = model.to(device=ref.device, dtype=ref.dtype)
        with torch.no_grad():
            return functional_call(model, state, tuple(inputs))


def _baseline_text(problem: KernelBenchProblem, entry: str) -> str:
    return (problem.text + "\n\n# eager PyTorch entry point (the KernelBench module itself): the speedup baseline\n"
            f"def {entry}(*args):\n"
            "    import torch\n"
            "    from torch.func import functional_call\n"
            f"    n_in, n_init, names = {problem.n_inputs}, {problem.n_init}, {problem.state_names!r}\n"
            "    model = Model(*args[n_in:n_in + n_init]).to(args[0].device)\n"
            "    with torch.no_grad():\n"
            "        return functional_call(model, dict(zip(names, args[n_in + n_init:])), tuple(args[:n_in]))\n")


def _forward_args(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    return [a.arg for a in item.args.args[1:]]
    return []


def _make_task(problem: KernelBenchProblem, tree: ast.Module, variants: list[dict[str, int]],
               level: str) -> AdaptedTask:
    entry = entry_name(problem.path.stem)
    fwd = _forward_args(tree) or [f"x{i}" for i in range(problem.n_inputs)]
    init_args = [f"init{i}" for i in range(problem.n_init)]
    state_args = [n.replace(".", "_") for n in problem.state_names]
    params = [f"{a}: torch.Tensor" for a in fwd] + init_args + [f"{a}: torch.Tensor" for a in state_args]
    signature = f"def {entry}({', '.join(params)}) -> torch.Tensor"
    init_values = problem._with_sizes(variants[0], lambda: list(problem.module.get_init_inputs()))
    instruction = (
        f"Write a Triton implementation of the PyTorch module below as a Python function `{entry}` that launches "
        f"Triton kernels and returns what `Model(*init_inputs).forward(...)` returns. It is called as "
        f"`{entry}({', '.join(fwd + init_args + state_args)})`: the forward inputs, then the module's init inputs "
        f"(e.g. {init_values!r}), then its parameters and buffers in named_parameters()/named_buffers() order "
        f"({', '.join(problem.state_names) or 'none'}). Inputs are float32 on the GPU; sizes vary.\n"
        f"```python\n{problem.text}\n```")
    small = tuple(case(f"cpu-v{i}", "float32", s, **v) for i, v in enumerate(variants) for s in SEEDS)
    suite_sizes = tuple(case("suite-sizes", "float32", s, **problem.sizes) for s in SEEDS)
    tol = dict(DEFAULT_TOLERANCES)
    tol["float32"] = Tolerance(atol=1e-4, rtol=1e-4)
    return AdaptedTask(
        id=task_id(problem.path.stem, level),
        instruction=instruction,
        entry_point=entry,
        signature=signature,
        reference=problem.reference,
        make_inputs=problem.make_inputs,
        dtypes=("float32",),
        visible=tuple(case(f"visible-s{s}", "float32", s, **variants[0]) for s in (0, 1)),
        hidden_gpu=suite_sizes + small,
        hidden_cpu=small,
        perf=(case("perf-suite-sizes", "float32", 0, **problem.sizes),),
        baseline_file="",
        difficulty=2,
        bytes_moved=lambda c: 0,
        flops=lambda c: 0,
        suites=("kernelbench", f"kernelbench-{level}"),
        tolerances=tol,
        category="adapted",
        source=f"kernelbench:{level}",
        origin=str(problem.path),
        mode="kernelbench",
        test_mode="differential: get_inputs() under 5 seeds at the suite's sizes (GPU) and at shrunk sizes, "
                  "against the suite's PyTorch module in float64",
        baseline_text=_baseline_text(problem, entry),
        triton_baseline=False,
    )


@register_adapter("kernelbench")
class KernelBenchAdapter:
    """`kernelbench:PATH`: one task per level-1 file whose reference runs at a shrunk size."""

    def load(self, root: Path, vendor: str) -> AdapterReport:
        folder = next((f for f in (root / "level1", root / "KernelBench" / "level1") if f.is_dir()), root)
        files = sorted(folder.glob("*.py"), key=lambda p: (int(m.group(1)) if (m := re.match(r"(\d+)_", p.name)) else 10**9,
                                                            p.name))
        if not files:
            raise AdapterError(f"{root} holds no level1/*.py files (the KernelBench layout)")
        report = AdapterReport("kernelbench", str(root), vendor)
        report.notes.append(f"level1: {folder}")
        for path in files:
            try:
                tree = ast.parse(path.read_text())
            except SyntaxError as exc:
                report.skipped.append(Skipped(str(path), f"does not parse: {exc.msg}"))
                continue
            defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            missing = [n for n in _REQUIRED if n not in defined]
            if missing:
                report.skipped.append(Skipped(str(path), f"not in the KernelBench layout: no {', '.join(missing)}"))
                continue
            model_src = next(ast.get_source_segment(path.read_text(), n) or "" for n in tree.body
                             if isinstance(n, ast.ClassDef) and n.name == "Model")
            if _RANDOM_FORWARD.search(model_src):
                report.skipped.append(Skipped(str(path), "the module draws random numbers (dropout or sampling): "
                                                         "no deterministic reference"))
                continue
            problem = KernelBenchProblem(path, size_constants(tree))
            try:
                problem.module  # noqa: B018 - import now: a file that fails to import is skipped with its error
            except Exception as exc:  # noqa: BLE001
                report.skipped.append(Skipped(str(path), f"import failed: {type(exc).__name__}: {str(exc)[:200]}"))
                continue
            variants, why = [], []
            for v in _variants(problem.sizes):
                err = problem.probe(v)
                if err:
                    why.append(err)
                else:
                    variants.append(v)
                    break
            if not variants:
                report.skipped.append(Skipped(str(path), f"no shrunk size variant runs on the reference: {why[-1]}"))
                continue
            report.tasks.append(_make_task(problem, tree, variants, "l1"))
        return report
