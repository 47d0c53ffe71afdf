"""The suite-adapter registry (bench/adapters/registry.py) through a toy plugin (tests/toy_adapter.py):
registered by name, loaded through `--source toy:PATH`, found as an installed package's entry
point, and judged by `cli.py eval` in a process where nothing but that entry point names it,
so an adapter needs no change to any other module."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

import tests.toy_adapter as toy
from bench.adapters import (
    ENTRY_POINT_GROUP,
    AdapterError,
    AdapterReport,
    adapter_class,
    adapter_names,
    load_source,
    registry,
)
from bench.registry import TaskSourceError, get_task, load_sources, suite_tasks
from tests.helpers import ROOT, cli_env, install_entry_points, run_cli

TOY = Path(__file__).resolve().parent / "fixtures" / "toy_suite"
EXPERT = ROOT / "bench" / "kernels" / "vector_add.py"


def _install(folder: Path, **entry_points: str) -> Path:
    return install_entry_points(folder, ENTRY_POINT_GROUP, "kmc-toy-plugin", **entry_points)


def test_the_toy_adapter_loads_through_the_registry_and_load_sources() -> None:
    assert adapter_class("toy") is toy.ToyAdapter and toy.ToyAdapter.name == "toy"
    assert {"geak-eval", "kernelbench", "toy"} <= set(adapter_names())
    report = load_sources([f"toy:{TOY}"], "cpu")[0]
    assert report.to_json() == {  # type: ignore[attr-defined]
        "adapter": "toy", "root": str(TOY), "vendor": "cpu", "loaded": 1, "skipped": 1, "by_suite": {"toy": 1},
        "tasks": ["toy-vector_add"],
        "skip_reasons": [{"path": str(TOY / "vector_mul.py"), "reason": "no expert kernel bench/kernels/vector_mul.py"}],
        "notes": []}
    task = get_task("toy-vector_add")
    assert suite_tasks("toy") == [task] and task.entry_point == "vector_add" and task.source == "toy"
    assert task.baseline_source() == EXPERT.read_text()
    x, y = task.inputs(task.visible[0], "cpu")
    assert x.shape == (1024,) and torch.equal(task.reference(x, y), x + y)


def test_an_unknown_adapter_is_one_line_naming_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(TaskSourceError) as err:
        load_sources([f"toyy:{TOY}"], "cpu")
    assert str(err.value) == "unknown adapter 'toyy' (did you mean toy?); known: geak-eval, kernelbench, toy"
    with pytest.raises(AdapterError, match="^toy source '/nonexistent' does not exist$"):
        load_source("toy", "/nonexistent")
    with pytest.raises(AdapterError, match=r"holds no \*\.py files \(the toy layout\)"):
        load_source("toy", tmp_path, "cpu")


def test_names_are_refused_twice_or_where_ADAPTER_PATH_cannot_hold_them() -> None:
    class Other:
        def load(self, root: Path, vendor: str) -> None: ...

    with pytest.raises(ValueError, match="adapter 'toy' registered twice"):
        registry.register_adapter("toy")(Other)
    for name in ("", "a:b", "a;b", "a b"):
        with pytest.raises(ValueError, match="cannot be the ADAPTER of ADAPTER:PATH"):
            registry.register_adapter(name)
    with pytest.raises(TypeError, match="has no load"):
        registry.register_adapter("no-load")(type("NoLoad", (), {}))


def test_an_adapter_task_with_a_built_in_id_is_refused_naming_both(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain Task has no `origin`, as a built-in has none: the clash is two sources, not one
    source loaded for two targets."""
    import dataclasses

    monkeypatch.setattr(registry, "_ADAPTERS", dict(registry._ADAPTERS))

    @registry.register_adapter("toy-clash")
    class Clash:
        def load(self, root: Path, vendor: str) -> AdapterReport:
            copy = dataclasses.replace(get_task("vector_add"), source="toy-clash")
            return AdapterReport("toy-clash", str(root), vendor, tasks=[copy])

    with pytest.raises(TaskSourceError) as err:
        load_sources([f"toy-clash:{TOY}"], "cpu")
    assert str(err.value) == (f"task id 'vector_add' comes from two sources: builtin and toy-clash "
                              f"(loading toy-clash:{TOY}); load only one of them")
    assert get_task("vector_add").source == "builtin"


def test_an_installed_plugin_is_found_through_its_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a process that never imported tests/toy_adapter.py: the entry point alone names it."""
    monkeypatch.setattr(registry, "_ADAPTERS", {k: v for k, v in registry._ADAPTERS.items() if k != "toy"})
    monkeypatch.delitem(sys.modules, "tests.toy_adapter")
    monkeypatch.syspath_prepend(str(_install(tmp_path, toy="tests.toy_adapter:ToyAdapter",
                                             broken="tests.no_such_plugin:Adapter",
                                             renamed="tests.toy_adapter:ToyAdapter")))
    assert {"toy", "broken", "renamed"} <= set(adapter_names())  # listed without importing anything
    assert "tests.toy_adapter" not in sys.modules
    found = adapter_class("toy")
    assert found.__module__ == "tests.toy_adapter" and found is not toy.ToyAdapter  # imported afresh
    assert [t.id for t in load_source("toy", TOY, "cpu").tasks] == ["toy-vector_add"]
    with pytest.raises(AdapterError, match=r"adapter 'broken': cannot load entry point broken = "
                                           r"'tests.no_such_plugin:Adapter' .*ModuleNotFoundError"):
        adapter_class("broken")
    with pytest.raises(AdapterError, match="names the class registered as 'toy'"):
        adapter_class("renamed")


@pytest.mark.slow
def test_a_plugin_installed_by_entry_point_is_judged_by_cli_eval(tmp_path: Path) -> None:
    """`cli.py eval --source toy:...` in a fresh process, its worker included: the toy's task is
    judged against the toy's reference; the built-in expert kernel passes, a wrong one fails."""
    env = cli_env()
    env["PYTHONPATH"] += os.pathsep + str(_install(tmp_path / "site", toy="tests.toy_adapter:ToyAdapter"))
    wrong = tmp_path / "wrong.py"
    wrong.write_text(EXPERT.read_text().replace("x + y, mask=mask)", "x + x, mask=mask)"))
    assert wrong.read_text() != EXPERT.read_text()
    verdicts = {}
    for candidate in (EXPERT, wrong):
        r = run_cli("eval", "--task", "toy-vector_add", "--candidate", str(candidate), "--source", f"toy:{TOY}",
                    "--device", "cpu", "--json", env=env)
        assert r.returncode in (0, 1), r.stderr[-2000:]
        verdicts[candidate.name] = json.loads(r.stdout)
    assert verdicts["vector_add.py"]["verdict"] == "correct" and verdicts["vector_add.py"]["cases_run"] == 9
    assert verdicts["wrong.py"]["verdict"] == "wrong_result"
    r = run_cli("eval", "--task", "toy-vector_add", "--candidate", str(EXPERT), "--source", f"toy:{TOY}",
                "--device", "cpu")  # not installed: one line
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].endswith(
        "unknown adapter 'toy'; known: geak-eval, kernelbench") and "Traceback" not in r.stderr
