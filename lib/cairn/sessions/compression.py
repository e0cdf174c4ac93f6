"""Summarizers that fold a session's oldest messages into its summary.

:class:`ExtractiveSummarizer` needs no model: one line per message (its role and first
sentences), the oldest lines dropped when the summary would pass its bound.
:class:`LLMSummarizer` asks an injected :class:`~cairn.llm.LLMClient`; any failure falls back to
the extractive summary, logged (never silently).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..errors import CairnError
from ..ingest.summaries import first_sentences
from .base import MAX_SUMMARY_CHARS, Message

log = logging.getLogger("cairn.sessions")


class ExtractiveSummarizer:
    """``previous`` plus one ``role: first sentences`` line per message, bounded."""

    def __init__(self, line_chars: int = 240, max_chars: int = MAX_SUMMARY_CHARS) -> None:
        self.line_chars = line_chars
        self.max_chars = max_chars

    def summarize(self, previous: str, messages: Sequence[Message]) -> str:
        lines = [line for line in previous.splitlines() if line.strip()]
        for m in messages:
            text = first_sentences(m.content, max_chars=self.line_chars, max_sentences=2) or m.content[: self.line_chars]
            lines.append(f"{m.role}: {text}")
        while lines and len("\n".join(lines)) > self.max_chars:
            lines.pop(0)  # the oldest go first
        return "\n".join(lines)


class LLMSummarizer:
    """Summaries by an LLM, from the versioned prompt ``session_summary``."""

    def __init__(self, llm, prompts=None, *, timeout_s: float = 20.0, fallback: ExtractiveSummarizer | None = None) -> None:
        from ..planning.prompts import PromptLibrary

        self.llm = llm
        self.prompts = prompts or PromptLibrary.default()
        self.timeout_s = timeout_s
        self.fallback = fallback or ExtractiveSummarizer()
        self.fallbacks = 0

    def summarize(self, previous: str, messages: Sequence[Message]) -> str:
        prompt = self.prompts.select("session_summary", getattr(self.llm, "model", ""))
        conversation = "\n".join(f"[{m.seq}] {m.role}: {m.content}" for m in messages)
        try:
            text = self.llm.complete(
                prompt.render(previous_summary=previous or "(none)", messages=conversation),
                system=prompt.system,
                timeout_s=self.timeout_s,
                json=False,
            ).strip()
            if not text:
                raise ValueError("the model returned an empty summary")
        except (CairnError, ValueError) as exc:
            self.fallbacks += 1
            log.warning("session summary fell back to extractive", extra={"fallback_reason": str(exc), "folded": len(messages)})
            return self.fallback.summarize(previous, messages)
        return text[:MAX_SUMMARY_CHARS]
