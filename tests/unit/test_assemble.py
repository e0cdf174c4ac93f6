import math

import pytest

from cairn.core.models import Candidate, ContextRecord, ContextType, TypedQuery
from cairn.core.requests import FindRequest
from cairn.engine.assemble import above_threshold, best_chunk_per_document, dedupe_by_uri
from cairn.engine.stages import RetrieveOutput, rerank

pytestmark = pytest.mark.unit


def cand(uri, score, level=2):
    return Candidate(record=ContextRecord.build(tenant="t", uri=uri, level=level, abstract=uri), score=score)


def test_threshold_is_strict_and_drops_non_finite():
    cs = [cand("cairn://resources/a", 0.1), cand("cairn://resources/b", 0.1001), cand("cairn://resources/c", math.nan)]
    assert [c.uri for c in above_threshold(cs, 0.1)] == ["cairn://resources/b"]


def test_dedupe_keeps_best_level_of_a_directory():
    cs = [cand("cairn://resources/d", 0.4, level=0), cand("cairn://resources/d", 0.6, level=1), cand("cairn://resources/e", 0.5)]
    out = dedupe_by_uri(cs)
    assert [(c.uri, c.record.level) for c in out] == [("cairn://resources/d", 1), ("cairn://resources/e", 2)]


def test_rerank_stage_cuts_buckets_and_reports_display_uris():
    req = FindRequest(query="q", limit=2)
    out = RetrieveOutput(
        query=TypedQuery(query="q"),
        candidates=[
            cand("cairn://resources/a.md", 0.9),
            cand("cairn://resources/dir", 0.8, level=0),
            cand("cairn://resources/b.md", 0.7),
            cand("cairn://user/u/memories/m", 0.95),
            cand("cairn://agent/skills/s", 0.05),
        ],
    )
    res = rerank([out], req)
    # cut to the limit per context type of each typed query, best first, then bucketed: a
    # memory does not take a resource's place
    assert [m.uri for m in res.memories] == ["cairn://user/u/memories/m"]
    assert [m.uri for m in res.resources] == ["cairn://resources/a.md", "cairn://resources/dir/.abstract.md"]
    assert res.skills == [] and res.total == 3
    assert res.query_results[0].trace.stats.candidates_excluded == 2


def test_rerank_stage_shows_directories_with_their_level_suffix():
    res = rerank([RetrieveOutput(query=TypedQuery(query="q"), candidates=[cand("cairn://resources/dir", 0.8, level=1)])], FindRequest(query="q"))
    assert res.resources[0].uri == "cairn://resources/dir/.overview.md"
    assert res.resources[0].context_type is ContextType.RESOURCE


def test_the_same_uri_from_two_typed_queries_is_listed_once():
    req = FindRequest(query="q")
    a = RetrieveOutput(query=TypedQuery(query="q1"), candidates=[cand("cairn://resources/a.md", 0.5)])
    b = RetrieveOutput(query=TypedQuery(query="q2"), candidates=[cand("cairn://resources/a.md", 0.7)])
    res = rerank([a, b], req)
    assert [(m.uri, m.score) for m in res.resources] == [("cairn://resources/a.md", 0.7)]


def test_chunks_of_one_document_collapse_into_its_best_chunk():
    cs = [
        cand("cairn://resources/docs/guide.md#0", 0.5),
        cand("cairn://resources/docs/guide.md#3", 0.8),
        cand("cairn://resources/docs/faq.md", 0.6),
        cand("cairn://resources/docs/guide.md#1", 0.7),
    ]
    out = dedupe_by_uri(cs)
    assert [(c.uri, c.score) for c in out] == [("cairn://resources/docs/guide.md#3", 0.8), ("cairn://resources/docs/faq.md", 0.6)]
    every = dedupe_by_uri(cs, collapse_chunks=False)  # the option that returns every chunk
    assert len(every) == 4


def test_a_retriever_keeps_the_best_chunk_per_document_in_its_order():
    cs = [
        cand("cairn://resources/docs/guide.md#0", 0.5),
        cand("cairn://resources/docs", 0.45, level=0),
        cand("cairn://resources/docs/guide.md#3", 0.8),
        cand("cairn://resources/docs/faq.md", 0.4),
    ]
    out = best_chunk_per_document(cs)
    assert [c.uri for c in out] == ["cairn://resources/docs/guide.md#3", "cairn://resources/docs", "cairn://resources/docs/faq.md"]
