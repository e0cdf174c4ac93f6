"""Chat LLM clients for planning and summaries: Bedrock Converse, OpenAI-compatible, LiteLLM.

Each provider module is imported only when it is built, so nothing here pulls in boto3, httpx
or litellm at import time.
"""

from __future__ import annotations

from typing import Any

from cairn.core.errors import ConfigError
from cairn.ports.llm.base import ChatMessage, LLMClient

__all__ = ["ChatMessage", "LLMClient", "build_llm"]


def build_llm(provider: str, model: str, **options: Any) -> LLMClient:
    """``provider`` is bedrock | openai | litellm; ``options`` go to the client's constructor
    (bedrock: region, endpoint_url, client; openai: base_url, api_key; all: timeout_s,
    max_tokens, temperature)."""
    if provider == "bedrock":
        from cairn.ports.llm.bedrock import BedrockLLM

        return BedrockLLM(model, **options)
    if provider == "openai":
        from cairn.ports.llm.openai_compat import OpenAICompatLLM

        return OpenAICompatLLM(model, **options)
    if provider == "litellm":
        from cairn.ports.llm.litellm_client import LiteLLMClient

        return LiteLLMClient(model, **options)
    raise ConfigError(f"unknown LLM provider {provider!r}; available: bedrock, openai, litellm")
