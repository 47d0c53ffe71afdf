"""Which accelerator this machine has, and the facts about it a run must record.

The toolkit decides once, here, whether kernels run on a GPU or through Triton's CPU
interpreter; everything downstream (default suite, timing, worker environment) reads
the `Target` rather than probing again.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Any

FORCE_CPU_ENV = "KMC_FORCE_CPU"


@dataclass(frozen=True)
class Target:
    vendor: str  # "nvidia", "amd" or "cpu"
    interpreter: bool
    device_name: str
    device_count: int

    @property
    def visible_devices_var(self) -> str | None:
        return {"nvidia": "CUDA_VISIBLE_DEVICES", "amd": "HIP_VISIBLE_DEVICES"}.get(self.vendor)

    @property
    def key(self) -> str:
        """What the evaluation cache keys on: verdicts from another device are not reused."""
        return f"{self.vendor}:{self.device_name}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def physical_device() -> int | str:
    """The device a judge worker is bound to, as NVML/amdsmi number it (they ignore
    CUDA_VISIBLE_DEVICES, so index 0 inside the worker is not index 0 for them)."""
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        value = os.environ.get(var, "").split(",")[0].strip()
        if value:
            return int(value) if value.isdigit() else value
    return 0


def default_device() -> str:
    """The `device` option's default: "cpu" when $KMC_FORCE_CPU=1, else "auto". Only a default:
    a command's --device replaces it, and a run records the device it used."""
    return "cpu" if os.environ.get(FORCE_CPU_ENV) == "1" else "auto"


def detect_target(force_cpu: bool = False) -> Target:
    """The CPU interpreter when asked (`force_cpu`, i.e. --device cpu), when this process runs
    under TRITON_INTERPRET=1 (an evaluation worker the pool made an interpreter worker, or a
    user's shell), or when there is no GPU; else the first visible GPU's vendor and name.

    Nothing here writes the environment: evaluation workers get TRITON_INTERPRET in their own
    environment from the pool (runners/pool.py), never through this process's."""
    if force_cpu or os.environ.get("TRITON_INTERPRET") == "1":
        return Target("cpu", True, "Triton CPU interpreter", 0)
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        vendor = "amd" if getattr(torch.version, "hip", None) else "nvidia"
        return Target(vendor, False, torch.cuda.get_device_name(0), torch.cuda.device_count())
    return Target("cpu", True, "Triton CPU interpreter", 0)


def _driver_version(vendor: str) -> str | None:
    cmd = {
        "nvidia": ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
        "amd": ["amd-smi", "version"],
    }.get(vendor)
    if not cmd:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def environment_info(target: Target) -> dict[str, Any]:
    import torch
    import triton

    from judge.clocks import read_clocks

    info: dict[str, Any] = {
        "target": target.to_json(),
        "ran_on": "Triton CPU interpreter (TRITON_INTERPRET=1); timings unavailable" if target.interpreter
        else f"{target.vendor} GPU: {target.device_name}",
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "torch_cuda": getattr(torch.version, "cuda", None),
        "torch_hip": getattr(torch.version, "hip", None),
    }
    if not target.interpreter:
        info["driver"] = _driver_version(target.vendor)
        info["clocks_at_start"] = [read_clocks(target.vendor, i) for i in range(target.device_count)]
    return info
