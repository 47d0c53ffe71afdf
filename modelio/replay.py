"""The response cache key, and replaying a recorded run's responses with no network.

A response is identified by what determines it: the endpoint's model, the messages (by
hash), the sampling parameters (temperature, max_tokens), the seed and the sample index.
The sample index and seed are part of the key so that distinct samples of one prompt stay
distinct (a key of messages and temperature alone would hand every sample the first
answer), and max_tokens is, because a token budget caps it and a capped answer differs.

`ReplayClient` is a ModelClient that answers each Request from a recorded run's store
(its `calls`, read once through record/recorded.py `recorded_calls`) by that key and never
opens a connection. It is given to an ordinary
Ledger, so a replayed response is charged exactly as a live one (its recorded tokens), and a
replay's budget accounting, candidates, verdicts and summary equal the original's. A request
the recorded run never made is a `ReplayMiss`: replay is exact or it stops, it does not guess.
A recorded failure is replayed as the same failure (same error text, same charge).

Across versions (`positional`, what an exact replay asks for): a later version of the toolkit
may word its prompts differently (a template edited), so the recorded run's requests no longer
hash alike. The reply recorded for the n-th call of a unit is then the answer to the n-th call
of the replayed unit, provided that call has the same role and the same sampling parameters
(temperature, max_tokens, seed, sample index); only the prompt's text may differ. This keeps
every decision the recorded run made: the replies are the recorded ones, and the evaluations
(replayed by candidate source) follow from them. Prompts answered so are counted
(`differed`) and the run's log says how many. Anything else (a call the recorded unit never
made, fewer calls than it made, another role or other parameters at a position) is a
`ReplayMiss` in one line naming both versions and the first place the calls part, with a short
excerpt of where the prompts' texts first differ. A `--rejudge` replay matches by hash only: its
verdicts are new, and a prompt that differs may be one that a changed verdict changed.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelio.tokens import count_tokens
from modelio.types import Completion, Message, Request
from record.recorded import CallRow, recorded_calls


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


def _row_key(row: CallRow) -> CallKey:
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


@dataclass(frozen=True)
class DifferedPrompt:
    """Where a replayed prompt first differs from the one recorded at the same call."""

    unit: tuple[str, str, int]
    call_index: int
    where: str  # "message 1, character 812: recorded '...', now '...'"

    def __str__(self) -> str:
        return f"{_unit_name(self.unit)} call {self.call_index} ({self.where})"


def _unit_name(unit: tuple[str, str, int]) -> str:
    return f"{unit[0]}/{unit[1]}/repeat {unit[2]}"


def _excerpt(text: str, at: int, before: int = 24, after: int = 40) -> str:
    """`text` around character `at`, on one line (newlines and quotes escaped)."""
    lo, hi = max(0, at - before), min(len(text), at + after)
    body = text[lo:hi].encode("unicode_escape").decode("ascii").replace("'", "\\'")
    return f"'{'...' if lo else ''}{body}{'...' if hi < len(text) else ''}'"


def first_difference(recorded: list[dict[str, Any]], now: list[dict[str, Any]]) -> str:
    """Where two prompts (lists of {role, content}) first differ, with a short excerpt of each."""
    for k in range(max(len(recorded), len(now))):
        if k >= len(recorded):
            return f"message {k} is new: {_excerpt(str(now[k].get('content', '')), 0)}"
        if k >= len(now):
            return f"recorded message {k} is gone: {_excerpt(str(recorded[k].get('content', '')), 0)}"
        a, b = recorded[k], now[k]
        if a.get("role") != b.get("role"):
            return f"message {k} is from {b.get('role')!r}, recorded from {a.get('role')!r}"
        x, y = str(a.get("content", "")), str(b.get("content", ""))
        if x != y:
            at = len(os.path.commonprefix([x, y]))
            return f"message {k}, character {at}: recorded {_excerpt(x, at)}, now {_excerpt(y, at)}"
    return "the same text"


def _messages(request: Request) -> list[dict[str, Any]]:
    return [{"role": m.role, "content": m.content} for m in request.messages]


def _recorded_messages(row: CallRow) -> list[dict[str, Any]]:
    try:
        messages = json.loads(row["messages"] or "[]")
    except (TypeError, ValueError):
        return []
    return messages if isinstance(messages, list) else []


class ReplayClient:
    """Answers Requests from a recorded store.sqlite; thread-safe; makes no HTTP requests.

    `positional`: match a request whose text differs by its unit and call index (module
    docstring); otherwise by key only. `versions`: (the recorded run's version, this one's), as
    record.provenance labels them, named by every miss."""

    def __init__(self, store_path: str | Path, model: str | None = None, simulated: bool | None = None,
                 positional: bool = False, versions: tuple[str, str] | None = None):
        self.store_path = Path(store_path)
        recorded = recorded_calls(self.store_path)
        rows, submitted, meta = recorded.calls, recorded.submissions, recorded.meta
        models = [r["model"] for r in rows if r["model"]]
        # The caller passes what the run folder's config.json recorded (record/run_folder.py);
        # a bare store falls back to its most frequent model and its own `simulated` flag.
        self.model = model or (max(set(models), key=models.count) if models else "")
        self.simulated = bool(simulated if simulated is not None else meta.get("simulated", False))
        self.positional = positional
        self.versions = versions
        self._rows: dict[CallKey, CallRow] = {}
        self._at: dict[tuple[str, str, int, int], CallRow] = {}  # (method, task, repeat, call index)
        self._unit_calls: dict[tuple[str, str, int], int] = {}
        for r in rows:  # first row wins: a cache answers one key with one response
            self._rows.setdefault(_row_key(r), r)
            self._at[(r["method"], r["task"], int(r["repeat"]), int(r["call_index"]))] = r
            unit = (r["method"], r["task"], int(r["repeat"]))
            self._unit_calls[unit] = self._unit_calls.get(unit, 0) + 1
        self._submitted: dict[tuple[str, str, int], list[tuple[str, int]]] = {}
        for r in submitted:
            self._submitted.setdefault((r["method"], r["task"], int(r["repeat"])), []).append(
                (str(r["source_hash"]), int(r["calls_used"])))
        if meta.get("prompt_counting") == "count_tokens":
            # The recorded client counted prompts exactly (the simulated model's rule), so the
            # ledger sized every request with it; the replay must size them the same way.
            self.count_prompt_tokens = _count_prompt_tokens
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.differed = 0  # calls answered by position whose prompt text differs from the recorded one
        self.first_differed: DifferedPrompt | None = None

    def __len__(self) -> int:
        return len(self._rows)

    def complete(self, request: Request) -> Completion:
        row = self._match(request)
        retries = int(row.get("retries", 0))
        if row["error"]:
            raise ReplayedFailure(row["error"], int(row["completion_tokens"]), retries)
        return Completion(text=row["response"], prompt_tokens=int(row["prompt_tokens"]),
                          completion_tokens=int(row["completion_tokens"]), latency_s=0.0, cached=True,
                          model=self.model, retries=0)

    def _match(self, request: Request) -> CallRow:
        key = call_key(self.model, request)
        if self.positional and request.unit is not None:
            return self._by_position(request, key)
        row = self._rows.get(key)
        if row is not None:
            with self._lock:
                self.hits += 1
            return row
        with self._lock:
            self.misses += 1
        where = ""
        if request.unit is not None:
            at = self._at.get((*request.unit, request.sample_index))
            where = (f"; at {_unit_name(request.unit)} call {request.sample_index} the prompts differ: "
                     + first_difference(_recorded_messages(at), _messages(request)) if at is not None
                     else f"; the recorded run made no call {request.sample_index} in {_unit_name(request.unit)}")
        raise ReplayMiss(f"the recorded run {self.store_path.parent} has no response for this request "
                         f"(model {key.model}, messages {key.messages_hash[:12]}, temperature {key.temperature}, "
                         f"max_tokens {key.max_tokens}, seed {key.seed}, sample {key.sample_index})"
                         f"{self._versions_text()}{where}; replay needs the same tasks, methods, options, budget "
                         "and seed")

    def _by_position(self, request: Request, key: CallKey) -> CallRow:
        assert request.unit is not None
        index = request.sample_index
        row = self._at.get((*request.unit, index))
        if row is None:
            made = self._unit_calls.get(request.unit, 0)
            self._miss(request.unit, f"call {index}", f"this version makes call {index} ({request.role or 'no role'}) and the "
                                            f"recorded unit made {made} call{'s' if made != 1 else ''}; it asks "
                                            + _excerpt(request.prompt_text(), 0))
        assert row is not None
        recorded = _row_key(row)
        differ = first_difference(_recorded_messages(row), _messages(request))
        if request.role and row["role"] != request.role:
            self._miss(request.unit, f"call {index}", f"a {request.role} call here and a {row['role']} call in the recorded "
                                            f"run; the prompts first differ at {differ}")
        params = [(name, getattr(recorded, name), getattr(key, name))
                  for name in ("model", "temperature", "max_tokens", "seed") if getattr(recorded, name) != getattr(key, name)]
        if params:
            self._miss(request.unit, f"call {index}", "it asks " + ", ".join(f"{n} {now} (recorded {was})" for n, was, now in params)
                       + (f"; the prompts first differ at {differ}" if key.messages_hash != recorded.messages_hash else ""))
        with self._lock:
            self.hits += 1
            if key.messages_hash != recorded.messages_hash:
                self.differed += 1
                if self.first_differed is None:
                    self.first_differed = DifferedPrompt(request.unit, index, differ)
        return row

    def check_unit(self, unit: tuple[str, str, int], calls: int, submissions: list[tuple[str, int]]) -> None:
        """A replayed unit ended after `calls` calls having submitted `submissions` ((source hash,
        calls used) in order). In a positional replay, a ReplayMiss when the recorded unit made
        more calls (this version stops sooner) or submitted otherwise: its replies and verdicts
        were the recorded ones, so the method's own rules decide otherwise now."""
        if not self.positional:
            return
        made = self._unit_calls.get(unit, 0)
        if calls < made:
            row = self._at.get((*unit, calls))
            asked = f": call {calls} ({row['role']}) asked " + _excerpt(
                "\n\n".join(str(m.get("content", "")) for m in _recorded_messages(row)), 0) if row is not None else ""
            self._miss(unit, f"call {calls}", f"this version ended the unit after {calls} call{'s' if calls != 1 else ''} "
                                              f"and the recorded unit made {made}{asked}")
        recorded = self._submitted.get(unit, [])
        if submissions != recorded:
            def listed(subs: list[tuple[str, int]]) -> str:
                return ", ".join(f"{h[:10]} after call {c}" for h, c in subs) or "nothing"

            self._miss(unit, "", f"with the recorded replies and verdicts this version submits "
                                                f"{listed(submissions)}; the recorded run submitted {listed(recorded)} "
                                                "(the method's rules decide otherwise)", lead="this version decides otherwise at")

    def _versions_text(self) -> str:
        return f" (recorded by {self.versions[0]}, replayed by {self.versions[1]})" if self.versions else ""

    def _miss(self, unit: tuple[str, str, int], where: str, what: str, lead: str = "the calls part at") -> None:
        with self._lock:
            self.misses += 1
            earlier = self.first_differed
        before = (f"; {self.differed} earlier prompt{'s' if self.differed != 1 else ''} differed, the first at {earlier}"
                  if earlier is not None else "")
        raise ReplayMiss(f"cannot replay {self.store_path.parent}{self._versions_text()}: {lead} "
                         f"{_unit_name(unit)}{' ' + where if where else ''}: {what}{before}")
