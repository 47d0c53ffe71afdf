"""The run folder, and the one type that reads and writes its JSON files.

A run folder holds `store.sqlite` (record/store.py: every call, candidate and verdict),
`run.log` (runners/logs.py: the story of the run, one line per event) and three JSON files
that only `RunFolder` opens:

- `config.json`: `{"format_version", "config", "resolved"}`. `config` is the run's options as
  given (runners/config.py `CompareConfig.to_json()`, enough to resume or replay the run),
  `resolved` what they resolved to (`ResolvedRun`: task list and difficulty, method options
  with defaults, model, whether it was simulated, the device).
- `env.json`: the machine (device, driver, clocks, Python, torch, triton), the code (git
  commit and dirty flag, package versions, the toolkit's version) and the command line
  (record/provenance.py), when it started, and one entry per later `--resume`.
- `summary.json`: the end-of-run summary; its content is results/summary.py's, this type only
  writes it (byte for byte as before: sorted keys, two-space indent) and reads it back.

Why one owner: these files were parsed by hand in five places, each with its own idea of
what a missing key means. Now a folder is validated once, old folders are read in one place,
and the format has a version: `format_version` 2 is written; a folder without the field was
written before it existed and reads as version 1 (same layout, fewer fields); a newer
version is refused with one line instead of being misread.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from record.provenance import launcher, provenance

FORMAT_VERSION = 2
CONFIG_FILE, ENV_FILE, SUMMARY_FILE, STORE_FILE = "config.json", "env.json", "summary.json", "store.sqlite"
LOG_FILE = "run.log"


class RunFolderError(ValueError):
    """A folder that is not a run folder, or one whose files cannot be read: one line for the user."""


@dataclass(frozen=True)
class ResolvedRun:
    """What a run's options resolved to, recorded so reports need only the folder."""

    tasks: tuple[str, ...]
    method_options: dict[str, dict[str, Any]]
    budget_unit: str
    model: str
    simulated: bool
    target: dict[str, Any]  # judge.device.Target.to_json(): vendor, interpreter, device_name, device_count
    task_difficulty: dict[str, int] = field(default_factory=dict)  # empty for runs recorded before it was
    new_shape_slots: dict[str, int] = field(default_factory=dict)  # adapted tasks' new-shape hidden cases, declared
    # The one-shot corpus (runners/compare.py oneshot_record): source, size, file digest, guard
    # threshold and similarity measure; empty for runs recorded before it was.
    oneshot: dict[str, Any] = field(default_factory=dict)

    @property
    def vendor(self) -> str:
        return str(self.target.get("vendor", ""))

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["tasks"] = list(self.tasks)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any], config: dict[str, Any]) -> ResolvedRun:
        """Old folders lack some keys; the budget unit then comes from the options."""
        return cls(
            tasks=tuple(str(t) for t in d["tasks"]),
            method_options={str(m): dict(o) for m, o in d.get("method_options", {}).items()},
            budget_unit=str(d.get("budget_unit", config["budget_unit"])),
            model=str(d.get("model") or ""),
            simulated=bool(d.get("simulated", False)),
            target=dict(d.get("target") or {}),
            task_difficulty={str(t): int(v) for t, v in d.get("task_difficulty", {}).items()},
            new_shape_slots={str(t): int(v) for t, v in d.get("new_shape_slots", {}).items()},
            oneshot=dict(d.get("oneshot") or {}),
        )


@dataclass(frozen=True)
class RecordedConfig:
    """config.json, read and validated."""

    format_version: int
    config: dict[str, Any]  # the options, as CompareConfig.to_json() wrote them
    resolved: ResolvedRun


def ensure_writable(path: Path) -> None:
    """`path` made if missing and shown writable by writing a probe file; OSError otherwise.
    Called before any work, so a run or report never fails at its end for want of a folder."""
    path.mkdir(parents=True, exist_ok=True)
    probe = path / f".write-test-{os.getpid()}"
    probe.write_text("")
    probe.unlink()


def output_folder(run_dirs: list[Path] | tuple[Path, ...], leaf: str) -> Path:
    """Where `report`, `figures` and `export` write by default: a folder beside the run folder,
    never inside it, so a published (or read-only) run folder stays as it was: `<run>-<leaf>`
    for one run, `<first run>-<leaf>-combined-N` for several."""
    first = Path(run_dirs[0])
    if first.name in ("", ".", ".."):
        first = first.resolve()
    name = f"{first.name}-{leaf}" if len(run_dirs) == 1 else f"{first.name}-{leaf}-combined-{len(run_dirs)}"
    return first.parent / name


