"""serve-sim: the simulated model behind an OpenAI-compatible HTTP API (stdlib only).

It exists so that the real client path (HTTP, the openai SDK, retries, concurrency, token
accounting) is exercised on loopback, in tests and by users, with no real model. It serves
`POST /v1/chat/completions` and `GET /v1/models`, and can inject what real endpoints do to
clients: latency (`latency_s` per chat request) and faults (`fail_rate`: each chat request
independently, from a seeded generator, becomes a 429, a 500 or a dropped connection;
`fault_script` forces faults on the first requests, in order, for deterministic tests; a
"timeout" fault holds the request for `stall_s` so the client's timeout fires), and the two
HTTP 400s that silently zeroed a method before (issue 13): `reject_json_mode` answers every
request asking for JSON mode (`response_format`) with 400 "not supported", as endpoints
without constrained decoding do, and `reject_every` answers every n-th chat request with 400
"maximum context length exceeded", as an endpoint does for a prompt too long for its window.
`reject_max_tokens` answers a request that caps its reply with `max_tokens` with 400
"unsupported parameter ... use 'max_completion_tokens' instead", as OpenAI does for its
reasoning models (the client then sends the cap under that name).
`refuse_fields` answers a request carrying any of those body fields with 422 in pydantic's
words ("extra inputs are not permitted"), as strict servers (Mistral's) answer `seed` or
`user` (the client then goes on without them).
/v1/models never faults, so a client's start-up check is not disturbed.

Request mapping (see modelio/openai_client.py, which sends it): `messages`, `temperature`,
`max_tokens` (or `max_completion_tokens`), `response_format` json_object/json_schema ->
json_mode; the sample index from the `user` field "kmc-sample-<n>", and the base seed as
`seed - n` (the client sends seed + n so that real seeded backends vary per sample). So a
run through serve-sim answers exactly as a run with the in-process simulated model.
Responses carry `usage` (unless `include_usage` is off, to test the client's fallback
count) and `system_fingerprint` "kmc-simulated", and /v1/models lists each model as
owned_by "kmc-simulated": that is how a client learns its results are simulated.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from modelio.openai_client import SIM_OWNER, sample_index_from_user
from modelio.simulated import SIM_MODEL_NAME, SimulatedModel
from modelio.types import Message, Request

FAULT_KINDS = ("429", "500", "drop", "timeout")
DEFAULT_FAULTS = ("429", "500", "drop")


@dataclass(frozen=True)
class ServerOptions:
    latency_s: float = 0.0
    fail_rate: float = 0.0
    fault_kinds: tuple[str, ...] = DEFAULT_FAULTS
    fault_script: tuple[str, ...] = ()
    stall_s: float = 30.0
    seed: int = 0
    include_usage: bool = True
    model_names: tuple[str, ...] = ("sim", SIM_MODEL_NAME)
    reject_json_mode: bool = False
    reject_every: int = 0  # 0: never; n: every n-th chat request answers 400 (context length)
    reject_max_tokens: bool = False  # a reply cap only as `max_completion_tokens` (OpenAI's reasoning models)
    refuse_fields: tuple[str, ...] = ()  # body fields answered 422 "extra inputs are not permitted" (strict servers)

    def __post_init__(self) -> None:
        if self.latency_s < 0:
            raise ValueError("latency must be >= 0 seconds")
        if not 0.0 <= self.fail_rate <= 1.0:
            raise ValueError(f"fail rate must be in [0, 1], got {self.fail_rate}")
        bad = [k for k in (*self.fault_kinds, *self.fault_script) if k not in FAULT_KINDS]
        if bad:
            raise ValueError(f"unknown fault kind(s) {', '.join(bad)}; known: {', '.join(FAULT_KINDS)}")
        if self.fail_rate > 0 and not self.fault_kinds:
            raise ValueError("a positive fail rate needs at least one fault kind")
        if self.reject_every < 0:
            raise ValueError(f"reject_every must be >= 0, got {self.reject_every}")


MAX_TOKENS_UNSUPPORTED = ("Unsupported parameter: 'max_tokens' is not supported with this model. "
                          "Use 'max_completion_tokens' instead.")  # OpenAI's words for its reasoning models


@dataclass
class ServerCounters:
    """What the server saw; tests read it to prove what was (not) sent."""

    requests: int = 0
    chat_requests: int = 0
    models_requests: int = 0
    answered: int = 0
    completion_tokens: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    max_in_flight: int = 0  # most chat requests being handled at once (proves a client's concurrency cap)


class BadRequest(ValueError):
    pass


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if content is None:
        return ""
    raise BadRequest("message content must be a string or a list of text parts")


def request_from_body(body: dict[str, Any]) -> Request:
    """An OpenAI chat-completions body -> the Request the simulated model answers."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    parsed = []
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest("each message needs a 'role' and 'content'")
        parsed.append(Message(m["role"], _content_text(m.get("content"))))
    try:
        temperature = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
        max_tokens = None if max_tokens is None else int(max_tokens)
        seed = int(body.get("seed") or 0)
    except (TypeError, ValueError):
        raise BadRequest("temperature, max_tokens and seed must be numbers") from None
    if max_tokens is not None and max_tokens < 1:
        raise BadRequest("max_tokens must be at least 1")
    sample_index = sample_index_from_user(body.get("user"))
    if sample_index is None:
        sample_index = 0
    else:
        seed -= sample_index
    fmt = body.get("response_format") or {}
    json_mode = isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema")
    return Request(messages=tuple(parsed), temperature=temperature, max_tokens=max_tokens, seed=seed,
                   sample_index=sample_index, json_mode=json_mode)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default backlog of 5 drops connections under 32-way bursts


