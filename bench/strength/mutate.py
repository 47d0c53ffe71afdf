"""Seeded operator-level mutants of a Triton source, made on its AST.

Each operator models a bug users write (issue 44): a mask off by one, a dropped or fixed
stride, the first block only, an eps or scale fixed, accumulation in a narrower type, the
reduction axis or a scan's order changed, a constant block cap, a load without `other=`, a
dropped barrier or atomic. An operator lists its *sites* (nodes it can change) in the
unmodified tree; a mutant is one site changed in a fresh copy, found again by its position
in `ast.walk` order, so a mutant is a pure function of (source, operator, site, seed).

Why the AST and not text edits: a text edit can match inside a comment or a string, and
whether it still parses is luck; here every mutant parses and differs from the original by
construction (`make_mutant` checks both). The mutated file is `ast.unparse`d, so comments are
gone: the judge never reads them.
"""

from __future__ import annotations

import ast
import copy
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

KERNEL = "kernel"
"""Sites inside `@triton.jit` functions."""
WRAPPER = "wrapper"
"""Sites in the host code around them (launch arguments, block sizes)."""

BLOCK_CAPS = (16, 32, 64)
"""The constant a `block_cap` mutant caps a block size at, drawn per site from the seed."""

_CONSTANT_PARAM = re.compile(r"(^|_)(eps|epsilon|scale|alpha|beta|theta|temperature|base)$")
_REDUCTIONS = {"sum", "max", "min", "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin", "reduce",
               "associative_scan", "xor_sum", "softmax"}
_SCANS = {"cumsum", "cumprod", "cummax", "cummin", "associative_scan"}
_ATOMICS = {"atomic_add", "atomic_max", "atomic_min", "atomic_xchg", "atomic_and", "atomic_or", "atomic_xor"}
_FLIP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_STRIDE_HELPER = "_kmc_contiguous_stride"
_STRIDE_HELPER_SOURCE = f'''
def {_STRIDE_HELPER}(t, dim):
    """The stride `t` would have if it were contiguous: the bug of assuming packed inputs."""
    dim = dim % len(t.shape)
    s = 1
    for n in t.shape[dim + 1:]:
        s *= n
    return s
'''


@dataclass(frozen=True)
class Site:
    """A place one operator can change: the node's index in `ast.walk` order of the whole module."""

    operator: str
    index: int
    line: int
    description: str


@dataclass(frozen=True)
class Mutant:
    """One mutated source. `id` is stable across runs and mutant counts: task, operator and the
    site's number among that operator's sites."""

    task: str
    id: str
    operator: str
    line: int
    description: str
    source: str


@dataclass(frozen=True)
class Operator:
    """`find(node)` says whether a node is a site (and how it reads), `change(node, parents, rng)`
    edits the copy in place or returns the node that replaces it."""

    name: str
    scope: str
    find: Callable[[ast.AST], str | None]
    change: Callable[[ast.AST, dict[ast.AST, ast.AST], random.Random], ast.AST | None]
    needs_stride_helper: bool = False


def _tl_call(node: ast.AST, names: set[str]) -> str | None:
    """`tl.<name>(...)` (or `triton.language.<name>`) with name in `names`: the name."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names:
        base = node.func.value
        if isinstance(base, ast.Name) and base.id in ("tl", "language"):
            return node.func.attr
        if isinstance(base, ast.Attribute) and base.attr == "language":
            return node.func.attr
    return None


def _text(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _replace(parents: dict[ast.AST, ast.AST], node: ast.AST, new: ast.AST) -> None:
    parent = parents[node]
    for name, value in ast.iter_fields(parent):
        if value is node:
            setattr(parent, name, new)
            return
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is node:
                    value[i] = new
                    return
    raise ValueError("node not found under its parent")


# ---------------------------------------------------------------- the operators


def _find_mask(node: ast.AST) -> str | None:
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _FLIP:
        flipped = ast.Compare(node.left, [_FLIP[type(node.ops[0])]()], node.comparators)
        return f"`{_text(node)}` -> `{_text(flipped)}`"
    return None


def _change_mask(node: ast.AST, parents: dict[ast.AST, ast.AST], rng: random.Random) -> None:
    assert isinstance(node, ast.Compare)
    node.ops = [_FLIP[type(node.ops[0])]()]


def _stride_operand(node: ast.AST) -> tuple[ast.expr, ast.expr] | None:
    """(stride, the other factor) of `a * stride_x`, else None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for stride, other in ((node.right, node.left), (node.left, node.right)):
            if isinstance(stride, ast.Name) and "stride" in stride.id.lower():
                return stride, other
    return None


