"""Importing Python source from a file of its own.

Triton's `@jit` refuses source that was `exec`-ed from a string, so candidates, expert
baselines and adapted suite files are all written to a file and imported from it; this is
the one place that does it.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path


def import_file(path: Path, name: str) -> types.ModuleType:
    """Import `path` as module `name`; on any failure the half-made module is unregistered
    and the exception (SystemExit from the imported code included) propagates."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
