"""Estimated cost of model calls: a small table of list prices the user can extend.

Prices are US dollars per one million tokens, input and output, as published by the
providers when this table was written; they change, so a run's cost is an *estimate*, and a
user with other models or negotiated prices supplies a YAML or JSON file (path in the
`KMC_PRICES` environment variable, or passed to `load_prices`) that adds to or overrides
the table:

    gpt-4o: {input: 2.50, output: 10.00}
    my-vllm-model: [0.0, 0.0]

A model name matches an entry exactly, else the longest entry it extends with "-" (so
"gpt-4o-2024-08-06" prices as "gpt-4o", never as a shorter unrelated key); a provider prefix
("openai/") is ignored. A model with no entry has an unknown cost (None), never zero, so a
missing price is visible rather than silently free. The simulated model costs nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

PRICES_ENV = "KMC_PRICES"


@dataclass(frozen=True)
class Price:
    """Dollars per 1M tokens."""

    input_per_m: float
    output_per_m: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_m + completion_tokens * self.output_per_m) / 1_000_000


DEFAULT_PRICES: dict[str, Price] = {
    "simulated-kernel-writer-v1": Price(0.0, 0.0),
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "o3-mini": Price(1.10, 4.40),
    "o4-mini": Price(1.10, 4.40),
    "deepseek-chat": Price(0.27, 1.10),
    "deepseek-reasoner": Price(0.55, 2.19),
}


class PriceFileError(ValueError):
    """A price file that cannot be read or has a malformed entry (one-line message)."""


def _parse_entry(name: str, value: object, path: Path) -> Price:
    if isinstance(value, dict) and set(value) == {"input", "output"}:
        pair = (value["input"], value["output"])
    elif isinstance(value, (list, tuple)) and len(value) == 2:
        pair = (value[0], value[1])
    else:
        raise PriceFileError(f"price file {path}: entry {name!r} must be {{input: X, output: Y}} or [X, Y] "
                             "(dollars per 1M tokens)")
    try:
        inp, out = float(pair[0]), float(pair[1])
    except (TypeError, ValueError):
        raise PriceFileError(f"price file {path}: entry {name!r} has a non-numeric price") from None
    if inp < 0 or out < 0:
        raise PriceFileError(f"price file {path}: entry {name!r} has a negative price")
    return Price(inp, out)


def load_prices(path: str | Path | None = None) -> dict[str, Price]:
    """The default table updated by the file at `path`, or at $KMC_PRICES when `path` is None."""
    table = dict(DEFAULT_PRICES)
    chosen = path if path is not None else os.environ.get(PRICES_ENV) or None
    if chosen is None:
        return table
    p = Path(chosen)
    try:
        text = p.read_text()
    except OSError as exc:
        raise PriceFileError(f"cannot read price file {p}: {exc.strerror or exc}") from None
    try:
        if p.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:  # noqa: BLE001 - json and yaml raise different types; both become one line
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PriceFileError(f"cannot parse price file {p}: {first}") from None
    if not isinstance(data, dict):
        raise PriceFileError(f"price file {p} must map model names to prices")
    for name, value in data.items():
        table[str(name)] = _parse_entry(str(name), value, p)
    return table


def price_for(model: str, table: dict[str, Price] | None = None) -> Price | None:
    table = DEFAULT_PRICES if table is None else table
    name = model.split("/", 1)[1] if "/" in model else model
    for candidate in (model, name):
        if candidate in table:
            return table[candidate]
    matches = [k for k in table if name.startswith(k + "-")]
    return table[max(matches, key=len)] if matches else None


def estimate_cost(model: str, prompt_tokens: int, completion_tokens: int,
                  table: dict[str, Price] | None = None) -> float | None:
    """Dollars, or None when the model has no price (unknown is not free)."""
    price = price_for(model, table)
    return None if price is None else price.cost(prompt_tokens, completion_tokens)
