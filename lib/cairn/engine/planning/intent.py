"""The intent analyzer: an LLM turns the query and the session into 0..5 typed queries.

Input: the query, the session's summary (truncated to 30,000 characters), its last 5 messages
and an optional restriction to one context type. The LLM call has a deadline (default 5 s)
enforced here, whatever the client does; a timeout, an error or an unusable answer falls back
to the raw query, recorded in the plan (``fallback=True``, ``fallback_reason``), logged and
counted. An answer with 0 queries is an empty plan: the caller returns an empty result
without retrieval.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from cairn.core.errors import CairnError
from cairn.core.models import ContextType, QueryPlan
from cairn.engine.planning.base import raw_query
from cairn.engine.planning.parsing import PlanParseError, parse_plan
from cairn.engine.planning.prompts import Prompt, PromptLibrary
from cairn.engine.planning.scope import FolderResolver, Roots, scope_plan
from cairn.ports.llm.base import LLMClient
from cairn.ports.sessions.base import Message, SessionView

log = logging.getLogger("cairn.engine.planning")

MAX_SUMMARY_CHARS = 30_000
RECENT_MESSAGES = 5
MAX_MESSAGE_CHARS = 4_000
PLANNER_NAME = "intent-llm"

_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    """One small pool per process: an LLM call that outlives its deadline finishes there."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="cairn-intent")
        return _pool


def format_messages(messages: list[Message] | tuple[Message, ...]) -> str:
    if not messages:
        return "(none)"
    return "\n".join(f"{m.role}: {m.content[:MAX_MESSAGE_CHARS]}" for m in messages)


class IntentAnalyzer:
    name = PLANNER_NAME

    def __init__(
        self,
        llm: LLMClient,
        prompts: PromptLibrary | None = None,
        timeout_s: float = 5.0,
        *,
        prompt_version: int | None = None,
        resolver: FolderResolver | None = None,
        roots: Roots | None = None,
    ) -> None:
        """With ``resolver`` and ``roots``, each planned query that names a folder of the tree
        (checked against the tree's own names, see :mod:`.scope`) is scoped to it."""
        self.resolver, self.roots = resolver, roots
        self.llm = llm
        self.prompts = prompts or PromptLibrary.default()
        self.timeout_s = timeout_s
        self.prompt: Prompt = self.prompts.select("intent_analysis", getattr(llm, "model", ""), prompt_version)
        self.fallbacks: Counter[str] = Counter()

    def plan(
        self,
        query: str,
        session: SessionView | None = None,
        *,
        context_type: ContextType | None = None,
        target_uris: tuple[str, ...] = (),
    ) -> QueryPlan:
        summary = (session.summary if session else "")[-MAX_SUMMARY_CHARS:]
        recent = list(session.recent[-RECENT_MESSAGES:]) if session else []
        allowed = [context_type.value] if context_type else [t.value for t in ContextType]
        prompt = self.prompt.render(
            query=query,
            summary=summary or "(none)",
            recent_messages=format_messages(recent),
            context_types=", ".join(allowed),
        )
        future = _executor().submit(
            self.llm.complete, prompt, system=self.prompt.system, timeout_s=self.timeout_s, json=True
        )
        try:
            answer = future.result(timeout=self.timeout_s)
            plan = parse_plan(answer, planner=self.name, context_type=context_type, target_uris=target_uris)
            if self.resolver is not None and self.roots is not None:
                plan = scope_plan(plan, self.resolver, self.roots)
            return plan
        except FutureTimeout:
            future.cancel()
            return self._fallback(query, context_type, target_uris, "timeout", f"no answer within {self.timeout_s:g} s")
        except PlanParseError as exc:
            return self._fallback(query, context_type, target_uris, "unparseable", str(exc))
        except CairnError as exc:
            return self._fallback(query, context_type, target_uris, "llm_error", exc.message)
        except Exception as exc:  # noqa: BLE001 - planning never fails a search
            return self._fallback(query, context_type, target_uris, "error", f"{type(exc).__name__}: {exc}")

    def _fallback(
        self, query: str, context_type: ContextType | None, target_uris: tuple[str, ...], kind: str, detail: str
    ) -> QueryPlan:
        self.fallbacks[kind] += 1
        reason = f"{kind}: {detail}"
        log.warning(
            "intent analysis fell back to the raw query",
            extra={"fallback_reason": reason, "model": self.llm.model, "prompt": self.prompt.id},
        )
        return QueryPlan(
            reasoning="intent analysis failed; the raw query is searched as it is",
            queries=(raw_query(query, context_type, target_uris, intent="raw query (fallback)"),),
            planner=self.name,
            fallback=True,
            fallback_reason=reason[:500],
        )
