"""Clock locking, tested only against fake `nvidia-smi` / `amd-smi` / `rocm-smi` scripts.

PATH is set to the fake tools' folder alone, so no real clock-changing command can ever
run from these tests, on any machine. Each fake logs its argv; the tests check the exact
commands, and that the restore commands run after a normal exit, an exception, a failed
lock step, Ctrl-C and SIGTERM. Also here: `clocks.clock_flags` and the NVML reader
against a fake `pynvml`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

from judge.clocks import CLOCKS_LOCKED_ENV, clock_flags, read_clocks
from runners.clock_lock import ClockLockError, choose_nvidia_clocks, lock_clocks, parse_lock_spec
from tests.helpers import ctrl_c_default

ROOT = Path(__file__).resolve().parent.parent

FAKE_TOOL = """#!/bin/sh
echo "${0##*/} $*" >> "$FAKE_SMI_LOG"
case "$*" in
  *--query-supported-clocks*) printf '2619, 1980\\n2619, 1500\\n2619, 1410\\n2619, 345\\n1593, 1200\\n' ;;
esac
if [ -n "$FAKE_SMI_FAIL" ]; then
  case "$*" in *"$FAKE_SMI_FAIL"*) echo "fake failure on $*" >&2; exit 3 ;; esac
fi
exit 0
"""


@pytest.fixture
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A bin folder holding only fake tools, made the whole PATH; returns (bin, log)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("nvidia-smi", "amd-smi", "rocm-smi"):
        tool = bin_dir / name
        tool.write_text(FAKE_TOOL)
        tool.chmod(0o755)
    log = tmp_path / "calls.log"
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("FAKE_SMI_LOG", str(log))
    monkeypatch.delenv("FAKE_SMI_FAIL", raising=False)
    monkeypatch.delenv(CLOCKS_LOCKED_ENV, raising=False)
    return bin_dir, log


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_choose_clocks_from_supported_table() -> None:
    table = {2619: [1980, 1500, 1410, 345], 1593: [1200]}
    assert choose_nvidia_clocks(table, 0.75) == (1500, 2619)  # 0.75 * 1980 = 1485 -> nearest 1500
    assert choose_nvidia_clocks(table, 1.0) == (1980, 2619)
    with pytest.raises(ValueError):
        choose_nvidia_clocks(table, 0.0)


def test_parse_lock_spec() -> None:
    assert parse_lock_spec("auto") == (None, None)
    assert parse_lock_spec("1410") == (1410, None)
    assert parse_lock_spec("1410,2619") == (1410, 2619)
    for bad in ("fast", "1410,", "1,2,3", "-5"):
        with pytest.raises(ValueError):
            parse_lock_spec(bad)


def test_nvidia_lock_and_restore_exact_commands(fake_tools: tuple[Path, Path]) -> None:
    _, log = fake_tools
    with lock_clocks("nvidia", (0,)) as lock:
        assert lock.locked and CLOCKS_LOCKED_ENV not in os.environ  # the workers are told, not this process
        assert calls(log) == [
            "nvidia-smi -i 0 --query-supported-clocks=memory,graphics --format=csv,noheader,nounits",
            "nvidia-smi -i 0 -lgc 1500,1500",
            "nvidia-smi -i 0 -lmc 2619,2619",
        ]
    assert calls(log)[3:] == ["nvidia-smi -i 0 -rmc", "nvidia-smi -i 0 -rgc"]
    assert lock.restore_errors == [] and not lock.locked
    assert CLOCKS_LOCKED_ENV not in os.environ


def test_nvidia_given_clocks_skip_the_query_and_cover_every_device(fake_tools: tuple[Path, Path]) -> None:
    _, log = fake_tools
    with lock_clocks("nvidia", (0, 3), sm_mhz=1410, mem_mhz=2619):
        pass
    assert calls(log) == [
        "nvidia-smi -i 0 -lgc 1410,1410", "nvidia-smi -i 0 -lmc 2619,2619",
        "nvidia-smi -i 3 -lgc 1410,1410", "nvidia-smi -i 3 -lmc 2619,2619",
        "nvidia-smi -i 3 -rmc", "nvidia-smi -i 3 -rgc", "nvidia-smi -i 0 -rmc", "nvidia-smi -i 0 -rgc",
    ]


def test_restore_runs_after_an_exception(fake_tools: tuple[Path, Path]) -> None:
    _, log = fake_tools
    with pytest.raises(RuntimeError, match="kernel blew up"):
        with lock_clocks("nvidia", (1,), sm_mhz=1410, mem_mhz=2619):
            raise RuntimeError("kernel blew up")
    assert calls(log)[-2:] == ["nvidia-smi -i 1 -rmc", "nvidia-smi -i 1 -rgc"]
    assert CLOCKS_LOCKED_ENV not in os.environ


def test_failed_lock_step_undoes_the_steps_already_taken(fake_tools: tuple[Path, Path],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _, log = fake_tools
    monkeypatch.setenv("FAKE_SMI_FAIL", "-lmc")
    with pytest.raises(ClockLockError, match="fake failure"):
        with lock_clocks("nvidia", (0,), sm_mhz=1410, mem_mhz=2619):
            pytest.fail("the block must not run when locking failed")
    assert calls(log) == ["nvidia-smi -i 0 -lgc 1410,1410", "nvidia-smi -i 0 -lmc 2619,2619", "nvidia-smi -i 0 -rgc"]
    assert CLOCKS_LOCKED_ENV not in os.environ


def test_a_failing_restore_does_not_stop_the_others(fake_tools: tuple[Path, Path],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _, log = fake_tools
    messages: list[str] = []
    with lock_clocks("nvidia", (0,), sm_mhz=1410, mem_mhz=2619, on_message=messages.append) as lock:
        monkeypatch.setenv("FAKE_SMI_FAIL", "-rmc")
    assert calls(log)[-2:] == ["nvidia-smi -i 0 -rmc", "nvidia-smi -i 0 -rgc"]
    assert len(lock.restore_errors) == 1 and "-rmc" in lock.restore_errors[0]
    assert any("run `nvidia-smi -i 0 -rmc` by hand" in m for m in messages)


def test_amd_smi_commands(fake_tools: tuple[Path, Path]) -> None:
    _, log = fake_tools
    with lock_clocks("amd", (2,), sm_mhz=1900):
        pass
    assert calls(log) == ["amd-smi set -g 2 --perf-determinism 1900", "amd-smi reset -g 2 --perf-determinism"]


def test_rocm_smi_fallback_when_amd_smi_is_missing(fake_tools: tuple[Path, Path]) -> None:
    bin_dir, log = fake_tools
    (bin_dir / "amd-smi").unlink()
    with lock_clocks("amd", (0,), sm_mhz=1700):
        pass
    assert calls(log) == ["rocm-smi -d 0 --setperfdeterminism 1700", "rocm-smi -d 0 --resetperfdeterminism"]


def test_amd_needs_a_clock_and_cpu_cannot_lock(fake_tools: tuple[Path, Path]) -> None:
    _, log = fake_tools
    with pytest.raises(ClockLockError, match="explicit graphics clock"):
        lock_clocks("amd", (0,))
    with pytest.raises(ClockLockError, match="cpu"):
        lock_clocks("cpu", (0,))
    assert calls(log) == []


def test_missing_tool_is_a_clear_error(fake_tools: tuple[Path, Path]) -> None:
    bin_dir, _ = fake_tools
    (bin_dir / "nvidia-smi").unlink()
    with pytest.raises(ClockLockError, match="nvidia-smi not found"):
        lock_clocks("nvidia", (0,))


CHILD = textwrap.dedent("""
    import sys, time
    from runners.clock_lock import lock_clocks
    try:
        with lock_clocks("nvidia", (0,), sm_mhz=1410, mem_mhz=2619):
            print("locked", flush=True)
            time.sleep(60)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
