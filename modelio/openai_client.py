"""A model client for any OpenAI-compatible endpoint (OpenAI, Azure OpenAI, vLLM, SGLang,
Ollama, or our own `serve-sim`), built to be called from many threads at once.

Why the synchronous SDK: the scheduler runs units on threads and each unit blocks on its
own call, so a thread-safe sync client (one shared connection pool) gives the concurrency
directly; an async client would need its own loop thread and a hop per call for nothing.
`max_concurrency` caps the requests in flight across all threads (a semaphore held for one
HTTP attempt, released during back-off so waiting calls do not block others).

Retries are ours (tenacity), not the SDK's (which is set to 0), so that each retry is
counted (`Completion.retries`, the calls table, `stats()`): retried are 429, 408/409, 5xx,
timeouts and dropped or refused connections, with exponential back-off plus jitter, honouring
a `Retry-After` header up to the back-off cap. Anything else (400, 401, 404) fails at once,
and its error names the HTTP status and carries the server's own message (a 400 for an
unsupported option or a prompt beyond the context window says which), so the run's record
and report show why a call failed.

The reply cap travels as `max_tokens`, which every OpenAI-compatible server reads, until the
endpoint answers 400 that it wants `max_completion_tokens` (OpenAI's reasoning models, which
accept nothing else): that call is sent again at once with the cap under the new name, and
the client keeps sending it so (`token_cap_field`, in `stats()`). The cap's value never
changes, so the methods' budgets mean the same on either endpoint. Likewise an endpoint that
refuses the optional `seed` or `user` field by name (400 or 422: "unsupported", "unknown",
"extra inputs are not permitted", as strict servers such as Mistral's answer unknown fields)
gets the call again without it, and every later call goes without it (`dropped_fields`, in
`stats()`, and one warning in the run's log: without a seed the endpoint's samples cannot
be drawn again). Nothing else is ever dropped: a refused temperature or response format
fails the call with the server's message, since it would change what the method asked for.

Sampling on the wire: the seed sent is `request.seed + request.sample_index`, so a seeded
backend (vLLM, SGLang, OpenAI's best-effort `seed`) draws a *different* sample for each
index of the same prompt, as direct prompting and pass@k need. The sample index itself
travels in the standard `user` field as "kmc-sample-<n>": every OpenAI-compatible server
accepts that field (real ones ignore it or use it for abuse monitoring), whereas an unknown
body field is rejected by OpenAI itself. `serve-sim` reads it back, recovers the base seed
as `seed - n`, and so answers exactly as the in-process simulated model would.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from modelio.prices import Price, estimate_cost, load_prices
from modelio.tokens import count_tokens
from modelio.types import Completion, Request

SAMPLE_USER_PREFIX = "kmc-sample-"
SIM_OWNER = "kmc-simulated"  # /v1/models owned_by and system_fingerprint of serve-sim
_SAMPLE_USER = re.compile(rf"^{SAMPLE_USER_PREFIX}(\d+)$")
_log = logging.getLogger("kmc.modelio")


def wire_seed(seed: int, sample_index: int) -> int:
    """The seed sent to the endpoint: distinct per sample index, invertible given the index."""
    return seed + sample_index


def sample_index_from_user(user: object) -> int | None:
    match = _SAMPLE_USER.match(user) if isinstance(user, str) else None
    return int(match.group(1)) if match else None


class EndpointUnreachable(RuntimeError):
    """The endpoint cannot be reached (or rejects our key) at start: a one-line message."""


class EndpointCallFailed(RuntimeError):
    """One call failed for good (retries used up, or a non-retryable answer).

    `retries` and `completion_tokens` are read by the ledger: it records the retries and
    charges the call only if the endpoint produced tokens (or the run charges failures)."""

    def __init__(self, message: str, retries: int, kind: str):
        super().__init__(message)
        self.retries = retries
        self.kind = kind
        self.completion_tokens = 0


@dataclass
class ClientStats:
    """Totals since the client was made, across all threads."""

    calls: int = 0
    failed_calls: int = 0
    retries: int = 0
    retries_by_kind: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    token_cap_field: str = "max_tokens"  # the name the reply cap is sent under (module docstring)
    dropped_fields: tuple[str, ...] = ()  # optional fields the endpoint refused, no longer sent


def _describe(exc: BaseException) -> str:
    """"HTTP <status>: <the server's message>" for a status error, else the exception's first line."""
    status = getattr(exc, "status_code", None)
    if status is None:
        return _one_line(exc)
    body = getattr(exc, "body", None)
    message = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else None
        if message is None and "detail" in body:  # FastAPI / pydantic servers (vLLM's 422s, Mistral's)
            message = json.dumps(body["detail"])[:1000]
    text = str(message if message else getattr(exc, "message", "") or exc).strip().replace("\n", " ")
    return f"HTTP {status}: {text[:1000]}"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class OpenAIClient:
    """ModelClient for an OpenAI-compatible chat-completions endpoint; thread-safe."""

    simulated = False

    def __init__(self, base_url: str, model: str, *, api_key_env: str = "OPENAI_API_KEY", api_key: str | None = None,
                 timeout_s: float = 120.0, max_retries: int = 5, max_concurrency: int = 8,
                 backoff_initial_s: float = 1.0, backoff_max_s: float = 30.0,
                 prices: dict[str, Price] | None = None):
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        try:
            import openai
        except ImportError:
            raise RuntimeError("the openai package is needed for a real endpoint: pip install openai") from None
        self._openai = openai
        self.base_url = base_url
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_concurrency = max_concurrency
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.prices = prices if prices is not None else load_prices()
        key = api_key if api_key is not None else os.environ.get(api_key_env)
        # Endpoints without auth (vLLM, Ollama, serve-sim) accept any key; the SDK needs one.
        self._client = openai.OpenAI(base_url=base_url, api_key=key or "not-needed", timeout=timeout_s,
                                     max_retries=0)
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._lock = threading.Lock()
        self._stats = ClientStats()
        self.token_cap_field = "max_tokens"
        self.dropped_fields: tuple[str, ...] = ()

    # ------------------------------------------------------------------ start-up check
    def check_reachable(self) -> None:
        """Fail fast, before a run folder exists: one request to /models, no retries.

        Also learns whether the endpoint is our own serve-sim, so that results it produced
        are labelled simulated (design invariant 7)."""
        try:
            page = self._client.with_options(max_retries=0, timeout=min(10.0, self.timeout_s)).models.list()
        except self._openai.AuthenticationError:
            raise EndpointUnreachable(f"model endpoint {self.base_url} rejected the API key (HTTP 401)") from None
        except self._openai.APIConnectionError as exc:
            raise EndpointUnreachable(f"model endpoint {self.base_url} is unreachable ({_one_line(exc)})") from None
        except self._openai.APIStatusError:
            return  # reachable; /models may be unsupported or need other auth
        if any(getattr(m, "owned_by", None) == SIM_OWNER for m in getattr(page, "data", []) or []):
            self.simulated = True

    # ------------------------------------------------------------------ calls
    def request_kwargs(self, request: Request) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model, "temperature": request.temperature,
            "seed": wire_seed(request.seed, request.sample_index),
            "user": f"{SAMPLE_USER_PREFIX}{request.sample_index}",
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        }
        if request.max_tokens is not None:
            kwargs[self.token_cap_field] = request.max_tokens
        if request.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        for name in self.dropped_fields:
            kwargs.pop(name, None)
        return kwargs

    def complete(self, request: Request) -> Completion:
        from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

        kwargs = self.request_kwargs(request)
        retries = 0
        started = time.perf_counter()

        def before_sleep(state: RetryCallState) -> None:
            nonlocal retries
            retries += 1
            exc = state.outcome.exception() if state.outcome else None
            kind = self._kind(exc) if exc else "unknown"
            with self._lock:
                self._stats.retries += 1
                self._stats.retries_by_kind[kind] = self._stats.retries_by_kind.get(kind, 0) + 1

        try:
            for attempt in Retrying(stop=stop_after_attempt(self.max_retries + 1), wait=self._wait,
                                    retry=retry_if_exception(self._retryable), before_sleep=before_sleep,
                                    reraise=True):
                with attempt:
                    with self._slots:
                        response = self._create_adapting(kwargs)
        except self._openai.OpenAIError as exc:
            self._count_failure()
            how = f"after {retries} retries" if retries else "without retry"
            raise EndpointCallFailed(f"{self.base_url} {how}: {_describe(exc)}", retries, self._kind(exc)) from exc
        return self._completion(request, response, retries, time.perf_counter() - started)

    def _completion(self, request: Request, response: Any, retries: int, latency_s: float) -> Completion:
        choices = getattr(response, "choices", None) or []
        if not choices:
            self._count_failure()
            said = _error_in_body(response)
            raise EndpointCallFailed(f"{self.base_url} returned no choices" + (f": {said}" if said else ""),
                                     retries, "empty")
        text = reply_text(getattr(choices[0], "message", None))
        usage = getattr(response, "usage", None)
        prompt_tokens = getattr(usage, "prompt_tokens", None)
        completion_tokens = getattr(usage, "completion_tokens", None)
        if prompt_tokens is None:
            prompt_tokens = count_tokens(request.prompt_text())
        if completion_tokens is None:
            completion_tokens = count_tokens(text)
        if getattr(response, "system_fingerprint", None) == SIM_OWNER:
            self.simulated = True
        cost = 0.0 if self.simulated else estimate_cost(self.model, prompt_tokens, completion_tokens, self.prices)
        with self._lock:
            s = self._stats
            s.calls += 1
            s.prompt_tokens += prompt_tokens
            s.completion_tokens += completion_tokens
            s.cost_usd = None if (cost is None or s.cost_usd is None) else s.cost_usd + cost
        return Completion(text=text, prompt_tokens=int(prompt_tokens), completion_tokens=int(completion_tokens),
                          latency_s=latency_s, cached=False, model=self.model, retries=retries)

    def _create_adapting(self, kwargs: dict[str, Any]) -> Any:
        """One request; where the endpoint refuses how a field was sent (module docstring), the
        same request again as it asks. Each adaptation takes a field out of `kwargs`, so this
        ends: at most once per field."""
        o = self._openai
        while True:
            try:
                return self._client.chat.completions.create(**kwargs)
            except (o.BadRequestError, o.UnprocessableEntityError) as exc:
                if not self._adapted(kwargs, _describe(exc)):
                    raise

    def _adapted(self, kwargs: dict[str, Any], said: str) -> bool:
        """Whether the endpoint's refusal (`said`) names a field it wants otherwise: if so,
        `kwargs` and every later call's send it as asked."""
        if "max_tokens" in kwargs and "max_completion_tokens" in said:
            kwargs["max_completion_tokens"] = kwargs.pop("max_tokens")
            with self._lock:
                self.token_cap_field = "max_completion_tokens"
            return True
        refused = next((name for name in DROPPABLE_FIELDS if name in kwargs and refuses_field(said, name)), None)
        if refused is None:
            return False
        kwargs.pop(refused)
        with self._lock:
            self.dropped_fields = (*self.dropped_fields, refused)
        _log.warning("%s refuses the %r field (%s); it is no longer sent%s", self.base_url, refused, said[:200],
                     ": this endpoint's samples cannot be drawn again by seed" if refused == "seed" else "")
        return True

    def stats(self) -> ClientStats:
        with self._lock:
            s = self._stats
            return ClientStats(s.calls, s.failed_calls, s.retries, dict(s.retries_by_kind), s.prompt_tokens,
                               s.completion_tokens, s.cost_usd, self.token_cap_field, self.dropped_fields)

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------------ retry policy
    def _count_failure(self) -> None:
        with self._lock:
            self._stats.failed_calls += 1

    def _kind(self, exc: BaseException) -> str:
        o = self._openai
        if isinstance(exc, o.APITimeoutError):
            return "timeout"
        if isinstance(exc, o.APIConnectionError):
            return "connection"
        if isinstance(exc, o.APIStatusError):
            return "429" if exc.status_code == 429 else ("5xx" if exc.status_code >= 500 else str(exc.status_code))
        return type(exc).__name__

    def _retryable(self, exc: BaseException) -> bool:
        o = self._openai
        if isinstance(exc, o.APIConnectionError):  # includes timeouts and dropped connections
            return True
        return isinstance(exc, o.APIStatusError) and (exc.status_code in (408, 409, 429) or exc.status_code >= 500)

    def _wait(self, state: Any) -> float:
        """Exponential back-off with jitter: initial * 2^(n-1) + U(0, initial), capped; at
        least the server's Retry-After when it sends one (also capped)."""
        import random

        n = state.attempt_number
        delay = min(self.backoff_max_s, self.backoff_initial_s * 2 ** (n - 1) + random.uniform(0, self.backoff_initial_s))
        exc = state.outcome.exception() if state.outcome else None
        after = _retry_after_s(exc)
        if after is not None:
            delay = max(delay, min(after, self.backoff_max_s))
        return delay


