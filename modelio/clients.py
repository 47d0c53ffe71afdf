"""Choosing the model client: the simulated model when no endpoint is configured, else an
OpenAI-compatible endpoint (modelio/openai_client.py; the openai SDK is imported only then).

An endpoint is checked once here, before the caller creates a run folder, so a configured
but unreachable endpoint fails fast with one line naming it and nothing is spent.
"""

from __future__ import annotations

from typing import Any

from modelio.openai_client import EndpointCallFailed, EndpointUnreachable, OpenAIClient
from modelio.types import ModelClient

__all__ = ["EndpointCallFailed", "EndpointUnreachable", "OpenAIClient", "make_client"]


def make_client(base_url: str | None, model: str | None, api_key_env: str = "OPENAI_API_KEY",
                timeout_s: float = 120.0, max_retries: int = 5, sim_params: dict[str, Any] | None = None,
                max_concurrency: int = 8, check: bool = True) -> ModelClient:
    if base_url is None:
        from modelio.simulated import SimParams, SimulatedModel

        return SimulatedModel(SimParams(**(sim_params or {})))
    if not model:
        raise ValueError("--model is required with --base-url")
    client = OpenAIClient(base_url, model, api_key_env=api_key_env, timeout_s=timeout_s, max_retries=max_retries,
                          max_concurrency=max_concurrency)
    if check:
        client.check_reachable()
    return client