def _find_dropped_stride(node: ast.AST) -> str | None:
    pair = _stride_operand(node)
    return f"`{_text(node)}` -> `{_text(pair[1])}`" if pair else None


def _change_dropped_stride(node: ast.AST, parents: dict[ast.AST, ast.AST], rng: random.Random) -> ast.AST:
    pair = _stride_operand(node)
    assert pair is not None
    return pair[1]


def _is_stride_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "stride"
            and len(node.args) == 1 and not node.keywords)


def _find_fixed_stride(node: ast.AST) -> str | None:
    if _is_stride_call(node):
        return f"`{_text(node)}` -> the stride of a contiguous tensor of that shape"
    return None


def _change_fixed_stride(node: ast.AST, parents: dict[ast.AST, ast.AST], rng: random.Random) -> ast.AST:
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    return ast.Call(ast.Name(_STRIDE_HELPER, ast.Load()), [node.func.value, node.args[0]], [])


def _range_args(node: ast.AST) -> list[ast.expr] | None:
    if isinstance(node, ast.For) and isinstance(node.iter, ast.Call):
        f = node.iter.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name in ("range", "static_range") and 1 <= len(node.iter.args) <= 3:
            return node.iter.args
    return None


def _find_first_block(node: ast.AST) -> str | None:
    if _tl_call(node, {"program_id"}) is not None:
        return f"`{_text(node)}` -> `0` (every program does the first block)"
    if _range_args(node) is not None and isinstance(node, ast.For):
        return f"`for {_text(node.target)} in {_text(node.iter)}` -> its first iteration only"
    return None


def _change_first_block(node: ast.AST, parents: dict[ast.AST, ast.AST], rng: random.Random) -> ast.AST | None:
    if isinstance(node, ast.Call):
        return ast.Constant(0)
    args = _range_args(node)
    assert args is not None and isinstance(node, ast.For) and isinstance(node.iter, ast.Call)
    if len(args) == 1:
        node.iter.args = [ast.Constant(1)]
    else:
        start = args[0]
        step = args[2] if len(args) == 3 else ast.Constant(1)
        node.iter.args = [start, ast.BinOp(copy.deepcopy(start), ast.Add(), copy.deepcopy(step)), step][:len(args)]
    return None


def _constant_for(name: str) -> float:
    return 1e-6 if "eps" in name.lower() else 1.0


