"""Amazon Bedrock embeddings through boto3's ``bedrock-runtime`` ``InvokeModel``.

Wire format: ``POST /model/{modelId}/invoke`` with a JSON body; the answer is JSON.

- **Titan Text Embeddings v2** (``amazon.titan-embed-text-v2:0``): one text per call,
  ``{"inputText", "dimensions": 256 | 512 | 1024, "normalize": true}`` →
  ``{"embedding": [...], "inputTextTokenCount": n}``. No query/document distinction. A batch is
  ``concurrency`` texts, sent at the same time.
- **Cohere Embed v3** (``cohere.embed-english-v3``, ``cohere.embed-multilingual-v3``): up to 96
  texts per call, ``{"texts", "input_type": "search_query" | "search_document", "truncate": "END"}``
  → ``{"embeddings": [[...], ...]}``; 1024 dimensions.

Which for which languages (docs/languages.md): Titan v2 (the default) and Cohere multilingual v3
embed 100+ languages, Chinese, Japanese and German included (Cohere multilingual is the one
trained for retrieval across languages); Cohere english v3 is English only, and says so
(``languages``), so a tenant writing Chinese is told at ingest.

botocore's own retries are off: throttling (``ThrottlingException``, 429), 5xx errors, timeouts
and lost connections (``cairn.core.retry``'s one definition) are retryable ``EmbeddingError``s that the
``Embedder`` base retries through the one ``RetryPolicy`` (``max_retries``, ``backoff_s``);
validation and access errors fail at once, with a hint. Every vector
is L2-normalised. Input tokens (the ``X-Amzn-Bedrock-Input-Token-Count`` header) are counted in
``tokens``, for usage records.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from cairn.core.errors import ConfigError, EmbeddingError
from cairn.core.retry import RetryPolicy, is_retryable_aws_error
from cairn.ports.embeddings.base import Embedder, InputType, normalize

TITAN_V2_DIMENSIONS = (256, 512, 1024)
TITAN_MAX_CHARS = 50_000  # Titan v2 takes up to 8,192 tokens or 50,000 characters
COHERE_MAX_TEXTS = 96
COHERE_MAX_CHARS = 2048  # Cohere Embed on Bedrock: texts of at most 2,048 characters
COHERE_INPUT_TYPES = {"query": "search_query", "document": "search_document"}
_HINTS = {
    "AccessDeniedException": "; the function's role needs bedrock:InvokeModel on the model, and model access must be granted in this region",
    "ResourceNotFoundException": "; check the model id and that the model is offered in this region",
    "ValidationException": "; check the model id and its parameters (Titan v2 dimensions: 256, 512 or 1024)",
}


@dataclass(frozen=True)
class _Family:
    kind: str  # titan-v2 | cohere-v3
    default_dimension: int
    dimensions: tuple[int, ...]
    max_batch: int
    max_tokens: int  # the model's input window (Titan v2: 8,192 tokens; Cohere v3: 512, cut at the end)


def family_of(model: str) -> _Family:
    """The request shape of a Bedrock embedding model id (or an inference profile / ARN naming it)."""
    base = model.rsplit("/", 1)[-1]
    if "amazon.titan-embed-text-v2" in base:
        return _Family("titan-v2", 1024, TITAN_V2_DIMENSIONS, 1, 8192)
    if "cohere.embed-english-v3" in base or "cohere.embed-multilingual-v3" in base:
        return _Family("cohere-v3", 1024, (1024,), COHERE_MAX_TEXTS, 512)
    raise ConfigError(
        f"Bedrock embedding model {model!r} is not supported; use amazon.titan-embed-text-v2:0, "
        "cohere.embed-english-v3 or cohere.embed-multilingual-v3 (or the litellm embedder for other models)"
    )


class BedrockEmbedder(Embedder):
    """Titan Text Embeddings v2 or Cohere Embed v3 on Amazon Bedrock."""

    def __init__(
        self,
        model: str,
        *,
        region: str | None = None,
        dimension: int | None = None,
        batch_size: int = 96,
        client: Any = None,
        endpoint_url: str | None = None,
        concurrency: int = 8,
        timeout_s: float = 10.0,
        max_retries: int = 4,
        backoff_s: float = 0.25,
    ) -> None:
        self.model = model
        self.family = family_of(model)
        self.name = f"bedrock:{model}"
        chosen = self.family.default_dimension if dimension is None else int(dimension)
        if chosen not in self.family.dimensions:
            allowed = ", ".join(str(d) for d in self.family.dimensions)
            raise ConfigError(f"{self.name}: dimension {dimension} is not offered; allowed: {allowed}")
        self.dimension = chosen
        self.max_tokens = self.family.max_tokens
        self.distinguishes_input_type = self.family.kind == "cohere-v3"
        # Titan v2 and Cohere multilingual v3 embed 100+ languages; Cohere english v3 English only
        self.languages = frozenset({"en"}) if "embed-english" in model else None
        if batch_size < 1:
            raise ConfigError(f"{self.name}: batch_size must be at least 1, got {batch_size}")
        self.concurrency = max(1, int(concurrency))
        # Cohere: up to 96 texts in one call. Titan: one text per call, a batch's calls run at once,
        # so a batch is ``concurrency`` texts (a throttled batch re-sends no more than that)
        self.batch_size = min(batch_size, COHERE_MAX_TEXTS if self.family.kind == "cohere-v3" else self.concurrency)
        self.retry_policy = RetryPolicy.of_retries(max_retries, base_s=backoff_s)
        self.tokens = 0
        self.requests = 0  # InvokeModel calls (usage lines)
        self.retries = 0
        self._region, self._endpoint_url, self._timeout_s = region, endpoint_url, timeout_s
        self._client = client
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- clients

    def client(self) -> Any:
        """The boto3 client, built on first use (no AWS call at construction) and then reused."""
        with self._lock:
            if self._client is None:
                import boto3
                from botocore.config import Config

                cfg = Config(read_timeout=self._timeout_s, connect_timeout=min(self._timeout_s, 3.0),
                             retries={"total_max_attempts": 1}, max_pool_connections=max(10, self.concurrency))
                self._client = boto3.client("bedrock-runtime", region_name=self._region,
                                            endpoint_url=self._endpoint_url, config=cfg)
            return self._client

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="bedrock-embed")
            return self._pool

    # ----------------------------------------------------------------- embedding

    def _embed(self, texts: list[str], input_type: InputType = "document") -> np.ndarray:
        if self.family.kind == "cohere-v3":
            body = {"texts": [t[:COHERE_MAX_CHARS] or " " for t in texts],
                    "input_type": COHERE_INPUT_TYPES[input_type], "truncate": "END"}
            return normalize(np.asarray(self._cohere_vectors(self._invoke(body), len(texts)), dtype=np.float32))
        if len(texts) == 1 or self.concurrency == 1:
            rows = [self._titan(t) for t in texts]
        else:
            rows = list(self._executor().map(self._titan, texts))
        return normalize(np.asarray(rows, dtype=np.float32))

    def _titan(self, text: str) -> list[float]:
        body = {"inputText": text[:TITAN_MAX_CHARS] or " ", "dimensions": self.dimension, "normalize": True}
        answer = self._invoke(body)
        vector = answer.get("embedding")
        if not isinstance(vector, list) or not vector:
            raise EmbeddingError(f"{self.name}: the answer has no 'embedding' (keys: {sorted(answer)})")
        return vector

    def _cohere_vectors(self, answer: dict[str, Any], n: int) -> list[list[float]]:
        vectors = answer.get("embeddings")
        if isinstance(vectors, dict):  # asked with embedding_types: {"float": [[...]]}
            vectors = vectors.get("float")
        if not isinstance(vectors, list) or len(vectors) != n:
            got = len(vectors) if isinstance(vectors, list) else "no"
            raise EmbeddingError(f"{self.name}: {got} embeddings in the answer for {n} texts")
        return vectors

    def _invoke(self, body: dict[str, Any]) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, ReadTimeoutError
        from botocore.exceptions import ConnectionError as BotoConnectionError

        try:
            response = self.client().invoke_model(modelId=self.model, body=json.dumps(body),
                                                  contentType="application/json", accept="application/json")
            answer = json.loads(response["body"].read())
        except ClientError as exc:
            err = exc.response.get("Error", {})
            code = err.get("Code", "")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            retryable = is_retryable_aws_error(code, status)
            raise EmbeddingError(
                f"{self.name}: InvokeModel failed with {code or status}: {err.get('Message', '')}"
                f"{'' if retryable else _HINTS.get(code, '')}",
                retryable=retryable, details={"status": status, "code": code},
            ) from exc
        except NoCredentialsError as exc:
            raise EmbeddingError(f"{self.name}: no AWS credentials found for Bedrock") from exc
        except (BotoConnectionError, ReadTimeoutError) as exc:
            raise EmbeddingError(f"{self.name}: cannot reach Bedrock: {exc}", retryable=True) from exc
        except BotoCoreError as exc:
            raise EmbeddingError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        except (ValueError, KeyError) as exc:
            raise EmbeddingError(f"{self.name}: the answer is not JSON: {exc}") from exc
        with self._lock:
            self.requests += 1
        self._count_tokens(response, answer)
        return answer

    def _count_tokens(self, response: dict[str, Any], answer: dict[str, Any]) -> None:
        headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        count = headers.get("x-amzn-bedrock-input-token-count") or answer.get("inputTextTokenCount") or 0
        try:
            n = int(count)
        except (TypeError, ValueError):
            return
        with self._lock:
            self.tokens += n
