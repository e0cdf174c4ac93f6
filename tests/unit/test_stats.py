"""The retrieval statistics collector: per-type totals, snapshot, thread safety."""

from __future__ import annotations

import math
import threading

import pytest

from cairn.core.models import ContextType, Level, MatchedContext, QueryResult, TraceStats, TypedQuery
from cairn.ports.observability.stats import RetrievalStats, StatsSnapshot

pytestmark = pytest.mark.unit


def test_records_are_totalled_per_context_type():
    s = RetrievalStats()
    s.record(ContextType.RESOURCE, scores=[0.9, 0.4], latency_ms=10, vector_calls=3, rounds=2, rerank_used=True)
    s.record("resource", scores=[], latency_ms=30, vector_calls=1, rerank_fallback="error")
    s.record(ContextType.MEMORY, scores=[0.2], latency_ms=5, vector_calls=1)
    snap = s.snapshot()
    assert isinstance(snap, StatsSnapshot)
    res = snap.by_type["resource"]
    assert (res.queries, res.results, res.zero_result_queries) == (2, 2, 1)
    assert (res.score_min, res.score_max) == (0.4, 0.9) and res.score_mean == pytest.approx(0.65)
    assert res.latency_ms_mean == 20 and res.latency_ms_max == 30
    assert (res.vector_calls, res.rounds) == (4, 2) and res.vector_calls_per_query == 2
    assert res.rerank_used == 1 and res.rerank_fallbacks == 1 and res.rerank_fallback_reasons == {"error": 1}
    assert snap.by_type["memory"].queries == 1
    assert snap.total.queries == 3 and snap.total.results == 3 and snap.total.score_min == 0.2


def test_a_query_across_all_types_is_recorded_as_all():
    s = RetrievalStats()
    s.record(None, scores=[0.5], latency_ms=1)
    assert list(s.snapshot().by_type) == ["all"]


def test_no_scores_means_no_score_statistics():
    s = RetrievalStats()
    s.record("skill", scores=[], latency_ms=2)
    st = s.snapshot().by_type["skill"]
    assert st.score_min is None and st.score_mean is None and st.score_max is None
    assert st.zero_result_queries == 1


def test_non_finite_scores_count_as_results_but_not_in_score_statistics():
    s = RetrievalStats()
    s.record("resource", scores=[math.nan, 0.3, math.inf], latency_ms=2)
    st = s.snapshot().by_type["resource"]
    assert st.results == 3 and st.score_min == st.score_max == 0.3


def test_latency_percentiles():
    s = RetrievalStats()
    for ms in range(1, 101):
        s.record("resource", scores=[0.5], latency_ms=ms)
    st = s.snapshot().by_type["resource"]
    assert st.latency_ms_p50 == pytest.approx(50.5)
    assert st.latency_ms_p95 == pytest.approx(95.05)


def test_snapshot_is_a_copy_and_serialises():
    s = RetrievalStats()
    s.record("resource", scores=[0.5], latency_ms=1, rerank_fallback="empty")
    snap = s.snapshot()
    s.record("resource", scores=[0.5], latency_ms=1)
    assert snap.by_type["resource"].queries == 1
    data = snap.model_dump(mode="json")
    assert data["by_type"]["resource"]["rerank_fallback_reasons"] == {"empty": 1}


def test_reset_forgets_everything():
    s = RetrievalStats()
    s.record("resource", scores=[0.5], latency_ms=1)
    s.reset()
    snap = s.snapshot()
    assert snap.by_type == {} and snap.total.queries == 0


def test_record_result_reads_matches_and_trace():
    qr = QueryResult(
        query=TypedQuery(query="refunds", context_type=ContextType.RESOURCE),
        matches=[
            MatchedContext(context_type=ContextType.RESOURCE, uri="cairn://resources/a", level=Level.DETAIL,
                           score=0.8, abstract=""),
            MatchedContext(context_type=ContextType.RESOURCE, uri="cairn://resources/b", level=Level.DETAIL,
                           score=0.3, abstract=""),
        ],
    )
    qr.trace.stats = TraceStats(mode="thinking", rounds=2, vector_calls=3, rerank_used=False,
                                rerank_fallback="length_mismatch", latency_ms=42.0)
    s = RetrievalStats()
    s.record_many([qr])
    st = s.snapshot().by_type["resource"]
    assert (st.queries, st.results, st.score_max, st.rounds, st.vector_calls) == (1, 2, 0.8, 2, 3)
    assert st.latency_ms_max == 42.0 and st.rerank_fallback_reasons == {"length_mismatch": 1}


def test_concurrent_records_are_not_lost():
    s = RetrievalStats()
    per_thread, threads = 500, 8

    def work(i: int) -> None:
        for _ in range(per_thread):
            s.record("resource" if i % 2 else "memory", scores=[0.5, 0.25], latency_ms=1.0, vector_calls=1)

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    snap = s.snapshot()
    assert snap.total.queries == per_thread * threads
    assert snap.total.results == 2 * per_thread * threads
    assert snap.by_type["memory"].vector_calls == per_thread * threads // 2
