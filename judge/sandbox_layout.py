"""What the candidate's sandbox is made of, read before any candidate exists: the `Spec` every
candidate of one template gets (read from the template's environment), and the sandbox's
filesystem as an allow-list (`Layout`): read-only binds of the interpreter, the Python and system
libraries, a few files of /etc, the GPU's device nodes and driver folders, /sys; on a GPU the
candidate's own writable Triton cache. Everything else is absent, and a bound folder that holds
a hidden path (the project tree, the run folder, the worker's folders) gets an empty tmpfs over
it. judge/sandbox.py builds the root from this layout in each candidate's child (`enter`).

Candidate side (judge/template.py `_CANDIDATE_SIDE`): the template imports it before it forks.
"""

from __future__ import annotations

import contextlib
import glob
import os
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from judge.containment import _python_paths

PROJECT_ROOT = str(Path(__file__).resolve().parent.parent)
TRITON_CACHE = "/var/cache/kmc-triton"  # inside the sandbox: the candidate's own writable Triton cache

AUTOTUNE_CACHE_ENV = "TRITON_CACHE_AUTOTUNING"
"""Triton's switch for keeping autotuning choices in its cache (a file per kernel, tuning key and
config list). Set by the pool for the judge's own processes where the Triton cache root is the
run's (runners/pool.py), so the worker and its shape-probing child (bench/adapters/shape_probe.py)
share a suite reference's choices: on an H100 a TritonBench reference autotuned each new shape
in the child and again, about a second a shape, in the worker (scripts/reference_diagnose.py).
Within a run every worker then judges against the same choice the probe accepted. Never in a
candidate's environment (judge/template.py `candidate_environment`): a candidate autotunes in its
own process, as it would alone."""

ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group", "nsswitch.conf",
             "localtime", "hosts", "os-release")
SYSTEM_TREES = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin")
BASIC_DEVICES = ("null", "zero", "full", "random", "urandom")
GPU_DEVICE_GLOBS = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri", "/dev/kfd")
GPU_TREE_GLOBS = ("/opt/rocm*", "/usr/local/nvidia", "/usr/local/cuda*", "/run/nvidia-persistenced")
TOOL_ENVS = ("CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "HIP_PATH", "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH",
             "TRITON_NVDISASM_PATH", "TRITON_HIP_LLD_PATH", "CC", "CXX")
COMPILER_ENVS = ("CC", "CXX")  # a compiler needs its whole installation (its own headers, cc1, libexec)


@dataclass(frozen=True)
class Spec:
    """What every candidate of one template gets. Read from the template's own environment when
    it starts (`from_environment`), never from a message: a spawn request carries nothing that
    shapes the boundary."""

    gpu: bool = False
    tmp_cap_mb: int = 256
    outside_uid: int | None = None  # --worker-user: switched to before the user namespace is made
    outside_gid: int | None = None
    hidden: tuple[str, ...] = ()  # host folders never visible (the project tree, run folders, ...)

    @classmethod
    def from_environment(cls, gpu: bool, hidden: Iterable[str] = ()) -> Spec:
        from judge.privileges import GID_ENV, UID_ENV

        # The worker's own folders (its working folder, temporary files, the sources' Triton
        # caches): hidden wherever a bound folder holds them.
        extra = [os.getcwd(), *filter(None, (os.environ.get("TMPDIR"), os.environ.get("TRITON_CACHE_DIR")))]
        uid, gid = os.environ.get(UID_ENV), os.environ.get(GID_ENV)
        return cls(gpu=gpu, tmp_cap_mb=int(os.environ.get("KMC_CANDIDATE_TMP_MB", "256")),
                   outside_uid=int(uid) if uid else None, outside_gid=int(gid) if gid else None,
                   hidden=tuple(dict.fromkeys([*hidden, *extra])))


@dataclass(frozen=True)
class Bind:
    """One read-only (or, for the Triton cache, writable) bind into the new root."""

    source: str  # host path
    target: str  # path inside the sandbox
    writable: bool = False
    device: bool = False  # a device node or a folder of them: bound as it is (no nodev)
    optional: bool = False  # left out, not a failure, where the kernel refuses it (/sys in some containers)


