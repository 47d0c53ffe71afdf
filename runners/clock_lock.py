"""`--lock-clocks`: pin GPU clocks for the length of a run, and always put them back.

Why: boost clocks follow temperature and power, so two timings of the same kernel minutes
apart can differ by more than the speedups being compared. Only
meta-pytorch/tritonbench locks clocks among the public harnesses. Locking is off by
default: it needs root, changes a shared machine's state, and is unavailable in most
VMs. When on, the restore commands run on normal exit, on an exception, on Ctrl-C and on
SIGTERM (the handler turns SIGTERM into `SystemExit`, so the `finally` runs).

NVIDIA: `nvidia-smi -i N -lgc F,F` and `-lmc M,M`, restored by `-rgc` and `-rmc`; the
frequencies are given, or chosen from `nvidia-smi --query-supported-clocks`: the highest
memory clock, and the supported graphics clock nearest `sm_fraction` of the maximum (a
clock the board can hold under load without power capping; tritonbench's choices sit
near 0.7 of max boost).
AMD: `amd-smi set -g N --perf-determinism F` (restored by `amd-smi reset -g N
--perf-determinism`), or with only `rocm-smi`: `--setperfdeterminism F` and
`--resetperfdeterminism`. Performance determinism caps the graphics clock only.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType, TracebackType

DEFAULT_SM_FRACTION = 0.75


class ClockLockError(RuntimeError):
    """Clocks could not be locked (nothing is left locked when this is raised)."""


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]

    def __str__(self) -> str:
        return " ".join(self.argv)


def _run(cmd: Command, timeout: float = 60.0) -> str:
    exe = shutil.which(cmd.argv[0])
    if exe is None:
        raise ClockLockError(f"{cmd.argv[0]} not found on PATH")
    try:
        out = subprocess.run([exe, *cmd.argv[1:]], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ClockLockError(f"`{cmd}` did not finish within {timeout:.0f} s") from None
    if out.returncode != 0:
        detail = (out.stderr or out.stdout).strip().splitlines()
        raise ClockLockError(f"`{cmd}` failed (exit {out.returncode}): {detail[-1] if detail else 'no output'}")
    return out.stdout


# ---------------------------------------------------------------- choosing frequencies


def nvidia_supported_clocks(index: int) -> dict[int, list[int]]:
    """{memory MHz: [graphics MHz, ...]} from `nvidia-smi --query-supported-clocks`."""
    text = _run(Command(("nvidia-smi", "-i", str(index), "--query-supported-clocks=memory,graphics",
                         "--format=csv,noheader,nounits")))
    table: dict[int, list[int]] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            continue
        table.setdefault(int(parts[0]), []).append(int(parts[1]))
    if not table:
        raise ClockLockError(f"nvidia-smi listed no supported clocks for GPU {index}")
    return table


def choose_nvidia_clocks(table: dict[int, list[int]], sm_fraction: float = DEFAULT_SM_FRACTION) -> tuple[int, int]:
    """(graphics MHz, memory MHz): highest memory clock; graphics clock nearest the fraction of max."""
    if not 0 < sm_fraction <= 1:
        raise ValueError(f"sm_fraction must be in (0, 1], got {sm_fraction}")
    mem = max(table)
    graphics = sorted(set(table[mem]))
    target = sm_fraction * graphics[-1]
    sm = min(graphics, key=lambda g: (abs(g - target), -g))
    return sm, mem


# ---------------------------------------------------------------- plans


@dataclass(frozen=True)
class LockPlan:
    """What to run to lock, and what to run to undo each lock step (in reverse order)."""

    vendor: str
    devices: tuple[int, ...]
    steps: tuple[tuple[Command, Command], ...]  # (lock, restore) pairs
    description: str


def nvidia_plan(devices: tuple[int, ...], sm_mhz: int | None = None, mem_mhz: int | None = None,
                sm_fraction: float = DEFAULT_SM_FRACTION) -> LockPlan:
    steps: list[tuple[Command, Command]] = []
    chosen = []
    for i in devices:
        sm, mem = sm_mhz, mem_mhz
        if sm is None or mem is None:
            auto_sm, auto_mem = choose_nvidia_clocks(nvidia_supported_clocks(i), sm_fraction)
            sm = auto_sm if sm is None else sm
            mem = auto_mem if mem is None else mem
        steps.append((Command(("nvidia-smi", "-i", str(i), "-lgc", f"{sm},{sm}")),
                      Command(("nvidia-smi", "-i", str(i), "-rgc"))))
        steps.append((Command(("nvidia-smi", "-i", str(i), "-lmc", f"{mem},{mem}")),
                      Command(("nvidia-smi", "-i", str(i), "-rmc"))))
        chosen.append(f"GPU {i}: SM {sm} MHz, memory {mem} MHz")
    return LockPlan("nvidia", devices, tuple(steps), "; ".join(chosen))


def amd_plan(devices: tuple[int, ...], sm_mhz: int) -> LockPlan:
    """amd-smi when present, else rocm-smi; AMD determinism needs an explicit graphics clock."""
    use_amd_smi = shutil.which("amd-smi") is not None
    if not use_amd_smi and shutil.which("rocm-smi") is None:
        raise ClockLockError("neither amd-smi nor rocm-smi is on PATH")
    steps = []
    for i in devices:
        if use_amd_smi:
            steps.append((Command(("amd-smi", "set", "-g", str(i), "--perf-determinism", str(sm_mhz))),
                          Command(("amd-smi", "reset", "-g", str(i), "--perf-determinism"))))
        else:
            steps.append((Command(("rocm-smi", "-d", str(i), "--setperfdeterminism", str(sm_mhz))),
                          Command(("rocm-smi", "-d", str(i), "--resetperfdeterminism"))))
    tool = "amd-smi" if use_amd_smi else "rocm-smi"
    return LockPlan("amd", devices, tuple(steps), f"{tool} performance determinism at {sm_mhz} MHz on GPUs "
                    + ",".join(map(str, devices)))


def make_plan(vendor: str, devices: tuple[int, ...], sm_mhz: int | None = None, mem_mhz: int | None = None,
              sm_fraction: float = DEFAULT_SM_FRACTION) -> LockPlan:
    if vendor == "nvidia":
        return nvidia_plan(devices, sm_mhz, mem_mhz, sm_fraction)
    if vendor == "amd":
        if sm_mhz is None:
            raise ClockLockError("locking AMD clocks needs an explicit graphics clock (e.g. --lock-clocks 1900)")
        return amd_plan(devices, sm_mhz)
    raise ClockLockError(f"cannot lock clocks on vendor {vendor!r}")


def parse_lock_spec(spec: str) -> tuple[int | None, int | None]:
    """`auto` -> (None, None); `1410` -> (1410, None); `1410,2619` -> (SM, memory) MHz."""
    spec = spec.strip().lower()
    if spec in ("", "auto"):
        return None, None
    parts = [p.strip() for p in spec.split(",")]
    if len(parts) > 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"--lock-clocks takes 'auto', 'SM_MHZ' or 'SM_MHZ,MEM_MHZ', got {spec!r}")
    return int(parts[0]), (int(parts[1]) if len(parts) == 2 else None)


# ---------------------------------------------------------------- the context manager


@dataclass
class ClockLock:
    """Context manager: lock on enter, restore on exit whatever the exit was.

    Restores run in reverse order and each is attempted even if an earlier one fails;
    failures are collected in `restore_errors` (and reported through `on_message`), never
    raised over the exception that ended the block.
    """

    plan: LockPlan
    on_message: Callable[[str], None] = lambda _msg: None
    done: list[Command] = field(default_factory=list)
    restore_errors: list[str] = field(default_factory=list)
    # True between a successful lock and the restore. The workers learn it from the pool
    # (LocalPool(clocks_locked=True) puts KMC_CLOCKS_LOCKED in their environment), not from ours.
    locked: bool = False
    _previous_handlers: dict[int, object] = field(default_factory=dict)

    def __enter__(self) -> ClockLock:
        self._install_signal_handlers()
        try:
            for lock, restore in self.plan.steps:
                _run(lock)
                self.done.append(restore)
        except BaseException:
            self._restore()
            self._uninstall_signal_handlers()
            raise
        self.locked = True
        self.on_message(f"clocks locked: {self.plan.description}")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self._restore()
        finally:
            self.locked = False
            self._uninstall_signal_handlers()

    def _restore(self) -> None:
        while self.done:
            cmd = self.done.pop()
            try:
                _run(cmd)
            except ClockLockError as err:
                self.restore_errors.append(str(err))
                self.on_message(f"warning: could not restore clocks: {err}; run `{cmd}` by hand")
        if not self.restore_errors:
            self.on_message("clocks restored")

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def terminate(signum: int, frame: FrameType | None) -> None:
            raise SystemExit(128 + signum)

        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._previous_handlers[sig] = signal.signal(sig, terminate)

    def _uninstall_signal_handlers(self) -> None:
        for sig, handler in self._previous_handlers.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous_handlers.clear()


def lock_clocks(vendor: str, devices: tuple[int, ...], sm_mhz: int | None = None, mem_mhz: int | None = None,
                sm_fraction: float = DEFAULT_SM_FRACTION, on_message: Callable[[str], None] = lambda _m: None
                ) -> ClockLock:
    """Plan now (querying supported clocks), lock on `with`."""
    return ClockLock(make_plan(vendor, devices, sm_mhz, mem_mhz, sm_fraction), on_message)
