"""The price table, its user extension, and the dry-run estimate's arithmetic."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from modelio.dryrun import estimate, first_prompt_tokens
from modelio.prices import DEFAULT_PRICES, Price, PriceFileError, estimate_cost, load_prices, price_for
from modelio.tokens import count_tokens
from modelio.types import Message


def test_price_lookup_exact_longest_prefix_provider_prefix_and_unknown() -> None:
    assert price_for("gpt-4o") == Price(2.50, 10.00)
    assert price_for("gpt-4o-mini-2024-07-18") == DEFAULT_PRICES["gpt-4o-mini"]  # not the shorter gpt-4o
    assert price_for("gpt-4o-2024-08-06") == DEFAULT_PRICES["gpt-4o"]
    assert price_for("openai/gpt-4.1") == DEFAULT_PRICES["gpt-4.1"]
    assert price_for("gpt-4oo") is None and price_for("llama-3-70b") is None
    assert estimate_cost("llama-3-70b", 10, 10) is None  # unknown is not free
    assert estimate_cost("gpt-4o", 1_000_000, 100_000) == pytest.approx(2.50 + 1.00)


def test_user_price_file_extends_and_overrides_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    yml = tmp_path / "prices.yaml"
    yml.write_text("my-vllm-model: {input: 0.1, output: 0.2}\ngpt-4o: [1, 4]\n")
    table = load_prices(yml)
    assert table["my-vllm-model"] == Price(0.1, 0.2) and table["gpt-4o"] == Price(1.0, 4.0)
    assert table["gpt-4o-mini"] == DEFAULT_PRICES["gpt-4o-mini"]
    js = tmp_path / "prices.json"
    js.write_text(json.dumps({"x-model": {"input": 3, "output": 6}}))
    monkeypatch.setenv("KMC_PRICES", str(js))
    assert load_prices()["x-model"] == Price(3.0, 6.0)


@pytest.mark.parametrize("text,match", [("m: 3\n", "must be"), ("m: [1, -2]\n", "negative"),
                                        ("m: {input: a, output: 1}\n", "non-numeric"), ("- 1\n", "must map"),
                                        ("m: [1, 2\n", "cannot parse")])
def test_bad_price_files_are_one_line_errors(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(PriceFileError, match=match) as info:
        load_prices(path)
    assert "\n" not in str(info.value)


class OneCallMethod:
    """A method whose first prompt is known exactly."""

    name = "fixed"

    def run(self, task, ctx) -> None:
        while True:
            ctx.ask([Message("system", "s" * 400), Message("user", f"write {task.id}" + "u" * 396)], temperature=1.0,
                    role="generator")


class NeverCalls:
    name = "silent"

    def run(self, task, ctx) -> None:
        return None


class View:
    def __init__(self, task_id: str) -> None:
        self.id = task_id


def test_first_prompt_is_captured_without_a_model() -> None:
    expected = count_tokens("s" * 400 + "\n\n" + "write ab" + "u" * 396)
    assert first_prompt_tokens(OneCallMethod(), View("ab"), "nvidia", 10) == expected
    assert first_prompt_tokens(NeverCalls(), View("ab"), "nvidia", 10) is None


def test_dry_run_estimate_arithmetic_per_budget_unit() -> None:
    views = [View("ab"), View("cd")]
    prompt = first_prompt_tokens(OneCallMethod(), views[0], "nvidia", 1)
    table = {"m": Price(1.0, 2.0)}
    calls = estimate(50, "calls", {"fixed": OneCallMethod(), "silent": NeverCalls()}, views, 3, "nvidia", "m", False,
                     completion_tokens=100, prices=table)
    fixed = calls.methods[0]
    assert (fixed.units, fixed.calls, fixed.input_tokens, fixed.output_tokens) == (6, 300, 300 * prompt, 300 * 100)
    assert fixed.cost_usd == pytest.approx((300 * prompt * 1.0 + 300 * 100 * 2.0) / 1e6)
    assert calls.methods[1].calls == 0 and calls.calls == 300
    out = estimate(1000, "output_tokens", {"fixed": OneCallMethod()}, views, 1, "nvidia", "m", False,
                   completion_tokens=300, prices=table)
    assert out.calls == 2 * math.ceil(1000 / 300) and out.output_tokens == 2 * 1000
    total = estimate(5000, "total_tokens", {"fixed": OneCallMethod()}, views, 1, "nvidia", "m", False,
                     completion_tokens=300, prices=table)
    n = math.ceil(5000 / (prompt + 300))
    assert total.calls == 2 * n and total.input_tokens + total.output_tokens == 2 * 5000
    unknown = estimate(5, "calls", {"fixed": OneCallMethod()}, views, 1, "nvidia", "nope", False, prices=table)
    assert unknown.cost_usd is None and "unknown" in unknown.format()
    sim = estimate(5, "calls", {"fixed": OneCallMethod()}, views, 1, "nvidia", "", True, prices=table)
    assert sim.cost_usd == 0.0 and "SIMULATED" in sim.format()
