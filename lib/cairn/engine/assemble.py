"""Small pure functions that turn candidates into the matches an agent reads."""

from __future__ import annotations

import math
from collections.abc import Iterable

from cairn.core import uri as uris
from cairn.core.models import MAX_MATCH_TEXT_CHARS, Candidate, Level, MatchedContext
from cairn.engine.explain import consistent, hot

DEFAULT_THRESHOLD = 0.1
HOTNESS_HALF_LIFE_S = 7 * 24 * 3600


def finite(score: float) -> float:
    """NaN and infinities become 0."""
    return score if math.isfinite(score) else 0.0


def above_threshold(candidates: Iterable[Candidate], threshold: float) -> list[Candidate]:
    """Keep candidates whose score is strictly greater than ``threshold``."""
    return [c for c in candidates if finite(c.score) > threshold]


def document_key(uri: str) -> str:
    """The document a URI belongs to: a chunk (``.../guide.md#3``) belongs to its file."""
    return uri.split("#", 1)[0]


def dedupe_by_uri(candidates: Iterable[Candidate], collapse_chunks: bool = True) -> list[Candidate]:
    """One candidate per URI (a directory's L0 and L1 share one), the highest score kept; best
    first. With ``collapse_chunks`` (the default), one per document: the chunks of a file are
    represented by their best chunk, so they do not crowd the results."""
    best: dict[str, Candidate] = {}
    for c in candidates:
        key = document_key(c.uri) if collapse_chunks else c.uri
        if key not in best or finite(c.score) > finite(best[key].score):
            best[key] = c
    return sorted(best.values(), key=lambda c: (-finite(c.score), c.uri))


def best_chunk_per_document(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Drop every chunk of a file but its best one (order kept; directories untouched): a
    retriever calls it before cutting to its hand-on size, so that ``limit`` means documents."""
    out: list[Candidate] = []
    seen: dict[str, int] = {}
    for c in candidates:
        if "#" not in c.uri:
            out.append(c)
            continue
        key = f"{document_key(c.uri)}\x00{int(c.record.level)}"
        at = seen.get(key)
        if at is None:
            seen[key] = len(out)
            out.append(c)
        elif finite(c.score) > finite(out[at].score):
            out[at] = c
    return out


def to_match(c: Candidate) -> MatchedContext:
    r = c.record
    return MatchedContext(
        context_type=r.context_type,
        uri=uris.display_uri(r.uri, r.level),
        level=r.level,
        score=round(finite(c.score), 6),
        abstract=r.abstract,
        tags=tuple(r.tags),
        title=r.title,
        citation=citation_of(r.metadata),
        text=bounded_text(r.text if r.level is Level.DETAIL and r.text else r.abstract),
        explanation=consistent(c),
    )


def bounded_text(text: str, limit: int = MAX_MATCH_TEXT_CHARS) -> str:
    """``text`` cut to ``limit`` characters at the last sentence (else word) end before it, with
    an ellipsis when it was cut."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    cut = max(head.rfind(". "), head.rfind(".\n"), head.rfind("? "), head.rfind("! "))
    if cut < limit // 2:
        cut = head.rfind(" ")
    return (head[: cut + 1] if cut > 0 else head).rstrip() + "…"


CITATION_PREFIX = "citation."


def citation_of(metadata: dict) -> dict | None:
    """Where in its document a match comes from (page, heading path, character offsets, ...): the
    ``citation.*`` metadata ingestion writes on each chunk; None when there is none."""
    found = {k[len(CITATION_PREFIX):]: v for k, v in metadata.items() if k.startswith(CITATION_PREFIX)}
    return found or None


def hotness(active_count: int, updated_at: float, now: float, half_life_s: float = HOTNESS_HALF_LIFE_S) -> float:
    """How "hot" a context is, in [0, 1): use (saturating in ``active_count``) times recency
    (halving every ``half_life_s`` since ``updated_at``)."""
    use = 1.0 - 1.0 / (1.0 + math.log1p(max(active_count, 0)))
    age = max(now - updated_at, 0.0)
    return use * 0.5 ** (age / half_life_s)


def blend_hotness(c: Candidate, weight: float, now: float) -> Candidate:
    """``(1−weight)·score + weight·hotness``, with its arithmetic; a weight of 0 (the default) changes nothing."""
    if weight <= 0:
        return c
    return hot(c, finite(c.score), hotness(c.record.active_count, c.record.updated_at, now), weight)
