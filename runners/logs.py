"""Logging: the `kmc` logger tree, the log every run folder keeps, and the CLI's own handlers.

Why a log beside the store: the store records results, not the story of a run (which unit
started when, which call was replayed, how long an evaluation took, what the user was told).
A reviewer handed a run folder reads `run.log` to see how it went; `--verbose` shows the same
lines live and `--log-file` copies them elsewhere. Modules log to `kmc.<module>` loggers; the
library adds no handler except the run folder's, for the length of a run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOGGER = "kmc"
FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def get_logger(module: str) -> logging.Logger:
    """`kmc.<module>`: every logger of the toolkit hangs under one name, so one handler sees them all."""
    return logging.getLogger(f"{LOGGER}.{module}")


def attach(handler: logging.Handler, level: int = logging.DEBUG) -> logging.Handler:
    """Send the toolkit's records at `level` and above to `handler` (formatted with FORMAT)."""
    handler.setLevel(level)
    if handler.formatter is None:
        handler.setFormatter(logging.Formatter(FORMAT))
    top = logging.getLogger(LOGGER)
    top.setLevel(logging.DEBUG)  # handlers filter; the logger itself drops nothing
    top.addHandler(handler)
    return handler


def detach(handler: logging.Handler) -> None:
    logging.getLogger(LOGGER).removeHandler(handler)
    handler.close()


@contextmanager
def run_log(path: Path) -> Iterator[None]:
    """Append every record of the toolkit to `path` while the block runs (a resumed run adds to
    the log it started)."""
    handler = attach(logging.FileHandler(path, encoding="utf-8"))
    try:
        yield
    finally:
        detach(handler)
