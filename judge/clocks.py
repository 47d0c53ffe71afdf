"""Read GPU clocks, temperature, power and throttle reasons, so every timing says under what
conditions it was taken. Reading only: locking clocks lives in `clock_lock.py` and is opt-in.

NVML (`nvidia-ml-py`) on NVIDIA, `amdsmi` on AMD; both imported lazily because neither is
needed on a CPU-only machine, and a missing library yields `{"available": False, ...}`
rather than an exception: a timing without clock data is still a timing, just flagged.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import Any

CLOCKS_LOCKED_ENV = "KMC_CLOCKS_LOCKED"  # set by runners.clock_lock while clocks are locked

# NVML throttle-reason bits that mean the clocks were pulled down for a reason other than idling.
_NVML_SLOWDOWN_BITS = {
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}

UP_FRACTION = 0.9
"""The SM clock counts as up (`clocks_up`) at this share of its maximum or above."""


def read_clocks(vendor: str, index: int | str = 0) -> dict[str, Any]:
    """Clocks of one physical device: `index` as NVML/amdsmi number devices (not as
    CUDA_VISIBLE_DEVICES renumbers them), or an NVIDIA UUID string. `max_sm_mhz` is the SM
    clock's maximum (`clocks_up` compares with it)."""
    try:
        if vendor == "nvidia":
            return _read_nvml(index)
        if vendor == "amd":
            return _read_amdsmi(index)
    except Exception as exc:  # noqa: BLE001 - clock data is advisory; its absence is recorded
        return {"available": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"available": False, "error": f"no clock reader for vendor {vendor!r}"}


def clocks_up(reading: dict[str, Any]) -> bool | None:
    """Whether the SM clock of `reading` is up (at `UP_FRACTION` of its maximum or above, or
    locked by `--lock-clocks`); None when the reading cannot tell (no clock data, no maximum).
    What the warm-up waits for (judge/timing.py `warm_up`): an idle GPU runs slow clocks, and a
    sample taken while they still rise is slow for a reason that is not the kernel's."""
    if os.environ.get(CLOCKS_LOCKED_ENV) == "1":
        return True
    sm, top = reading.get("sm_mhz"), reading.get("max_sm_mhz")
    if not reading.get("available") or not isinstance(sm, (int, float)) or not isinstance(top, (int, float)) \
            or top <= 0:
        return None
    return sm >= UP_FRACTION * top


class _Session:
    """A management library (NVML, amdsmi) initialised once per process, its device handles
    kept. Why not per reading: an initialisation loads the library and enumerates every device
    (known to cost far more than a reading, and to serialise processes that initialise at once),
    and a timed case reads the clocks inside its exclusive hold at the GPU's gate. Started
    again in a forked child, and for another module object (a test's fake library); a failed
    start is remembered for the process, not tried again at every reading."""

    def __init__(self, module_name: str, start: str, stop: str) -> None:
        self.module_name, self.start, self.stop = module_name, start, stop
        self.key: tuple[int, int] | None = None
        self.failure: Exception | None = None
        self.lib: Any = None
        self.handles: dict[Any, Any] = {}
        self.static: dict[Any, Any] = {}  # per handle key: readings that never change (the maximum clock)
        self._exit_registered = False

    def module(self) -> Any:
        import importlib

        lib = sys.modules.get(self.module_name) or importlib.import_module(self.module_name)
        key = (os.getpid(), id(lib))
        if key != self.key:
            self.close()  # another library module in this process: the old session ends (a fork's is not ours)
            self.key, self.lib, self.handles, self.static, self.failure = key, lib, {}, {}, None
            try:
                getattr(lib, self.start)()
            except Exception as exc:  # noqa: BLE001 - remembered, raised at every reading of this process
                self.failure = exc
            else:
                if not self._exit_registered:
                    atexit.register(self.close)
                    self._exit_registered = True
        if self.failure is not None:
            raise self.failure
        return lib

    def handle(self, index: Any, find: Any) -> Any:
        if index not in self.handles:
            self.handles[index] = find(index)
        return self.handles[index]

    def close(self) -> None:
        if self.key is not None and self.key[0] == os.getpid() and self.failure is None and self.lib is not None:
            try:
                getattr(self.lib, self.stop)()
            except Exception:  # noqa: BLE001 - at exit, nothing to tell
                pass
        self.key, self.lib, self.handles, self.static = None, None, {}, {}


_NVML = _Session("pynvml", "nvmlInit", "nvmlShutdown")
_AMDSMI = _Session("amdsmi", "amdsmi_init", "amdsmi_shut_down")


def _read_nvml(index: int | str) -> dict[str, Any]:
    pynvml = _NVML.module()

    def find(i: int | str) -> Any:
        if isinstance(i, str) and not i.isdigit():
            return pynvml.nvmlDeviceGetHandleByUUID(i)
        return pynvml.nvmlDeviceGetHandleByIndex(int(i))

    h = _NVML.handle(index, find)
    if index not in _NVML.static:
        top = getattr(pynvml, "nvmlDeviceGetMaxClockInfo", None)
        _NVML.static[index] = top(h, pynvml.NVML_CLOCK_SM) if top is not None else None
    reasons = pynvml.nvmlDeviceGetCurrentClocksEventReasons(h) if hasattr(
        pynvml, "nvmlDeviceGetCurrentClocksEventReasons") else pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)
    return {
        "available": True,
        "sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
        "mem_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
        "max_sm_mhz": _NVML.static[index],
        "temp_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
        "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
        "throttle_bits": int(reasons),
        "throttle": sorted(name for bit, name in _NVML_SLOWDOWN_BITS.items() if reasons & bit),
    }


def _read_amdsmi(index: int | str) -> dict[str, Any]:
    amdsmi = _AMDSMI.module()
    h = _AMDSMI.handle(int(index), lambda i: amdsmi.amdsmi_get_processor_handles()[i])
    gfx = amdsmi.amdsmi_get_clock_info(h, amdsmi.AmdSmiClkType.GFX)
    mem = amdsmi.amdsmi_get_clock_info(h, amdsmi.AmdSmiClkType.MEM)
    temp = amdsmi.amdsmi_get_temp_metric(h, amdsmi.AmdSmiTemperatureType.EDGE, amdsmi.AmdSmiTemperatureMetric.CURRENT)
    power = amdsmi.amdsmi_get_power_info(h)
    return {
        "available": True,
        "sm_mhz": gfx.get("clk"),
        "mem_mhz": mem.get("clk"),
        "max_sm_mhz": gfx.get("max_clk"),
        "temp_c": temp,
        "power_w": power.get("current_socket_power") or power.get("average_socket_power"),
        "throttle_bits": 0,
        "throttle": [],
    }


def clock_flags(before: dict[str, Any], after: dict[str, Any], tolerance: float = 0.02,
                ignore: tuple[str, ...] = ()) -> list[str]:
    """Reasons to distrust a timing taken between two clock readings.

    `ignore` names throttle reasons that are expected: with clocks locked by
    `--lock-clocks`, NVML reports "applications_clocks_setting" on purpose."""
    if not before.get("available") or not after.get("available"):
        return ["clocks_unavailable"]
    flags = []
    for key in ("sm_mhz", "mem_mhz"):
        b, a = before.get(key), after.get(key)
        if b and a and abs(a - b) / max(b, 1) > tolerance:
            flags.append(f"{key}_moved:{b}->{a}")
    for name in sorted(set(before.get("throttle", [])) | set(after.get("throttle", []))):
        if name not in ignore:
            flags.append(f"throttle:{name}")
    return flags
