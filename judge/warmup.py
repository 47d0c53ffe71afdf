"""What the first call in a fresh process pays, paid once in the warm template instead.

Measured on the CPU interpreter: entering the launch recorder's dispatch mode for the first
time imported torch's dispatch machinery and, through torch's guard around a mode's
`__torch_dispatch__`, torch._dynamo (about 3 s; the recorder now opts out of that guard,
judge/candidate/launches.py), and the interpreter's first launch costs about 0.2 s more. Every
candidate process is a fresh fork of the template, so without
this each candidate would pay both again, once per job (issue 12: the compare smoke run went
from about 40 s to 135 s). Only the judge's own tiny kernel runs here, before any candidate
exists; the record is dropped and nothing it allocated survives. On a GPU no kernel is
launched (the template must not create a GPU context before it forks); the judge instead
launches the same kernel once itself (`compile_helpers`), which builds Triton's driver helpers
into its own cache for judge/source_caches.py to seed each candidate's cache with.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from judge.candidate import call_record, launches


@triton.jit
def _double_plus_one(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2 + 1, mask=mask)


def warm_up(interpreter: bool) -> None:
    x = torch.arange(8, dtype=torch.float32)
    with launches.recording((x,)) as rec:
        y = torch.empty_like(x).copy_(x)
        (y * 2).sum()  # an operation outside the allow-list: the fallback path is warm too
        if interpreter:
            _double_plus_one[(1,)](y, 8, BLOCK=8)
    call_record.unwritten_outputs(y, rec, interpreter)
    call_record.aliased_inputs(y, (x,))


def triton_hashes() -> None:
    """Triton's hashes of its own files, in the template: the first launch in a process hashes
    Triton's sources and its ~500 MB library to key its cache (a noticeable part of a fresh
    process's first launch; scripts/judge_profile.py measures it). They are cached per process, and
    forked children inherit them; no GPU is touched. Best effort: where a Triton keeps them
    elsewhere, each process pays the cost again."""
    import contextlib
    from pathlib import Path

    with contextlib.suppress(Exception):
        from triton.runtime.cache import triton_key

        triton_key()
    for backend in ("nvidia", "amd"):
        with contextlib.suppress(Exception):
            import importlib

            compiler = importlib.import_module(f"triton.backends.{backend}.compiler")
            file_hash = getattr(compiler, "file_hash", None)
            if file_hash is not None:
                for library in sorted((Path(str(compiler.__file__)).parent / "lib").glob("*.bc")):
                    file_hash(str(library))  # the path string its options name (extern_libs)


HOST_LOOKUPS = {
    "any": (("triton.runtime.build", "platform_key"),),
    "cuda": (("triton.backends.nvidia.driver", "library_dirs"),),
    "hip": (("triton.backends.amd.driver", "_get_path_to_hip_runtime_dylib"),),
}
"""Functions Triton 3.6 calls when it makes a process's first C launcher, each cached per
process and each starting a program: `platform_key` runs `file` on the interpreter (through
`platform.architecture`), NVIDIA's `library_dirs` runs `ldconfig -p` to find libcuda, AMD's
looks for the HIP runtime (`hipconfig`, `ldconfig`) unless torch has it loaded. 6-20 ms a
process on a 2-core host; none touches a GPU."""


def host_lookups_here() -> tuple[tuple[str, str], ...]:
    """`HOST_LOOKUPS` for this torch build's GPU runtime (HIP or CUDA)."""
    return HOST_LOOKUPS["any"] + HOST_LOOKUPS["hip" if getattr(torch.version, "hip", None) else "cuda"]


def triton_host_lookups(lookups: tuple[tuple[str, str], ...] | None = None) -> list[str]:
    """`host_lookups_here()` (or `lookups`) answered in the template, so forked candidate
    processes inherit the cached answers instead of starting the programs again (from a
    sandboxed process, per candidate). Only functions cached per process are called; one this
    Triton lacks, or one that fails here (no libcuda on this machine), is skipped and left to
    Triton. Returns those answered."""
    import importlib

    answered = []
    lookups = host_lookups_here() if lookups is None else lookups
    for module_name, name in lookups:
        try:
            fn = getattr(importlib.import_module(module_name), name)
            if not hasattr(fn, "cache_info"):
                continue  # not cached: calling it here would save a candidate nothing
            fn()
        except Exception:  # noqa: BLE001 - an optimisation: Triton asks again where this failed
            continue
        answered.append(f"{module_name}.{name}")
    return answered


LAZY_TRITON_MODULES = ("triton.experimental.gluon",)
"""Modules Triton imports on a process's first kernel launch, not at `import triton`: Triton 3.6
imports its Gluon front end while it specialises the first call's arguments. scripts/judge_profile.py
showed it in every candidate process's first launch (dozens of modules, compiled from source each
time where no bytecode cache can be written)."""


def lazy_triton_imports() -> list[str]:
    """Import `LAZY_TRITON_MODULES` in the template, so forked candidate processes inherit them;
    those this Triton does not have are skipped. Returns the ones imported."""
    import importlib

    imported = []
    for name in LAZY_TRITON_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an optimisation: a Triton without it imports what it needs itself
            continue
        imported.append(name)
    return imported


def compile_helpers() -> None:
    """In the judge process on a GPU: one launch, so Triton builds its driver helpers now."""
    x = torch.zeros(8, device="cuda")
    _double_plus_one[(1,)](x, 8, BLOCK=8)
    torch.cuda.synchronize()
