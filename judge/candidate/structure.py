"""A call's arguments and outputs as they cross between the judge and a candidate process:
JSON-able structure that names tensors by their place in the message's tensor list
(judge/candidate/wire.py carries the structure and the tensors).

Two directions, two trust levels. The judge sends a call's arguments: its own objects, so the
candidate process may rebuild them faithfully (`encode_values(..., objects=True)` and
`decode_values(..., rebuild=Rebuilder(module))`): torch.nn modules, a suite's config classes,
namedtuples, devices, every torch and Triton dtype. The candidate process sends back outputs
and its arguments after the call: untrusted, so the judge decodes plain values only (tensors,
numbers, strings, nested lists, tuples and dicts, dtypes, devices); anything else becomes an
`Opaque` carrying its type name, and nothing it sends is ever unpickled or constructed.
"""

from __future__ import annotations

import copyreg
from collections.abc import Callable
from typing import Any

import torch

from bench.sequences import of_type
from judge.candidate.wire import DTYPES, WireError

_STDLIB_OBJECTS = ("builtins", "collections", "types", "dataclasses", "enum", "functools", "fractions",
                   "decimal", "datetime", "numbers", "operator", "math")
"""Top-level packages whose classes the candidate process may import to rebuild an object (the
judge's interpreter has the same ones): torch, triton and these standard modules."""
IMPORTABLE = ("torch", "triton", *_STDLIB_OBJECTS)
_MAX_DEPTH = 24
_NEWOBJ = copyreg.__newobj__  # type: ignore[attr-defined]  # how pickle rebuilds an ordinary class's instance


def _importable(module: str) -> bool:
    return module.split(".")[0] in IMPORTABLE


def _tuple_fields(cls: type) -> list[str] | None:
    """The field names of a namedtuple class or of a struct sequence (torch.return_types.max:
    named fields, no `_fields` in every Python and torch), else None."""
    fields = getattr(cls, "_fields", None)
    if fields is None and isinstance(getattr(cls, "n_fields", None), int):
        fields = getattr(cls, "__match_args__", None)
    return [str(f) for f in fields] if isinstance(fields, tuple) else None


