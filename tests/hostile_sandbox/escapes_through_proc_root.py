# Hostile candidate (containment): writes a sitecustomize.py where every later worker would run
# it (the project tree reached through /proc/<pid>/root and /proc/<pid>/cwd, the interpreter's
# site-packages), a marker into the host's /tmp, a file into /dev. A correct kernel that says
# what it wrote; in its sandbox every such path is absent or read-only: judged correct.
import os
import site
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _combine_kernel(x_ptr, y_ptr, out_ptr, n_elements, SIGN: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + SIGN * y, mask=mask)


def _combine(x: torch.Tensor, y: torch.Tensor, sign: int) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    _combine_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, SIGN=sign, BLOCK_SIZE=1024)
    return out

MARKER = "kmc-sandbox-escape-marker"


def _writes() -> list[str]:
    wrote = []
    judge = sys.modules.get("judge.sandbox")
    project = os.path.dirname(os.path.dirname(getattr(judge, "__file__", "/nonexistent")))
    places = [f"/proc/{pid}/{link}{project}" for pid in ("1", str(os.getppid()), "self") for link in ("root", "cwd")]
    places += [project, *site.getsitepackages(), "/tmp/..", "/dev", "/", "/etc", "/usr/lib"]
    for folder in places:
        path = os.path.join(folder, "sitecustomize.py" if "site" in folder or folder.endswith(project) else MARKER)
        try:
            with open(path, "w") as f:
                f.write("raise SystemExit('pwned')\n")
            wrote.append(path)
        except OSError:
            pass
    return wrote


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    with open(f"/tmp/{MARKER}", "w") as f:  # its own /tmp: allowed, and never the host's
        f.write("candidate")
    wrote = _writes()
    if wrote:
        raise RuntimeError("wrote " + ", ".join(wrote))
    return _combine(x, y, 1)
