"""The model-layer records and the one protocol every model client implements."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True)
class Request:
    """One model call. `sample_index` and `seed` keep distinct samples of one prompt distinct
    (and a cache keyed on them exact), which plain (messages, temperature) keys would not."""

    messages: tuple[Message, ...]
    temperature: float = 1.0
    max_tokens: int | None = None
    seed: int = 0
    sample_index: int = 0
    json_mode: bool = False
    # Who asks, never sent and no part of any key: the call's role in its method ("generator",
    # "reflector", ...) and its unit (method, task, repeat), set by the ledger. A replay of a run
    # recorded by another version matches calls by them (modelio/replay.py).
    role: str = ""
    unit: tuple[str, str, int] | None = None

    def messages_hash(self) -> str:
        blob = json.dumps([asdict(m) for m in self.messages], sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()

    def prompt_text(self) -> str:
        return "\n\n".join(m.content for m in self.messages)


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float = 0.0
    cached: bool = False
    model: str = ""
    retries: int = 0  # transport retries (429, 5xx, timeouts, dropped connections) before this answer

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class ModelClient(Protocol):
    """Anything that answers a Request with a Completion (a real endpoint or the simulator)."""

    model: str
    simulated: bool

    def complete(self, request: Request) -> Completion: ...
