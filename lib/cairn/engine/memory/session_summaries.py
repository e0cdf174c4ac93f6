"""The LLM summarizer that folds a session's oldest messages into its summary.

(The store's default, :class:`~cairn.ports.sessions.base.ExtractiveSummarizer`, needs no model.)
:class:`LLMSummarizer` asks an injected :class:`~cairn.ports.llm.LLMClient`; any failure falls back to
the extractive summary, logged (never silently).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from cairn.core.errors import CairnError
from cairn.engine.planning.prompts import PromptLibrary
from cairn.ports.sessions.base import MAX_SUMMARY_CHARS, ExtractiveSummarizer, Message

log = logging.getLogger("cairn.ports.sessions")


class LLMSummarizer:
    """Summaries by an LLM, from the versioned prompt ``session_summary``."""

    def __init__(self, llm, prompts=None, *, timeout_s: float = 20.0, fallback: ExtractiveSummarizer | None = None) -> None:
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
