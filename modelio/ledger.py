"""The budget ledger: the single door every model call goes through.

Budgets are per (method, task, repeat) account and enforced here, identically for every
method (design invariant 1): a call that would overdraw is refused *before* it is sent by
raising `BudgetExhausted`, which is also how a method's loop ends. Every call is recorded
as it completes. On resume, an account finds its earlier calls by (account, call index)
and replays them instead of calling the model again, charged exactly as the live call was,
so a resumed run spends and sees what the uninterrupted run would have.

Failed calls (`charge_failed_calls`): a call that fails after the client's retries is
always recorded (its error and retries); it is charged one call, plus the completion tokens
the endpoint reports having produced, when it produced any, and otherwise only if the ledger
was made with `charge_failed_calls=True`. The default keeps an outage from eating a
method's budget while still charging any tokens that were really generated.

Token budgets that hold: a call is sent with `max_tokens` = the smaller of the caller's cap
(each method's per-call cap, GEAK-v1's 15000 / 5000 by default) and what the account has
left, so an endpoint that honours `max_tokens` never overdraws an `output_tokens` budget.
For `total_tokens` the prompt is counted *before* sending and the call is refused
(`BudgetExhausted`) when prompt plus at least one reply token cannot fit: exactly, when the
client counts prompts itself (`count_prompt_tokens`, as the simulated model does); otherwise
with a bound. The first call of an account is bounded by the prompt's UTF-8 bytes plus the
chat format's per-message overhead (a BPE token is never shorter than one byte); later calls
by the modelio/tokens estimate scaled by the largest ratio of reported to estimated prompt
tokens this account has seen, plus a 10% margin (never above the byte bound). The ratio is per
account, not per ledger, so the requests a unit sends never depend on other threads' timing,
which keeps runs, resumes and replays identical.

Thread safety: an Account may be called from several threads (a method that fans out); its
calls are serialised by a per-account lock, so the budget check, the call and its charge are
one step and two threads can never both pass the check for the last affordable call. Many
accounts run concurrently; the ledger's run-wide totals are guarded by their own lock; the
recorder (the run store) serialises its own writes.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from modelio.replay import ReplayMiss
from modelio.tokens import count_tokens
from modelio.types import Completion, Message, ModelClient, Request

BUDGET_UNITS = ("calls", "output_tokens", "total_tokens")
UNIT_ALIASES = {"tokens": "total_tokens"}


def resolve_unit(unit: str) -> str:
    unit = UNIT_ALIASES.get(unit, unit)
    if unit not in BUDGET_UNITS:
        raise ValueError(f"unknown budget unit {unit!r}; choose one of calls, tokens, output_tokens, total_tokens")
    return unit


class BudgetExhausted(Exception):
    """Raised before a call that the account cannot afford; ends the method's loop."""


class ModelCallFailed(RuntimeError):
    """The endpoint failed after its retries; recorded in the store, then raised."""


class ReplayDiverged(RuntimeError):
    """A resumed unit asked a different question than the recorded run at the same index."""


class CallRecorder(Protocol):
    def recorded_call(self, method: str, task: str, repeat: int, call_index: int) -> Any: ...

    def record_call(self, row: dict[str, Any]) -> None: ...


# The chat format's overhead per message and per reply (OpenAI's documented accounting is 4 and
# 3; chat templates of open models add up to about 8 per message), added to the prompt bound
# so that a total_tokens budget is not overdrawn by it.
TOKENS_PER_MESSAGE = 8
TOKENS_PER_REPLY = 3
CALIBRATION_MARGIN = 1.10


@dataclass
class Spend:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def used(self, unit: str) -> int:
        return {"calls": self.calls, "output_tokens": self.completion_tokens, "total_tokens": self.total_tokens}[unit]


