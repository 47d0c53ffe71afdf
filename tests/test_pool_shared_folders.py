"""What the pool's workers share: one Triton cache root on a GPU, with a cache per candidate source
under it (judge/source_caches.py `SourceCaches`), lent to the candidate's sandbox by links and taken back by renames
(judge/source_caches.py): a source judged again by another worker compiles nothing,
no candidate's files are ever taken for the judge's prebuilt helpers, and a helper copied into
a source's cache appears whole or not at all. No worker or GPU is started here."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from judge.device import Target
from judge.source_caches import SOURCE_CACHES, SourceCaches, prebuilt_helpers
from runners.pool import LocalPool
from runners.sizing import WorkerPlan

GPU = Target("nvidia", False, "NVIDIA H200", 2)
SUFFIX = ".cpython-test.so"


def _plan(workers: int) -> WorkerPlan:
    return WorkerPlan(workers, {"0": workers}, 1, "given", "test", 8)


def test_a_gpu_pools_workers_share_one_triton_cache_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with LocalPool(GPU, workers=3, plan=_plan(3)) as pool:
        roots = {w._env()["TRITON_CACHE_DIR"] for w in pool._all}
        assert roots == {str(pool.workdir / "triton-cache")}
    assert "TRITON_CACHE_DIR" not in os.environ  # told to the workers, not set here


def test_the_runs_own_cache_keeps_the_judges_autotuning_choices_and_no_candidate_inherits_the_switch(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from judge.sandbox_layout import AUTOTUNE_CACHE_ENV
    from judge.template import candidate_environment

    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    monkeypatch.delenv(AUTOTUNE_CACHE_ENV, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with LocalPool(GPU, workers=2, plan=_plan(2)) as pool:
        worker_envs = [w._env() for w in pool._all]
    assert {e[AUTOTUNE_CACHE_ENV] for e in worker_envs} == {"1"}
    assert AUTOTUNE_CACHE_ENV not in os.environ
    candidate = candidate_environment(worker_envs[0], "cuda")
    assert AUTOTUNE_CACHE_ENV not in candidate and candidate["KMC_CANDIDATE_DEVICE"] == "cuda"
    assert candidate["TRITON_CACHE_DIR"] == worker_envs[0]["TRITON_CACHE_DIR"]
    # A cache the user keeps across runs never gets choices written into it by the pool's say-so.
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    with LocalPool(GPU, workers=1, plan=_plan(1)) as pool:
        assert AUTOTUNE_CACHE_ENV not in pool._all[0]._env()


def test_a_pool_that_judges_each_task_once_tells_its_workers_to_keep_no_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    from judge.worker import KEEP_TASK_INPUTS_ENV

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with LocalPool(GPU, workers=1, plan=_plan(1)) as pool:
        assert pool._all[0]._env()[KEEP_TASK_INPUTS_ENV] == "1"
    with LocalPool(GPU, workers=1, plan=_plan(1), keep_task_inputs=False) as pool:
        assert pool._all[0]._env()[KEEP_TASK_INPUTS_ENV] == "0"


def test_a_users_triton_cache_is_kept_and_the_interpreter_gets_none(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    with LocalPool(GPU, workers=1, plan=_plan(1)) as pool:
        assert pool._all[0]._env()["TRITON_CACHE_DIR"] == str(tmp_path)
    monkeypatch.delenv("TRITON_CACHE_DIR")
    with LocalPool(Target("cpu", True, "Triton CPU interpreter", 0), workers=1) as pool:
        assert "TRITON_CACHE_DIR" not in pool._all[0]._env()


def _helper(root: Path, name: str) -> Path:
    entry = root / name
    entry.mkdir(parents=True)
    (entry / f"launcher{SUFFIX}").write_bytes(b"\x7fELF")
    return entry


def test_only_the_judges_own_entries_are_taken_for_helpers(tmp_path: Path) -> None:
    helper = _helper(tmp_path, "HELPERHASH")
    (tmp_path / "KERNELHASH").mkdir()  # a judge kernel's entry: no library in it
    (tmp_path / "KERNELHASH" / "k.cubin").write_bytes(b"")
    # What a candidate could write in its own source's cache, a library at its top included.
    planted = tmp_path / SOURCE_CACHES / "0123abcd"
    planted.mkdir(parents=True)
    (planted / f"evil{SUFFIX}").write_bytes(b"")
    _helper(tmp_path, ".HELPERHASH.99.partial")
    assert prebuilt_helpers(tmp_path, SUFFIX) == [helper]


def _worker_caches(root: Path, helpers: list[Path]) -> SourceCaches:
    """A GPU worker's Triton caches (judge/worker.py), with no template and no GPU: only what `lend` reads."""
    return SourceCaches(root / "cache", helpers, None, interpreter=False)


def _process(root: Path, name: str) -> Any:
    """What `lend` reads of a candidate process: the folder bound into its sandbox."""
    cache = root / "candidates" / name
    cache.mkdir(parents=True)
    return SimpleNamespace(cache=str(cache), source_cache=None)


