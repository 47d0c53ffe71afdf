"""The registry behind the report's extension points: statistics (results/statistics.py) and
figures (results/figure_registry.py). Each is a `Registry` of classes, registered by name.

Unlike a suite adapter (bench/adapters/registry.py), which a run names, every registered
statistic and figure is drawn into every report, so `classes()` loads them all: the built-ins
(their modules, `builtin_modules`, imported on the first call), every class a module of this
process registered, and every installed package's entry point in the registry's group. Entry
points are read afresh on each call (a couple of milliseconds), so what a report holds follows
what is installed now. A broken plugin is a `PluginError` (one line: the command prints it and
exits 2), never a report that silently lacks it.

Order, so the same run gives the same files in every process: the built-ins in the order their
module registers them, then all others by name.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from importlib import metadata
from typing import TypeVar

C = TypeVar("C", bound=type)

#: A name is a field of summary.json, a column of a CSV, a file name: lower-case words joined by '_'.
NAME = re.compile(r"[a-z][a-z0-9_]*")


class PluginError(ValueError):
    """A statistic or figure that cannot be registered or loaded, or that broke its contract: one line."""


class Registry:
    """Classes of one kind (`kind`: "statistic", "figure") by name; each must have the method
    `required`, and passes `check(name, cls)` (which raises TypeError or ValueError saying what is
    wrong); installed packages add theirs through the entry-point group `group`."""

    def __init__(self, kind: str, group: str, required: str, builtin_modules: tuple[str, ...] = (),
                 check: Callable[[str, type], None] | None = None) -> None:
        self.kind, self.group, self.required, self.builtin_modules = kind, group, required, builtin_modules
        self.check = check
        self._classes: dict[str, type] = {}
        self._builtin_loaded = False

    def register(self, name: str) -> Callable[[C], C]:
        """The decorator `@register_<kind>(name)`: ValueError for a bad or taken name, TypeError
        for a class without the required method, and what `check` raises."""
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ValueError(f"{self.kind} name {name!r} must be lower-case letters, digits and '_', "
                             "starting with a letter (it names a field, a column or a file)")

        def decorate(cls: C) -> C:
            taken = self._classes.get(name)
            if taken is not None and taken is not cls:
                raise ValueError(f"{self.kind} {name!r} registered twice ({taken.__module__}, {cls.__module__})")
            if not callable(getattr(cls, self.required, None)):
                raise TypeError(f"{self.kind} {name!r} has no {self.required}()")
            if self.check is not None:
                self.check(name, cls)
            cls.name = name  # type: ignore[attr-defined]
            self._classes[name] = cls
            return cls

        return decorate

    def classes(self) -> dict[str, type]:
        """Every registered class by name, installed plugins loaded: built-ins first, then by name."""
        if not self._builtin_loaded:
            self._builtin_loaded = True
            for module in self.builtin_modules:
                importlib.import_module(module)
        declared: dict[str, list[metadata.EntryPoint]] = {}
        for ep in metadata.entry_points(group=self.group):
            declared.setdefault(ep.name, []).append(ep)
        for name in sorted(declared):
            if name not in self._classes:  # a built-in or an imported module's name is never looked up
                self._load(name, declared[name])
        builtin = [n for n, c in self._classes.items() if c.__module__ in self.builtin_modules]
        return {n: self._classes[n] for n in builtin + sorted(set(self._classes) - set(builtin))}

    def _load(self, name: str, eps: list[metadata.EntryPoint]) -> None:
        values = sorted({ep.value for ep in eps})
        if len(values) > 1:
            raise PluginError(f"{self.kind} {name!r} is declared by more than one installed plugin: "
                              f"{', '.join(values)}; uninstall all but one")
        ep = eps[0]
        where = f"entry point {ep.name} = {ep.value!r} ({self.group})"
        try:
            cls = ep.load()
        except Exception as exc:  # noqa: BLE001 - a plugin's import error, in one line
            raise PluginError(f"{self.kind} {name!r}: cannot load {where}: {type(exc).__name__}: {exc}") from None
        if not isinstance(cls, type):
            raise PluginError(f"{self.kind} {name!r}: {where} names a {type(cls).__name__}, not a class")
        other = next((n for n, c in self._classes.items() if c is cls and n != name), None)  # its module may register it
        if other is not None:
            raise PluginError(f"{self.kind} {name!r}: {where} names the class registered as {other!r}")
        try:
            self.register(name)(cls)
        except (TypeError, ValueError) as exc:
            raise PluginError(f"{exc} ({where})") from None
