"""Helpers shared by tests: running the CLI in a subprocess as a user would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def ctrl_c_default() -> None:
    """`preexec_fn` for a child a test will send Ctrl-C (SIGINT): a shell that started the
    tests in the background (`nohup ... &`) leaves SIGINT ignored, children inherit that, and
    Python then never raises KeyboardInterrupt in them."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # the project first, then what the caller's path had (packages installed beside the
    # interpreter's, as on a machine where wheels go to a --target folder)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(extra)
    return env


def run_cli(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True,
                          timeout=timeout, env=env or cli_env(), cwd=str(ROOT))


def in_process_runner(task: Any, source: str, folder: Path, module_name: str) -> Any:
    """The candidate `source` for `task`, imported here and run through judge/runner.py's LocalRunner
    on the CPU interpreter (the caller sets TRITON_INTERPRET=1 before this)."""
    from judge.candidate.loading import load_module, prepare_process
    from judge.runner import LocalRunner

    prepare_process()
    path = folder / "candidate.py"
    path.write_text(source)
    module = load_module(path, module_name)
    return LocalRunner(getattr(module, task.entry_point), "cpu", True, task.allowed_torch_ops, source_path=path)


def import_afresh(monkeypatch: Any, module: str) -> Any:
    """`module` imported afresh (`monkeypatch` puts the old one back afterwards): a toy plugin's
    decorator runs again and registers it, into the test's own copy of the registry."""
    import importlib

    monkeypatch.delitem(sys.modules, module, raising=False)
    return importlib.import_module(module)


def install_entry_points(folder: Path, group: str, distribution: str, **entry_points: str) -> Path:
    """A distribution's metadata in `folder` declaring `entry_points` in `group`, as `pip install`
    of a package with `[project.entry-points."<group>"]` leaves it: put `folder` on sys.path and
    importlib.metadata finds the plugin. Returns `folder`."""
    dist = folder / f"{distribution.replace('-', '_')}-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (dist / "entry_points.txt").write_text(f"[{group}]\n{lines}")
    return folder


def script_module(name: str, folder: str = "scripts") -> Any:
    """FOLDER/NAME.py (scripts/ or benchmarks/, neither a package) imported as module NAME,
    registered in sys.modules first: its dataclasses look their module up there."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