def test_a_sources_cache_is_the_same_for_every_worker_and_seeded_whole(tmp_path: Path) -> None:
    helper = _helper(tmp_path / "built", "HELPERHASH")
    first, second = _worker_caches(tmp_path, [helper]), _worker_caches(tmp_path, [helper])
    # Built by the judge (judge/candidate/launchers.py).
    first.launchers.folders = [_helper(tmp_path / "cache", "LAUNCHERHASH")]
    procs = [_process(tmp_path, "a"), _process(tmp_path, "b")]
    for caches, proc in zip((first, second), procs, strict=True):
        caches.lend(proc, "def kernel(): pass\n")
    assert procs[0].source_cache == procs[1].source_cache
    cache = procs[0].source_cache
    assert cache.parent == tmp_path / "cache" / SOURCE_CACHES
    assert sorted(p.name for p in cache.iterdir()) == ["HELPERHASH", "LAUNCHERHASH"]  # no partial copy beside them
    assert (cache / "HELPERHASH" / f"launcher{SUFFIX}").read_bytes() == b"\x7fELF"
    lent = Path(procs[0].cache)  # what the candidate's sandbox sees: copies of the same files
    assert sorted(p.name for p in lent.iterdir()) == ["HELPERHASH", "LAUNCHERHASH"]
    assert (lent / "HELPERHASH" / f"launcher{SUFFIX}").read_bytes() == b"\x7fELF"
    # never the source cache's own file: a write through it would change what later processes load
    assert not os.path.samefile(lent / "HELPERHASH" / f"launcher{SUFFIX}", cache / "HELPERHASH" / f"launcher{SUFFIX}")
    other = _process(tmp_path, "c")
    second.lend(other, "def other(): pass\n")
    assert other.source_cache != cache


def test_what_a_candidate_compiled_goes_back_to_its_sources_cache_and_links_never_do(tmp_path: Path) -> None:
    from judge.source_caches import fill, harvest

    source_cache = tmp_path / "source"
    (source_cache / "OLD").mkdir(parents=True)
    (source_cache / "OLD" / "k.cubin").write_bytes(b"old")
    secret = tmp_path / "secret.txt"
    secret.write_text("host file")
    (source_cache / "PLANTED").symlink_to(secret)  # a link left by an earlier candidate of this source
    lent = tmp_path / "lent"
    lent.mkdir()
    assert fill(source_cache, lent) == 1 and not (lent / "PLANTED").exists()  # the link is never lent
    (lent / "NEW").mkdir()
    (lent / "NEW" / "k.cubin").write_bytes(b"new")
    (lent / "LINK").symlink_to(secret)
    (lent / "HALF").mkdir()
    (lent / "HALF" / "to-secret").symlink_to(secret)
    assert harvest(lent, source_cache) == 1
    assert (source_cache / "NEW" / "k.cubin").read_bytes() == b"new"
    assert not (source_cache / "LINK").exists() and not (source_cache / "HALF").exists()
    assert not lent.exists() and secret.read_text() == "host file"


def test_a_copy_that_lost_the_race_leaves_the_winners_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    helper = _helper(tmp_path / "built", "HELPERHASH")
    caches = _worker_caches(tmp_path, [helper])
    cache = tmp_path / "cache" / SOURCE_CACHES / "abc"
    cache.mkdir(parents=True)
    real_rename = os.rename

    def another_worker_first(src: Any, dst: Any) -> None:
        if not Path(dst).exists():  # another worker's whole copy lands between our copy and rename
            _helper(cache, "HELPERHASH").joinpath("winner").write_text("")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", another_worker_first)
    caches.seed(cache)
    assert sorted(p.name for p in cache.iterdir()) == ["HELPERHASH"]
    assert (cache / "HELPERHASH" / "winner").exists()


def test_a_pools_workers_share_one_probe_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Adapted tasks' new shapes are decided once per pool (bench/adapters/shape_probe.py)."""
    from bench.adapters.shape_probe import PROBE_DIR_ENV

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with LocalPool(GPU, workers=2, plan=_plan(2)) as pool:
        assert {w._env()[PROBE_DIR_ENV] for w in pool._all} == {str(pool.workdir / "probes")}
    assert PROBE_DIR_ENV not in os.environ


