"""Tracebacks in feedback (issue 13 item 4): a candidate that raises gets the frames of its own
file, capped and deterministic, and every method is shown them through `Feedback.describe`.

The unit tests import a candidate in this process (judge/candidate/loading.py `load_module`, as the
candidate process does); the slow one judges a failing candidate twice through the real pool
(two fresh candidate processes, two temporary folders) and gets identical text."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from judge.candidate import tracebacks
from judge.candidate.loading import CandidateLoadError, format_exception, load_module
from judge.candidate.tracebacks import HEADER, MAX_CHARS, MAX_FRAMES, candidate_traceback, scrub

PY_FAILURE = """import torch


def helper(x):
    return x.view(3, -1, 7)


def vector_add(x, y):
    return helper(x) + y
"""

KERNEL_FAILURE = """import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    z = tl.no_such_function(x)
    tl.store(out_ptr + offs, z, mask=offs < n)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(1,)](x, y, out, x.numel(), BLOCK=128)
    return out
"""

IMPORT_FAILURE = """import torch


def table():
    return {}["missing"]


TABLE = table()


def vector_add(x, y):
    return x + y
"""

RECURSION = """def down(n):
    if n == 0:
        raise ValueError(f"bottom reached by {object()!r}")
    return down(n - 1)


def vector_add(x, y):
    return down(30)
"""


def _raised(tmp_path: Path, source: str, name: str) -> tuple[BaseException, Path]:
    path = tmp_path / "candidate.py"
    path.write_text(source)
    module = load_module(path, f"kmc_candidate_{name}_4242")
    try:
        module.vector_add(torch.ones(100), torch.ones(100))
    except BaseException as exc:  # noqa: BLE001
        return exc, path
    raise AssertionError("the candidate did not raise")


def test_only_the_candidates_own_frames_outermost_first(tmp_path: Path) -> None:
    exc, path = _raised(tmp_path, PY_FAILURE, "py")
    text = candidate_traceback(exc, path)
    assert text.splitlines() == [
        HEADER,
        '  File "candidate.py", line 9, in vector_add',
        "    return helper(x) + y",
        '  File "candidate.py", line 5, in helper',
        "    return x.view(3, -1, 7)",
    ]
    assert str(tmp_path) not in text and "torch" not in text and "test_tracebacks" not in text


KERNEL_FAILURE_LINES = [
    '  File "candidate.py", line 16, in vector_add',
    "    add_kernel[(1,)](x, y, out, x.numel(), BLOCK=128)",
    '  File "candidate.py", line 10, in add_kernel',
    "    z = tl.no_such_function(x)",
]


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                    reason="needs Triton's interpreter (TRITON_INTERPRET=1, set by conftest.py without a GPU); "
                           "the compiled path is tested by the compile-error tests")
def test_an_interpreted_kernel_error_shows_the_kernel_line_after_the_launch(tmp_path: Path) -> None:
    """The interpreter raises the kernel's error as the cause of an InterpreterError: the
    launch's frames and then the kernel's own line, and nothing of Triton's."""
    exc, path = _raised(tmp_path, KERNEL_FAILURE, "kernel")
    assert candidate_traceback(exc, path).splitlines()[1:] == KERNEL_FAILURE_LINES


def _compiled(tmp_path: Path, source: str) -> list[str]:
    """The traceback lines of the candidate `source` with its kernel compiled by Triton's real
    front end, in a process of its own (tests/compiled_launch.py says why)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "candidate.py"
    path.write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
    done = subprocess.run([sys.executable, str(Path(__file__).resolve().parent / "compiled_launch.py"), str(path)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    assert shown["error"] == "CompilationError", shown
    return str(shown["traceback"]).splitlines()


@pytest.mark.slow
def test_a_compile_error_shows_the_kernel_line_after_the_launch(tmp_path: Path) -> None:
    """Compiled (a GPU, no interpreter): Triton's code generator raises a CompilationError
    with no frame inside the kernel; the kernel's failing line is added after the launch's,
    as the interpreter shows it (the same feedback on a GPU as on the CPU). A kernel calling
    a jit helper that fails shows the call's line and the helper's."""
    assert _compiled(tmp_path / "direct", KERNEL_FAILURE) == [HEADER, *KERNEL_FAILURE_LINES]
    assert _compiled(tmp_path / "helper", HELPER_FAILURE)[1:] == [
        '  File "candidate.py", line 20, in vector_add',
        "    add_kernel[(1,)](x, y, out, x.numel(), BLOCK=128)",
        '  File "candidate.py", line 15, in add_kernel',
        "    tl.store(out_ptr + offs, twice(x), mask=offs < n)",
        '  File "candidate.py", line 8, in twice',
        "    return tl.no_such_function(v) * 2",
    ]


HELPER_FAILURE = """import torch
import triton
import triton.language as tl


