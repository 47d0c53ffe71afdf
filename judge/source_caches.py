"""A source's Triton cache, lent to one sandboxed candidate process and taken back after it.

Each candidate source has a Triton cache of its own (`SourceCaches`, under the judge worker's
Triton cache root, judge/worker.py), so a source judged again
(visible, hidden, timing) compiles nothing twice, and no candidate can plant a binary where
another source's candidate (or the expert) will look for its own. The sandbox binds exactly one
writable folder, made for the process when it was forked (judge/sandbox.py), before its
source is known. So the judge lends the source's cache into that folder when the source
arrives (`fill`: hard links, milliseconds) and takes what the candidate compiled back after it
(`harvest`: renames). Only plain files and folders move, never a link or a device: a symbolic
link a candidate left could point anywhere on the host once the judge follows it.

Each source's cache is seeded with copies of Triton's driver helpers, compiled once by the judge
into its own entries beside `SOURCE_CACHES` (`build_helpers`), and of the launchers the judge
built for signatures candidates used (judge/candidate/launchers.py): a candidate process does
not rebuild them, and nothing a candidate wrote is ever taken for one of them.

Two sides per source. What a process wrote after it saw hidden cases (a hidden job's, or one
compiling the hidden cases in the background, judge/hidden_warmup.py) goes to the source's
hidden side only, which only such processes are lent; the visible side gets nothing from them,
so a later feedback or own-test process of the source (whose output reaches the method) never
reads what a candidate may have noted about the hidden cases. The visible side is lent as
copies, never links: a process holding a link (or an open file) to one of its files could
write into it after it saw the hidden cases.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SOURCE_CACHES = "sources"  # under the Triton cache root: one writable cache per candidate source
HIDDEN_SIDE = ".hidden"  # the suffix of a source's hidden side (module docstring)


def prebuilt_helpers(root: Path, suffix: str) -> list[Path]:
    """The judge's own entries in the Triton cache `root` that hold a compiled library (Triton's
    helpers): never the candidates' caches under `SOURCE_CACHES`, nor a copy still in progress."""
    return [entry for entry in sorted(root.iterdir())
            if entry.is_dir() and entry.name != SOURCE_CACHES and not entry.name.startswith(".")
            and any(f.name.endswith(suffix) for f in entry.iterdir())]


def build_helpers(root: Path, interpreter: bool) -> list[Path]:
    """On a GPU: Triton's driver helpers (its C utilities and launcher, built with the system
    C compiler on first use and kept in the Triton cache) compiled once here, by the judge,
    into its own cache `root`. Each source's cache is seeded with copies of them
    (`SourceCaches.lend`), so a candidate process does not rebuild them (seconds per source) and
    never writes into what another process loads."""
    if interpreter:
        return []
    try:
        from judge.candidate.loading import use_triton_cache
        from judge.warmup import compile_helpers

        # The judge's own kernels and helpers go where the listing below looks (without
        # this, Triton's default cache: nothing was found, and every candidate process
        # built the helpers again, seconds per source).
        root.mkdir(parents=True, exist_ok=True)
        use_triton_cache(str(root))
        compile_helpers()
        return prebuilt_helpers(root, sysconfig.get_config_var("EXT_SUFFIX") or ".so")
    except Exception as exc:  # noqa: BLE001 - an optimisation: candidates then build the helpers themselves
        print(f"judge worker: Triton's helpers not prebuilt ({type(exc).__name__}: {exc})", file=sys.stderr)
        return []