class SimServer:
    """The server object; `start()` serves on a background thread, `serve_forever()` blocks."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, options: ServerOptions | None = None,
                 model: SimulatedModel | None = None):
        self.options = options or ServerOptions()
        self.model = model or SimulatedModel()
        from bench.registry import all_tasks

        all_tasks()  # load the task registry once, before handler threads race to do it
        self._rng = random.Random(self.options.seed)
        self._script = list(self.options.fault_script)
        self._lock = threading.Lock()
        self._counters = ServerCounters()
        self._thread: threading.Thread | None = None
        self.httpd = _HTTPServer((host, port), _make_handler(self))
        bound = self.httpd.server_address[0]
        self.host = bound.decode() if isinstance(bound, bytes) else str(bound)
        self.port = int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def counters(self) -> ServerCounters:
        with self._lock:
            c = self._counters
            return ServerCounters(c.requests, c.chat_requests, c.models_requests, c.answered, c.completion_tokens,
                                  dict(c.faults), c.in_flight, c.max_in_flight)

    def start(self) -> SimServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="serve-sim", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ used by the handler
    def _count(self, **inc: int) -> None:
        with self._lock:
            for k, v in inc.items():
                setattr(self._counters, k, getattr(self._counters, k) + v)

    def _enter(self) -> None:
        with self._lock:
            c = self._counters
            c.in_flight += 1
            c.max_in_flight = max(c.max_in_flight, c.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._counters.in_flight -= 1

    def _rejection(self, body: dict[str, Any]) -> str | None:
        """The message of a 400 this request gets (module docstring), else None."""
        fmt = body.get("response_format")
        if self.options.reject_json_mode and isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"):
            reason = "response_format of type json_object is not supported by this model"
        elif self.options.reject_max_tokens and "max_tokens" in body:
            reason = MAX_TOKENS_UNSUPPORTED
        else:
            with self._lock:
                n = self._counters.chat_requests
            if not (self.options.reject_every and n % self.options.reject_every == 0):
                return None
            reason = ("This model's maximum context length is 8192 tokens; your request (messages plus "
                      "max_tokens) exceeds it")
        self._count_fault("400")
        return reason

    def _count_fault(self, kind: str) -> None:
        with self._lock:
            self._counters.faults[kind] = self._counters.faults.get(kind, 0) + 1

    def _draw_fault(self) -> str | None:
        with self._lock:
            if self._script:
                kind: str | None = self._script.pop(0)
            elif self.options.fail_rate > 0 and self._rng.random() < self.options.fail_rate:
                kind = self._rng.choice(self.options.fault_kinds)
            else:
                kind = None
        if kind is not None:
            self._count_fault(kind)
        return kind

    def models_body(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": SIM_OWNER}
                                           for name in self.options.model_names]}

    def chat_body(self, body: dict[str, Any]) -> dict[str, Any]:
        request = request_from_body(body)
        completion = self.model.complete(request)
        finish = "length" if request.max_tokens is not None and completion.completion_tokens >= request.max_tokens \
            else "stop"
        out: dict[str, Any] = {
            "id": f"chatcmpl-sim-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": str(body.get("model") or SIM_MODEL_NAME), "system_fingerprint": SIM_OWNER,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": completion.text},
                         "finish_reason": finish, "logprobs": None}],
        }
        if self.options.include_usage:
            out["usage"] = {"prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
                            "total_tokens": completion.total_tokens}
        self._count(answered=1, completion_tokens=completion.completion_tokens)
        return out


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _make_handler(server: SimServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real endpoints do
        server_version = "kmc-serve-sim"

        def setup(self) -> None:
            super().setup()
            # Headers and body are two writes; with Nagle's algorithm and the client's delayed
            # ACK the body would wait ~40 ms, which would swamp any latency being measured.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            pass  # a request log per call would drown the terminal; counters() says what happened

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up (its timeout); nothing to do

        def _path(self) -> str:
            return self.path.split("?", 1)[0].rstrip("/")

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            server._count(requests=1)
            if self._path() in ("/v1/models", "/models"):
                server._count(models_requests=1)
                self._send(200, server.models_body())
            else:
                self._send(404, _error(f"no route {self.path}", "not_found_error"))

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            server._count(requests=1)
            length = self.headers.get("Content-Length")
            raw = self.rfile.read(int(length)) if length and length.isdigit() else b""
            if self._path() not in ("/v1/chat/completions", "/chat/completions"):
                self._send(404, _error(f"no route {self.path}", "not_found_error"))
                return
            server._count(chat_requests=1)
            server._enter()
            try:
                self._chat(raw)
            finally:
                server._leave()

        def _chat(self, raw: bytes) -> None:
            try:
                body = json.loads(raw or b"null")
                if not isinstance(body, dict):
                    raise BadRequest("the body must be a JSON object")
            except (ValueError, BadRequest) as exc:
                self._send(400, _error(f"invalid request body: {exc}", "invalid_request_error"))
                return
            if server.options.latency_s:
                time.sleep(server.options.latency_s)
            rejected = server._rejection(body)
            if rejected is not None:
                self._send(400, _error(rejected, "invalid_request_error"))
                return
            extra = [name for name in server.options.refuse_fields if name in body]
            if extra:
                server._count_fault("422")
                self._send(422, {"detail": [{"type": "extra_forbidden", "loc": ["body", name],
                                             "msg": "Extra inputs are not permitted"} for name in extra]})
                return
            fault = server._draw_fault()
            if fault == "429":
                self._send(429, _error("simulated rate limit", "rate_limit_error"))
            elif fault == "500":
                self._send(500, _error("simulated server error", "server_error"))
            elif fault == "drop":
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            else:
                if fault == "timeout":
                    time.sleep(server.options.stall_s)
                try:
                    payload = server.chat_body(body)
                except BadRequest as exc:
                    self._send(400, _error(str(exc), "invalid_request_error"))
                    return
                self._send(200, payload)

    return Handler


def serve(host: str, port: int, options: ServerOptions | None = None,
          on_ready: Callable[[SimServer], None] = lambda _s: None) -> None:
    """`cli.py serve-sim` as a library call: serve on host:port until interrupted (or until
    `server.httpd.shutdown()` from another thread); `on_ready` hears the bound server first.
    ValueError for bad options or an address that cannot be listened on; the socket is closed
    whatever ends it (a KeyboardInterrupt is re-raised after)."""
    try:
        server = SimServer(host, port, options)
    except OSError as exc:
        raise ValueError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        on_ready(server)
        server.serve_forever()
    finally:
        server.httpd.server_close()
