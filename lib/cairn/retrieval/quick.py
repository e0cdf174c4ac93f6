"""Quick mode: one scoped vector search over all levels."""

from __future__ import annotations

import time

from ..models import Candidate, ThinkingTrace, TraceStats
from ..assemble import best_chunk_per_document
from ..vectorstores import SearchMode, VectorQuery, VectorStore
from ..vectorstores.base import MAX_QUERY_LIMIT
from .scope import scope_filter


def quick_search(
    store: VectorStore,
    tenant: str,
    vector: list[float],
    roots: list[str],
    limit: int,
    user_filter: dict | None = None,
    hybrid_text: str | None = None,
    collapse_chunks: bool = True,
) -> tuple[list[Candidate], ThinkingTrace]:
    """One scoped search. With ``hybrid_text`` and a backend that declares hybrid search, dense
    and BM25 scores are fused (:mod:`cairn.vectorstores.fusion`: 0..1, on the dense scale);
    without, the search is dense and the trace says so. With ``collapse_chunks`` the search
    reaches deeper (2·limit) so that ``limit`` counts documents, one chunk each."""
    started = time.perf_counter()
    trace = ThinkingTrace(stats=TraceStats(mode="quick"))
    if not roots:
        trace.stats.stop_reason = "no_roots"
        return [], trace
    hybrid = bool(hybrid_text) and store.capabilities().hybrid
    if hybrid_text and not hybrid:
        trace.add("fallback", detail=f"the {store.backend} backend has no hybrid search: dense only")
    req = VectorQuery(
        tenant=tenant,
        vector=vector,
        text=hybrid_text if hybrid else None,
        mode=SearchMode.HYBRID if hybrid else SearchMode.DENSE,
        filter=scope_filter(roots, user_filter),
        limit=min(2 * limit, MAX_QUERY_LIMIT) if collapse_chunks else limit,
    )
    hits = store.query(req)
    trace.add("global_search", detail=f"roots={roots} limit={limit} mode={req.mode.value} hits={len(hits)}")
    trace.stats.vector_calls = 1
    trace.stats.stop_reason = "single_search"
    trace.stats.latency_ms = (time.perf_counter() - started) * 1000
    reason = "hybrid" if hybrid else "vector"
    found = [Candidate(record=h.record, score=h.score, reason=reason) for h in hits]
    if collapse_chunks:
        found = best_chunk_per_document(found)[:limit]
    trace.stats.candidates_kept = len(found)
    return found, trace
