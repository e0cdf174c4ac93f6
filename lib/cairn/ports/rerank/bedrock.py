"""Amazon Bedrock rerank through boto3's ``bedrock-agent-runtime`` client (``Rerank``).

Request::

    queries=[{"type": "TEXT", "textQuery": {"text": query}}]
    sources=[{"type": "INLINE",
              "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": doc}}}, ...]
    rerankingConfiguration={"type": "BEDROCK_RERANKING_MODEL",
        "bedrockRerankingConfiguration": {"numberOfResults": n,
            "modelConfiguration": {"modelArn": arn, "additionalModelRequestFields": {...}}}}

Answer: ``results[].index`` / ``results[].relevanceScore`` (paged with ``nextToken``).
The API takes 1 to 1000 sources of 1 to 32,000 characters: longer documents are cut to
32,000 characters and more than 1000 are sent in several calls (a cross-encoder scores
each pair on its own, so the scores stay comparable).

``model`` is a model ARN, or a model id such as ``amazon.rerank-v1:0`` or
``cohere.rerank-v3-5:0`` from which the foundation-model ARN of the client's region is
built. botocore's own retries are switched off and the base's backoff is used instead, so
that retries are counted and bounded the same way for every provider. Throttling, 5xx
errors, timeouts and connection errors are retryable; validation and access errors not.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from cairn.core.distribution import install_hint
from cairn.core.errors import ConfigError, RerankError
from cairn.core.retry import AwsError
from cairn.ports.rerank.base import Reranker, scores_from_indexed, with_retries

MAX_SOURCES = 1000
MAX_TEXT_CHARS = 32_000
MAX_PAGES = 20
def model_arn(model: str, region: str) -> str:
    """``model`` if it is an ARN, else the foundation-model ARN of ``model`` in ``region``."""
    if model.startswith("arn:"):
        return model
    partition = "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"
    return f"arn:{partition}:bedrock:{region}::foundation-model/{model}"


class BedrockReranker(Reranker):
    """Bedrock's ``Rerank`` API (Amazon Rerank, Cohere Rerank on Bedrock)."""

    def __init__(
        self,
        *,
        model: str = "amazon.rerank-v1:0",
        region: str | None = None,
        endpoint_url: str | None = None,
        client: Any = None,
        timeout_s: float = 10.0,
        max_retries: int = 2,
        backoff_s: float = 0.25,
        additional_fields: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.name = f"bedrock:{model}"
        super().__init__(max_tokens=max_tokens)
        if client is None:
            client = _build_client(region, endpoint_url, timeout_s)
        self._client = client
        resolved_region = client.meta.region_name
        if not model.startswith("arn:") and not resolved_region:
            raise ConfigError(f"{self.name}: no AWS region; pass region= or set AWS_REGION, or give a model ARN")
        self.model_arn = model_arn(model, resolved_region or "")
        self.max_retries = max(0, int(max_retries))
        self.backoff_s = float(backoff_s)
        self.additional_fields = dict(additional_fields or {})

    def _score(self, query: str, documents: list[str]) -> list[float]:
        scores: list[float] = []
        for start in range(0, len(documents), MAX_SOURCES):
            batch = documents[start : start + MAX_SOURCES]
            part = with_retries(
                functools.partial(self._rerank_batch, query, batch), max_retries=self.max_retries, backoff_s=self.backoff_s
            )
            if not part:
                return []  # an empty answer for any batch: the base keeps every vector score
            scores.extend(part)
        return scores

    def _rerank_batch(self, query: str, documents: list[str]) -> list[float]:
        model_config: dict[str, Any] = {"modelArn": self.model_arn}
        if self.additional_fields:
            model_config["additionalModelRequestFields"] = self.additional_fields
        request: dict[str, Any] = {
            "queries": [{"type": "TEXT", "textQuery": {"text": query[:MAX_TEXT_CHARS]}}],
            "sources": [
                {"type": "INLINE",
                 "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": d[:MAX_TEXT_CHARS]}}}
                for d in documents
            ],
            "rerankingConfiguration": {
                "type": "BEDROCK_RERANKING_MODEL",
                "bedrockRerankingConfiguration": {
                    "numberOfResults": len(documents),
                    "modelConfiguration": model_config,
                },
            },
        }
        results: list[Any] = []
        for _ in range(MAX_PAGES):
            page = self._call(request)
            results.extend(page.get("results") or [])
            token = page.get("nextToken")
            if not token:
                break
            request["nextToken"] = token
        pairs = ((r.get("index"), r.get("relevanceScore")) for r in results if isinstance(r, dict))
        return scores_from_indexed(pairs, len(documents), who=self.name)

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            NoCredentialsError,
            ReadTimeoutError,
        )
        from botocore.exceptions import (
            ConnectionError as BotoConnectionError,
        )

        try:
            return self._client.rerank(**request)
        except ClientError as exc:
            err = AwsError.of(exc)
            hint = "" if err.retryable else _hint(err.code)
            raise RerankError(
                f"{self.name}: Bedrock rerank failed with {err.code or err.status}: {err.message}{hint}",
                retryable=err.retryable,
                details={"status": err.status, "code": err.code},
            ) from exc
        except NoCredentialsError as exc:
            raise RerankError(f"{self.name}: no AWS credentials found for Bedrock rerank") from exc
        except (BotoConnectionError, ReadTimeoutError) as exc:
            raise RerankError(f"{self.name}: cannot reach Bedrock: {exc}", retryable=True) from exc
        except BotoCoreError as exc:
            raise RerankError(f"{self.name}: {type(exc).__name__}: {exc}") from exc


def _hint(code: str) -> str:
    if code == "AccessDeniedException":
        return "; the role needs bedrock:Rerank and bedrock:InvokeModel on the model"
    if code == "ResourceNotFoundException":
        return "; check the model id and that it is available in this region"
    return ""


def _build_client(region: str | None, endpoint_url: str | None, timeout_s: float) -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError as exc:
        raise ConfigError(f"the bedrock reranker needs boto3: {install_hint('aws')}") from exc
    config = Config(
        retries={"total_max_attempts": 1, "mode": "standard"},  # the base retries, counted and bounded
        connect_timeout=timeout_s,
        read_timeout=timeout_s,
    )
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return boto3.client("bedrock-agent-runtime", region_name=region, endpoint_url=endpoint_url, config=config)
