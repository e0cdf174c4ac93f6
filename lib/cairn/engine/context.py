"""A prompt-ready block of context: what ``POST /v1/context``, ``Cairn.context`` and MCP's
``context`` answer.

:func:`build_context` takes a find/search answer and writes one block an agent pastes into its
prompt: the user's memories first, then skills, then resources, each passage numbered ``[n]`` with
its citation (URI, title, and page or heading when ingestion knows them), the same document or
the same text never twice, and never more than ``budget_tokens`` tokens — a passage that does not
fit whole is cut at a word with ``…``, and passages after the budget is spent are left out (the
block says how many).

Tokens are counted with the embedder's own tokenizer when cairn has it (the embedded MiniLM's
WordPiece; the embedded multilingual-e5's SentencePiece, through its engine's count), else estimated as one token per three characters, rounded up — more than GPT-style
and WordPiece tokenizers count for English text, so an estimated block stays within the budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

CountTokens = Callable[[str], int]
SECTIONS = (("memories", "What is known about the user"), ("skills", "Skills"), ("resources", "Resources"))
MIN_PASSAGE_TOKENS = 24  # a cut passage shorter than this is left out instead
CHARS_PER_TOKEN = 3  # the estimate, when the embedder's tokenizer is not at hand


class Passage(BaseModel):
    n: int = Field(description="the number the block cites it by: [n]")
    uri: str
    context_type: str
    title: str = ""
    score: float = 0.0
    text: str = ""
    citation: dict[str, Any] | None = None
    truncated: bool = False


class ContextBlock(BaseModel):
    text: str = Field(description="the block to paste into a prompt")
    tokens: int = Field(description="its size, counted as `counter` says")
    budget_tokens: int
    counter: str = Field(default="estimate", description="how tokens were counted: the embedder's tokenizer or an estimate")
    passages: list[Passage] = Field(default_factory=list)
    omitted: int = Field(default=0, description="matches left out because the budget was spent")
    query_plan: dict[str, Any] | None = None


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def token_counter(embedder: Any) -> CountTokens:
    """How to count tokens for ``embedder``: its own ``count_tokens`` (the embedded e5's SentencePiece,
    counted by its engine), else its tokenizer (:meth:`cairn.ports.embeddings.Embedder.tokenizer`: the
    embedded MiniLM's WordPiece), else the estimate."""
    own = getattr(embedder, "count_tokens", None)
    if callable(own):
        counted: CountTokens = own
    else:
        try:
            tok = embedder.tokenizer() if callable(getattr(embedder, "tokenizer", None)) else None
        except Exception:  # noqa: BLE001 - the tokenizer file is missing: fall back to the estimate
            tok = None
        if tok is None:
            return estimate_tokens

        def counted(text: str) -> int:
            return len(tok.encode(text, add_special_tokens=False).ids)

    def count(text: str) -> int:
        return counted(text)

    count.__name__ = f"tokenizer of {getattr(embedder, 'name', 'the embedder')}"  # the block's ``counter``
    return count


def _where(citation: dict[str, Any] | None, title: str) -> str:
    """`` (p. 3, Billing > Refunds)``; a heading path the title already holds is not repeated."""
    if not citation:
        return ""
    parts = []
    if citation.get("page"):
        parts.append(f"p. {citation['page']}")
    path = citation.get("heading_path")
    if path:
        last = path[-1] if isinstance(path, list) and path else str(path)
        if str(last) not in title:
            parts.append(" > ".join(path) if isinstance(path, list) else str(path))
    return f" ({', '.join(parts)})" if parts else ""


def _cut(text: str, tokens: int, count: CountTokens) -> str:
    """The longest prefix of ``text``, cut at a word, that counts at most ``tokens`` with ``…``."""
    lo, hi = 0, len(text)
    while lo < hi:  # binary search on characters, then back to a word boundary
        mid = (lo + hi + 1) // 2
        if count(text[:mid] + " …") <= tokens:
            lo = mid
        else:
            hi = mid - 1
    head = text[:lo]
    if lo < len(text) and " " in head:
        head = head.rsplit(" ", 1)[0]
    return head.rstrip() + " …"


def build_context(answer: Any, budget_tokens: int, count: CountTokens = estimate_tokens) -> ContextBlock:
    """The block for ``answer`` (a FindResult or FindResponse) within ``budget_tokens``."""
    seen_docs: set[str] = set()
    seen_text: set[str] = set()
    candidates: list[tuple[str, str, Any]] = []
    for bucket, heading in SECTIONS:
        for m in sorted(getattr(answer, bucket, None) or [], key=lambda m: -m.score):
            doc = m.uri.split("#", 1)[0]
            body = " ".join(str(getattr(m, "text", "") or m.abstract or m.title).split())
            if not body or doc in seen_docs or body in seen_text:
                continue
            seen_docs.add(doc)
            seen_text.add(body)
            candidates.append((heading, body, m))
    lines: list[str] = []
    passages: list[Passage] = []
    used, omitted, section = 0, 0, None
    for heading, body, m in candidates:
        title = m.title or m.uri.rsplit("/", 1)[-1]
        n = len(passages) + 1
        header = ([f"## {heading}"] if heading != section else [])
        head = f"[{n}] {title} — {m.uri}{_where(m.citation, title)}"
        sep = 1 if lines else 0
        room = budget_tokens - used - sep - count("\n".join([*header, head, ""]))
        original, truncated, fits, chunk, cost = body, False, False, "", 0
        for _ in range(4):  # cut to the room left; a tokenizer may count the joined text a little differently
            if count(body) > room:
                if room < MIN_PASSAGE_TOKENS:
                    break
                body, truncated = _cut(original, room, count), True
            chunk = "\n".join([*header, head, body])
            cost = count(chunk) + sep
            fits = used + cost <= budget_tokens
            if fits:
                break
            room -= used + cost - budget_tokens
        if not fits:
            omitted += 1
            continue
        lines.append(chunk)
        used += cost
        section = heading
        passages.append(Passage(n=n, uri=m.uri, context_type=str(getattr(m.context_type, "value", m.context_type)),
                                title=title, score=round(float(m.score), 4), text=body,
                                citation=dict(m.citation) if m.citation else None, truncated=truncated))
    text = "\n".join(lines)
    tokens = count(text) if text else 0
    while tokens > budget_tokens and passages:  # a tokenizer that counts a join differently: drop from the end
        passages.pop()
        omitted += 1
        text = "\n".join(lines[: len(passages)])
        tokens = count(text) if text else 0
    plan = getattr(answer, "query_plan", None)
    return ContextBlock(text=text, tokens=tokens, budget_tokens=budget_tokens, passages=passages, omitted=omitted,
                        counter=getattr(count, "__name__", "estimate"),
                        query_plan=plan.model_dump(mode="json") if plan is not None else None)
