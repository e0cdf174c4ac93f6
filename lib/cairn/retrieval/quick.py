"""Quick mode: one scoped vector search over all levels."""

from __future__ import annotations

import time

from ..models import Candidate, ThinkingTrace, TraceStats
from ..vectorstores import SearchMode, VectorQuery, VectorStore
from ..vectorstores.fusion import RRF_K
from .scope import scope_filter

# A hybrid (RRF) score divided by this is 1 for a record ranked first by both searches.
RRF_BEST = 2.0 / (RRF_K + 1)


def quick_search(
    store: VectorStore,
    tenant: str,
    vector: list[float],
    roots: list[str],
    limit: int,
    user_filter: dict | None = None,
    hybrid_text: str | None = None,
) -> tuple[list[Candidate], ThinkingTrace]:
    """One scoped search. With ``hybrid_text`` and a backend that declares hybrid search, dense
    and BM25 rankings are fused (RRF), scores scaled so that first in both is 1."""
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
        limit=limit,
    )
    hits = store.query(req)
    scale = RRF_BEST if hybrid else 1.0
    trace.add("global_search", detail=f"roots={roots} limit={limit} mode={req.mode.value} hits={len(hits)}")
    trace.stats.vector_calls = 1
    trace.stats.candidates_kept = len(hits)
    trace.stats.stop_reason = "single_search"
    trace.stats.latency_ms = (time.perf_counter() - started) * 1000
    reason = "hybrid" if hybrid else "vector"
    return [Candidate(record=h.record, score=h.score / scale, reason=reason) for h in hits], trace
