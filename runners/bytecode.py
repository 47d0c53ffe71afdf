"""A run's own bytecode folder for the judge's processes, where the installation has none.

Every judge worker and every shape-probing child it starts (bench/adapters/shape_probe.py) is
a fresh interpreter. On an installation without bytecode beside its sources (an image built
with PYTHONDONTWRITEBYTECODE, a read-only site-packages), each of them compiled about 1,400
modules from source: 4.5 s of a TritonBench reference's 34 s diagnosis on an H100 (2026-12-06,
scripts/reference_diagnose.py --cprofile), paid again by the probing child of every adapted
task. The workers never write bytecode beside the sources (runners/worker_process.py), so the
pool gives them a folder of the run's own (PYTHONPYCACHEPREFIX) that they and their probing
children write and read; candidates' processes only read it (judge/template.py
`candidate_environment`), and their sandbox does not show it. Where the installation has its
bytecode (pip writes it), a prefix would hide it and every process would compile anew, so none
is set there.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path

PREFIX_ENV = "PYTHONPYCACHEPREFIX"
NO_WRITING_ENV = "PYTHONDONTWRITEBYTECODE"
SWITCH_ENV = "KMC_RUN_BYTECODE"
""""0": never a run folder; "1": always; unset: where torch's bytecode is missing beside its sources."""


def installed_bytecode_found(module: str = "torch") -> bool:
    """Whether `module`'s bytecode lies beside its source, where an interpreter with no prefix
    looks for it (`importlib.util.cache_from_source` would answer for this process's prefix)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return True  # nothing of it to compile here
    source = Path(spec.origin)
    return (source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc").exists()


def run_bytecode_environment(folder: Path, given: Mapping[str, str]) -> dict[str, str]:
    """The workers' variables for a bytecode folder at `folder`, or none: where the caller
    already chose one (`given`, e.g. the throughput benchmark's primed folder), where
    `$KMC_RUN_BYTECODE` is "0", or where the installation has its own bytecode."""
    told = os.environ.get(SWITCH_ENV, "")
    if PREFIX_ENV in given or told == "0" or (told != "1" and installed_bytecode_found()):
        return {}
    return {PREFIX_ENV: str(folder), NO_WRITING_ENV: ""}
