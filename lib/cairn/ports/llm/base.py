"""One small interface over chat LLMs: ``complete(messages | prompt, system=..., timeout_s=..., json=...)``.

The public :meth:`LLMClient.complete` normalises the messages, applies the timeout default and
maps any vendor exception once, through the backend's ``_map_error``, into a
:class:`~cairn.core.errors.LLMError` whose ``retryable`` flag says whether trying again may help.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.core.errors import CairnError, LLMError

JSON_INSTRUCTION = "Answer with one JSON value only: no prose before or after it."
CHAT_ROLES = ("user", "assistant")


@dataclass(frozen=True)
class ChatMessage:
    role: str  # user | assistant
    content: str


def normalize_messages(messages: str | Sequence[ChatMessage | Mapping[str, Any]]) -> list[ChatMessage]:
    """A prompt string, or a list of ChatMessage / {"role", "content"} dicts; checked once."""
    if isinstance(messages, str):
        messages = [ChatMessage("user", messages)]
    out: list[ChatMessage] = []
    for n, m in enumerate(messages):
        msg = m if isinstance(m, ChatMessage) else ChatMessage(str(m.get("role", "")), m.get("content", ""))
        if msg.role not in CHAT_ROLES:
            raise LLMError(f"messages[{n}].role {msg.role!r} is not valid; allowed: user, assistant (pass system= for the system prompt)")
        if not isinstance(msg.content, str) or not msg.content.strip():
            raise LLMError(f"messages[{n}].content is empty; pass the text of the message")
        out.append(msg)
    if not out:
        raise LLMError("no messages to send; pass a prompt or at least one message")
    return out


class LLMClient(ABC):
    """A chat model behind one call. Built once per process (or Lambda container) and reused."""

    provider: str = "abstract"

    def __init__(self, model: str, *, timeout_s: float = 10.0, max_tokens: int = 1024, temperature: float = 0.0) -> None:
        if not model:
            raise LLMError(f"the {self.provider} LLM client needs a model id")
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.temperature = temperature
        # billable work, counted for the usage lines (cairn.ports.observability.usage)
        self.llm_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self._count_lock = threading.Lock()

    def count_usage(self, input_tokens: int = 0, output_tokens: int = 0) -> None:
        """Add a call's tokens as the provider reported them (a provider's ``_complete`` calls it)."""
        with self._count_lock:
            self.input_tokens += int(input_tokens or 0)
            self.output_tokens += int(output_tokens or 0)

    def complete(
        self,
        messages: str | Sequence[ChatMessage | Mapping[str, Any]],
        *,
        system: str | None = None,
        timeout_s: float | None = None,
        json: bool = True,
    ) -> str:
        """The model's answer as text. With ``json=True`` the provider's JSON mode is asked for
        where it has one, and the system prompt says to answer with JSON only."""
        msgs = normalize_messages(messages)
        if json:
            system = f"{system}\n\n{JSON_INSTRUCTION}" if system else JSON_INSTRUCTION
        with self._count_lock:
            self.llm_calls += 1
        try:
            return self._complete(msgs, system, self.timeout_s if timeout_s is None else timeout_s, json)
        except CairnError:
            raise
        except Exception as exc:
            raise self._map_error(exc) from exc

    @abstractmethod
    def _complete(self, messages: list[ChatMessage], system: str | None, timeout_s: float, json: bool) -> str: ...

    def _map_error(self, exc: Exception) -> LLMError:
        return LLMError(f"{self.provider} model {self.model!r}: {type(exc).__name__}: {exc}")

    def _error(self, what: str, *, retryable: bool) -> LLMError:
        return LLMError(f"{self.provider} model {self.model!r}: {what}", retryable=retryable)


def retryable_status(status: int) -> bool:
    return status in (408, 409, 425, 429) or status >= 500
