"""Anything LiteLLM reaches. ``litellm`` is imported on the first call, never at import time:
it costs seconds, which must not land on the cold start of retrieve, rerank or api."""

from __future__ import annotations

import os
import threading
from typing import Any

from cairn.core.errors import LLMError, require
from cairn.ports.llm.base import ChatMessage, LLMClient, retryable_status

_RETRYABLE = {
    "Timeout",
    "RateLimitError",
    "APIConnectionError",
    "ServiceUnavailableError",
    "InternalServerError",
}
_lock = threading.Lock()


def load_litellm(feature: str = "the LiteLLM LLM") -> Any:
    """``litellm``, imported once, on first use, with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` so that
    the import does not fetch a price list; :class:`~cairn.core.errors.MissingExtra` naming ``llm`` when
    it is not installed. Every LiteLLM client of cairn (LLM, embedder, reranker) loads it here."""
    with _lock:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        return require("litellm", extra="llm", feature=feature)


def _litellm() -> Any:
    return load_litellm()


class LiteLLMClient(LLMClient):
    provider = "litellm"

    def __init__(self, model: str, *, api_base: str | None = None, api_key: str | None = None, json_mode: bool = True, **options: Any) -> None:
        super().__init__(model, **options)
        self.api_base = api_base
        self.api_key = api_key
        self.json_mode = json_mode

    def _complete(self, messages: list[ChatMessage], system: str | None, timeout_s: float, json: bool) -> str:
        litellm = _litellm()
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": ([{"role": "system", "content": system}] if system else [])
            + [{"role": m.role, "content": m.content} for m in messages],
            "timeout": timeout_s,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "num_retries": 0,
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        if json and self.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        response = litellm.completion(**kwargs)
        usage = getattr(response, "usage", None)
        if usage is not None:
            self.count_usage(getattr(usage, "prompt_tokens", 0) or 0, getattr(usage, "completion_tokens", 0) or 0)
        text = response.choices[0].message.content
        if not isinstance(text, str) or not text.strip():
            raise self._error("returned no text", retryable=False)
        return text

    def _map_error(self, exc: Exception) -> LLMError:
        names = {cls.__name__ for cls in type(exc).__mro__}
        status = getattr(exc, "status_code", None)
        retryable = bool(names & _RETRYABLE) or (isinstance(status, int) and retryable_status(status))
        message = getattr(exc, "message", None) or str(exc)
        return self._error(f"{type(exc).__name__}: {message}", retryable=retryable)
