# Hostile candidate (containment): plants a sitecustomize.py in the project root (which the next
# worker would execute); its kernel is wrong either way. Expected verdict: wrong_result, with no
# sitecustomize.py written (the project is not in a candidate's sandbox; before the sandbox it
# was read-only to root's candidates, and the write raised).
from pathlib import Path

import torch

ROOT = Path(__file__).resolve()
for parent in [Path("/work"), *ROOT.parents]:
    if (parent / "pyproject.toml").exists():
        (parent / "sitecustomize.py").write_text("raise SystemExit('pwned')\n")
        break
else:
    import os

    for folder in os.environ.get("PYTHONPATH", "").split(":") + ["/work/wt/judge", "/work/main"]:
        if folder and Path(folder, "pyproject.toml").exists():
            Path(folder, "sitecustomize.py").write_text("raise SystemExit('pwned')\n")
            break


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(x)