@dataclass
class LedgerTotals:
    """Run-wide totals over every account of one ledger (a snapshot)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failed_calls: int = 0
    retries: int = 0
    replayed_calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Charge:
    """One call as the ledger charged it, told to `Ledger.on_charge`."""

    method: str
    task: str
    repeat: int
    call_index: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    failed: bool
    replayed: bool


def matched_eval_cap(budget: int, budget_unit: str) -> int | None:
    """GPU evaluations per unit that match a calls budget: one per two calls, at least 1.

    Why: GEAK-v1 spends exactly 2 calls and 1 evaluation per iteration, and Reflexion one
    evaluation per implementation call (every other call); direct prompting would evaluate
    every call's sample, twice the GPU compute at the same calls. Under this cap every method
    gets the same GPU evaluations as well as the same calls. None for a token budget: there is
    no call count to derive it from (summary.json says evaluations are then not matched)."""
    if budget_unit != "calls":
        return None
    return max(1, int(budget) // 2)


def stable_seed(*parts: Any) -> int:
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


class Account:
    def __init__(self, ledger: Ledger, method: str, task: str, repeat: int):
        self.ledger = ledger
        self.method, self.task, self.repeat = method, task, repeat
        self.spend = Spend()
        self.next_index = 0
        self.seed = stable_seed(ledger.run_seed, method, task, repeat)
        self.prompt_ratio: float | None = None  # largest reported/estimated prompt tokens seen; None: no call yet
        self.lock = threading.RLock()  # held for a whole call (module docstring); callers may nest it

    def remaining(self) -> int:
        return self.ledger.budget - self.spend.used(self.ledger.unit)

    def prompt_bound(self, messages: tuple[Message, ...]) -> int:
        """What the endpoint will count for this prompt at most (module docstring)."""
        exact = getattr(self.ledger.client, "count_prompt_tokens", None)
        if callable(exact):
            return int(exact(messages))
        text = "\n\n".join(m.content for m in messages)
        overhead = TOKENS_PER_MESSAGE * len(messages) + TOKENS_PER_REPLY
        by_bytes = len(text.encode()) + overhead
        if self.prompt_ratio is None:
            return by_bytes
        calibrated = math.ceil(count_tokens(text) * self.prompt_ratio * CALIBRATION_MARGIN) + overhead
        return min(by_bytes, calibrated)

    def _affordable_max_tokens(self, messages: tuple[Message, ...], max_tokens: int | None) -> int | None:
        unit, left = self.ledger.unit, self.remaining()
        if left <= 0:
            raise BudgetExhausted(f"{unit} budget of {self.ledger.budget} spent")
        if unit == "calls":
            return max_tokens
        if unit == "output_tokens":
            cap = left
        else:
            prompt = self.prompt_bound(messages)
            cap = left - prompt
            if cap < 1:
                raise BudgetExhausted(f"the prompt (up to {prompt} tokens) cannot fit in the {left} tokens left")
        return cap if max_tokens is None else min(max_tokens, cap)

    def _observe_prompt(self, request: Request, prompt_tokens: int) -> None:
        raw = count_tokens(request.prompt_text())
        if prompt_tokens > 0 and raw > 0:
            self.prompt_ratio = max(self.prompt_ratio or 0.0, prompt_tokens / raw)

    def complete(self, messages: list[Message] | tuple[Message, ...], *, temperature: float, role: str,
                 max_tokens: int | None = None, json_mode: bool = False) -> Completion:
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        messages = tuple(messages)
        with self.lock:
            request = Request(
                messages=messages, temperature=temperature, seed=self.seed, sample_index=self.next_index,
                json_mode=json_mode, max_tokens=self._affordable_max_tokens(messages, max_tokens), role=role,
                unit=(self.method, self.task, self.repeat),
            )
            recorded = self.ledger.recorder.recorded_call(self.method, self.task, self.repeat, self.next_index)
            if recorded is not None:
                completion = self._replay(recorded, request)
            else:
                completion = self._live(request, role)
            self.next_index += 1
            return completion

    def _replay(self, row: Any, request: Request) -> Completion:
        if row["messages_hash"] != request.messages_hash():
            raise ReplayDiverged(
                f"{self.method}/{self.task}/repeat {self.repeat}: call {self.next_index} differs from the recorded run")
        self._charge(int(row["charged"]), int(row["prompt_tokens"]), int(row["completion_tokens"]), replayed=True,
                     failed=bool(row["error"]))
        if row["error"]:
            raise ModelCallFailed(row["error"])
        self._observe_prompt(request, int(row["prompt_tokens"]))
        return Completion(text=row["response"], prompt_tokens=int(row["prompt_tokens"]),
                          completion_tokens=int(row["completion_tokens"]), latency_s=float(row["latency_s"] or 0.0),
                          cached=True, model=row["model"] or "")

    def _live(self, request: Request, role: str) -> Completion:
        started = time.perf_counter()
        row: dict[str, Any] = {
            "method": self.method, "task": self.task, "repeat": self.repeat, "call_index": self.next_index,
            "role": role, "messages_hash": request.messages_hash(),
            "messages": json.dumps([asdict(m) for m in request.messages]),
            "temperature": request.temperature, "max_tokens": request.max_tokens, "seed": request.seed,
            "sample_index": request.sample_index, "model": self.ledger.client.model,
        }
        try:
            completion = self.ledger.client.complete(request)
        except ReplayMiss:
            raise  # not a model failure: the replay does not match its recording, and the run must stop
        except Exception as exc:  # noqa: BLE001 - recorded, then raised as one clear error
            # A replayed failure carries the original run's error text, so the replay's row matches.
            error = (getattr(exc, "recorded_error", None) or f"{type(exc).__name__}: {exc}")[:2000]
            produced = int(getattr(exc, "completion_tokens", 0) or 0)
            retries = int(getattr(exc, "retries", 0) or 0)
            charged = 1 if (produced > 0 or self.ledger.charge_failed_calls) else 0
            row.update(response=None, prompt_tokens=0, completion_tokens=produced, latency_s=time.perf_counter() - started,
                       cached=int(bool(getattr(exc, "cached", False))), error=error, charged=charged, retries=retries)
            self.ledger.recorder.record_call(row)
            self._charge(charged, 0, produced, failed=True, retries=retries)
            raise ModelCallFailed(error) from exc
        row.update(response=completion.text, prompt_tokens=completion.prompt_tokens,
                   completion_tokens=completion.completion_tokens, latency_s=completion.latency_s,
                   cached=int(completion.cached), error=None, charged=1, retries=completion.retries)
        self.ledger.recorder.record_call(row)
        self._charge(1, completion.prompt_tokens, completion.completion_tokens, retries=completion.retries)
        self._observe_prompt(request, completion.prompt_tokens)
        return completion

    def _charge(self, calls: int, prompt_tokens: int, completion_tokens: int, *, failed: bool = False,
                retries: int = 0, replayed: bool = False) -> None:
        self.spend.calls += calls
        self.spend.prompt_tokens += prompt_tokens
        self.spend.completion_tokens += completion_tokens
        self.ledger._add_totals(calls, prompt_tokens, completion_tokens, failed, retries, replayed)
        if self.ledger.on_charge is not None:
            self.ledger.on_charge(Charge(self.method, self.task, self.repeat, self.next_index, calls, prompt_tokens,
                                         completion_tokens, failed, replayed))


class Ledger:
    """Opens accounts; holds the budget, its unit, the client and the recorder.

    `charge_failed_calls`: a call that fails after retries is always recorded; it is charged
    when the endpoint produced tokens, and otherwise only if this is set (default off, so an
    outage does not eat a method's budget). See the module docstring.
    """

    def __init__(self, client: ModelClient, recorder: CallRecorder, budget: int, unit: str = "calls",
                 run_seed: int = 0, charge_failed_calls: bool = False,
                 on_charge: Callable[[Charge], None] | None = None):
        if budget <= 0:
            raise ValueError("budget must be a positive integer")
        self.client = client
        self.recorder = recorder
        self.budget = budget
        self.unit = resolve_unit(unit)
        self.run_seed = run_seed
        self.charge_failed_calls = charge_failed_calls
        self.on_charge = on_charge  # told of every charge (live or replayed): the progress bar and the run log
        self._totals = LedgerTotals()
        self._lock = threading.Lock()

    def account(self, method: str, task: str, repeat: int) -> Account:
        return Account(self, method, task, repeat)

    def totals(self) -> LedgerTotals:
        """Charged calls and tokens over all accounts, plus failures, retries and resumed calls."""
        with self._lock:
            t = self._totals
            return LedgerTotals(t.calls, t.prompt_tokens, t.completion_tokens, t.failed_calls, t.retries,
                                t.replayed_calls)

    def _add_totals(self, calls: int, prompt_tokens: int, completion_tokens: int, failed: bool, retries: int,
                    replayed: bool) -> None:
        with self._lock:
            t = self._totals
            t.calls += calls
            t.prompt_tokens += prompt_tokens
            t.completion_tokens += completion_tokens
            t.failed_calls += int(failed)
            t.retries += retries
            t.replayed_calls += int(replayed)