def encode_values(values: Any, objects: bool = True) -> tuple[Any, list[torch.Tensor]]:
    """A call's arguments or outputs as JSON-able structure plus the tensors it refers to.

    `objects` (the judge's messages): objects other than plain values cross as recipes (their
    class's module and qualified name, the arguments of `__new__` and their state, encoded the
    same way, so tensors inside them still cross as bytes), a function by its name. The
    candidate process encodes with `objects=False`: its objects cross as their type name
    (the judge would not rebuild them anyway)."""
    tensors: list[torch.Tensor] = []

    def enc(v: Any, depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            return {"other": type(v).__name__}
        if type(v) is torch.Tensor:
            tensors.append(v.detach())
            return {"tensor": len(tensors) - 1}
        if objects and type(v) is torch.nn.Parameter:
            tensors.append(v.detach())
            return {"parameter": len(tensors) - 1, "grad": bool(v.requires_grad)}
        if isinstance(v, torch.Tensor):
            return {"subclass": type(v).__name__}
        if v is None or isinstance(v, (bool, int, float, str)):
            return {"value": v}
        if isinstance(v, torch.dtype):
            return {"dtype": str(v).removeprefix("torch.")}
        if isinstance(v, torch.device):
            return {"device": str(v)}
        if isinstance(v, torch.Size):
            return {"size": [int(x) for x in v]}
        if _is_triton_dtype(v):
            return {"tl_dtype": v.name}
        if objects and isinstance(v, tuple) and _tuple_fields(type(v)) is not None:
            fields = _tuple_fields(type(v))
            return {"namedtuple": [type(v).__module__, type(v).__qualname__, fields],
                    "seq": [enc(x, depth + 1) for x in v]}
        if isinstance(v, (tuple, list)):
            return {"seq": [enc(x, depth + 1) for x in v], "tuple": isinstance(v, tuple)}
        if isinstance(v, dict) and all(type(k) is str for k in v):
            return {"map": [[k, enc(x, depth + 1)] for k, x in v.items()]}  # e.g. launch options
        if isinstance(v, dict):
            return {"pairs": [[enc(k, depth + 1), enc(x, depth + 1)] for k, x in v.items()]}
        if isinstance(v, (set, frozenset)):
            return {"set": [enc(x, depth + 1) for x in v], "frozen": isinstance(v, frozenset)}
        if objects:
            return _encode_object(v, lambda x: enc(x, depth + 1))
        return {"other": type(v).__name__}

    return enc(values), tensors


def _is_triton_dtype(v: Any) -> bool:
    """A `triton.language` dtype (tl.float8e5 passed to `triton.reinterpret`), not a pointer type."""
    cls = type(v)
    return cls.__name__ == "dtype" and cls.__module__.startswith("triton.language") and isinstance(
        getattr(v, "name", None), str)


def _encode_object(v: Any, enc: Callable[[Any], Any]) -> Any:
    """The recipe of an object the judge passes (see `Rebuilder`), or its type name when it has
    none: a class's instance by `copyreg.__newobj__` (what pickle does for ordinary classes,
    nn.Module and dataclasses included), a function or class by its name."""
    import types

    cls = type(v)
    if isinstance(v, (types.FunctionType, types.BuiltinFunctionType, type)):
        name = getattr(v, "__qualname__", "")
        if "<" not in name:  # a lambda or a local function has no name to find it by
            return {"named": [getattr(v, "__module__", "") or "", name]}
        return {"other": cls.__name__}
    try:
        reduced = v.__reduce_ex__(4)
    except Exception:  # noqa: BLE001 - an object that refuses to be reduced has no recipe
        return {"other": cls.__name__}
    if isinstance(reduced, tuple) and len(reduced) >= 2 and reduced[0] is _NEWOBJ \
            and reduced[1] and reduced[1][0] is cls:
        state = reduced[2] if len(reduced) > 2 else None
        return {"object": [cls.__module__, cls.__qualname__], "new": enc(tuple(reduced[1][1:])), "state": enc(state)}
    return {"other": cls.__name__}


class Opaque:
    """A value that is not a tensor or a structure of plain values (its type name is all that crossed)."""

    def __init__(self, type_name: str, subclass: bool = False) -> None:
        self.type_name = type_name
        self.subclass = subclass

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


class Rebuilder:
    """Rebuilds the judge's objects in the candidate process from their recipes.

    A class is taken from torch, triton or the standard library (`IMPORTABLE`), else by its
    qualified name from the candidate's own module (a suite's config class or nn.Module
    subclass that the candidate's source defines as the suite's does); a class found nowhere
    becomes a `types.SimpleNamespace` with the same attributes (a namedtuple: one made on the
    spot), so code that reads `config.num_warps` still works. Only the judge's messages are
    decoded this way; the judge never rebuilds what a candidate process sends."""

    def __init__(self, local: Any = None) -> None:
        self.local = local

    def find(self, module: str, qualname: str) -> Any:
        import importlib

        owner: Any = None
        if _importable(module):
            try:
                owner = importlib.import_module(module)
            except ImportError:
                owner = None
        elif self.local is not None:
            owner = self.local
        for part in qualname.split("."):
            owner = getattr(owner, part, None) if owner is not None else None
        return owner

    def named(self, spec: Any) -> Any:
        module, qualname = (str(x) for x in spec)
        found = self.find(module, qualname)
        return found if found is not None else Opaque(qualname[:80])

    def namedtuple(self, spec: Any, items: list[Any]) -> Any:
        import collections

        module, qualname, fields = str(spec[0]), str(spec[1]), [str(f) for f in spec[2]]
        cls = self.find(module, qualname)
        if isinstance(cls, type) and issubclass(cls, tuple):
            return of_type(cls, items)  # a namedtuple, or a struct sequence (torch.return_types.max)
        return collections.namedtuple(qualname.rsplit(".", 1)[-1], fields)(*items)

    def object(self, spec: Any, new_args: Any, state: Any) -> Any:
        import types

        module, qualname = (str(x) for x in spec)
        cls = self.find(module, qualname)
        if not isinstance(cls, type):
            obj: Any = types.SimpleNamespace()
            _set_state(obj, state, use_setstate=False)
            return obj
        obj = cls.__new__(cls, *(new_args or ()))
        _set_state(obj, state, use_setstate=True)
        return obj


def _set_state(obj: Any, state: Any, use_setstate: bool) -> None:
    """What pickle does with an object's state: `__setstate__` when the class has one, else the
    instance dictionary and slots."""
    if state is None:
        return
    setstate = getattr(obj, "__setstate__", None) if use_setstate else None
    if setstate is not None and getattr(type(obj), "__setstate__", None) is not getattr(object, "__setstate__", None):
        setstate(state)
        return
    slots: Any = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    for source in (state, slots):
        if isinstance(source, dict):
            for k, x in source.items():
                setattr(obj, k, x)


def decode_values(spec: Any, tensors: list[torch.Tensor], rebuild: Rebuilder | None = None) -> Any:
    """The structure `encode_values` described. Object recipes are rebuilt only with `rebuild`
    (the candidate process decoding the judge's arguments); otherwise they become `Opaque`."""

    def dec(s: Any) -> Any:
        return decode_values(s, tensors, rebuild)

    if not isinstance(spec, dict):
        raise WireError("a value description that is not an object")
    try:
        return _decode(spec, tensors, rebuild, dec)
    except WireError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, RuntimeError) as exc:
        raise WireError(f"a value description that cannot be rebuilt ({type(exc).__name__}: {str(exc)[:120]}): "
                        f"{str(spec)[:200]}") from None