def _write_json(path: Path, data: Any) -> None:
    """Atomically (a reader never sees half a file), sorted and indented (stable diffs)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


class RunFolder:
    """One run folder: where its files are, and the only reader and writer of its JSON files."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    # ------------------------------------------------------------------ where things are
    @property
    def store_path(self) -> Path:
        return self.path / STORE_FILE

    @property
    def summary_path(self) -> Path:
        return self.path / SUMMARY_FILE

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def env_path(self) -> Path:
        return self.path / ENV_FILE

    @property
    def log_path(self) -> Path:
        """run.log: what happened during the run, as runners/logs.py writes it (appended on resume)."""
        return self.path / LOG_FILE

    def has_store(self) -> bool:
        return self.store_path.is_file()

    def has_config(self) -> bool:
        return self.config_path.is_file()

    # ------------------------------------------------------------------ making one
    @classmethod
    def create(cls, out: str | Path, identity: dict[str, Any]) -> RunFolder:
        """A new, empty folder under `out` named `<date>-<time>-<hash of identity>` (a suffix
        when that exists). An output folder that cannot be written is a RunFolderError, raised
        before anything is made in it."""
        out = Path(out)
        try:
            ensure_writable(out)
        except OSError as exc:
            raise RunFolderError(f"output folder {out} is not writable: {exc.strerror or exc}") from None
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:6]
        path = out / f"{stamp}-{digest}"
        n = 1
        while path.exists():
            n += 1
            path = out / f"{stamp}-{digest}-{n}"
        path.mkdir(parents=True)
        return cls(path)

    # ------------------------------------------------------------------ config.json
    def write_config(self, config: dict[str, Any], resolved: ResolvedRun, executor: dict[str, Any] | None = None) -> None:
        """`executor`: how the run's evaluations run (the executor's `layout()`: workers per
        device, timing lanes, and why that many), kept beside the options as `executor`."""
        data = {"format_version": FORMAT_VERSION, "config": config, "resolved": resolved.to_json()}
        if executor is not None:
            data["executor"] = executor
        _write_json(self.config_path, data)

    def _rewrite_config(self, **entries: Any) -> None:
        recorded = self.read_config()  # validated first
        data = json.loads(self.config_path.read_text())
        _write_json(self.config_path, {**data, **entries, "format_version": FORMAT_VERSION,
                                       "resolved": recorded.resolved.to_json()})

    def update_options(self, changes: dict[str, Any]) -> None:
        """Rewrite options of config.json's `config` (a `--resume` that changes how the run runs,
        e.g. its worker count); the resolved record is kept as it was."""
        self._rewrite_config(config={**self.read_config().config, **changes})

    def record_executor(self, executor: dict[str, Any]) -> None:
        """config.json's `executor` replaced by this one (a resumed run may run on another
        machine, with another worker count); env.json's `resumed` entries keep the history."""
        self._rewrite_config(executor=executor)

    def read_executor(self) -> dict[str, Any] | None:
        """config.json's `executor` (None for runs recorded before it was kept)."""
        self.read_config()
        executor = json.loads(self.config_path.read_text()).get("executor")
        return executor if isinstance(executor, dict) else None

    def read_config(self) -> RecordedConfig:
        """config.json validated; RunFolderError (one line) when it is missing or malformed."""
        if not self.path.is_dir():
            raise RunFolderError(f"{self.path} is not a folder")
        if not self.config_path.is_file():
            raise RunFolderError(f"{self.path} is not a run folder (no config.json)")
        try:
            data = json.loads(self.config_path.read_text())
            version = int(data.get("format_version", 1))
            if version > FORMAT_VERSION:
                raise RunFolderError(f"{self.config_path} has format version {version}; this toolkit reads up to "
                                     f"{FORMAT_VERSION} (update the toolkit)")
            config = data["config"]
            if not isinstance(config, dict):
                raise TypeError("config is not a mapping")
            for key, kind in (("budget", int), ("budget_unit", str), ("methods", list), ("repeats", int),
                              ("seed", int)):
                if not isinstance(config[key], kind):
                    raise TypeError(f"config.{key} is not {kind.__name__}")
            return RecordedConfig(version, dict(config), ResolvedRun.from_json(data["resolved"], config))
        except RunFolderError:
            raise
        except (OSError, AttributeError, KeyError, TypeError, ValueError) as exc:
            raise RunFolderError(f"{self.config_path} is not a run's config ({type(exc).__name__}: {exc})") from None

    # ------------------------------------------------------------------ env.json
    def write_env(self, machine: dict[str, Any], command_line: list[str] | tuple[str, ...] | None = None) -> None:
        """The machine's facts (judge.device.environment_info) plus the code's and the command's."""
        _write_json(self.env_path, {**machine, **provenance(command_line), "started": time.time()})

    def read_env(self) -> dict[str, Any]:
        """env.json as written ({} when the folder has none: it is informative, not required)."""
        try:
            data = json.loads(self.env_path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise RunFolderError(f"{self.env_path} is unreadable ({type(exc).__name__}: {exc})") from None
        if not isinstance(data, dict):
            raise RunFolderError(f"{self.env_path} is not a mapping")
        return data

    def launcher(self) -> str:
        """The command this run was started with, for hints that repeat it (`kmc`, `python cli.py`):
        the first word of env.json's recorded command line (record.provenance.launcher)."""
        try:
            command_line = self.read_env().get("command_line")
        except RunFolderError:
            command_line = None
        return launcher(command_line if isinstance(command_line, list) else None)

    def record_resume(self, command_line: list[str] | tuple[str, ...] | None = None,
                      changed: dict[str, Any] | None = None) -> None:
        """Append this resumption (when, which code, which command, and the options it changed,
        each as {"from": old, "to": new}) to env.json's `resumed` list: the code that finished a
        run may differ from the code that started it."""
        env = self.read_env()
        entry = {**provenance(command_line), "started": time.time()}
        if changed:
            entry["changed"] = changed
        env.setdefault("resumed", []).append(entry)
        _write_json(self.env_path, env)

    # ------------------------------------------------------------------ summary.json
    def write_summary(self, summary: dict[str, Any]) -> None:
        _write_json(self.summary_path, summary)

    def read_summary(self) -> dict[str, Any] | None:
        """summary.json, or None for a run that has not finished."""
        try:
            data = json.loads(self.summary_path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise RunFolderError(f"{self.summary_path} is unreadable ({type(exc).__name__}: {exc})") from None
        if not isinstance(data, dict):
            raise RunFolderError(f"{self.summary_path} is not a mapping")
        return data