class SourceCaches:
    """A judge worker's Triton cache `root`: its own entries (`helpers`, from `build_helpers`, and
    the `launchers` it builds for the signatures candidates noted) and, under `SOURCE_CACHES`,
    one cache per candidate source, lent to the process that judges it (`lend`)."""

    def __init__(self, root: Path, helpers: list[Path], user: tuple[int, int] | None, interpreter: bool) -> None:
        """`user`: the (uid, gid) candidate processes drop to (judge/privileges.py), or None."""
        from judge.candidate.launchers import SharedLaunchers

        self.root, self.helpers, self.user, self.interpreter = root, helpers, user, interpreter
        self.launchers = SharedLaunchers(root)  # built for the signatures candidates noted

    def seed(self, cache: Path) -> None:
        """Copies of the judge's prebuilt helpers (and the launchers it built for signatures
        candidates used: judge/candidate/launchers.py) in a source's cache. Each appears whole or not
        at all (copied beside it, then renamed): the pool's workers share the sources' caches,
        and a candidate of another worker must never load a helper half copied."""
        for entry in (*self.helpers, *self.launchers.folders):
            if not (cache / entry.name).exists():
                _copy_whole(entry, cache / entry.name)

    def lend(self, proc: Any, source: str, hidden: bool = False) -> None:
        """On a GPU, the source's own Triton cache lent to the process that judges it (`fill`):
        duplicates reuse their kernels, and no candidate can plant a
        binary where another source's candidate (or the expert) will look for its own. The
        pool's workers share the sources' caches (runners/pool.py): a duplicate judged by another
        worker compiles nothing. They live apart from the judge's own entries, which
        `build_helpers` lists: nothing a candidate wrote is ever taken for a helper. `hidden`:
        the process will see hidden cases, so it is lent the hidden side as well and gives back
        to it alone (the module's docstring)."""
        if self.interpreter or not proc.cache:
            return
        visible = self.side(source, hidden=False)
        fill(visible, Path(proc.cache), self.user, copy=True)
        proc.source_cache = visible
        if hidden:
            proc.source_cache = self.side(source, hidden=True)
            fill(proc.source_cache, Path(proc.cache), self.user)

    def side(self, source: str, hidden: bool) -> Path:
        """The source's visible or hidden cache, made and seeded on first use."""
        name = hashlib.sha256(source.encode()).hexdigest()[:24] + (HIDDEN_SIDE if hidden else "")
        cache = self.root / SOURCE_CACHES / name
        cache.mkdir(parents=True, exist_ok=True)
        self.seed(cache)
        return cache

    def hide(self, proc: Any, source: str) -> None:
        """A process lent the visible side is about to see hidden cases: what it compiled so
        far is copied to the visible side now, and what it writes from here on goes back to
        the hidden side alone."""
        if self.interpreter or not proc.cache:
            return
        snapshot(Path(proc.cache), self.side(source, hidden=False))
        proc.source_cache = self.side(source, hidden=True)

    def close(self) -> None:
        self.launchers.close()


def fill(source_cache: Path, cache: Path, owner: tuple[int, int] | None = None, copy: bool = False) -> int:
    """The source cache's entries hard-linked (`copy`: copied) into `cache` (a folder the
    candidate process writes); `owner`: the worker user's (uid, gid), which then owns the
    folders. Returns the files."""
    linked = 0
    for entry in sorted(source_cache.iterdir()):
        if _plain_tree(entry) and not (cache / entry.name).exists():
            linked += _link_tree(entry, cache / entry.name, owner, copy)
    if owner is not None:
        os.chown(cache, *owner)
    return linked


def snapshot(cache: Path, source_cache: Path) -> int:
    """Copies of the entries a live candidate process added to `cache`, each renamed into
    `source_cache` whole (`harvest` moves them once the process is gone). Returns how many."""
    return sum(_copy_whole(entry, target) for entry, target in _new_entries(cache, source_cache))


def _copy_whole(entry: Path, target: Path) -> bool:
    """`entry` copied beside `target`, then renamed to it: a process (of any worker) sees it
    whole or not at all. False where that failed (another worker's copy landed first)."""
    partial = target.parent / f".{target.name}.{os.getpid()}.partial"
    try:
        if entry.is_dir():
            shutil.copytree(entry, partial, symlinks=True)
        else:
            shutil.copyfile(entry, partial, follow_symlinks=False)
        os.rename(partial, target)
        return True
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
        return False


def harvest(cache: Path, source_cache: Path) -> int:
    """Entries the candidate process added to `cache`, moved whole into the source's cache
    (a rename: another worker sees an entry complete or not at all), then `cache` emptied.
    Returns how many entries moved."""
    moved = 0
    for entry, target in _new_entries(cache, source_cache):
        with contextlib.suppress(OSError):
            os.rename(entry, target)
            moved += 1
    shutil.rmtree(cache, ignore_errors=True)
    return moved


def _new_entries(cache: Path, source_cache: Path) -> Iterator[tuple[Path, Path]]:
    """`cache`'s entries that `source_cache` lacks, plain files and folders only (never a link
    or a device), each with its place there; none where `cache` cannot be read."""
    try:
        entries = sorted(cache.iterdir())
    except OSError:
        return
    for entry in entries:
        target = source_cache / entry.name
        try:
            fresh = not entry.name.startswith(".") and not target.exists() and _plain_tree(entry)
        except OSError:  # gone meanwhile
            continue
        if fresh:
            yield entry, target


def _plain_tree(path: Path) -> bool:
    """Only folders and regular files below `path` (lstat: a link is never followed)."""
    mode = os.lstat(path).st_mode
    if stat.S_ISREG(mode):
        return True
    if not stat.S_ISDIR(mode):
        return False
    return all(_plain_tree(child) for child in path.iterdir())


def _link_tree(source: Path, target: Path, owner: tuple[int, int] | None, copy: bool = False) -> int:
    if source.is_file():
        if copy:
            shutil.copyfile(source, target, follow_symlinks=False)
        else:
            os.link(source, target, follow_symlinks=False)
        return 1
    target.mkdir()
    if owner is not None:
        os.chown(target, *owner)
    return sum(_link_tree(child, target / child.name, owner, copy) for child in sorted(source.iterdir()))
