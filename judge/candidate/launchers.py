"""Triton's C launchers: noted where candidates use them, built once by the judge for the next ones.

On Triton 3.6 the first launch of a kernel whose argument signature is new to the process's
Triton cache builds a small C module with the system compiler, a noticeable fraction of a second
each; a first evaluation of vector_add's expert built two (its sizes take 32 and 64 bits over the
hidden cases), over a third of its time in the candidate's process. Each
candidate source has a Triton cache of its own (judge/source_caches.py: no candidate may plant
a binary another one loads), so every new source paid for them again, although a launcher
depends only on the kinds of the kernel's arguments (pointer, integer width, float, constexpr),
never on the kernel: a run of many sources of a few tasks rebuilt the same few launchers.

So a candidate process notes the signatures of the launchers it made (`note_launchers`, wrapped
around the backend's launcher class in the template, before any candidate code) and sends them
with its `collect` reply. The judge takes them as a hint only: each must be a list of Triton type
names (`valid_signature`), and the judge builds the launcher itself, in its own Triton cache,
with Triton's own generator (`build_launcher`). What a later candidate loads is therefore what
Triton builds for that signature, never bytes a candidate wrote; the worker seeds it into each new
source's cache beside Triton's other helpers (judge/source_caches.py `SourceCaches.seed`). A candidate that lies
costs the judge at most `MAX_PER_JOB` builds per job, in the background. A Triton that builds
no C launcher (3.9 launches through one generic module) makes this a no-op.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
import sys
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

MAX_NOTED = 64  # signatures a candidate process keeps for its collect reply
MAX_PER_JOB = 8  # builds one job's hints may start
MAX_KNOWN = 512  # signatures a worker builds in its life
MAX_ARGS = 256
_TYPE_NAME = re.compile(r"(\*k?)?[a-z][a-z0-9]{0,15}")
_BACKEND_LAUNCHERS = (("triton.backends.nvidia.driver", "CudaLauncher"), ("triton.backends.amd.driver", "HIPLauncher"))
_NOTED: list[Any] = []


# ---------------------------------------------------------------- the candidate's side


def note_launchers() -> list[str]:
    """Wrap each present backend's launcher class so every launcher made in this process notes
    its signature for `noted`. Touches no GPU (only the classes are imported). Returns the
    classes wrapped."""
    wrapped = []
    for module_name, class_name in _BACKEND_LAUNCHERS:
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except Exception:  # noqa: BLE001 - a backend this Triton lacks, or one that fails to import here
            continue
        original = cls.__init__
        if not getattr(original, "_kmc_notes", False):
            def init(self: Any, src: Any, metadata: Any, *rest: Any, __original: Any = original, **kwargs: Any) -> None:
                __original(self, src, metadata, *rest, **kwargs)
                with contextlib.suppress(Exception):
                    signature = _plain(list(src.signature.values()))
                    if signature not in _NOTED and len(_NOTED) < MAX_NOTED:
                        _NOTED.append(signature)

            init._kmc_notes = True  # type: ignore[attr-defined]
            cls.__init__ = init
        wrapped.append(f"{module_name}.{class_name}")
    return wrapped


def noted() -> list[Any]:
    """The signatures noted since the last call (JSON-ready lists)."""
    out = list(_NOTED)
    _NOTED.clear()
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return str(value)


# ---------------------------------------------------------------- the judge's side


def valid_signature(raw: Any, depth: int = 0) -> tuple[Any, ...] | None:
    """`raw` as a signature Triton's launcher generator takes (type names, tuples for tuple
    arguments), or None when it is anything else: a candidate's word is checked, not trusted.
    Tensor descriptors are left out (their launchers need metadata a signature lacks)."""
    if not isinstance(raw, list) or len(raw) > MAX_ARGS or depth > 3 or (depth == 0 and not raw):
        return None
    out: list[Any] = []
    for item in raw:
        if isinstance(item, list):
            inner = valid_signature(item, depth + 1)
            if inner is None:
                return None
            out.append(inner)
        elif isinstance(item, str) and _TYPE_NAME.fullmatch(item):
            out.append(item)
        else:
            return None
    return tuple(out)


class _Metadata:
    """What a launcher class reads of a compiled kernel's metadata, with a plain kernel's values
    (one CTA, no scratch memory, no cooperative or PDL launch): none of it is in the C source
    except, on ROCm, the warp size, which is the GPU's (`build_launcher` sets it)."""

    cluster_dims = (1, 1, 1)
    num_ctas = 1
    tensordesc_meta = None
    warp_size = 32

    def __getattr__(self, name: str) -> Any:
        return 0


def build_launcher(signature: tuple[Any, ...]) -> Path | None:
    """Triton's launcher for `signature`, built in this process's Triton cache (found there when
    built before); the cache folder holding it, or None where this Triton builds no module per
    signature. Needs the process's Triton driver (a GPU process)."""
    from types import SimpleNamespace

    import triton

    names = [f"arg{i}" for i in range(len(signature))]
    src = SimpleNamespace(constants={}, signature=dict(zip(names, signature, strict=True)),
                          fn=SimpleNamespace(arg_names=names))
    driver = triton.runtime.driver.active
    metadata = _Metadata()
    with contextlib.suppress(Exception):  # HIP's launcher source names the warp size; CUDA's does not
        metadata.warp_size = int(driver.get_current_target().warp_size)
    launcher = driver.launcher_cls(src, metadata)
    module = getattr(getattr(launcher, "launch", None), "__self__", None)
    path = getattr(module, "__file__", None)
    return Path(path).parent if isinstance(path, str) else None


class SharedLaunchers:
    """A judge worker's launchers: the signatures its candidates noted, each built once, in the
    background, into the Triton cache `root`; `folders` lists the cache folders built so far."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.folders: list[Path] = []  # replaced whole by the one build thread, read by the worker's
        self._known: set[str] = set()
        self._builds = ThreadPoolExecutor(max_workers=1, thread_name_prefix="launchers")
        self._pending: list[Future[None]] = []

    def learn(self, hints: Any) -> int:
        """Builds queued for the valid signatures among `hints` not seen before (at most
        `MAX_PER_JOB`); how many."""
        queued = 0
        for raw in hints if isinstance(hints, list) else ():
            signature = valid_signature(raw)
            if signature is None:
                continue
            key = json.dumps(signature)
            if key in self._known:
                continue
            if queued >= MAX_PER_JOB or len(self._known) >= MAX_KNOWN:
                break
            self._known.add(key)
            queued += 1
            self._pending.append(self._builds.submit(self._build, signature))  # at most MAX_KNOWN
        return queued

    def _build(self, signature: tuple[Any, ...]) -> None:
        try:
            folder = build_launcher(signature)
        except Exception as exc:  # noqa: BLE001 - an optimisation: candidates then build it themselves
            print(f"judge worker: no launcher built for {list(signature)} ({type(exc).__name__}: {exc})"[:400],
                  file=sys.stderr)
            return
        if folder is not None and folder.resolve().parent == self.root and folder not in self.folders:
            self.folders = [*self.folders, folder]  # the judge's own cache, nowhere else

    def wait(self, timeout: float | None = None) -> None:
        """Until the builds queued so far are done (tests, benchmarks)."""
        wait(list(self._pending), timeout=timeout)

    def close(self) -> None:
        self._builds.shutdown(wait=False, cancel_futures=True)
