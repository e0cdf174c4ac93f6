"""Bedrock Converse over boto3: the fast path in AWS (no litellm on the cold start).

Wire format: ``POST /model/{modelId}/converse`` with ``messages`` (content blocks), ``system``
and ``inferenceConfig``; the answer is ``output.message.content[*].text``.
"""

from __future__ import annotations

import threading
from typing import Any

from cairn.core.errors import LLMError
from cairn.ports.llm.base import ChatMessage, LLMClient

_RETRYABLE = {
    "ThrottlingException",
    "ServiceUnavailableException",
    "InternalServerException",
    "ModelNotReadyException",
    "ModelTimeoutException",
    "TooManyRequestsException",
}
_TRANSIENT = {"ReadTimeoutError", "ConnectTimeoutError", "EndpointConnectionError", "ConnectionClosedError"}


class BedrockLLM(LLMClient):
    provider = "bedrock"

    def __init__(
        self,
        model: str,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        client: Any = None,
        **options: Any,
    ) -> None:
        super().__init__(model, **options)
        self.region = region
        self.endpoint_url = endpoint_url
        self._injected = client
        self._clients: dict[float, Any] = {}
        self._lock = threading.Lock()

    def _client(self, timeout_s: float) -> Any:
        """An injected client as it is; else one boto3 client per read timeout, built once."""
        if self._injected is not None:
            return self._injected
        with self._lock:
            if timeout_s not in self._clients:
                import boto3
                from botocore.config import Config

                cfg = Config(read_timeout=timeout_s, connect_timeout=min(timeout_s, 3.0), retries={"max_attempts": 1})
                self._clients[timeout_s] = boto3.client(
                    "bedrock-runtime", region_name=self.region, endpoint_url=self.endpoint_url, config=cfg
                )
            return self._clients[timeout_s]

    def _complete(self, messages: list[ChatMessage], system: str | None, timeout_s: float, json: bool) -> str:
        request: dict[str, Any] = {
            "modelId": self.model,
            "messages": [{"role": m.role, "content": [{"text": m.content}]} for m in messages],
            "inferenceConfig": {"maxTokens": self.max_tokens, "temperature": self.temperature},
        }
        if system:
            request["system"] = [{"text": system}]
        response = self._client(timeout_s).converse(**request)
        usage = response.get("usage") or {}
        self.count_usage(usage.get("inputTokens", 0), usage.get("outputTokens", 0))
        blocks = response.get("output", {}).get("message", {}).get("content", [])
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict))
        if not text.strip():
            raise self._error(f"returned no text (stopReason={response.get('stopReason')!r})", retryable=False)
        return text

    def _map_error(self, exc: Exception) -> LLMError:
        response = getattr(exc, "response", None)
        if isinstance(response, dict) and "Error" in response:
            code = response["Error"].get("Code", "")
            message = response["Error"].get("Message", "")
            hint = " (check the model id and that model access is granted in this region)" if code in (
                "ValidationException", "AccessDeniedException", "ResourceNotFoundException") else ""
            return self._error(f"{code}: {message}{hint}", retryable=code in _RETRYABLE)
        name = type(exc).__name__
        if name in _TRANSIENT:
            return self._error(f"{name}: {exc}", retryable=True)
        return super()._map_error(exc)
