"""Any OpenAI-compatible chat endpoint over httpx: ``POST {base_url}/chat/completions``."""

from __future__ import annotations

import os
from typing import Any

from cairn.core.errors import LLMError
from cairn.core.tls import verified_context
from cairn.ports.llm.base import ChatMessage, LLMClient, retryable_status


class OpenAICompatLLM(LLMClient):
    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        json_mode: bool = True,
        client: Any = None,
        **options: Any,
    ) -> None:
        """``json_mode`` sends ``response_format={"type": "json_object"}`` when JSON is asked
        for; turn it off for servers that reject the field."""
        super().__init__(model, **options)
        import httpx

        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.json_mode = json_mode
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.http = client or httpx.Client(headers=headers, timeout=self.timeout_s, verify=verified_context())

    def _complete(self, messages: list[ChatMessage], system: str | None, timeout_s: float, json: bool) -> str:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": ([{"role": "system", "content": system}] if system else [])
            + [{"role": m.role, "content": m.content} for m in messages],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if json and self.json_mode:
            body["response_format"] = {"type": "json_object"}
        response = self.http.post(f"{self.base_url}/chat/completions", json=body, timeout=timeout_s)
        if response.status_code >= 400:
            raise self._error(
                f"HTTP {response.status_code} from {self.base_url}/chat/completions: {_error_text(response)}",
                retryable=retryable_status(response.status_code),
            )
        try:
            answer = response.json()
            text = answer["choices"][0]["message"]["content"]
            usage = answer.get("usage") or {}
            self.count_usage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise self._error(f"unexpected response body: {response.text[:200]!r}", retryable=False) from None
        if not isinstance(text, str) or not text.strip():
            raise self._error("returned no text", retryable=False)
        return text

    def _map_error(self, exc: Exception) -> LLMError:
        import httpx

        if isinstance(exc, httpx.TimeoutException):
            return self._error(f"timed out ({type(exc).__name__}) calling {self.base_url}", retryable=True)
        if isinstance(exc, httpx.TransportError):
            return self._error(f"cannot reach {self.base_url}: {type(exc).__name__}: {exc}", retryable=True)
        return super()._map_error(exc)


def _error_text(response: Any) -> str:
    try:
        err = response.json().get("error")
        if isinstance(err, dict):
            return str(err.get("message") or err)
        if err:
            return str(err)
    except ValueError:
        pass
    return response.text[:200]