def _find_constant(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and _CONSTANT_PARAM.search(node.id.lower()):
        return f"`{node.id}` -> `{_constant_for(node.id)!r}`"
    return None


def _change_constant(node: ast.AST, parents: dict[ast.AST, ast.AST], rng: random.Random) -> ast.AST:
    assert isinstance(node, ast.Name)
    return ast.Constant(_constant_for(node.id))


def _find_narrow(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and node.attr in ("float32", "float64") and isinstance(node.value, ast.Name) \
            and node.value.id == "tl":
        return f"`tl.{node.attr}` -> `tl.float16` (narrower accumulation)"
    return None


def _change_narrow(node: ast.AST, parents: dict[ast.AST, ast.AST], rng: random.Random) -> None:
    assert isinstance(node, ast.Attribute)
    node.attr = "float16"


def _axis_value(node: ast.AST) -> int | None:
    """The integer axis of a `tl.<reduction>(x, axis)` call, else None."""
    if _tl_call(node, _REDUCTIONS) is None:
        return None
    assert isinstance(node, ast.Call)
    candidates = [k.value for k in node.keywords if k.arg in ("axis", "dim")]
    if not candidates and len(node.args) >= 2:
        candidates = [node.args[1]]
    for c in candidates:
        try:
            value = ast.literal_eval(c)
        except ValueError:
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _other_axis(value: int) -> int:
    return 1 if value in (0, -2) else 0


def _find_axis(node: ast.AST) -> str | None:
    axis = _axis_value(node)
    return f"axis {axis} -> {_other_axis(axis)} in `{_text(node)}`" if axis is not None else None


def _change_axis(node: ast.AST, parents: dict[ast.AST, ast.AST], rng: random.Random) -> None:
    assert isinstance(node, ast.Call)
    axis = _axis_value(node)
    assert axis is not None
    new = ast.Constant(_other_axis(axis))
    for k in node.keywords:
        if k.arg in ("axis", "dim"):
            k.value = new
            return
    node.args[1] = new


def _find_scan_order(node: ast.AST) -> str | None:
    name = _tl_call(node, _SCANS)
    if name is not None and isinstance(node, ast.Call) and not any(k.arg == "reverse" for k in node.keywords):
        return f"`tl.{name}` scans in reverse order"
    return None


def _change_scan_order(node: ast.AST, parents: dict[ast.AST, ast.AST], rng: random.Random) -> None:
    assert isinstance(node, ast.Call)
    node.keywords.append(ast.keyword("reverse", ast.Constant(True)))


def _is_block_name(name: str) -> bool:
    return name.startswith("BLOCK") or name.endswith("BLOCK_SIZE") or name in ("BLOCK", "TILE")


def _block_value(node: ast.AST) -> ast.expr | None:
    """The value of `BLOCK_X = ...` or of a launch's `BLOCK_X=...` keyword."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
            and _is_block_name(node.targets[0].id):
        return node.value
    if isinstance(node, ast.keyword) and node.arg is not None and _is_block_name(node.arg) \
            and not isinstance(node.value, ast.Name):
        return node.value
    return None


def _find_block_cap(node: ast.AST) -> str | None:
    value = _block_value(node)
    if value is None or (isinstance(value, ast.Constant) and isinstance(value.value, int)
                         and value.value <= min(BLOCK_CAPS)):
        return None
    return f"`{_text(value)}` capped at a constant block size"


def _change_block_cap(node: ast.AST, parents: dict[ast.AST, ast.AST], rng: random.Random) -> None:
    assert isinstance(node, (ast.Assign, ast.keyword))
    cap = rng.choice(BLOCK_CAPS)
    node.value = ast.Call(ast.Name("min", ast.Load()), [node.value, ast.Constant(cap)], [])


def _find_missing_other(node: ast.AST) -> str | None:
    if _tl_call(node, {"load"}) is not None and isinstance(node, ast.Call) \
            and any(k.arg == "other" for k in node.keywords):
        return f"`other=` dropped from `{_text(node)}`"
    return None


def _change_missing_other(node: ast.AST, parents: dict[ast.AST, ast.AST], rng: random.Random) -> None:
    assert isinstance(node, ast.Call)
    node.keywords = [k for k in node.keywords if k.arg != "other"]


def _find_sync(node: ast.AST) -> str | None:
    if isinstance(node, ast.Expr) and _tl_call(node.value, {"debug_barrier"}) is not None:
        return "`tl.debug_barrier()` dropped"
    name = _tl_call(node, _ATOMICS)
    if name is not None:
        return f"`tl.{name}` -> a plain `tl.store` (a race between programs)"
    return None


def _change_sync(node: ast.AST, parents: dict[ast.AST, ast.AST], rng: random.Random) -> ast.AST | None:
    if isinstance(node, ast.Expr):
        return ast.Pass()
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    node.func.attr = "store"
    node.keywords = [k for k in node.keywords if k.arg in ("mask",)]
    node.args = node.args[:3]
    return None


OPERATORS: tuple[Operator, ...] = (
    Operator("mask_off_by_one", KERNEL, _find_mask, _change_mask),
    Operator("stride_dropped", KERNEL, _find_dropped_stride, _change_dropped_stride),
    Operator("stride_fixed", WRAPPER, _find_fixed_stride, _change_fixed_stride, needs_stride_helper=True),
    Operator("first_block_only", KERNEL, _find_first_block, _change_first_block),
    Operator("constant_fixed", KERNEL, _find_constant, _change_constant),
    Operator("narrow_accumulation", KERNEL, _find_narrow, _change_narrow),
    Operator("reduction_axis", KERNEL, _find_axis, _change_axis),
    Operator("scan_order", KERNEL, _find_scan_order, _change_scan_order),
    Operator("block_cap", WRAPPER, _find_block_cap, _change_block_cap),
    Operator("missing_other", KERNEL, _find_missing_other, _change_missing_other),
    Operator("dropped_sync", KERNEL, _find_sync, _change_sync),
)
OPERATOR_NAMES = tuple(op.name for op in OPERATORS)


# ---------------------------------------------------------------- sites and mutants


def _is_kernel(fn: ast.FunctionDef) -> bool:
    return any("jit" in ast.unparse(d) for d in fn.decorator_list)


def _scoped_nodes(tree: ast.Module, scope: str) -> Iterator[ast.AST]:
    """Nodes inside `@triton.jit` functions (KERNEL) or inside the other functions (WRAPPER)."""
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and (_is_kernel(fn) == (scope == KERNEL)):
            for stmt in fn.body:
                yield from ast.walk(stmt)


def find_sites(source: str, operators: tuple[Operator, ...] = OPERATORS) -> list[Site]:
    """Every site of every operator in `source`, in a fixed order (operator, then walk order)."""
    tree = ast.parse(source)
    position = {id(n): i for i, n in enumerate(ast.walk(tree))}
    sites: list[Site] = []
    for op in operators:
        seen: set[int] = set()
        for node in _scoped_nodes(tree, op.scope):
            if id(node) in seen:
                continue
            seen.add(id(node))
            text = op.find(node)
            if text is not None:
                sites.append(Site(op.name, position[id(node)], getattr(node, "lineno", 0), text))
    return sorted(sites, key=lambda s: (OPERATOR_NAMES.index(s.operator), s.index))


def _rng(*parts: object) -> random.Random:
    """A generator seeded from text: `random.Random(str)` hashes with SHA-512, not Python's
    per-process salted `hash`, so the same parts give the same draws in every process."""
    return random.Random(":".join(str(p) for p in parts))


def make_mutant(task: str, source: str, site: Site, number: int, seed: int) -> Mutant:
    """The mutant of `source` at `site`; raises ValueError if the result would not differ or parse."""
    op = next(o for o in OPERATORS if o.name == site.operator)
    tree = ast.parse(source)
    nodes = list(ast.walk(tree))
    node = nodes[site.index]
    parents = {child: parent for parent in nodes for child in ast.iter_child_nodes(parent)}
    new = op.change(node, parents, _rng(seed, task, site.operator, number))
    if new is not None:
        _replace(parents, node, new)
    if op.needs_stride_helper:
        tree.body.extend(ast.parse(_STRIDE_HELPER_SOURCE).body)
    ast.fix_missing_locations(tree)
    text = ast.unparse(tree) + "\n"
    if ast.unparse(ast.parse(text)) == ast.unparse(ast.parse(source)):
        raise ValueError(f"{site.operator} at line {site.line} changes nothing")
    return Mutant(task, f"{task}/{site.operator}/{number}", site.operator, site.line, site.description, text)


def mutants(task: str, source: str, count: int, seed: int) -> list[Mutant]:
    """Up to `count` mutants of `source`, chosen by `seed`: operators in a seeded order, taking
    turns, each contributing its sites in a seeded order, so every operator with a site is
    represented before any has two. A smaller `count` gives a prefix of a larger one's list."""
    by_op: dict[str, list[tuple[int, Site]]] = {}
    for site in find_sites(source):
        group = by_op.setdefault(site.operator, [])
        group.append((len(group), site))
    rng = _rng(seed, task, "choice")
    order = sorted(by_op)
    rng.shuffle(order)
    for name in order:
        rng.shuffle(by_op[name])
    chosen: list[Mutant] = []
    while len(chosen) < count and any(by_op[name] for name in order):
        for name in order:
            if by_op[name] and len(chosen) < count:
                number, site = by_op[name].pop(0)
                try:
                    chosen.append(make_mutant(task, source, site, number, seed))
                except ValueError:
                    continue
    return chosen