def reply_text(message: Any) -> str:
    """A reply's text: its `content` as a string, or the text parts of a content list (servers
    that answer in the parts format of requests); "" for no content (a refusal, a reply cut
    at its cap before any text)."""
    content = getattr(message, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") if isinstance(p, dict) else getattr(p, "text", None) for p in content]
        return "".join(t for t in parts if isinstance(t, str))
    return ""


def _error_in_body(response: Any) -> str:
    """The message of an error a server put in a 200 response's body instead of choices (some
    proxies do), "" when there is none."""
    extra = getattr(response, "model_extra", None)
    error = extra.get("error") if isinstance(extra, dict) else getattr(response, "error", None)
    if isinstance(error, dict):
        error = error.get("message") or error
    return " ".join(str(error).split())[:500] if error else ""


DROPPABLE_FIELDS = ("seed", "user")
"""Optional fields a request goes on without when the endpoint refuses them by name."""
_REFUSAL = re.compile(r"unsupported|not supported|unknown|unrecognized|not permitted|not allowed|extra|invalid "
                      r"(?:field|param)|cannot find field", re.IGNORECASE)


def refuses_field(said: str, name: str) -> bool:
    """Whether an endpoint's error names the field `name`, quoted or as a request-body location,
    as one it does not take (OpenAI's "Unsupported parameter: 'seed'", pydantic's
    `"loc": ["body", "seed"], "msg": "Extra inputs are not permitted"`, Google's
    `Unknown name "seed"`). A bare word is not enough: "user" is also a message role."""
    quoted = re.search(rf"""['"`]{re.escape(name)}['"`]""", said) is not None
    return quoted and _REFUSAL.search(said) is not None


def _retry_after_s(exc: BaseException | None) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            return None  # an HTTP date: rare for these APIs; fall back to our own back-off
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    return None