@dataclass
class Layout:
    """The sandbox's filesystem, as an allow-list: everything else is absent."""

    binds: list[Bind] = field(default_factory=list)
    symlinks: dict[str, str] = field(default_factory=dict)  # inside path -> link text (merged /usr)
    hidden: list[str] = field(default_factory=list)  # inside paths covered by an empty tmpfs

    @classmethod
    def for_spec(cls, spec: Spec, cache: str | None, etc_copy: str | None = None) -> Layout:
        """`etc_copy`: a folder holding copies of the allow-listed /etc files (`copy_etc`),
        bound as /etc in one mount instead of one per file."""
        layout = cls(hidden=sorted({os.path.realpath(p) for p in spec.hidden if p}))
        for top in SYSTEM_TREES:
            if os.path.islink(top):
                layout.symlinks[top] = os.readlink(top)
            elif os.path.isdir(top):
                layout.add(top)
        if etc_copy:
            layout.binds.append(Bind(etc_copy, "/etc"))
        else:
            for name in ETC_FILES:
                layout.add(f"/etc/{name}")
        for path in (*python_paths(), *library_paths(), *tool_paths()):
            layout.add(path)
        for name in BASIC_DEVICES:
            layout.add(f"/dev/{name}", device=True)
        layout.add("/sys", optional=True)
        if spec.gpu:
            for pattern in GPU_DEVICE_GLOBS:
                for path in sorted(glob.glob(pattern)):
                    layout.add(path, device=True)
            for pattern in GPU_TREE_GLOBS:
                for path in sorted(glob.glob(pattern)):
                    layout.add(path, optional=True)
        layout.hidden = [h for h in layout.hidden if any(within(h, b.target) and h != b.target for b in layout.binds)]
        return layout.with_cache(cache)

    def with_cache(self, cache: str | None) -> Layout:
        """This layout plus `cache` bound writable as the candidate's Triton cache (a new layout:
        the template's own is shared by every candidate it forks)."""
        if not cache:
            return self
        return Layout([*self.binds, Bind(os.path.realpath(cache), TRITON_CACHE, writable=True)], dict(self.symlinks),
                      list(self.hidden))

    def add(self, path: str, device: bool = False, optional: bool = False) -> None:
        """`path` (and its real path, where a link leads elsewhere) bound read-only, unless a
        folder already bound shows it. A hidden path is never bound, and what lies below one is
        bound on its own (a virtual environment inside the project tree)."""
        if not path or not os.path.isabs(path) or not os.path.exists(path):
            return
        real = os.path.realpath(path)
        for target in dict.fromkeys([os.path.normpath(path), real]):
            if _under_link(target, self.symlinks) or target in self.hidden \
                    or any(self._shows(b.target, target) for b in self.binds):
                continue
            self.binds = [b for b in self.binds if not self._shows(target, b.target)]
            self.binds.append(Bind(real if target == real else os.path.realpath(target), target, device=device,
                                   optional=optional))

    def _shows(self, folder: str, path: str) -> bool:
        """Whether a bind of `folder` already shows `path` (no hidden path between them)."""
        return within(path, folder) and not any(within(path, h) and within(h, folder) and h != folder
                                                 for h in self.hidden)


def copy_etc(folder: str) -> str:
    """Copies of the allow-listed /etc files in `folder`/etc (links inside a copied folder stay
    links: /etc/alternatives points into /usr, which the sandbox has), made once per template."""
    import shutil

    etc = os.path.join(folder, "etc")
    os.makedirs(etc, exist_ok=True)
    for name in ETC_FILES:
        source = f"/etc/{name}"
        with contextlib.suppress(OSError):
            if os.path.isdir(source):
                shutil.copytree(source, os.path.join(etc, name), symlinks=True, dirs_exist_ok=True)
            elif os.path.exists(source):
                shutil.copyfile(source, os.path.join(etc, name))
    return etc


def within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _under_link(path: str, links: dict[str, str]) -> bool:
    return any(within(path, link) for link in links)


def python_paths() -> list[str]:
    """The interpreter, its prefixes, the import path's package folders and PYTHONPATH's
    folders (not every import path entry: the project root and the worker's folder, the
    template's working folder, are entries too)."""
    paths = [os.path.dirname(os.path.realpath(sys.executable)), *_python_paths()]
    paths += [p for p in sysconfig.get_paths().values() if p]
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
              if os.path.isabs(p) and os.path.realpath(p) != PROJECT_ROOT]
    for name in ("torch", "triton", "numpy"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            paths.append(os.path.dirname(os.path.realpath(str(module.__file__))))
    return paths


def library_paths() -> list[str]:
    """Where the dynamic loader looks: LD_LIBRARY_PATH and ld.so.conf's folders (a GPU driver's
    libcuda is opened only when the context is made, after the sandbox is built)."""
    paths = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    confs = ["/etc/ld.so.conf", *sorted(glob.glob("/etc/ld.so.conf.d/*.conf"))]
    for conf in confs:
        with contextlib.suppress(OSError):
            for line in Path(conf).read_text().splitlines():
                line = line.split("#")[0].strip()
                if line.startswith("/"):
                    paths.append(line)
    return paths


def tool_paths() -> list[str]:
    """Folders the GPU toolchain is named in by the environment (ptxas, the C compiler, ROCm)."""
    paths = []
    for name in TOOL_ENVS:
        value = os.environ.get(name, "")
        if value.startswith("/"):
            paths.append(value if os.path.isdir(value) else os.path.dirname(value))
            if name in COMPILER_ENVS:
                paths += [p for p in map(_installation, dict.fromkeys([value, os.path.realpath(value)])) if p]
    return paths


def _installation(executable: str) -> str:
    """The folder a compiler is installed in (`/opt/gcc` for `/opt/gcc/bin/gcc`): its headers
    (stddef.h), cc1 and libraries live beside its bin folder, not in it. A compiler on the
    device image's $CC outside /usr found none of them in the sandbox."""
    folder = os.path.dirname(executable)
    parent = os.path.dirname(folder)
    return parent if os.path.basename(folder) == "bin" and parent not in ("/", "") else ""