def test_what_a_process_wrote_after_it_saw_hidden_cases_never_reaches_a_visible_process(tmp_path: Path) -> None:
    """judge/source_caches.py, two sides per source: a visible job's process, turned to the
    hidden cases (`hide`), leaves what it compiled so far to the visible side (copied) and
    gives what it writes afterwards to the hidden side alone; a hidden job is lent both sides,
    a later visible (or own-test) process only the visible one, and no file of the visible side
    is ever shared with a process, so nothing written afterwards through an open file reaches it."""
    caches = _worker_caches(tmp_path, [])
    source = "def kernel(): pass\n"
    feedback = _process(tmp_path, "feedback")
    caches.lend(feedback, source)
    lent = Path(feedback.cache)
    (lent / "VISIBLE").mkdir()
    (lent / "VISIBLE" / "k.cubin").write_bytes(b"visible kernel")
    caches.hide(feedback, source)  # the hidden cases' layouts are sent after this
    visible, hidden = caches.side(source, hidden=False), caches.side(source, hidden=True)
    assert feedback.source_cache == hidden
    assert (visible / "VISIBLE" / "k.cubin").read_bytes() == b"visible kernel"
    (lent / "VISIBLE" / "k.cubin").write_bytes(b"notes on the hidden cases")  # through its own file
    (lent / "HIDDEN").mkdir()
    (lent / "HIDDEN" / "k.cubin").write_bytes(b"hidden kernel")
    from judge.source_caches import harvest

    harvest(lent, feedback.source_cache)  # as its close does
    assert (visible / "VISIBLE" / "k.cubin").read_bytes() == b"visible kernel"
    assert not (visible / "HIDDEN").exists() and (hidden / "HIDDEN" / "k.cubin").read_bytes() == b"hidden kernel"

    later_feedback, hidden_job = _process(tmp_path, "later"), _process(tmp_path, "hidden-job")
    caches.lend(later_feedback, source)
    caches.lend(hidden_job, source, hidden=True)
    assert sorted(p.name for p in Path(later_feedback.cache).iterdir()) == ["VISIBLE"]
    assert sorted(p.name for p in Path(hidden_job.cache).iterdir()) == ["HIDDEN", "VISIBLE"]
    assert (Path(hidden_job.cache) / "VISIBLE" / "k.cubin").read_bytes() == b"visible kernel"
    assert later_feedback.source_cache == visible and hidden_job.source_cache == hidden
    (Path(hidden_job.cache) / "VISIBLE" / "k.cubin").write_bytes(b"more notes")  # a hidden job's lent copy
    assert (visible / "VISIBLE" / "k.cubin").read_bytes() == b"visible kernel"


def test_where_the_installation_has_no_bytecode_the_judges_processes_share_a_run_folder_candidates_only_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from judge.template import candidate_environment
    from runners.bytecode import NO_WRITING_ENV, PREFIX_ENV, SWITCH_ENV

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv(SWITCH_ENV, "1")  # as on an image without torch's bytecode
    with LocalPool(GPU, workers=2, plan=_plan(2)) as pool:
        envs = [w._env() for w in pool._all]
        assert {e[PREFIX_ENV] for e in envs} == {str(pool.workdir / "bytecode")}
        assert {e[NO_WRITING_ENV] for e in envs} == {""}  # the workers and their probing children write it
        candidate = candidate_environment(envs[0], "cuda")
        assert candidate[NO_WRITING_ENV] == "1" and candidate[PREFIX_ENV] == envs[0][PREFIX_ENV]
    monkeypatch.setenv(SWITCH_ENV, "0")
    with LocalPool(GPU, workers=1, plan=_plan(1)) as pool:
        env = pool._all[0]._env()
        assert PREFIX_ENV not in env and env[NO_WRITING_ENV] == "1"  # never written beside the sources
    # A folder the caller primed (the throughput benchmark's) is kept as given, read-only.
    monkeypatch.setenv(SWITCH_ENV, "1")
    with LocalPool(GPU, workers=1, plan=_plan(1), extra_env={PREFIX_ENV: "/primed"}) as pool:
        env = pool._all[0]._env()
        assert env[PREFIX_ENV] == "/primed" and env[NO_WRITING_ENV] == "1"


def test_the_switch_follows_whether_torchs_bytecode_lies_beside_its_sources(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sys

    from runners.bytecode import SWITCH_ENV, installed_bytecode_found, run_bytecode_environment

    monkeypatch.delenv(SWITCH_ENV, raising=False)
    package = tmp_path / "kmc_bytecode_probe"
    package.mkdir()
    (package / "__init__.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not installed_bytecode_found("kmc_bytecode_probe")
    cache = package / "__pycache__"
    cache.mkdir()
    (cache / f"__init__.{sys.implementation.cache_tag}.pyc").write_bytes(b"")
    assert installed_bytecode_found("kmc_bytecode_probe")
    expected = {} if installed_bytecode_found() else {"PYTHONPYCACHEPREFIX": str(tmp_path), "PYTHONDONTWRITEBYTECODE": ""}
    assert run_bytecode_environment(tmp_path, {}) == expected


def test_a_fresh_process_given_the_run_folder_writes_it_and_the_next_one_reads_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    from runners.worker_process import scrubbed_env

    source = tmp_path / "src"
    source.mkdir()
    (source / "kmc_bytecode_module.py").write_text("VALUE = 41 + 1\n")
    folder = tmp_path / "bytecode"
    env = scrubbed_env({"PYTHONPYCACHEPREFIX": str(folder), "PYTHONDONTWRITEBYTECODE": "",
                        "PYTHONPATH": str(source)})
    code = ("import importlib.util, kmc_bytecode_module as m; "
            "print(m.VALUE, importlib.util.cache_from_source(m.__file__))")
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    value, cached = first.stdout.split()
    assert value == "42" and Path(cached).is_file() and Path(cached).is_relative_to(folder)
    assert not (source / "__pycache__").exists()  # nothing beside the sources
    stamp = Path(cached).stat().st_mtime_ns
    subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert Path(cached).stat().st_mtime_ns == stamp  # read, not written again
