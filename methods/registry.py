"""The method registry: names to method classes, options in and out.

Built-in methods register when `methods/__init__.py` imports them; plugin modules are
imported by `load_method_modules`, with the names a run records in its config.json, so a
resumed or replayed run loads the same plugins whatever the caller's environment.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
from collections.abc import Callable
from typing import Any, TypeVar

from methods.base import Method

PLUGIN_ENV = "KMC_METHOD_MODULES"


class UnknownMethodError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


M = TypeVar("M", bound=type)
_METHODS: dict[str, type] = {}


def register_method(name: str) -> Callable[[M], M]:
    def decorate(cls: M) -> M:
        if name in _METHODS and _METHODS[name] is not cls:
            raise ValueError(f"method {name!r} registered twice ({_METHODS[name].__module__}, {cls.__module__})")
        if not callable(getattr(cls, "run", None)):
            raise TypeError(f"method {name!r} has no run(task, ctx)")
        cls.name = name  # type: ignore[attr-defined]
        _METHODS[name] = cls
        return cls

    return decorate


def method_names() -> list[str]:
    return sorted(_METHODS)


def method_class(name: str) -> type:
    try:
        return _METHODS[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(_METHODS), n=2)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UnknownMethodError(f"unknown method {name!r}{hint}; known: {', '.join(sorted(_METHODS))}") from None


def create_method(name: str, options: dict[str, Any] | None = None) -> Method:
    cls = method_class(name)
    options = dict(options or {})
    params = inspect.signature(cls).parameters
    unknown = [k for k in options if k not in params]
    if unknown:
        raise ValueError(f"method {name!r} has no option(s) {', '.join(unknown)}; "
                         f"options: {', '.join(p for p in params if p != 'self')}")
    return cls(**options)


def method_options(method: Method) -> dict[str, Any]:
    """The resolved options of a method instance (defaults included), for config.json."""
    params = inspect.signature(type(method)).parameters
    return {k: getattr(method, k) for k in params if k != "self" and hasattr(method, k)}


def default_method_modules() -> list[str]:
    """Plugin modules named in $KMC_METHOD_MODULES (comma-separated): only a default, which
    the run then records as its `method_modules` option."""
    return [m.strip() for m in os.environ.get(PLUGIN_ENV, "").split(",") if m.strip()]


def load_method_modules(modules: list[str] | tuple[str, ...]) -> None:
    """Import plugin modules so their `@register_method` classes are known."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise UnknownMethodError(f"cannot import method module {module!r}: {exc}") from None