@triton.jit
def twice(v):
    return tl.no_such_function(v) * 2


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, twice(x), mask=offs < n)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(1,)](x, y, out, x.numel(), BLOCK=128)
    return out
"""


def test_a_compile_error_whose_source_is_not_the_candidates_adds_no_frame() -> None:
    """Read defensively: a compile error of a jit function not in the file (Triton's own
    library), or without the attributes, adds nothing; the launch's frames stay."""
    from triton.compiler.errors import CompilationError

    source = KERNEL_FAILURE.splitlines()
    node = ast.parse("x = 1").body[0]
    foreign = CompilationError("def add_kernel(a):\n    return a + 1\n", node, "boom")
    assert tracebacks.compile_error_frames(foreign, source) == []
    bare = CompilationError(None, node, "boom")
    assert tracebacks.compile_error_frames(bare, source) == []
    kernel_src = "\n".join(line.strip() if i == 0 else line for i, line in enumerate(source[6:11]))
    ours = CompilationError(kernel_src, ast.parse("\n\n\nz = 1").body[0], "boom")  # line 4 of the kernel
    assert tracebacks.compile_error_frames(ours, source) == [tracebacks.Frame(10, "add_kernel")]
    assert tracebacks.compile_error_frames(RuntimeError("not Triton's"), source) == []


def test_an_import_failure_carries_the_module_level_frames(tmp_path: Path) -> None:
    path = tmp_path / "candidate.py"
    path.write_text(IMPORT_FAILURE)
    with pytest.raises(CandidateLoadError) as info:
        load_module(path, "kmc_candidate_import_1")
    assert info.value.kind == "runtime_error" and str(info.value) == "import failed: KeyError: 'missing'"
    assert info.value.traceback.splitlines()[1:] == [
        '  File "candidate.py", line 8, in <module>',
        "    TABLE = table()",
        '  File "candidate.py", line 5, in table',
        '    return {}["missing"]',
    ]


def test_a_syntax_error_names_its_line_in_the_message_and_has_no_frames(tmp_path: Path) -> None:
    path = tmp_path / "candidate.py"
    path.write_text("def vector_add(x, y:\n    return x\n")
    with pytest.raises(CandidateLoadError) as info:
        load_module(path, "kmc_candidate_syntax_1")
    assert info.value.kind == "syntax_error" and info.value.traceback == ""
    assert "candidate.py, line 1" in str(info.value) and str(tmp_path) not in str(info.value)


def test_frames_and_characters_are_capped_keeping_the_innermost(tmp_path: Path) -> None:
    exc, path = _raised(tmp_path, RECURSION, "deep")
    lines = candidate_traceback(exc, path).splitlines()
    # vector_add, then 31 frames of down, each with its code line: the outermost left out.
    assert lines[1] == f"  ... {32 - MAX_FRAMES} outer frames left out"
    assert sum(1 for ln in lines if ln.startswith('  File "candidate.py"')) == MAX_FRAMES
    assert lines[-2:] == ['  File "candidate.py", line 3, in down',
                          '    raise ValueError(f"bottom reached by {object()!r}")']

    long_call = "return down(n - 1" + " + 0" * 100 + ")"  # each code line cut at MAX_LINE_CHARS
    exc, path = _raised(tmp_path, RECURSION.replace("return down(n - 1)", long_call), "long")
    text = candidate_traceback(exc, path)
    assert len(text) <= MAX_CHARS and text.startswith(HEADER + "\n  ... [cut]\n")
    assert text.splitlines()[-1] == '    raise ValueError(f"bottom reached by {object()!r}")'


