"""Choosing the model client: the simulated model when no endpoint is configured, else an
OpenAI-compatible endpoint (openai SDK, imported only then)."""

from __future__ import annotations

import os
import time
from typing import Any

from llm.tokens import count_tokens
from llm.types import Completion, ModelClient, Request


class EndpointUnreachable(RuntimeError):
    pass


class OpenAICompatibleClient:
    simulated = False

    def __init__(self, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 120.0,
                 max_retries: int = 5):
        try:
            import openai
        except ImportError:
            raise RuntimeError("the openai package is needed for a real endpoint: pip install openai") from None
        self.model = model
        self.base_url = base_url
        self._openai = openai
        self._client = openai.OpenAI(base_url=base_url, api_key=os.environ.get(api_key_env) or "not-needed",
                                     timeout=timeout_s, max_retries=max_retries)

    def check_reachable(self) -> None:
        try:
            self._client.with_options(max_retries=0, timeout=10).models.list()
        except self._openai.APIConnectionError as exc:
            raise EndpointUnreachable(f"model endpoint {self.base_url} is unreachable: {exc}") from None
        except self._openai.APIStatusError:
            pass  # reachable; /models may be unsupported or need other auth

    def complete(self, request: Request) -> Completion:
        kwargs: dict[str, Any] = {"model": self.model, "temperature": request.temperature, "seed": request.seed,
                                  "messages": [{"role": m.role, "content": m.content} for m in request.messages]}
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        if request.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        started = time.perf_counter()
        response = self._client.chat.completions.create(**kwargs)
        text = response.choices[0].message.content or ""
        usage = response.usage
        return Completion(
            text=text,
            prompt_tokens=usage.prompt_tokens if usage else count_tokens(request.prompt_text()),
            completion_tokens=usage.completion_tokens if usage else count_tokens(text),
            latency_s=time.perf_counter() - started, cached=False, model=self.model,
        )


def make_client(base_url: str | None, model: str | None, api_key_env: str, timeout_s: float, max_retries: int,
                sim_params: dict[str, Any] | None = None) -> ModelClient:
    if base_url is None:
        from llm.simulated import SimParams, SimulatedModel

        return SimulatedModel(SimParams(**(sim_params or {})))
    if not model:
        raise ValueError("--model is required with --base-url")
    client = OpenAICompatibleClient(base_url, model, api_key_env, timeout_s, max_retries)
    client.check_reachable()
    return client
