"""The response cache key, and replaying a recorded run's responses with no network.

A response is identified by what determines it: the endpoint's model, the messages (by
hash), the sampling parameters (temperature, max_tokens), the seed and the sample index.
The sample index and seed are part of the key so that distinct samples of one prompt stay
distinct (a key of messages and temperature alone would hand every sample the first
answer), and max_tokens is, because a token budget caps it and a capped answer differs.

`ReplayClient` is a ModelClient that answers each Request from a recorded run's store
(`calls` table) by that key and never opens a connection. It is given to an ordinary
Ledger, so a replayed response is charged exactly as a live one (its recorded tokens), and a
replay's budget accounting, candidates, verdicts and summary equal the original's. A request
the recorded run never made is a `ReplayMiss`: replay is exact or it stops, it does not guess.
A recorded failure is replayed as the same failure (same error text, same charge).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from modelio.read_only import read_only_uri
from modelio.tokens import count_tokens
from modelio.types import Completion, Message, Request


@dataclass(frozen=True)
class CallKey:
    model: str
    messages_hash: str
    temperature: float | None
    max_tokens: int | None
    seed: int | None
    sample_index: int | None


def call_key(model: str, request: Request) -> CallKey:
    return CallKey(model, request.messages_hash(), float(request.temperature), request.max_tokens, request.seed,
                   request.sample_index)


def _row_key(row: sqlite3.Row) -> CallKey:
    temperature = row["temperature"]
    return CallKey(row["model"] or "", row["messages_hash"], None if temperature is None else float(temperature),
                   row["max_tokens"], row["seed"], row["sample_index"])


def _count_prompt_tokens(messages: tuple[Message, ...]) -> int:
    return count_tokens("\n\n".join(m.content for m in messages))


class ReplayMiss(LookupError):
    """The replayed run asked something the recorded run never asked."""


class ReplayedFailure(RuntimeError):
    """A call that failed in the recorded run fails the same way on replay.

    The ledger reads `recorded_error` (the original row's error text) and
    `completion_tokens` (what the endpoint had produced), so the charge and the row match."""

    def __init__(self, recorded_error: str, completion_tokens: int, retries: int):
        super().__init__(recorded_error)
        self.recorded_error = recorded_error
        self.completion_tokens = completion_tokens
        self.retries = retries
        self.cached = True


def _open_read_only(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(read_only_uri(path), uri=True)
    db.row_factory = sqlite3.Row
    return db


class ReplayClient:
    """Answers Requests from a recorded store.sqlite; thread-safe; makes no HTTP requests."""

    def __init__(self, store_path: str | Path, model: str | None = None, simulated: bool | None = None):
        self.store_path = Path(store_path)
        if not self.store_path.is_file():
            raise FileNotFoundError(f"no recorded run store at {self.store_path}")
        db = _open_read_only(self.store_path)
        try:
            rows = db.execute("SELECT * FROM calls ORDER BY method, task, repeat, call_index").fetchall()
            meta = {r["key"]: json.loads(r["value"]) for r in db.execute("SELECT key, value FROM meta")}
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{self.store_path} is not a run store: {exc}") from None
        finally:
            db.close()
        models = [r["model"] for r in rows if r["model"]]
        # The caller passes what the run folder's config.json recorded (results/run_folder.py);
        # a bare store falls back to its most frequent model and its own `simulated` flag.
        self.model = model or (max(set(models), key=models.count) if models else "")
        self.simulated = bool(simulated if simulated is not None else meta.get("simulated", False))
        self._rows: dict[CallKey, sqlite3.Row] = {}
        for r in rows:  # first row wins: a cache answers one key with one response
            self._rows.setdefault(_row_key(r), r)
        if meta.get("prompt_counting") == "count_tokens":
            # The recorded client counted prompts exactly (the simulated model's rule), so the
            # ledger sized every request with it; the replay must size them the same way.
            self.count_prompt_tokens = _count_prompt_tokens
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._rows)

    def complete(self, request: Request) -> Completion:
        key = call_key(self.model, request)
        row = self._rows.get(key)
        with self._lock:
            if row is None:
                self.misses += 1
            else:
                self.hits += 1
        if row is None:
            raise ReplayMiss(f"the recorded run {self.store_path.parent} has no response for this request "
                             f"(model {key.model}, messages {key.messages_hash[:12]}, temperature {key.temperature}, "
                             f"max_tokens {key.max_tokens}, seed {key.seed}, sample {key.sample_index}); "
                             "replay needs the same tasks, methods, options, budget and seed")
        retries = int(row["retries"]) if "retries" in row.keys() else 0
        if row["error"]:
            raise ReplayedFailure(row["error"], int(row["completion_tokens"]), retries)
        return Completion(text=row["response"], prompt_tokens=int(row["prompt_tokens"]),
                          completion_tokens=int(row["completion_tokens"]), latency_s=0.0, cached=True,
                          model=self.model, retries=0)
