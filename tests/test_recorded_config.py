"""Configuration that is recorded: task sources and method modules are options (the environment
variables only give their defaults), recorded in config.json, honoured by --resume, --replay and
the evaluation workers; and no module of the toolkit writes the process environment."""

from __future__ import annotations

import ast
import json
import os
import sqlite3
from pathlib import Path

import pytest

from bench.registry import (
    SOURCES_ENV,
    TaskSourceError,
    default_task_sources,
    get_task,
    load_sources,
    normalize_sources,
)
from judge.device import FORCE_CPU_ENV, default_device, detect_target
from runners.config import CompareConfig, ConfigError
from runners.worker_process import worker_command
from tests.helpers import ROOT, cli_env, run_cli

GEAK = ROOT / "tests" / "fixtures" / "geak_eval"


def test_sources_are_normalised_to_absolute_paths_once_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert normalize_sources(["geak-eval:rel/dir", "kernelbench: /abs ; geak-eval:rel/dir"]) == [
        f"geak-eval:{tmp_path / 'rel' / 'dir'}", "kernelbench:/abs"]
    with pytest.raises(TaskSourceError, match="is not ADAPTER:PATH"):
        normalize_sources(["geak-eval"])
    with pytest.raises(TaskSourceError, match="must be a list"):
        normalize_sources("geak-eval:/x")  # type: ignore[arg-type]


def test_environment_variables_are_defaults_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SOURCES_ENV, "geak-eval:/data/a;kernelbench:/data/b")
    monkeypatch.setenv("KMC_METHOD_MODULES", "tests.toy_best_of_n_repair")
    monkeypatch.setenv(FORCE_CPU_ENV, "1")
    assert default_task_sources() == ["geak-eval:/data/a", "kernelbench:/data/b"]
    config = CompareConfig()
    assert config.task_sources == ["geak-eval:/data/a", "kernelbench:/data/b"]
    assert config.method_modules == ["tests.toy_best_of_n_repair"] and config.device == "cpu"
    recorded = config.to_json()
    assert recorded["task_sources"] == config.task_sources and recorded["method_modules"] == config.method_modules
    # What was recorded wins over whatever the environment says later (resume, replay).
    monkeypatch.setenv(SOURCES_ENV, "kernelbench:/elsewhere")
    monkeypatch.delenv("KMC_METHOD_MODULES")
    monkeypatch.delenv(FORCE_CPU_ENV)
    again = CompareConfig.from_json(recorded)
    assert again.task_sources == ["geak-eval:/data/a", "kernelbench:/data/b"]
    assert again.method_modules == ["tests.toy_best_of_n_repair"] and again.device == "cpu"
    assert CompareConfig().device == default_device() == "auto"


