"""Quick mode: one scoped vector search over all levels."""

from __future__ import annotations

import time

from ..models import Candidate, ThinkingTrace, TraceStats
from ..vectorstores import VectorQuery, VectorStore
from .scope import scope_filter


def quick_search(
    store: VectorStore,
    tenant: str,
    vector: list[float],
    roots: list[str],
    limit: int,
    user_filter: dict | None = None,
) -> tuple[list[Candidate], ThinkingTrace]:
    started = time.perf_counter()
    trace = ThinkingTrace(stats=TraceStats(mode="quick"))
    if not roots:
        trace.stats.stop_reason = "no_roots"
        return [], trace
    hits = store.query(VectorQuery(tenant=tenant, vector=vector, filter=scope_filter(roots, user_filter), limit=limit))
    trace.add("global_search", detail=f"roots={roots} limit={limit} hits={len(hits)}")
    trace.stats.vector_calls = 1
    trace.stats.candidates_kept = len(hits)
    trace.stats.stop_reason = "single_search"
    trace.stats.latency_ms = (time.perf_counter() - started) * 1000
    return [Candidate(record=h.record, score=h.score, reason="vector") for h in hits], trace
