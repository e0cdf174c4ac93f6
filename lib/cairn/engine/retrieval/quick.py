"""Quick mode: one scoped vector search over all levels."""

from __future__ import annotations

import time

from cairn.core.models import Candidate, ThinkingTrace, TraceStats
from cairn.engine.assemble import best_chunk_per_document
from cairn.engine.retrieval.scope import keyword_statistics, scope_filter
from cairn.ports.vectorstores import SearchMode, VectorQuery, VectorStore
from cairn.ports.vectorstores.base import MAX_QUERY_LIMIT


def quick_search(
    store: VectorStore,
    tenant: str,
    vector: list[float],
    roots: list[str],
    limit: int,
    user_filter: dict | None = None,
    hybrid_text: str | None = None,
    collapse_chunks: bool = True,
    dense_weight: float | None = None,
) -> tuple[list[Candidate], ThinkingTrace]:
    """One scoped search. With ``hybrid_text`` and a backend that declares hybrid search, dense
    and BM25 scores are fused (:mod:`cairn.ports.vectorstores.fusion`: 0..1, on the dense scale);
    without, the search is dense and the trace says so. With ``collapse_chunks`` ``limit`` counts
    documents, one chunk each: the search reaches 2·limit deep, and searches again deeper when
    the chunks of a few documents filled the page (the trace's stop reason says "deepened").
    ``dense_weight``: the fusion's weight of the dense score (None: the stores' default)."""
    started = time.perf_counter()
    trace = ThinkingTrace(stats=TraceStats(mode="quick"))
    if not roots:
        trace.stats.stop_reason = "no_roots"
        return [], trace
    hybrid = bool(hybrid_text) and store.capabilities().hybrid
    if hybrid_text and not hybrid:
        trace.add("fallback", detail=f"the {store.backend} backend has no hybrid search: dense only")
    # With collapse_chunks, ``limit`` counts documents: search 2·limit deep, and deeper (x4 each
    # time, up to the backend's limit) while one document's chunks crowd the page.
    depth = min(2 * limit, MAX_QUERY_LIMIT) if collapse_chunks else limit
    reason = "hybrid" if hybrid else "vector"
    while True:
        req = VectorQuery(
            tenant=tenant,
            vector=vector,
            text=hybrid_text if hybrid else None,
            mode=SearchMode.HYBRID if hybrid else SearchMode.DENSE,
            filter=scope_filter(roots, user_filter),
            limit=depth,
            dense_weight=dense_weight if hybrid else None,
            keyword_statistics=keyword_statistics(roots),
        )
        hits = store.query(req)
        trace.stats.vector_calls += 1
        trace.add("global_search", detail=f"roots={roots} limit={depth} mode={req.mode.value} hits={len(hits)}")
        found = [Candidate(record=h.record, score=h.score, reason=reason, explanation=h.explanation) for h in hits]
        if not collapse_chunks:
            break
        found = best_chunk_per_document(found)
        if len(found) >= limit or len(hits) < depth or depth >= MAX_QUERY_LIMIT:
            found = found[:limit]
            break
        depth = min(4 * depth, MAX_QUERY_LIMIT)
    trace.stats.stop_reason = "single_search" if trace.stats.vector_calls == 1 else "deepened"
    trace.stats.latency_ms = (time.perf_counter() - started) * 1000
    trace.stats.candidates_kept = len(found)
    return found, trace
