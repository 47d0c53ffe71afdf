"""The resolved configuration of a comparison run: every option, written to config.json.

A run folder's config.json is enough to resume it, so everything that shapes the run
(including method options with their defaults filled in) is recorded here, and nothing
that does not (paths of the output folder are derived, not stored as identity).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from judge.policy import TimingPolicy

DEFAULT_METHODS = ("direct", "reflexion", "geak")


class ConfigError(ValueError):
    """A malformed or inconsistent configuration: reported as one line, exit status 2."""


def _default_method_modules() -> list[str]:
    from methods.registry import default_method_modules

    return default_method_modules()


def _default_task_sources() -> list[str]:
    from bench.registry import default_task_sources

    return default_task_sources()


def _default_device() -> str:
    from judge.device import default_device

    return default_device()


@dataclass
class EndpointConfig:
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    max_concurrency: int = 8
    timeout_s: float = 120.0
    max_retries: int = 5

    @property
    def simulated(self) -> bool:
        return self.base_url is None


@dataclass
class CompareConfig:
    budget: int = 100
    budget_unit: str = "calls"
    methods: list[str] = field(default_factory=lambda: list(DEFAULT_METHODS))
    method_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    suite: str | None = None
    tasks: list[str] | None = None
    repeats: int = 1
    seed: int = 0
    device: str = field(default_factory=_default_device)  # "auto" | "cpu"; $KMC_FORCE_CPU=1 gives "cpu"
    workers: int | None = None
    concurrency: int | None = None
    job_timeout_s: float | None = None
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    sim_params: dict[str, Any] = field(default_factory=dict)
    charge_failed_calls: bool = False
    timing_policy: TimingPolicy = field(default_factory=TimingPolicy)
    worker_user: str | None = None  # run evaluation workers as this user (judge/privileges.py)
    # Plugin modules defining methods (`@register_method`); $KMC_METHOD_MODULES gives the default,
    # and the names are recorded so --resume and --replay load the same plugins.
    method_modules: list[str] = field(default_factory=_default_method_modules)
    # External task suites, `ADAPTER:PATH` (bench/adapters); $KMC_TASK_SOURCES gives the default.
    # Recorded with absolute paths, loaded by this process and handed to every evaluation worker.
    task_sources: list[str] = field(default_factory=_default_task_sources)
    # What every method is shown and asked, the same for all (issue 13): the one-shot corpus
    # (None: the built-in tasks' expert kernels; else a file in GEAK-v1's train_crawl.json
    # layout, bench/oneshot.py) and the similarity at or above which an example counts as a
    # near-copy of the task's answer and is never shown; how every code prompt asks for code
    # ("fenced" or GEAK-v1's "json" object); constrained JSON decoding for every code-writing
    # call of every method, or none (needs answer_format json).
    oneshot_corpus: str | None = None
    oneshot_threshold: float = 0.5
    answer_format: str = "fenced"
    json_mode: bool = False
    # GPU evaluations per unit (visible feedback plus runs of a method's own tests), enforced
    # like the call budget; None: counted and reported, not capped.
    eval_budget: int | None = None

    def validate(self) -> None:
        if not isinstance(self.budget, int) or isinstance(self.budget, bool) or self.budget <= 0:
            raise ConfigError(f"budget must be a positive integer, got {self.budget!r}")
        if self.repeats < 1:
            raise ConfigError(f"repeats must be at least 1, got {self.repeats}")
        for name in ("workers", "concurrency"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ConfigError(f"{name} must be at least 1 (or left out for the default), got {value!r}")
        if self.job_timeout_s is not None and (not isinstance(self.job_timeout_s, (int, float))
                                               or isinstance(self.job_timeout_s, bool) or self.job_timeout_s <= 0):
            raise ConfigError(f"job_timeout_s must be a positive number of seconds, got {self.job_timeout_s!r}")
        if not self.methods:
            raise ConfigError("no methods chosen")
        if not isinstance(self.oneshot_threshold, (int, float)) or isinstance(self.oneshot_threshold, bool) \
                or not 0.0 < self.oneshot_threshold <= 1.0:
            raise ConfigError(f"oneshot_threshold must be a similarity in (0, 1], got {self.oneshot_threshold!r}")
        if self.oneshot_corpus is not None:
            if not Path(self.oneshot_corpus).is_file():
                raise ConfigError(f"oneshot_corpus {self.oneshot_corpus} is not a file")
            self.oneshot_corpus = str(Path(self.oneshot_corpus).resolve())  # recorded so a resume finds it
        if self.answer_format not in ("fenced", "json"):
            raise ConfigError(f"answer_format must be fenced or json, got {self.answer_format!r}")
        if not isinstance(self.json_mode, bool):
            raise ConfigError(f"json_mode must be true or false, got {self.json_mode!r}")
        if self.json_mode and self.answer_format != "json":
            raise ConfigError("json_mode (constrained JSON decoding) needs answer_format: json, so every prompt "
                              "asks for the JSON object the decoder enforces")
        if self.eval_budget is not None and (not isinstance(self.eval_budget, int) or isinstance(self.eval_budget, bool)
                                             or self.eval_budget < 1):
            raise ConfigError(f"eval_budget must be a positive integer or null, got {self.eval_budget!r}")
        if self.device not in ("auto", "cpu"):
            raise ConfigError(f"device must be auto or cpu, got {self.device!r}")
        if self.worker_user is not None:
            from judge.privileges import PrivilegeError, resolve_worker_user

            try:
                resolve_worker_user(self.worker_user)
            except PrivilegeError as exc:
                raise ConfigError(str(exc)) from None
        from bench.registry import TaskSourceError, normalize_sources

        try:
            self.task_sources = normalize_sources(self.task_sources)
        except TaskSourceError as exc:
            raise ConfigError(str(exc)) from None
        if isinstance(self.method_modules, str) or not all(isinstance(m, str) for m in self.method_modules):
            raise ConfigError(f"method_modules must be a list of module names, got {self.method_modules!r}")
        from modelio.ledger import resolve_unit

        try:
            self.budget_unit = resolve_unit(self.budget_unit)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CompareConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"unknown config key(s): {', '.join(unknown)}")
        d = dict(d)
        endpoint = d.pop("endpoint", None) or {}
        if not isinstance(endpoint, dict):
            raise ConfigError("endpoint must be a mapping")
        bad = sorted(set(endpoint) - {f.name for f in fields(EndpointConfig)})
        if bad:
            raise ConfigError(f"unknown endpoint key(s): {', '.join(bad)}")
        try:
            d["timing_policy"] = TimingPolicy.from_json(d.get("timing_policy"))
        except (TypeError, ValueError) as exc:
            raise ConfigError(str(exc)) from None
        return cls(endpoint=EndpointConfig(**endpoint), **d)


def load_config_file(path: Path) -> dict[str, Any]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"cannot parse config {path}: {first}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config {path} must be a mapping of options, got {type(data).__name__}")
    return data


#: Options that say how to run, not what is compared: `--resume` may change them (recorded in
#: config.json and in env.json's `resumed` entry), because no recorded result depends on them.
RESUMABLE_OPTIONS = ("workers",)

ENDPOINT_KEYS = ("base_url", "model", "api_key_env", "max_concurrency")


def compose_config(overrides: dict[str, Any], config_file: Path | None = None,
                   recorded: dict[str, Any] | None = None) -> CompareConfig:
    """A run's configuration from three layers, each overriding the one before: a recorded run's
    options (`--replay`; runners.compare.recorded_options), a YAML or JSON config file, then
    explicit options. In `overrides` a None value means "not given"; the endpoint's keys
    (base_url, model, api_key_env, max_concurrency) may be given at top level, as flags are."""
    data: dict[str, Any] = dict(recorded or {})
    data.update(load_config_file(config_file) if config_file else {})
    if not isinstance(data.get("endpoint") or {}, dict):
        raise ConfigError("endpoint must be a mapping")
    endpoint = dict(data.get("endpoint") or {})
    for key, value in overrides.items():
        if value is None:
            continue
        if key in ENDPOINT_KEYS:
            endpoint[key] = value
        else:
            data[key] = value
    data["endpoint"] = endpoint
    return CompareConfig.from_json(data)
