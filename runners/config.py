"""The resolved configuration of a comparison run: every option, written to config.json.

A run folder's config.json is enough to resume it, so everything that shapes the run
(including method options with their defaults filled in) is recorded here, and nothing
that does not (paths of the output folder are derived, not stored as identity).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from judge.policy import TimingPolicy
from modelio.ledger import matched_eval_cap

DEFAULT_METHODS = ("direct", "reflexion", "geak")
# Options that hold a list of names. A config file may give one name as a plain string
# (`tasks: vector_add`) or several as a comma-separated one, as the command line does.
LIST_FIELDS = ("methods", "tasks", "method_modules", "task_sources")
# A sensible budget to suggest when a token unit is chosen without one: about 100 calls,
# at the ~3,000 total (~800 output) tokens a call of the built-in methods costs.
SUGGESTED_TOKEN_BUDGET = {"total_tokens": 300_000, "output_tokens": 80_000}


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
    worker_user: str | None = None  # run candidate processes as this user (judge/privileges.py)
    sanitize: bool = False  # final submissions also under compute-sanitizer memcheck/racecheck (NVIDIA)
    # Candidates run without the sandbox (judge/sandbox.py), with only best-effort containment:
    # the user's accepted risk where the sandbox cannot be built; printed on the report.
    unsandboxed: bool = False
    # Judge on a Ray cluster instead of local workers (runners/ray_executor.py, extra `cluster`):
    # "local" starts a Ray instance on this machine, anything else is the address ray.init takes
    # ("auto" for a running cluster); None: the local pool.
    ray_address: str | None = None
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
    oneshot_threshold: float = 0.8
    answer_format: str = "fenced"
    json_mode: bool = False
    # GPU evaluations per unit (visible feedback plus runs of a method's own tests), enforced
    # like the call budget; None: the matched cap when match_evals (one per two calls of a calls
    # budget, modelio.ledger.matched_eval_cap), else counted and reported, not capped.
    eval_budget: int | None = None
    # The default run is matched in GPU compute as well as in calls (issue 43): every method
    # gets the same cap on evaluations per unit. configs/paper.yaml turns it off.
    match_evals: bool = True

    def effective_eval_budget(self) -> int | None:
        """The cap on GPU evaluations per unit the run enforces (see eval_budget, match_evals)."""
        if self.eval_budget is not None:
            return self.eval_budget
        return matched_eval_cap(self.budget, self.budget_unit) if self.match_evals else None

    def validate(self) -> None:
        if not _is_int(self.budget) or self.budget <= 0:
            raise ConfigError(f"budget must be a positive integer, got {self.budget!r}")
        if not _is_int(self.repeats) or self.repeats < 1:
            raise ConfigError(f"repeats must be an integer of at least 1, got {self.repeats!r}")
        if not _is_int(self.seed):
            raise ConfigError(f"seed must be an integer, got {self.seed!r}")
        for name in ("workers", "concurrency"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < 1):
                raise ConfigError(f"{name} must be at least 1 (or left out for the default), got {value!r}")
        if self.job_timeout_s is not None and (not _is_number(self.job_timeout_s) or self.job_timeout_s <= 0):
            raise ConfigError(f"job_timeout_s must be a positive number of seconds, got {self.job_timeout_s!r}")
        if not isinstance(self.charge_failed_calls, bool):
            raise ConfigError(f"charge_failed_calls must be true or false, got {self.charge_failed_calls!r}")
        for name in LIST_FIELDS:
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, as_name_list(name, value))
        if not isinstance(self.method_options, dict) or not all(isinstance(v, dict)
                                                                for v in self.method_options.values()):
            raise ConfigError("method_options must map each method to a mapping of its options, "
                              f"got {self.method_options!r}")
        if self.suite is not None and not isinstance(self.suite, str):
            raise ConfigError(f"suite must be a suite name, got {self.suite!r}")
        if not isinstance(self.sim_params, dict):
            raise ConfigError(f"sim_params must be a mapping, got {self.sim_params!r}")
        ep = self.endpoint
        if not _is_int(ep.max_concurrency) or ep.max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be a positive integer, got {ep.max_concurrency!r}")
        if not _is_number(ep.timeout_s) or ep.timeout_s <= 0:
            raise ConfigError(f"endpoint timeout_s must be a positive number, got {ep.timeout_s!r}")
        if not _is_int(ep.max_retries) or ep.max_retries < 0:
            raise ConfigError(f"endpoint max_retries must be a non-negative integer, got {ep.max_retries!r}")
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
        if not isinstance(self.unsandboxed, bool):
            raise ConfigError(f"unsandboxed must be true or false, got {self.unsandboxed!r}")
        if self.json_mode and self.answer_format != "json":
            raise ConfigError("json_mode (constrained JSON decoding) needs answer_format: json, so every prompt "
                              "asks for the JSON object the decoder enforces")
        if not isinstance(self.match_evals, bool):
            raise ConfigError(f"match_evals must be true or false, got {self.match_evals!r}")
        if self.eval_budget is not None and (not isinstance(self.eval_budget, int) or isinstance(self.eval_budget, bool)
                                             or self.eval_budget < 1):
            raise ConfigError(f"eval_budget must be a positive integer or null, got {self.eval_budget!r}")
        if self.device not in ("auto", "cpu"):
            raise ConfigError(f"device must be auto or cpu, got {self.device!r}")
        if self.ray_address is not None and (not isinstance(self.ray_address, str) or not self.ray_address.strip()):
            raise ConfigError(f"ray_address must be an address, auto or local, got {self.ray_address!r}")
        if self.ray_address is not None and self.worker_user is not None:
            raise ConfigError("worker_user is not supported on the Ray executor (its actors' workers run as the "
                              "cluster's user); leave out one of them")
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
        from modelio.ledger import resolve_unit

        try:
            self.budget_unit = resolve_unit(self.budget_unit)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CompareConfig:
        _refuse_unknown(d, {f.name for f in fields(cls)}, "config key")
        d = dict(d)
        for name in LIST_FIELDS:
            if name in d:
                d[name] = as_name_list(name, d[name])
                if d[name] is None and name != "tasks":
                    del d[name]  # null: the default (tasks: null means "the suite's")
        endpoint = d.pop("endpoint", None) or {}
        if not isinstance(endpoint, dict):
            raise ConfigError("endpoint must be a mapping")
        _refuse_unknown(endpoint, {f.name for f in fields(EndpointConfig)}, "endpoint key")
        try:
            d["timing_policy"] = TimingPolicy.from_json(d.get("timing_policy"))
        except (TypeError, ValueError) as exc:
            raise ConfigError(str(exc)) from None
        return cls(endpoint=EndpointConfig(**endpoint), **d)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _refuse_unknown(given: dict[str, Any], known: set[str], what: str) -> None:
    """ConfigError naming every unknown key, each with the nearest known one when there is one."""
    unknown = sorted(set(given) - known, key=str)
    if not unknown:
        return
    described = []
    for key in unknown:
        near = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.6)
        described.append(f"{key} (did you mean {near[0]}?)" if near else str(key))
    raise ConfigError(f"unknown {what}(s): {', '.join(described)}")


def as_name_list(name: str, value: Any) -> list[str] | None:
    """A list of names from a list, one name, or a comma-separated string (None stays None)."""
    if value is None:
        return None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f"{name} must be a name or a list of names, got {value!r}")


def _parse_error(path: Path, exc: Exception) -> str:
    """Where a YAML or JSON file stopped parsing, as `line L, column C: problem` (1-based)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    if mark is not None:
        context = getattr(exc, "context", None)
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" + (f" ({context})" if context else "")
    return str(problem)


def load_config_file(path: Path) -> dict[str, Any]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot parse config {path}: {_parse_error(path, exc)}") from None
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
    config = CompareConfig.from_json(data)
    _require_token_budget(config, given="budget" in data and data["budget"] is not None)
    return config


def _require_token_budget(config: CompareConfig, given: bool) -> None:
    """A token budget must be given: the default budget (100) counts calls, and 100 tokens buy
    no call at all, so every unit would score 0 without a word."""
    from modelio.ledger import resolve_unit

    try:
        unit = resolve_unit(config.budget_unit) if isinstance(config.budget_unit, str) else config.budget_unit
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if unit in SUGGESTED_TOKEN_BUDGET and not given:
        raise ConfigError(f"--budget-unit {config.budget_unit} needs --budget in tokens (the default, "
                          f"{CompareConfig.budget}, counts calls), e.g. --budget {SUGGESTED_TOKEN_BUDGET[unit]} "
                          "(about 100 calls); compare --dry-run shows what a budget buys")
