"""`compare --ray local`: the main job judged on Ray actors (a local Ray instance, CPU
interpreter), its executor recorded in config.json; and the Ray executor's bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from record.run_folder import RunFolder
from runners.compare import CompareOptions, run_compare
from runners.config import CompareConfig, ConfigError

ray = pytest.importorskip("ray", reason="the cluster extra is not installed (CI installs it)")


def _config(**overrides: object) -> CompareConfig:
    base: dict[str, object] = {"budget": 2, "methods": ["direct"], "tasks": ["vector_add"], "device": "cpu",
                               "workers": 1, "task_sources": [], "method_modules": [], "ray_address": "local"}
    return CompareConfig(**{**base, **overrides})  # type: ignore[arg-type]


@pytest.mark.slow
def test_compare_on_a_local_ray_instance_records_its_executor(tmp_path: Path) -> None:
    assert not ray.is_initialized()
    result = run_compare(_config(), CompareOptions(out=tmp_path / "runs"))
    assert not ray.is_initialized()  # the run started Ray, so it stopped it
    assert result.summary["methods"]["direct"]["calls_used"] == {"vector_add": 2}
    executor = RunFolder(result.run_dir).read_executor()
    assert executor is not None and executor["kind"] == "ray"
    assert (executor["workers"], executor["timing_lanes"], executor["chosen"]) == (1, 0, "given")
    assert RunFolder(result.run_dir).read_config().config["ray_address"] == "local"


def test_ray_options_are_checked_before_a_run_folder_exists(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    with pytest.raises(ConfigError, match="ray_address must be an address"):
        run_compare(_config(ray_address=""), CompareOptions(out=out))
    with pytest.raises(ConfigError, match="worker_user is not supported on the Ray executor"):
        run_compare(_config(worker_user="nobody"), CompareOptions(out=out))
    assert not out.exists()
