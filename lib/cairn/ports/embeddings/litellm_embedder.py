"""Any embedding model LiteLLM reaches (``litellm.embedding``): OpenAI, Azure, Cohere, Voyage,
Gemini, Bedrock, Ollama, any OpenAI-compatible server (``openai/<model>`` with ``base_url``)...

``litellm`` is imported on the first call, never at import time (it costs seconds and must not
land on a cold start), with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` so that importing it does not
reach the network. LiteLLM's own retries are off: rate limits, timeouts, connection errors and
5xx answers are retryable ``EmbeddingError``s that the ``Embedder`` base retries with backoff.

The dimension is a setting (LiteLLM cannot tell it before the first call); every answer is
checked against it. ``request_dimensions=True`` also sends it as ``dimensions`` (models that can
shorten their vectors: OpenAI text-embedding-3, Gemini, Titan v2...). Models that embed queries and
documents differently get the input type in their provider's spelling (see ``_INPUT_TYPE``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cairn.core.errors import ConfigError, EmbeddingError
from cairn.core.retry import RetryPolicy, is_retryable_status
from cairn.ports.embeddings.base import Embedder, InputType, normalize

_RETRYABLE = frozenset({"Timeout", "RateLimitError", "APIConnectionError", "ServiceUnavailableError", "InternalServerError"})
# provider prefix -> (parameter, {input type -> value})
_INPUT_TYPE: dict[str, tuple[str, dict[str, str]]] = {
    "cohere/": ("input_type", {"query": "search_query", "document": "search_document"}),
    "bedrock/cohere.": ("input_type", {"query": "search_query", "document": "search_document"}),
    "voyage/": ("input_type", {"query": "query", "document": "document"}),
    "gemini/": ("task_type", {"query": "RETRIEVAL_QUERY", "document": "RETRIEVAL_DOCUMENT"}),
    "vertex_ai/": ("task_type", {"query": "RETRIEVAL_QUERY", "document": "RETRIEVAL_DOCUMENT"}),
}


class _NoRetries(int):
    """Zero retries that LiteLLM passes on: it reads ``max_retries or DEFAULT_MAX_RETRIES``, so a
    plain 0 lets the openai SDK retry twice, unseen. Retries are the base's, counted, with backoff."""

    def __bool__(self) -> bool:
        return True


NO_SDK_RETRIES = _NoRetries(0)


def _litellm() -> Any:
    from cairn.ports.llm.litellm_client import load_litellm

    return load_litellm("the LiteLLM embedder")


def input_type_parameter(model: str) -> tuple[str, dict[str, str]] | None:
    """How ``model`` takes the query/document distinction, or None when it has none."""
    for prefix, spelling in _INPUT_TYPE.items():
        if model.startswith(prefix):
            return spelling
    return None


class LiteLLMEmbedder(Embedder):
    def __init__(
        self,
        model: str,
        *,
        dimension: int,
        base_url: str | None = None,
        api_key: str | None = None,
        batch_size: int = 96,
        request_dimensions: bool = False,
        timeout_s: float = 10.0,
        max_retries: int = 4,
        backoff_s: float = 0.25,
    ) -> None:
        if not model:
            raise ConfigError("the litellm embedder needs a model, e.g. openai/text-embedding-3-small")
        self.name = f"litellm:{model}"
        if not isinstance(dimension, int) or dimension < 1:
            raise ConfigError(f"{self.name}: dimension must be a positive whole number (the model's output size), got {dimension!r}")
        if batch_size < 1:
            raise ConfigError(f"{self.name}: batch_size must be at least 1, got {batch_size}")
        self.model = model
        self.dimension = dimension
        self.batch_size = batch_size
        self.base_url, self.api_key = base_url, api_key
        self.request_dimensions = request_dimensions
        self.timeout_s = timeout_s
        self.retry_policy = RetryPolicy.of_retries(max_retries, base_s=backoff_s)
        self._input_type = input_type_parameter(model)
        self.distinguishes_input_type = self._input_type is not None
        self.tokens = 0
        self.retries = 0

    def _embed(self, texts: list[str], input_type: InputType = "document") -> np.ndarray:
        litellm = _litellm()
        kwargs: dict[str, Any] = {"model": self.model, "input": [t or " " for t in texts],
                                  "timeout": self.timeout_s,
                                  "num_retries": 0, "max_retries": NO_SDK_RETRIES}
        if self.base_url:
            kwargs["api_base"] = self.base_url
        if self.api_key:
            kwargs["api_key"] = self.api_key
        if self.request_dimensions:
            kwargs["dimensions"] = self.dimension
        if self._input_type is not None:
            param, values = self._input_type
            kwargs[param] = values[input_type]
        try:
            response = litellm.embedding(**kwargs)
        except Exception as exc:
            raise self._map_error(exc) from exc
        return normalize(np.asarray(self._vectors(response, len(texts)), dtype=np.float32))

    def _vectors(self, response: Any, n: int) -> list[list[float]]:
        data = list(getattr(response, "data", None) or [])
        if len(data) != n:
            raise EmbeddingError(f"{self.name}: {len(data)} embeddings in the answer for {n} texts")
        rows: list[Any] = [None] * n
        for pos, item in enumerate(data):
            get = item.get if isinstance(item, dict) else lambda k, d=None, i=item: getattr(i, k, d)
            index = get("index", pos)
            rows[index if isinstance(index, int) and 0 <= index < n else pos] = get("embedding")
        if any(not isinstance(r, list) or not r for r in rows):
            raise EmbeddingError(f"{self.name}: an answer item has no embedding")
        usage = getattr(response, "usage", None)
        tokens = getattr(usage, "prompt_tokens", None) if usage is not None else None
        if isinstance(tokens, int):
            self.tokens += tokens
        return rows

    def _map_error(self, exc: Exception) -> EmbeddingError:
        names = {cls.__name__ for cls in type(exc).__mro__}
        status = getattr(exc, "status_code", None)
        retryable = bool(names & _RETRYABLE) or is_retryable_status(status)
        message = getattr(exc, "message", None) or str(exc)
        return EmbeddingError(f"{self.name}: {type(exc).__name__}: {message}", retryable=retryable,
                              details={"status": status} if isinstance(status, int) else None)
