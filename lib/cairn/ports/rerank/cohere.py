"""The Cohere-style rerank API over httpx: Cohere, Jina, Voyage, TEI, vLLM and most self-hosted rerankers.

Request: ``POST {base_url}/v2/rerank`` (the path is configurable: Jina and Voyage use
``/v1/rerank``) with ``{"model", "query", "documents": [str, ...], "top_n"}``; ``top_n`` is
the number of documents sent, so every document comes back with a score.
Answer: ``{"results": [{"index", "relevance_score"}, ...]}`` in any order. Two common
variants are accepted as well: Voyage's ``{"data": [...]}`` and a bare list of results;
``"score"`` is accepted for ``"relevance_score"``.

The API key goes in ``Authorization: Bearer <key>`` (or in ``api_key_header`` as is, e.g.
``api-key`` for Azure); a self-hosted server may need none. 408, 429 and 5xx answers,
timeouts and connection errors are retried with exponential backoff (``Retry-After`` is
honoured); anything else fails at once. Errors become ``RerankError`` with ``retryable``
set, and the base class then keeps the vector scores.
"""

from __future__ import annotations

import os
from typing import Any

import httpx

from cairn.core.errors import ConfigError, RerankError
from cairn.core.retry import is_retryable_status, parse_retry_after
from cairn.core.tls import verified_context
from cairn.ports.rerank.base import Reranker, scores_from_indexed, with_retries

DEFAULT_PATH = "/v2/rerank"
API_KEY_ENV = "CAIRN_RERANK_API_KEY"


def _retry_after(response: httpx.Response) -> float | None:
    return parse_retry_after(response.headers.get("retry-after"))


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict):
        for key in ("message", "detail", "error"):
            if body.get(key):
                return str(body[key])[:300]
    return str(body)[:300]


def _results_of(body: Any, who: str) -> list[Any]:
    if isinstance(body, list):
        return body
    if isinstance(body, dict):
        for key in ("results", "data"):
            if isinstance(body.get(key), list):
                return body[key]
    raise RerankError(f"{who}: answer has no 'results' list: {str(body)[:200]}")


def _pair(item: Any) -> tuple[Any, Any]:
    if not isinstance(item, dict):
        return None, None
    score = item.get("relevance_score", item.get("score"))
    return item.get("index"), score


class CohereReranker(Reranker):
    """A reranker speaking Cohere's ``/v2/rerank`` wire format."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        path: str = DEFAULT_PATH,
        api_key_header: str = "Authorization",
        timeout_s: float = 10.0,
        max_retries: int = 2,
        backoff_s: float = 0.25,
        extra_body: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.name = f"cohere:{model}"
        super().__init__(max_tokens=max_tokens)
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"cohere reranker: base_url must be an http(s) URL, got {base_url!r}")
        if not model:
            raise ConfigError("cohere reranker: model is required (e.g. 'rerank-v3.5')")
        self.url = base_url.rstrip("/") + "/" + path.lstrip("/")
        self.model = model
        self.max_retries = max(0, int(max_retries))
        self.backoff_s = float(backoff_s)
        self.extra_body = dict(extra_body or {})
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        if key:
            headers[api_key_header] = f"Bearer {key}" if api_key_header.lower() == "authorization" else key
        self._owns_client = client is None
        self._client = client or httpx.Client(timeout=httpx.Timeout(timeout_s), verify=verified_context())
        self._headers = headers
        self.timeout_s = timeout_s

    def _score(self, query: str, documents: list[str]) -> list[float]:
        body = {**self.extra_body, "model": self.model, "query": query, "documents": documents,
                "top_n": len(documents)}
        payload = with_retries(lambda: self._post(body), max_retries=self.max_retries, backoff_s=self.backoff_s)
        results = _results_of(payload, self.name)
        return scores_from_indexed((_pair(r) for r in results), len(documents), who=self.name)

    def _post(self, body: dict[str, Any]) -> Any:
        try:
            response = self._client.post(self.url, json=body, headers=self._headers)
        except httpx.TimeoutException as exc:
            raise RerankError(f"{self.name}: {self.url} timed out after {self.timeout_s}s", retryable=True) from exc
        except httpx.TransportError as exc:
            raise RerankError(f"{self.name}: cannot reach {self.url}: {exc}", retryable=True) from exc
        status = response.status_code
        if is_retryable_status(status):
            raise RerankError(
                f"{self.name}: {self.url} answered {status}: {_error_text(response)}",
                retryable=True,
                details={"status": status, "retry_after": _retry_after(response)},
            )
        if status in (401, 403):
            raise RerankError(
                f"{self.name}: {self.url} refused the API key ({status}): {_error_text(response)}; "
                f"set the reranker's api_key or {API_KEY_ENV}",
                details={"status": status},
            )
        if status >= 400:
            raise RerankError(
                f"{self.name}: {self.url} rejected the request ({status}): {_error_text(response)}",
                details={"status": status},
            )
        try:
            return response.json()
        except ValueError as exc:
            raise RerankError(f"{self.name}: answer is not JSON: {response.text[:200]!r}") from exc

    def close(self) -> None:
        if self._owns_client:
            self._client.close()
