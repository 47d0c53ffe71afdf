"""The suite-adapter registry: the ADAPTER of `--source ADAPTER:PATH` to an adapter class.

Built-in adapters register when their modules (`BUILTIN_MODULES`) are imported, on the first
look-up; installed packages add theirs through the entry-point group `ENTRY_POINT_GROUP`, each
loaded only when its name is looked up (a broken plugin breaks only its own name). A built-in
name is never looked up among the entry points. What an adapter must provide, and the rules it
keeps, open bench/adapters/base.py.
"""

from __future__ import annotations

import difflib
import importlib
import os
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import TypeVar

from bench.adapters.base import AdapterError, AdapterReport, SuiteAdapter
from bench.task import Task

ENTRY_POINT_GROUP = "kernel_method_compare.adapters"
BUILTIN_MODULES = ("bench.adapters.geak_eval", "bench.adapters.kernelbench")

A = TypeVar("A", bound=type)
_ADAPTERS: dict[str, type] = {}


def register_adapter(name: str) -> Callable[[A], A]:
    if not name or any(c in name for c in ":; \t") or name != name.strip():
        raise ValueError(f"adapter name {name!r} cannot be the ADAPTER of ADAPTER:PATH (no ':', ';' or spaces)")

    def decorate(cls: A) -> A:
        if name in _ADAPTERS and _ADAPTERS[name] is not cls:
            raise ValueError(f"adapter {name!r} registered twice ({_ADAPTERS[name].__module__}, {cls.__module__})")
        if not callable(getattr(cls, "load", None)):
            raise TypeError(f"adapter {name!r} has no load(root, vendor)")
        cls.name = name  # type: ignore[attr-defined]
        _ADAPTERS[name] = cls
        return cls

    return decorate


_builtin_loaded = False


def _load_builtin() -> None:
    global _builtin_loaded
    if not _builtin_loaded:
        _builtin_loaded = True
        for module in BUILTIN_MODULES:
            importlib.import_module(module)


def _entry_points() -> list[metadata.EntryPoint]:
    return list(metadata.entry_points(group=ENTRY_POINT_GROUP))


def adapter_names() -> list[str]:
    """Every adapter name a source may use here: built-in, registered, or an installed entry point."""
    _load_builtin()
    return sorted(set(_ADAPTERS) | {ep.name for ep in _entry_points()})


def adapter_class(name: str) -> type:
    """The class registered as `name`, loading an installed plugin's entry point when no module
    of this process registered it. AdapterError (one line) for a name nothing declares."""
    _load_builtin()
    if name in _ADAPTERS:
        return _ADAPTERS[name]
    declared = {ep.value: ep for ep in _entry_points() if ep.name == name}
    if not declared:
        names = adapter_names()
        close = difflib.get_close_matches(name, names, n=2)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise AdapterError(f"unknown adapter {name!r}{hint}; known: {', '.join(names)}")
    if len(declared) > 1:
        raise AdapterError(f"adapter {name!r} is declared by more than one installed plugin: "
                           f"{', '.join(sorted(declared))}; uninstall all but one")
    return _load_entry_point(next(iter(declared.values())))


def _load_entry_point(ep: metadata.EntryPoint) -> type:
    where = f"entry point {ep.name} = {ep.value!r} ({ENTRY_POINT_GROUP})"
    try:
        cls = ep.load()
    except Exception as exc:  # noqa: BLE001 - a plugin's import error, in one line
        raise AdapterError(f"adapter {ep.name!r}: cannot load {where}: {type(exc).__name__}: {exc}") from None
    if not isinstance(cls, type):
        raise AdapterError(f"adapter {ep.name!r}: {where} names a {type(cls).__name__}, not an adapter class")
    other = next((n for n, c in _ADAPTERS.items() if c is cls and n != ep.name), None)
    if other is not None:
        raise AdapterError(f"adapter {ep.name!r}: {where} names the class registered as {other!r}")
    try:
        return register_adapter(ep.name)(cls)
    except (TypeError, ValueError) as exc:
        raise AdapterError(f"{exc} ({where})") from None


def detect_vendor() -> str:
    """'nvidia', 'amd' or 'cpu' (the Triton interpreter), decided as judge.device does but
    without importing runners: bench sits below runners in the data flow."""
    if os.environ.get("KMC_FORCE_CPU") == "1" or os.environ.get("TRITON_INTERPRET") == "1":
        return "cpu"
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return "amd" if getattr(torch.version, "hip", None) else "nvidia"
    return "cpu"


def load_source(adapter: str, path: str | Path, vendor: str | None = None) -> AdapterReport:
    """The tasks and skip reasons of the suite at `path`, read by the adapter named `adapter`
    for `vendor` (None: this machine's). AdapterError, one line, when it cannot be read at all."""
    made: SuiteAdapter = adapter_class(adapter)()
    root = Path(path).expanduser().resolve()
    if not root.exists():
        raise AdapterError(f"{adapter} source {str(path)!r} does not exist")
    report = made.load(root, vendor or detect_vendor())
    if not isinstance(report, AdapterReport):
        raise AdapterError(f"adapter {adapter!r} returned a {type(report).__name__}, not an AdapterReport")
    odd = next((t for t in report.tasks if not isinstance(t, Task)), None)
    if odd is not None:
        raise AdapterError(f"adapter {adapter!r} returned a task that is a {type(odd).__name__}, not a bench.task.Task")
    return report