def test_the_message_and_traceback_are_the_same_in_every_process(tmp_path: Path) -> None:
    """No memory address, process id or temporary folder: two copies of the candidate in
    different folders under different module names give identical texts."""
    texts = []
    for i, folder in enumerate((tmp_path / "a1b2c3", tmp_path / "zz")):
        folder.mkdir()
        exc, path = _raised(folder, RECURSION, f"proc{i}")
        texts.append((format_exception(exc, path=path), candidate_traceback(exc, path)))
    assert texts[0] == texts[1]
    message = texts[0][0]
    assert re.fullmatch(r"ValueError: bottom reached by <object object at 0x…>", message), message


def test_scrub_hides_the_folder_the_module_name_and_addresses() -> None:
    text = ("File /tmp/kmc-x/cand-7/candidate.py: module 'kmc_candidate_91234' has no attribute 'f'; "
            "<function f at 0x7f3a2b1c9d40> in /tmp/kmc-x/cand-7")
    assert scrub(text, "/tmp/kmc-x/cand-7/candidate.py") == (
        "File candidate.py: module 'candidate' has no attribute 'f'; <function f at 0x…> in .")
    assert scrub("mask 0x3C3C", None) == "mask 0x3C3C"  # short hex constants are values, kept
    assert tracebacks.SHOWN_FILE == "candidate.py"


def test_feedback_shows_the_traceback_after_the_message() -> None:
    from methods.base import Feedback

    fb = Feedback("runtime_error", "RuntimeError: boom", "visible-n1024", None, None,
                  traceback=f'{HEADER}\n  File "candidate.py", line 4, in vector_add\n    boom()')
    assert fb.describe() == ("runtime_error on visible-n1024: RuntimeError: boom\n" + fb.traceback)
    assert Feedback("wrong_result", "off", "visible-n1024", None, None).describe() == "wrong_result on visible-n1024: off"


@pytest.mark.slow
def test_the_same_failing_candidate_judged_twice_gets_identical_text() -> None:
    """Through the pool: a fresh candidate process and temporary folder each time."""
    from bench.registry import get_task
    from judge.device import detect_target
    from runners.pool import LocalPool

    task = get_task("vector_add")
    with LocalPool(detect_target(force_cpu=True), workers=1, job_timeout=120) as pool:
        first = [pool.evaluate(task.id, src, "visible").verdict for src in (PY_FAILURE, KERNEL_FAILURE, IMPORT_FAILURE)]
        again = [pool.evaluate(task.id, src, "visible").verdict for src in (PY_FAILURE, KERNEL_FAILURE, IMPORT_FAILURE)]
    assert [(v.kind, v.message, v.traceback) for v in first] == [(v.kind, v.message, v.traceback) for v in again]
    assert [v.kind for v in first] == ["runtime_error", "compile_error", "runtime_error"]
    for v in first:
        assert v.traceback.startswith(HEADER) and '"candidate.py"' in v.traceback
        assert "/" not in v.traceback and "/" not in v.message, v  # no folder of the judge's or the temp's
    assert first[1].traceback.splitlines()[-1] == "    z = tl.no_such_function(x)"


@pytest.mark.gpu
def test_a_triton_compile_error_on_a_gpu_shows_the_launch_and_the_kernel_line() -> None:
    """On a GPU the kernel is compiled, not run: no frame inside it, yet the traceback shows
    the kernel's failing line after the launch, as on the interpreter; Triton's own message
    (which names the kernel's line too) is the message."""
    from bench.registry import get_task
    from judge.device import detect_target
    from runners.pool import LocalPool

    with LocalPool(detect_target(), workers=1, job_timeout=300) as pool:
        v = pool.evaluate(get_task("vector_add").id, KERNEL_FAILURE, "visible").verdict
    assert v.kind == "compile_error", v
    assert "no_such_function" in v.message and "/" not in v.traceback
    assert v.traceback.splitlines()[1:] == KERNEL_FAILURE_LINES
