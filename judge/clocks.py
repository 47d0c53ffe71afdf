"""Read GPU clocks, temperature, power and throttle reasons, so every timing says under what
conditions it was taken. Reading only: locking clocks lives in `clock_lock.py` and is opt-in.

NVML (`nvidia-ml-py`) on NVIDIA, `amdsmi` on AMD; both imported lazily because neither is
needed on a CPU-only machine, and a missing library yields `{"available": False, ...}`
rather than an exception: a timing without clock data is still a timing, just flagged.
"""

from __future__ import annotations

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


def read_clocks(vendor: str, index: int | str = 0) -> dict[str, Any]:
    """Clocks of one physical device: `index` as NVML/amdsmi number devices (not as
    CUDA_VISIBLE_DEVICES renumbers them), or an NVIDIA UUID string."""
    try:
        if vendor == "nvidia":
            return _read_nvml(index)
        if vendor == "amd":
            return _read_amdsmi(index)
    except Exception as exc:  # noqa: BLE001 - clock data is advisory; its absence is recorded
        return {"available": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"available": False, "error": f"no clock reader for vendor {vendor!r}"}


def _read_nvml(index: int | str) -> dict[str, Any]:
    import pynvml

    pynvml.nvmlInit()
    try:
        if isinstance(index, str) and not index.isdigit():
            h = pynvml.nvmlDeviceGetHandleByUUID(index)
        else:
            h = pynvml.nvmlDeviceGetHandleByIndex(int(index))
        reasons = pynvml.nvmlDeviceGetCurrentClocksEventReasons(h) if hasattr(
            pynvml, "nvmlDeviceGetCurrentClocksEventReasons") else pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)
        return {
            "available": True,
            "sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "temp_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "throttle_bits": int(reasons),
            "throttle": sorted(name for bit, name in _NVML_SLOWDOWN_BITS.items() if reasons & bit),
        }
    finally:
        pynvml.nvmlShutdown()


def _read_amdsmi(index: int | str) -> dict[str, Any]:
    import amdsmi

    amdsmi.amdsmi_init()
    h = amdsmi.amdsmi_get_processor_handles()[int(index)]
    gfx = amdsmi.amdsmi_get_clock_info(h, amdsmi.AmdSmiClkType.GFX)
    mem = amdsmi.amdsmi_get_clock_info(h, amdsmi.AmdSmiClkType.MEM)
    temp = amdsmi.amdsmi_get_temp_metric(h, amdsmi.AmdSmiTemperatureType.EDGE, amdsmi.AmdSmiTemperatureMetric.CURRENT)
    power = amdsmi.amdsmi_get_power_info(h)
    return {
        "available": True,
        "sm_mhz": gfx.get("clk"),
        "mem_mhz": mem.get("clk"),
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
