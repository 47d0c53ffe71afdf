"""What code and which command produced a run: the git revision, package versions, the command line.

Why: a run's numbers are only as trustworthy as one's ability to say what made them. A run
folder records the toolkit's git commit (and whether the checkout had uncommitted changes),
the versions of the libraries that judge kernels and compute statistics, and the command
that started it, so a result can be traced to code (inspect_ai's `EvalSpec.revision` and
`packages` keep the same facts). Every fact is best-effort: a toolkit installed without git,
or a library that is not installed, is recorded as `None`, never as a guess.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTION = "kernel-method-compare"
# The libraries whose versions can change a verdict, a timing or an interval.
PACKAGES = ("torch", "triton", "numpy", "scipy", "statsmodels", "pandas", "openai")


@dataclass(frozen=True)
class GitRevision:
    commit: str | None  # None: not a git checkout, or git is not installed
    dirty: bool | None  # uncommitted changes (tracked or untracked, not ignored) when it ran


def git_revision(root: Path = PROJECT_ROOT) -> GitRevision:
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10,
                                 check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout if out.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    commit = git("rev-parse", "HEAD")
    # An installed copy inside someone else's checkout (a .venv in another repository) is not that repository's code.
    if commit is None or top is None or Path(top.strip()).resolve() != root.resolve():
        return GitRevision(None, None)
    status = git("status", "--porcelain")
    return GitRevision(commit.strip(), None if status is None else bool(status.strip()))


def toolkit_version(root: Path = PROJECT_ROOT) -> str | None:
    """The version in this checkout's pyproject.toml (what ran), else the installed one."""
    try:
        return str(tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        pass
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed versions by distribution metadata (nothing is imported); None when absent."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def provenance(command_line: list[str] | tuple[str, ...] | None = None) -> dict[str, Any]:
    """The facts above as env.json records them. `command_line` defaults to this process's argv."""
    return {
        "toolkit_version": toolkit_version(),
        "git": asdict(git_revision()),
        "packages": package_versions(),
        "command_line": list(sys.argv if command_line is None else command_line),
    }


def version_label(version: str | None, commit: str | None, dirty: bool | None) -> str:
    """A toolkit version as `kmc --version` prints it: `kmc 0.1.0 (git 8a178c8a1993, uncommitted
    changes)`; the commit is left out when it is unknown (an installed copy, no git)."""
    where = f" (git {commit[:12]}{', uncommitted changes' if dirty else ''})" if commit else ""
    return f"kmc {version or 'unknown version'}{where}"


def this_version() -> str:
    """The running toolkit's version label (version_label)."""
    rev = git_revision()
    return version_label(toolkit_version(), rev.commit, rev.dirty)


def recorded_version(env: dict[str, Any]) -> str:
    """The version label of the code that started a run, from its env.json (`toolkit_version`,
    `git`); a run folder without them says so rather than guessing."""
    recorded_git = env.get("git")
    git: dict[str, Any] = recorded_git if isinstance(recorded_git, dict) else {}
    version, commit = env.get("toolkit_version"), git.get("commit")
    if not version and not commit:
        return "an unrecorded version"
    return version_label(str(version) if version else None, str(commit) if commit else None, git.get("dirty"))


def launcher(command_line: list[str] | tuple[str, ...] | None) -> str:
    """How a recorded command line started the toolkit, as a hint to the user should repeat it:
    `kmc` for the installed console script (its full path when `kmc` on PATH is another file),
    `python cli.py` for a Python file (relative to the current folder when it lies under it, else
    as recorded), and `python cli.py` when
    the command line says nothing (a library call, or a run recorded without one)."""
    argv0 = str(command_line[0]) if command_line else ""
    name = Path(argv0).name
    if not argv0 or name in ("-c", "-m") or name.startswith(("pytest", "ipykernel", "python")):
        return "python cli.py"
    if name.endswith(".py"):  # as typed from the current folder when the script is under it
        try:
            return f"python {Path(argv0).resolve().relative_to(Path.cwd().resolve())}"
        except (OSError, ValueError):
            return f"python {argv0}"
    found = shutil.which(name)
    same = found is not None and Path(found).resolve() == Path(argv0).resolve()
    return name if same or argv0 == name else argv0
