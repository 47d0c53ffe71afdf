"""A source's Triton cache, lent to one sandboxed candidate process and taken back after it.

Each candidate source has a Triton cache of its own (judge/worker.py), so a source judged again
(visible, hidden, timing) compiles nothing twice, and no candidate can plant a binary where
another source's candidate (or the expert) will look for its own. The sandbox binds exactly one
writable folder, made for the process when it was forked (judge/sandbox.py), before its
source is known. So the judge lends the source's cache into that folder when the source
arrives (`fill`: hard links, milliseconds) and takes what the candidate compiled back after it
(`harvest`: renames). Only plain files and folders move, never a link or a device: a symbolic
link a candidate left could point anywhere on the host once the judge follows it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path


def fill(source_cache: Path, cache: Path, owner: tuple[int, int] | None = None) -> int:
    """The source cache's entries hard-linked into `cache` (a folder the candidate process
    writes); `owner`: the worker user's (uid, gid), which then owns them. Returns the files."""
    linked = 0
    for entry in sorted(source_cache.iterdir()):
        if _plain_tree(entry) and not (cache / entry.name).exists():
            linked += _link_tree(entry, cache / entry.name, owner)
    if owner is not None:
        os.chown(cache, *owner)
    return linked


def harvest(cache: Path, source_cache: Path) -> int:
    """Entries the candidate process added to `cache`, moved whole into the source's cache
    (a rename: another worker sees an entry complete or not at all), then `cache` emptied.
    Returns how many entries moved."""
    moved = 0
    with contextlib.suppress(OSError):
        for entry in sorted(cache.iterdir()):
            target = source_cache / entry.name
            if entry.name.startswith(".") or target.exists() or not _plain_tree(entry):
                continue
            with contextlib.suppress(OSError):
                os.rename(entry, target)
                moved += 1
    shutil.rmtree(cache, ignore_errors=True)
    return moved


def _plain_tree(path: Path) -> bool:
    """Only folders and regular files below `path` (lstat: a link is never followed)."""
    mode = os.lstat(path).st_mode
    if stat.S_ISREG(mode):
        return True
    if not stat.S_ISDIR(mode):
        return False
    return all(_plain_tree(child) for child in path.iterdir())


def _link_tree(source: Path, target: Path, owner: tuple[int, int] | None) -> int:
    if source.is_file():
        os.link(source, target, follow_symlinks=False)
        return 1
    target.mkdir()
    if owner is not None:
        os.chown(target, *owner)
    return sum(_link_tree(child, target / child.name, owner) for child in sorted(source.iterdir()))