def test_config_validation_normalises_sources_and_refuses_malformed_ones(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = CompareConfig(task_sources=["geak-eval:suite"])
    config.validate()
    assert config.task_sources == [f"geak-eval:{tmp_path / 'suite'}"]
    with pytest.raises(ConfigError, match="is not ADAPTER:PATH"):
        CompareConfig(task_sources=["nocolon"]).validate()
    one = CompareConfig(method_modules="tests.toy_best_of_n_repair")  # type: ignore[arg-type]
    one.validate()  # one name where a list is expected, as a config file may give it
    assert one.method_modules == ["tests.toy_best_of_n_repair"]
    with pytest.raises(ConfigError, match="method_modules must be a name or a list of names"):
        CompareConfig(method_modules=[3]).validate()  # type: ignore[list-item]


def test_loading_sources_registers_tasks_and_leaves_the_environment_alone() -> None:
    before = dict(os.environ)
    reports = load_sources([f"geak-eval:{GEAK}"], vendor="cpu")
    assert [r.adapter for r in reports] == ["geak-eval"]  # type: ignore[attr-defined]
    assert get_task("tb-add_vectors").id == "tb-add_vectors"
    assert load_sources([f"geak-eval:{GEAK}"], vendor="cpu")[0] is reports[0]  # loaded once per process
    assert dict(os.environ) == before


def test_workers_are_handed_the_sources_on_their_command_line() -> None:
    from judge.worker import _task_sources

    cmd = worker_command(("geak-eval:/a", "kernelbench:/b"))
    assert cmd[1:] == ["-m", "judge.worker", "--task-source", "geak-eval:/a", "--task-source", "kernelbench:/b"]
    assert _task_sources(cmd[3:]) == ["geak-eval:/a", "kernelbench:/b"]
    assert worker_command(())[1:] == ["-m", "judge.worker"] and _task_sources([]) == []


def test_forcing_the_cpu_is_an_argument_not_an_environment_flag() -> None:
    before = dict(os.environ)
    target = detect_target(force_cpu=True)
    assert target.interpreter and target.vendor == "cpu"
    assert dict(os.environ) == before


# Functions allowed to write a process's environment, by name, each in a child process of its
# own that nothing else reads: the sandboxed candidate pointing HOME and TMPDIR at its own /tmp
# (judge/template.py), a `bench strength` worker choosing the interpreter (runners/strength.py).
ALLOWED_WRITERS = {"_inside_the_sandbox", "_in_a_strength_worker"}


def _environment_writes(path: Path) -> list[str]:
    """Lines of a module that change os.environ (assignment, deletion, setdefault/update/pop/...)."""
    tree = ast.parse(path.read_text())
    found = []
    allowed = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name in ALLOWED_WRITERS
               for n in ast.walk(f)}

    def is_environ(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "environ"

    for node in ast.walk(tree):
        if id(node) in allowed:
            continue
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for t in targets:
            if isinstance(t, ast.Subscript) and is_environ(t.value):
                found.append(f"{path.name}:{node.lineno}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("setdefault", "update", "pop", "popitem", "clear") and is_environ(node.func.value):
                found.append(f"{path.name}:{node.lineno}")
            if node.func.attr in ("putenv", "unsetenv"):
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_module_of_the_toolkit_writes_the_process_environment() -> None:
    """Targets, task sources, plugins and locked clocks reach workers through their own
    environment or command line, built by the pool, never through this process's."""
    packages = ("bench", "commands", "judge", "methods", "modelio", "record", "results", "runners", "stats")
    sources = [ROOT / "cli.py", *[p for pkg in packages for p in (ROOT / pkg).rglob("*.py")]]
    assert [w for p in sources for w in _environment_writes(p)] == []


def test_the_environment_write_probe_finds_every_kind_of_write(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import os\nos.environ['A'] = '1'\nos.environ.setdefault('B', '1')\n"
                     "os.environ.update(C='1')\nos.environ.pop('A')\ndel os.environ['B']\nos.putenv('D', '1')\n"
                     "x = os.environ.get('E')\n")
    assert sorted(_environment_writes(probe)) == [f"probe.py:{n}" for n in (2, 3, 4, 5, 6, 7)]


@pytest.mark.slow
def test_sources_and_plugins_are_recorded_and_honoured_by_replay_and_resume(tmp_path: Path) -> None:
    """A run whose config file names a task source (by a relative path) and a plugin module, run
    in a shell without the KMC_ variables, records both; its replay (whose workers must load the
    adapted task to judge it) and its resumption find them from config.json alone, from another
    working directory."""
    config_file = tmp_path / "run.yaml"
    config_file.write_text("task_sources: ['geak-eval:tests/fixtures/geak_eval']\n"
                           "method_modules: [tests.toy_best_of_n_repair]\n"
                           "methods: [toy_best_of_n_repair]\ntasks: [tb-add_vectors]\nbudget: 2\n")
    env = {k: v for k, v in cli_env().items() if k not in (SOURCES_ENV, "KMC_METHOD_MODULES")}
    first = run_cli("compare", "--config", str(config_file), "--out", str(tmp_path / "runs"), "--quiet", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    (run_dir,) = list((tmp_path / "runs").iterdir())
    recorded = json.loads((run_dir / "config.json").read_text())["config"]
    assert recorded["task_sources"] == [f"geak-eval:{GEAK}"]  # absolute: resumable from anywhere
    assert recorded["method_modules"] == ["tests.toy_best_of_n_repair"]

    import subprocess
    import sys

    def cli_elsewhere(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True,
                              timeout=300, env=env, cwd=str(tmp_path))

    replay = cli_elsewhere("compare", "--replay", str(run_dir), "--out", str(tmp_path / "replay"), "--quiet")
    assert replay.returncode == 0, replay.stderr[-3000:]
    (replay_dir,) = list((tmp_path / "replay").iterdir())
    assert (replay_dir / "summary.json").read_text() == (run_dir / "summary.json").read_text()
    with sqlite3.connect(replay_dir / "store.sqlite") as db:
        verdicts = db.execute("SELECT verdict, evaluation FROM evaluations WHERE task='tb-add_vectors' "
                              "AND case_set='hidden'").fetchall()
        # Judged afresh by a worker that knew the adapted task: every candidate got a verdict of its
        # own (the simulated model's samples include a compile error), none "unknown task".
        assert "correct" in [v for v, _ in verdicts] and all("unknown task" not in e for _, e in verdicts)

    # Unfinished, as a kill before its unit was recorded leaves it (a finished run's resume runs
    # nothing, issue 46): the resume runs that unit again, its calls replayed, with the recorded
    # sources and plugins.
    with sqlite3.connect(run_dir / "store.sqlite") as db:
        db.execute("DELETE FROM units")
    (run_dir / "summary.json").unlink()
    resumed = cli_elsewhere("compare", "--resume", str(run_dir), "--quiet")
    assert resumed.returncode == 0 and "(resumed)" in resumed.stderr, resumed.stderr[-3000:]
    assert (run_dir / "summary.json").exists()
    env_json = json.loads((run_dir / "env.json").read_text())
    assert env_json["resumed"][0]["command_line"][-3:] == ["--resume", str(run_dir), "--quiet"]
