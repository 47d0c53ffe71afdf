"""Triton's C launchers built by the judge for the signatures candidates noted (judge/candidate/launchers.py):
what a candidate says is checked, builds are bounded, and only folders in the judge's own cache
are seeded. The GPU half (a second source of a task builds no launcher) is in
tests/test_judge_gpu.py."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from judge.candidate import launchers


def test_signatures_are_lists_of_triton_type_names_and_nothing_else() -> None:
    assert launchers.valid_signature(["*fp32", "*fp16", "i32", "constexpr"]) == ("*fp32", "*fp16", "i32", "constexpr")
    assert launchers.valid_signature(["*kbf16", ["i64", "fp32"], "u8"]) == ("*kbf16", ("i64", "fp32"), "u8")
    for bad in ([], "i32", ["i32", 3], ["tensordesc<fp16[64, 64]>"], ['i32"); system("sh'], ["I32"],
                [[[[["i32"]]]]], ["i32"] * (launchers.MAX_ARGS + 1), [None], {"a": "i32"}):
        assert launchers.valid_signature(bad) is None, bad


def test_hints_are_built_once_each_bounded_per_job_and_only_judge_cache_folders_are_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "triton-cache"
    root.mkdir()
    built: list[tuple[Any, ...]] = []

    def fake_build(signature: tuple[Any, ...]) -> Path:
        built.append(signature)
        if signature[0] == "*fp64":  # a launcher that (somehow) landed outside the judge's own cache
            return tmp_path / "elsewhere" / "x"
        folder = root / f"launcher-{len(built)}"
        folder.mkdir()
        return folder

    monkeypatch.setattr(launchers, "build_launcher", fake_build)
    shared = launchers.SharedLaunchers(root)
    try:
        hints = [["*fp32", "i32"], ["*fp32", "i32"], "junk", ["*fp32", "i64"], ["*fp64", "i32"]]
        assert shared.learn(hints) == 3  # the duplicate and the junk are not queued
        shared.wait(30)
        assert built == [("*fp32", "i32"), ("*fp32", "i64"), ("*fp64", "i32")]
        assert shared.folders == [root / "launcher-1", root / "launcher-2"]
        assert shared.learn([["*fp32", "i32"]]) == 0  # known already
        many = [["*fp32"] * (k + 1) for k in range(launchers.MAX_PER_JOB + 5)]
        assert shared.learn(many) == launchers.MAX_PER_JOB
        assert shared.learn("not a list") == 0
    finally:
        shared.close()


def test_a_build_that_fails_is_said_and_left_to_the_candidates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    def failing(signature: tuple[Any, ...]) -> Path:
        raise RuntimeError("no C compiler")

    monkeypatch.setattr(launchers, "build_launcher", failing)
    shared = launchers.SharedLaunchers(tmp_path)
    try:
        assert shared.learn([["*fp32", "i32"]]) == 1
        shared.wait(30)
        assert shared.folders == []
        assert "no launcher built for ['*fp32', 'i32'] (RuntimeError: no C compiler)" in capsys.readouterr().err
    finally:
        shared.close()


def test_a_candidate_process_notes_the_signatures_of_the_launchers_it_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeLauncher:
        def __init__(self, src: Any, metadata: Any) -> None:
            self.src = src

    backend = types.ModuleType("kmc_fake_backend_driver")
    backend.FakeLauncher = FakeLauncher  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "kmc_fake_backend_driver", backend)
    monkeypatch.setattr(launchers, "_BACKEND_LAUNCHERS", (("kmc_fake_backend_driver", "FakeLauncher"),
                                                          ("kmc_no_such_backend", "Launcher")))
    monkeypatch.setattr(launchers, "_NOTED", [])
    assert launchers.note_launchers() == ["kmc_fake_backend_driver.FakeLauncher"]
    assert launchers.note_launchers() == ["kmc_fake_backend_driver.FakeLauncher"]  # wrapped once, not twice
    src = types.SimpleNamespace(signature={"x": "*fp32", "n": "i32", "pair": ("i64", "fp16"), "BLOCK": "constexpr"})
    made = FakeLauncher(src, None)
    FakeLauncher(src, None)
    assert made.src is src  # the class still does its own work
    assert launchers.noted() == [["*fp32", "i32", ["i64", "fp16"], "constexpr"]]
    assert launchers.noted() == []


def test_the_judge_builds_with_the_backends_own_launcher_class_and_the_gpus_warp_size(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`build_launcher` hands Triton's launcher class the signature as a kernel's source would
    (argument kinds only) and the GPU's warp size (in HIP's launcher source), and finds the cache
    folder from the module the launcher loaded."""
    import triton

    made: list[tuple[Any, Any]] = []
    library = tmp_path / "KEY" / "__triton_launcher.so"

    class Module:
        __file__ = str(library)

        def launch(self) -> None:
            pass

    class Launcher:
        def __init__(self, src: Any, metadata: Any) -> None:
            made.append((src, metadata))
            self.launch = Module().launch

    driver = types.SimpleNamespace(launcher_cls=Launcher,
                                   get_current_target=lambda: types.SimpleNamespace(warp_size=64))
    monkeypatch.setattr(triton.runtime, "driver", types.SimpleNamespace(active=driver))
    assert launchers.build_launcher(("*fp32", ("i32", "i64"), "constexpr")) == tmp_path / "KEY"
    (src, metadata), = made
    assert list(src.signature.values()) == ["*fp32", ("i32", "i64"), "constexpr"] and src.constants == {}
    assert metadata.warp_size == 64 and tuple(metadata.cluster_dims) == (1, 1, 1) and metadata.launch_pdl == 0
    driver.launcher_cls = lambda src, metadata: types.SimpleNamespace(launch=print)  # a Triton with no module per signature
    assert launchers.build_launcher(("*fp32",)) is None
