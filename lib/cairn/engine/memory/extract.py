"""Typed memories from a conversation, by an LLM, merged with what is already known.

1. The ``memory_extraction`` prompt (versioned file in ``prompts/``) gets the new messages as
   delimited data and answers ``{"memories": [{category, key, title, text, seqs}]}``. A memory
   whose category is not one of :class:`TypedCategory`, whose text is empty or that cites no seq
   of the messages given is dropped (counted); an answer that is not JSON is a fallback (logged,
   counted), and the commit archives the turns anyway.
2. Each memory is compared with the user's similar memories of its category (one vector search
   under the category folder). The ``memory_merge`` prompt decides ``create``, ``update`` (merge
   into one existing memory) or ``skip``; when the LLM fails or answers something unusable, the
   deterministic rule decides: a near-duplicate (cosine >= ``duplicate_at``) is merged into the
   existing memory by adding the new citations to it, anything else is created.
3. A memory that already cites every message the new one cites is skipped before any LLM call:
   that is what makes a retried commit add nothing.

Citations are ``"<session id>#<seq>"`` strings in the ``cites`` metadata list; a merge keeps the
union of both memories' citations.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairn.core.errors import CairnError
from cairn.engine.memory.archive import format_date, speaker_of
from cairn.engine.memory.models import MemoryItem, MemoryKind, TypedCategory, cite, memory_root, slugify, text_key
from cairn.engine.planning.parsing import PlanParseError, extract_json
from cairn.engine.planning.prompts import PromptLibrary
from cairn.ports.embeddings import Embedder
from cairn.ports.sessions.base import Message
from cairn.ports.vectorstores import VectorQuery, VectorStore

log = logging.getLogger("cairn.engine.memory")
PROMPTS = Path(__file__).parent / "prompts"
MAX_PROMPT_MESSAGES_CHARS = 24_000
KNOWN_IN_PROMPT = 30


@dataclass
class Extraction:
    items: list[MemoryItem] = field(default_factory=list)
    created: int = 0
    merged: int = 0
    skipped: int = 0
    dropped: int = 0  # memories of the answer that were unusable
    mode: str = "llm"  # llm | fallback:<reason>
    merge_fallbacks: int = 0


class LLMExtractor:
    def __init__(
        self,
        llm: Any,
        store: VectorStore,
        embedder: Embedder,
        tenant: str,
        *,
        prompts: PromptLibrary | None = None,
        timeout_s: float = 30.0,
        similar: int = 5,
        duplicate_at: float = 0.92,
    ) -> None:
        self.llm = llm
        self.store = store
        self.embedder = embedder
        self.tenant = tenant
        self.prompts = prompts or PromptLibrary.from_folder(PROMPTS)
        self.timeout_s = timeout_s
        self.similar = similar
        self.duplicate_at = duplicate_at

    # ----------------------------------------------------------------- extraction

    def extract(self, user: str, session_id: str, messages: Sequence[Message]) -> Extraction:
        out = Extraction()
        try:
            raw = self._ask("memory_extraction", user=user, known=self._known(user), messages=render_messages(messages))
            found = extract_json(raw)
        except (CairnError, PlanParseError) as exc:
            out.mode = f"fallback:{type(exc).__name__}"
            log.warning("memory extraction fell back to archiving only", extra={"fallback_reason": str(exc)})
            return out
        seqs = {m.seq for m in messages}
        by_uri: dict[str, MemoryItem] = {}
        for cand in parse_memories(found, user, session_id, seqs, out):
            decided = self._decide(cand, out)
            if decided is not None:
                prior = by_uri.get(decided.uri)
                by_uri[decided.uri] = _merge_cites(decided, prior) if prior else decided
        out.items = list(by_uri.values())
        return out

    def _ask(self, name: str, **values: Any) -> str:
        prompt = self.prompts.select(name, getattr(self.llm, "model", ""))
        return str(self.llm.complete(prompt.render(**values), system=prompt.system, timeout_s=self.timeout_s, json=True))

    def _known(self, user: str) -> str:
        return "(none)"  # keys come back through the similarity search; kept as a prompt slot for v2

    # ----------------------------------------------------------------- merging

    def _decide(self, cand: MemoryItem, out: Extraction) -> MemoryItem | None:
        similar = self._similar(cand)
        new_cites = set(cand.metadata.get("cites", []))  # type: ignore[arg-type]
        for rec, _score in similar:
            if new_cites <= set(rec.metadata.get("cites", []) or []):
                out.skipped += 1  # already merged from these very messages (a retried commit)
                return None
        if not similar:
            out.created += 1
            return cand
        decision = self._ask_merge(cand, similar)
        if decision is None:
            out.merge_fallbacks += 1
            rec, score = similar[0]
            decision = ("update", rec, rec.text) if score >= self.duplicate_at else ("create", None, "")
        kind, target, text = decision
        if kind == "skip":
            out.skipped += 1
            return None
        if kind == "create" or target is None:
            out.created += 1
            return cand
        out.merged += 1
        old_cites = [c for c in target.metadata.get("cites", []) or [] if isinstance(c, str)]
        meta = {**cand.metadata, "cites": sorted(set(old_cites) | new_cites)}
        return cand.model_copy(update={"key": str(target.metadata.get("memory_key") or target.uri.rsplit("/", 1)[1]),
                                       "text": text or target.text, "title": target.title, "metadata": meta})

    def _similar(self, cand: MemoryItem) -> list[tuple[Any, float]]:
        folder = f"{memory_root(cand.user)}/{cand.category}"
        vector = self.embedder.embed([cand.text], input_type="query")[0].tolist()
        hits = self.store.query(VectorQuery(
            tenant=self.tenant, vector=vector, limit=self.similar,
            filter={"parent_uri": folder, "level": 2},
        ))
        return [(h.record, h.score) for h in hits]

    def _ask_merge(self, cand: MemoryItem, similar: list[tuple[Any, float]]) -> tuple[str, Any, str] | None:
        keyed = {str(r.metadata.get("memory_key") or r.uri.rsplit("/", 1)[1]): r for r, _ in similar}
        existing = "\n".join(f"key={k}: {r.text}" for k, r in keyed.items())
        try:
            answer = extract_json(self._ask("memory_merge", candidate=f"key={cand.key}: {cand.text}", existing=existing))
        except (CairnError, PlanParseError) as exc:
            log.warning("memory merge fell back to the similarity rule", extra={"fallback_reason": str(exc)})
            return None
        if not isinstance(answer, dict) or answer.get("decision") not in ("skip", "update", "create"):
            return None
        if answer["decision"] == "update":
            target = keyed.get(str(answer.get("target") or ""))
            if target is None:
                return None
            return ("update", target, str(answer.get("text") or "").strip())
        return (answer["decision"], None, "")


def render_messages(messages: Sequence[Message], budget: int = MAX_PROMPT_MESSAGES_CHARS) -> str:
    """One ``[seq N] (date) speaker (role): text`` line per message, newest kept within ``budget``."""
    lines = [
        f"[seq {m.seq}] ({format_date(m.created_at)}) {speaker_of(m)} ({m.role}): {' '.join(m.content.split())}"
        for m in messages
    ]
    while len(lines) > 1 and sum(len(x) + 1 for x in lines) > budget:
        lines.pop(0)
    return "\n".join(lines)


def parse_memories(found: Any, user: str, session_id: str, seqs: set[int], out: Extraction) -> list[MemoryItem]:
    """The usable memories of an extraction answer (a dict with ``memories``, or a bare list)."""
    raw = found.get("memories", []) if isinstance(found, dict) else found if isinstance(found, list) else []
    items = []
    categories = {c.value for c in TypedCategory}
    for m in raw if isinstance(raw, list) else []:
        if not isinstance(m, dict):
            out.dropped += 1
            continue
        text = " ".join(str(m.get("text") or "").split())
        category = str(m.get("category") or "").strip().lower()
        cited = sorted({int(s) for s in m.get("seqs") or [] if _is_int(s) and int(s) in seqs})
        if not text or category not in categories or not cited:
            out.dropped += 1
            continue
        key = slugify(str(m.get("key") or "")) or text_key(text)
        items.append(MemoryItem(
            user=user, category=category, key=key, text=text[:4000], title=str(m.get("title") or "")[:200],
            kind=MemoryKind.EXTRACTED,
            metadata={"cites": [cite(session_id, s) for s in cited]},
        ))
    return items


def _is_int(v: Any) -> bool:
    try:
        int(v)
    except (TypeError, ValueError):
        return False
    return not isinstance(v, bool)


def _merge_cites(a: MemoryItem, b: MemoryItem) -> MemoryItem:
    cites = sorted(set(a.metadata.get("cites", [])) | set(b.metadata.get("cites", [])))  # type: ignore[arg-type]
    return a.model_copy(update={"metadata": {**a.metadata, "cites": cites}})


__all__ = ["Extraction", "LLMExtractor", "parse_memories", "render_messages"]