""")


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM)])
def test_restore_runs_after_ctrl_c_and_sigterm(fake_tools: tuple[Path, Path], sig: int, code: int) -> None:
    _, log = fake_tools
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True, env=env,
                            preexec_fn=ctrl_c_default)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "locked"
        time.sleep(0.1)
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == code
    finally:
        if proc.poll() is None:
            proc.kill()
    assert calls(log) == ["nvidia-smi -i 0 -lgc 1410,1410", "nvidia-smi -i 0 -lmc 2619,2619",
                          "nvidia-smi -i 0 -rmc", "nvidia-smi -i 0 -rgc"]


def test_previous_sigterm_handler_is_put_back(fake_tools: tuple[Path, Path]) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with lock_clocks("nvidia", (0,), sm_mhz=1410, mem_mhz=2619):
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


# ---------------------------------------------------------------- clocks.py


def test_clock_flags() -> None:
    base = {"available": True, "sm_mhz": 1980, "mem_mhz": 2619, "throttle": []}
    assert clock_flags(base, dict(base)) == []
    assert clock_flags({"available": False}, base) == ["clocks_unavailable"]
    moved = {**base, "sm_mhz": 1500}
    assert clock_flags(base, moved) == ["sm_mhz_moved:1980->1500"]
    assert clock_flags(base, {**base, "sm_mhz": 1960}) == []  # 1% is within the 2% tolerance
    hot = {**base, "throttle": ["hw_thermal_slowdown", "applications_clocks_setting"]}
    assert clock_flags(base, hot) == ["throttle:applications_clocks_setting", "throttle:hw_thermal_slowdown"]
    assert clock_flags(base, hot, ignore=("applications_clocks_setting",)) == ["throttle:hw_thermal_slowdown"]


def _fake_pynvml(handles: dict[object, dict[str, int]]) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.NVML_CLOCK_SM, m.NVML_CLOCK_MEM, m.NVML_TEMPERATURE_GPU = 0, 1, 0  # type: ignore[attr-defined]
    m.inits = 0  # type: ignore[attr-defined]

    def init() -> None:
        m.inits += 1  # type: ignore[attr-defined]

    def shutdown() -> None:
        m.inits -= 1  # type: ignore[attr-defined]

    m.nvmlInit, m.nvmlShutdown = init, shutdown  # type: ignore[attr-defined]
    m.nvmlDeviceGetHandleByIndex = lambda i: handles[i]  # type: ignore[attr-defined]
    m.nvmlDeviceGetHandleByUUID = lambda u: handles[u]  # type: ignore[attr-defined]
    m.nvmlDeviceGetClockInfo = lambda h, kind: h["sm"] if kind == 0 else h["mem"]  # type: ignore[attr-defined]
    m.nvmlDeviceGetTemperature = lambda h, kind: h["temp"]  # type: ignore[attr-defined]
    m.nvmlDeviceGetPowerUsage = lambda h: h["mw"]  # type: ignore[attr-defined]
    m.nvmlDeviceGetCurrentClocksEventReasons = lambda h: h["reasons"]  # type: ignore[attr-defined]
    m.nvmlDeviceGetMaxClockInfo = lambda h, kind: h.get("max", 1980)  # type: ignore[attr-defined]
    return m


def test_read_clocks_through_fake_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu1 = {"sm": 1755, "mem": 2619, "temp": 61, "mw": 412_000, "reasons": 0x4 | 0x40 | 0x1}
    gpu0 = {"sm": 1980, "mem": 2619, "temp": 40, "mw": 90_000, "reasons": 0}
    fake = _fake_pynvml({0: gpu0, 1: gpu1, "GPU-abc": gpu1})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    r = read_clocks("nvidia", 1)
    assert r == {"available": True, "sm_mhz": 1755, "mem_mhz": 2619, "max_sm_mhz": 1980, "temp_c": 61,
                 "power_w": 412.0, "throttle_bits": 0x45, "throttle": ["hw_thermal_slowdown", "sw_power_cap"]}
    assert read_clocks("nvidia", "GPU-abc")["sm_mhz"] == 1755
    assert read_clocks("nvidia", 0)["throttle"] == []
    assert fake.inits == 1  # NVML started once for the process, not once per reading  # type: ignore[attr-defined]
    assert clock_flags(read_clocks("nvidia", 0), read_clocks("nvidia", 1)) == [
        "sm_mhz_moved:1980->1755", "throttle:hw_thermal_slowdown", "throttle:sw_power_cap"]


def test_the_library_session_is_kept_per_process_and_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """One NVML start per process: readings after it reuse the session and its handles; a
    library module that differs (here: another fake) starts its own; a failed start is said at
    every reading without being tried again; the session ends at exit, once."""
    from judge import clocks

    gpu = {"sm": 1980, "mem": 2619, "temp": 40, "mw": 90_000, "reasons": 0, "max": 1980}
    first = _fake_pynvml({0: gpu})
    looked_up: list[int] = []
    find = first.nvmlDeviceGetHandleByIndex  # type: ignore[attr-defined]
    first.nvmlDeviceGetHandleByIndex = lambda i: looked_up.append(i) or find(i)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", first)
    for _ in range(5):
        assert clocks.read_clocks("nvidia", 0)["sm_mhz"] == 1980
    assert first.inits == 1 and looked_up == [0]  # type: ignore[attr-defined]
    second = _fake_pynvml({0: {**gpu, "sm": 1410}})
    monkeypatch.setitem(sys.modules, "pynvml", second)
    assert clocks.read_clocks("nvidia", 0)["sm_mhz"] == 1410 and second.inits == 1  # type: ignore[attr-defined]
    broken = _fake_pynvml({})
    starts: list[int] = []

    def refuse() -> None:
        starts.append(1)
        raise RuntimeError("NVML: driver/library version mismatch")

    broken.nvmlInit = refuse  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    for _ in range(3):
        r = clocks.read_clocks("nvidia", 0)
        assert r["available"] is False and "version mismatch" in r["error"]
    assert starts == [1]
    monkeypatch.setitem(sys.modules, "pynvml", first)
    clocks.read_clocks("nvidia", 0)
    clocks._NVML.close()
    assert first.inits == 0  # type: ignore[attr-defined]


def test_read_clocks_without_a_library_is_recorded_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    r = read_clocks("nvidia", 0)
    assert r["available"] is False
    assert "ImportError" in r["error"] or "ModuleNotFoundError" in r["error"]
    assert read_clocks("cpu")["available"] is False


def test_clock_lock_imports_without_torch() -> None:
    """`--lock-clocks` runs in the parent before any worker: it must not pull in torch."""
    code = "import sys; import runners.clock_lock; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_workers_learn_that_clocks_are_locked_from_their_own_environment() -> None:
    """The pool puts KMC_CLOCKS_LOCKED in its workers' environment when asked; nothing is set in
    this process (no worker is started here)."""
    from judge.device import Target
    from runners.pool import LocalPool

    cpu = Target("cpu", True, "Triton CPU interpreter", 0)
    with LocalPool(cpu, workers=1, clocks_locked=True) as pool:
        assert pool._all[0]._env()[CLOCKS_LOCKED_ENV] == "1"
    with LocalPool(cpu, workers=1) as pool:
        assert pool._all[0]._env()[CLOCKS_LOCKED_ENV] == "0"
    assert CLOCKS_LOCKED_ENV not in os.environ


def test_a_locked_clocks_flag_in_the_shell_does_not_reach_the_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    from judge.device import Target
    from runners.pool import LocalPool

    monkeypatch.setenv(CLOCKS_LOCKED_ENV, "1")  # left over in the user's shell: clocks are not locked by this run
    with LocalPool(Target("cpu", True, "Triton CPU interpreter", 0), workers=1) as pool:
        assert pool._all[0]._env()[CLOCKS_LOCKED_ENV] == "0"


def test_read_clocks_through_fake_amdsmi(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ROCm reader: GFX clock and its maximum from amdsmi's clock info, one library start
    for many readings, the processor handles looked up once."""
    m = types.ModuleType("amdsmi")
    m.starts = 0  # type: ignore[attr-defined]
    listed: list[int] = []

    def init() -> None:
        m.starts += 1  # type: ignore[attr-defined]

    def handles() -> list[str]:
        listed.append(1)
        return ["gpu0", "gpu1"]

    m.amdsmi_init, m.amdsmi_shut_down = init, lambda: None  # type: ignore[attr-defined]
    m.amdsmi_get_processor_handles = handles  # type: ignore[attr-defined]
    m.AmdSmiClkType = types.SimpleNamespace(GFX="gfx", MEM="mem")  # type: ignore[attr-defined]
    m.AmdSmiTemperatureType = types.SimpleNamespace(EDGE="edge")  # type: ignore[attr-defined]
    m.AmdSmiTemperatureMetric = types.SimpleNamespace(CURRENT="current")  # type: ignore[attr-defined]
    clocks = {("gpu1", "gfx"): {"clk": 2100, "max_clk": 2100}, ("gpu1", "mem"): {"clk": 1300}}
    m.amdsmi_get_clock_info = lambda h, kind: clocks[(h, kind)]  # type: ignore[attr-defined]
    m.amdsmi_get_temp_metric = lambda h, kind, metric: 55  # type: ignore[attr-defined]
    m.amdsmi_get_power_info = lambda h: {"current_socket_power": 480}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "amdsmi", m)
    from judge.clocks import clocks_up

    for _ in range(3):
        r = read_clocks("amd", 1)
    assert r == {"available": True, "sm_mhz": 2100, "mem_mhz": 1300, "max_sm_mhz": 2100, "temp_c": 55,
                 "power_w": 480, "throttle_bits": 0, "throttle": []}
    assert m.starts == 1 and listed == [1]  # type: ignore[attr-defined]
    assert clocks_up(r) is True
