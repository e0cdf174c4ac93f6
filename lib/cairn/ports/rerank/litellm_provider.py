"""Rerank through LiteLLM (``litellm.rerank``): any provider LiteLLM reaches.

``litellm`` is imported inside the first call, never at module import: it costs seconds
(benchmarks/README.md, import times), which must not land on the cold start of the rerank function when another
reranker is configured. ``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set before that import so
LiteLLM does not fetch its price list over the network.

``model`` is LiteLLM's ``provider/model`` name (``cohere/rerank-v3.5``,
``together_ai/...``, ``voyage/rerank-2``, ...); ``api_base`` points it at a
self-hosted or proxy endpoint. LiteLLM's own retries are switched off; the base's backoff
retries rate limits, 5xx errors, timeouts and connection errors.
"""

from __future__ import annotations

from typing import Any

from cairn.core.errors import ConfigError, RerankError
from cairn.core.retry import is_retryable_status
from cairn.ports.rerank.base import Reranker, scores_from_indexed, with_retries

_RETRYABLE_NAMES = frozenset({
    "RateLimitError", "InternalServerError", "ServiceUnavailableError", "APIConnectionError", "Timeout",
    "BadGatewayError",
})


def _import_litellm() -> Any:
    from cairn.ports.llm.litellm_client import load_litellm

    return load_litellm("the LiteLLM reranker")


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


class LiteLLMReranker(Reranker):
    """``litellm.rerank`` behind the cairn ``Reranker`` interface."""

    def __init__(
        self,
        *,
        model: str,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 10.0,
        max_retries: int = 2,
        backoff_s: float = 0.25,
        extra: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.name = f"litellm:{model}"
        super().__init__(max_tokens=max_tokens)
        if not model:
            raise ConfigError("litellm reranker: model is required (e.g. 'cohere/rerank-v3.5')")
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_retries = max(0, int(max_retries))
        self.backoff_s = float(backoff_s)
        self.extra = dict(extra or {})

    def _score(self, query: str, documents: list[str]) -> list[float]:
        litellm = _import_litellm()
        response = with_retries(
            lambda: self._call(litellm, query, documents), max_retries=self.max_retries, backoff_s=self.backoff_s
        )
        results = _field(response, "results") or []
        pairs = ((_field(r, "index"), _field(r, "relevance_score")) for r in results)
        return scores_from_indexed(pairs, len(documents), who=self.name)

    def _call(self, litellm: Any, query: str, documents: list[str]) -> Any:
        kwargs: dict[str, Any] = {**self.extra, "timeout": self.timeout_s, "num_retries": 0}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        try:
            return litellm.rerank(
                model=self.model, query=query, documents=documents, top_n=len(documents),
                return_documents=False, **kwargs,
            )
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            retryable = type(exc).__name__ in _RETRYABLE_NAMES or is_retryable_status(status)
            raise RerankError(
                f"{self.name}: litellm.rerank failed: {type(exc).__name__}: {str(exc)[:300]}",
                retryable=retryable,
                details={"status": status},
            ) from exc
