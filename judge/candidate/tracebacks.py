"""The traceback a method sees when its candidate raises: the candidate's own frames only.

Upstream GEAK sent the failing program's stderr back to the model; a bare exception line
("RuntimeError: shape '[3, -1, 7]' is invalid") does not say which line of the candidate
raised it. So a verdict of a candidate that raised carries the frames of the candidate's own
source file, outermost first, each with its line of code, rendered as `File "candidate.py"`:

- only frames whose file is the candidate's: never the judge's, torch's, Triton's or the
  project's, so the text reveals neither the judge's layout nor anything a frame of theirs
  holds (no local variables are shown, so no case values either);
- deterministic: no temporary folder (the file is always `candidate.py`), no process id (the
  module's per-process name becomes `candidate`), no memory address (`0x` and 8 or more hex
  digits become `0x…`); the same failing candidate gives the same text in every process;
- capped: at most `MAX_FRAMES` frames (the innermost kept, the number left out said) and
  `MAX_CHARS` characters, each code line at most `MAX_LINE_CHARS`.

The interpreter raises a kernel's error as the cause of an `InterpreterError`, so the chain
of causes and contexts is walked and their candidate frames joined in call order (the outer
exception's frames reach the launch, its cause's continue inside the kernel). A Triton
compile error on a GPU has no frames inside the kernel (the kernel is compiled, not run),
so the feedback would stop at the launch: the kernel's failing line is added as a frame of
its own, found from what every Triton 3.x `CompilationError` carries (`src`: the jit
function's source from its `def` line; `node`: the AST node that failed, its `lineno`
counted from that `def`), read defensively, and placed in the candidate's file by finding
that source there (a jit function of Triton's own library, not in the file, adds nothing).
A call into a jit helper that fails is a compile error raised from the helper's: both lines.

Candidate-side: imported by judge/candidate/loading.py in the candidate's process (judge/template.py
lists it), where it needs nothing of the judge.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass
from pathlib import Path

MAX_FRAMES = 8
MAX_CHARS = 1500
MAX_LINE_CHARS = 160
SHOWN_FILE = "candidate.py"
SHOWN_MODULE = "candidate"
HEADER = "Traceback (the candidate's own lines, most recent call last):"

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{8,}")
_MODULE_NAME = re.compile(r"kmc_candidate_\d+")
_DEF = re.compile(r"def\s+(\w+)\s*\(")


def scrub(text: str, path: Path | str | None = None) -> str:
    """`text` without what differs between processes or reveals the judge's folders: the
    candidate's full path and folder, its per-process module name, memory addresses."""
    if path is not None:
        full = str(path)
        text = text.replace(full, SHOWN_FILE)
        folder = str(Path(full).parent)
        if len(folder) > 1:
            text = text.replace(folder + "/", "").replace(folder, ".")
    text = _MODULE_NAME.sub(SHOWN_MODULE, text)
    return _ADDRESS.sub("0x…", text)


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and what it was raised from or during, innermost (the first raised) last."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return chain


@dataclass(frozen=True)
class Frame:
    """One line of the candidate's on the stack."""

    lineno: int
    name: str


def candidate_frames(exc: BaseException, path: Path | str) -> list[Frame]:
    """The frames of the candidate's file along the exception's chain, outermost first; a frame
    that an exception and its cause both passed at the same line is listed once."""
    wanted = str(path)
    frames: list[Frame] = []
    seen: set[tuple[int, int]] = set()
    for link in _chain(exc):
        for frame, lineno in traceback.walk_tb(link.__traceback__):
            key = (id(frame), lineno)
            if frame.f_code.co_filename != wanted or key in seen:
                continue
            seen.add(key)
            frames.append(Frame(lineno, frame.f_code.co_name))
    return frames


def _is_compile_error(exc: BaseException) -> bool:
    """A Triton `CompilationError` (or subclass), known by its class name so that this module
    imports nothing of Triton's (the class moved between modules across 3.x releases)."""
    return any(c.__name__ == "CompilationError" and c.__module__.startswith("triton")
               for c in type(exc).__mro__)


def _first_line_in(src: str, source: list[str]) -> tuple[int, str] | None:
    """Where `src` (a jit function's source, dedented; Triton 3.x starts it at the `def`)
    begins in the candidate's file `source`, as a 1-based line number, with the function's
    name: the first `def` of that name whose lines are `src`'s. None when the file does not
    hold it (a jit function of Triton's own library, such as `tl.softmax`, is never mistaken
    for a candidate's function of the same name)."""
    src_lines = src.splitlines()
    defs = [(i, m[1]) for i, line in enumerate(src_lines) if (m := _DEF.match(line.strip()))]
    if not defs:
        return None
    def_at, name = defs[0]
    wanted = [line.strip() for line in src_lines[def_at:]]
    for i, line in enumerate(source):
        m = _DEF.match(line.strip())
        if m and m[1] == name and [s.strip() for s in source[i:i + len(wanted)]] == wanted:
            return i + 1 - def_at, name
    return None


def compile_error_frames(exc: BaseException, source: list[str]) -> list[Frame]:
    """The kernel lines in `source` (the candidate's file) where Triton's compiler failed,
    along the exception's chain, outermost first (a kernel's call of a jit helper, then the
    helper's line)."""
    frames: list[Frame] = []
    for link in _chain(exc):
        if not _is_compile_error(link):
            continue
        src, node = getattr(link, "src", None), getattr(link, "node", None)
        lineno = getattr(node, "lineno", None)
        if not isinstance(src, str) or not isinstance(lineno, int) or lineno < 1:
            continue
        where = _first_line_in(src, source)
        if where is not None:
            frames.append(Frame(where[0] + lineno - 1, where[1]))
    return frames


def _code_line(frame: Frame, source: list[str]) -> str:
    line = source[frame.lineno - 1].strip() if 0 < frame.lineno <= len(source) else ""
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " …"


def candidate_traceback(exc: BaseException, path: Path | str) -> str:
    """The capped, deterministic traceback of the candidate's own frames, then the kernel
    lines a Triton compile error names; "" when none is there (it failed inside the judge's
    call)."""
    try:
        source = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        source = []
    frames = candidate_frames(exc, path)
    frames += [f for f in compile_error_frames(exc, source) if f not in frames[-1:]]
    if not frames:
        return ""
    left_out = max(0, len(frames) - MAX_FRAMES)
    lines = [HEADER]
    if left_out:
        lines.append(f"  ... {left_out} outer frame{'s' if left_out > 1 else ''} left out")
    for frame in frames[left_out:]:
        lines.append(f'  File "{SHOWN_FILE}", line {frame.lineno}, in {frame.name}')
        code = _code_line(frame, source)
        if code:
            lines.append(f"    {code}")
    text = scrub("\n".join(lines), path)
    if len(text) > MAX_CHARS:  # keep the innermost lines: they say where it failed
        text = HEADER + "\n  ... [cut]\n" + text[-(MAX_CHARS - len(HEADER) - 12):].split("\n", 1)[-1]
    return text
