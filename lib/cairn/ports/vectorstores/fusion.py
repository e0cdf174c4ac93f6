"""Hybrid fusion, shared by every backend that offers hybrid search.

Hybrid search runs a dense and a keyword (BM25) search for the same query, each ``depth``
deep, and fuses them with a **convex combination** of their scores::

    score = w · max(cosine, 0) + (1 − w) · bm25 / max(bm25)

with ``w = DENSE_WEIGHT``. Not reciprocal-rank fusion: RRF keeps only ranks, so a query that
matches nothing still gets "first in both lists" scores (gibberish came back at 0.50 under a
0.1 threshold). Here the dense part keeps its absolute scale (an unrelated text stays near 0)
and BM25, normalised by the best keyword score of the query, is a bounded bonus: a fused score
lies in 0..1 and the score threshold means what it means in dense mode. A query none of whose
words the corpus knows gets no keyword bonus at all.

``bm25 / max(bm25)`` is relative to what the query searched. A search inside part of what an
earlier search covered (thinking mode's search of one folder after its search of everything) passes
that search's best BM25 as ``keyword_scale``: normalised by the folder's own best, a page that
scored 0.20 in the whole search scored 0.42 inside its folder and ranked over better pages found
elsewhere (benchmarks/README.md, session 14). BM25 itself does not depend on the filter (the tenant's
statistics), so on one scale a record scores the same inside its folder as in the whole search.

A record one list did not return takes that list's floor: the lowest score the list holds
when it was cut at ``depth`` (everything below scores at most that), else 0 (the list held
every match). Both the local and the OpenSearch store call :func:`fuse`, so a hybrid score
means the same on both; the local reranker uses the same combination.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

from cairn.core.models import ScoreExplanation, ScoreTerm, TraceEvent
from cairn.ports.vectorstores.base import MAX_QUERY_LIMIT, VectorStore

K = TypeVar("K", bound=Hashable)

DENSE_WEIGHT = 0.7
# where the embedder was not trained on the query's language (``Embedder.languages``): its cosines
# there rank noise, so the keyword side leads (benchmarks/README.md, "Languages")
UNCOVERED_DENSE_WEIGHT = 0.0


def hybrid_depth(limit: int) -> int:
    """How deep each of the two searches of a hybrid query goes for ``limit`` results."""
    return min(max(2 * limit, 20), MAX_QUERY_LIMIT)


def _floor(scores: Sequence[float], depth: int) -> float:
    return min(scores) if scores and len(scores) >= depth else 0.0


def fuse(
    dense: Sequence[tuple[K, float]],
    keyword: Sequence[tuple[K, float]],
    limit: int,
    *,
    depth: int | None = None,
    dense_weight: float | None = None,
    keyword_scale: float | None = None,
    parts: dict[K, tuple[float, float, float]] | None = None,
) -> list[tuple[K, float]]:
    """The ``limit`` best keys of ``w·max(cos, 0) + (1−w)·bm25/max(bm25)``, best first (ties:
    dense order, then keyword order). ``dense``/``keyword``: (key, score) best first, each cut
    at ``depth`` (default ``hybrid_depth(limit)``); ``dense_weight``: ``w`` (None: ``DENSE_WEIGHT``);
    ``keyword_scale``: the BM25 score that counts as 1 (None: the best in ``keyword``; above it, 1).
    ``parts``, when given, receives each returned key's arms: ``(w, max(cos, 0), bm25 / max(bm25))``."""
    depth = depth or hybrid_depth(limit)
    w = DENSE_WEIGHT if dense_weight is None else dense_weight
    cos = dict(dense)
    kw = dict(keyword)
    best_kw = keyword_scale or max(kw.values(), default=0.0)
    cos_floor = _floor([s for _, s in dense], depth)
    kw_floor = _floor([s for _, s in keyword], depth)
    order = list(dict.fromkeys([k for k, _ in dense] + [k for k, _ in keyword]))
    fused: dict[K, float] = {}
    arms: dict[K, tuple[float, float]] = {}
    for key in order:
        c = max(cos.get(key, cos_floor), 0.0)
        b = min(kw.get(key, kw_floor) / best_kw, 1.0) if best_kw > 0 else 0.0
        fused[key], arms[key] = w * c + (1.0 - w) * b, (c, b)
    ranked = sorted(order, key=lambda key: -fused[key])[:limit]  # stable: ties keep dense, then keyword order
    if parts is not None:
        parts.update({key: (w, *arms[key]) for key in ranked})
    return [(key, fused[key]) for key in ranked]


def hybrid_explanation(arms: tuple[float, float, float] | None) -> ScoreExplanation | None:
    """The arithmetic of one fused score from its arms ``(w, max(cos, 0), bm25 / max(bm25))``; None without arms."""
    if arms is None:
        return None
    w, cosine, keyword = arms
    return ScoreExplanation.of("weighted_sum", [
        ScoreTerm(label="dense: cosine similarity to the query (at least 0)", score=cosine, weight=w),
        ScoreTerm(label="keyword: BM25 over the query's best BM25", score=keyword, weight=1.0 - w),
    ], note="hybrid fusion")


def uncovered_event(embedder: str, store: VectorStore, language: str, weight: float | None) -> TraceEvent:
    """What a trace says of a query in a language the embedder (its name) was not trained on."""
    if not store.capabilities().hybrid:
        return TraceEvent(kind="fallback", detail=f"{embedder} was not trained on {language!r} and the {store.backend} "
                          "store has no keyword search: the dense scores answer alone")
    return TraceEvent(kind="fallback", detail=f"{embedder} was not trained on {language!r}: "
                      f"keywords lead every search (dense weight {weight})")