def _decode(spec: dict[str, Any], tensors: list[torch.Tensor], rebuild: Rebuilder | None,
            dec: Callable[[Any], Any]) -> Any:
    if "tensor" in spec or "parameter" in spec:
        i = spec.get("tensor", spec.get("parameter"))
        if not isinstance(i, int) or not 0 <= i < len(tensors):
            raise WireError("a tensor reference out of range")
        if "parameter" in spec:
            if rebuild is None:
                return Opaque("Parameter", subclass=True)
            return torch.nn.Parameter(tensors[i], requires_grad=bool(spec.get("grad")))
        return tensors[i]
    if "namedtuple" in spec and isinstance(spec.get("seq"), list):
        items = [dec(s) for s in spec["seq"]]
        return rebuild.namedtuple(spec["namedtuple"], items) if rebuild is not None else tuple(items)
    if "seq" in spec and isinstance(spec["seq"], list):
        items = [dec(s) for s in spec["seq"]]
        return tuple(items) if spec.get("tuple") else items
    if "value" in spec:
        v = spec["value"]
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
    if "map" in spec and isinstance(spec["map"], list):
        pairs = spec["map"]
        if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in pairs):
            raise WireError("a mapping that is not a list of [name, value] pairs")
        return {k: dec(x) for k, x in pairs}
    if "pairs" in spec and isinstance(spec["pairs"], list):
        return {dec(k): dec(x) for k, x in spec["pairs"]}
    if "set" in spec and isinstance(spec["set"], list):
        items = [dec(s) for s in spec["set"]]
        return frozenset(items) if spec.get("frozen") else set(items)
    if "dtype" in spec:
        if spec["dtype"] not in DTYPES:
            raise WireError(f"an unknown dtype {str(spec['dtype'])[:40]}")
        return DTYPES[spec["dtype"]]
    if "device" in spec:
        return torch.device(str(spec["device"])[:40])
    if "size" in spec and isinstance(spec["size"], list):
        return torch.Size([int(x) for x in spec["size"]])
    if "tl_dtype" in spec:
        import triton.language as tl

        return tl.dtype(str(spec["tl_dtype"])[:40])
    if "named" in spec:
        return rebuild.named(spec["named"]) if rebuild is not None else Opaque(str(spec["named"])[:80])
    if "object" in spec:
        if rebuild is None:
            return Opaque(str(spec["object"][-1])[:80])
        return rebuild.object(spec["object"], dec(spec["new"]), dec(spec["state"]))
    if "subclass" in spec:
        return Opaque(str(spec["subclass"])[:80], subclass=True)
    if "other" in spec:
        return Opaque(str(spec["other"])[:80])
    raise WireError(f"a value description that makes no sense: {str(spec)[:200]}")
