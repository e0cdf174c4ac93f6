"""search(): planning, 0-query short circuit, rerank in the stage, sessions; with hand-written fakes."""

import math

import pytest

from cairn import Cairn
from cairn.core.models import ContextRecord, QueryPlan
from cairn.ports.rerank.base import Reranker
from cairn.ports.sessions import open_session_store
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.unit


class TableEmbedder:
    """Maps known texts to fixed unit vectors (4 dims); anything else to e0."""

    name, dimension, batch_size = "table", 4, 8

    def embed_one(self, text):
        import numpy as np

        return np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)

    def embed(self, texts, input_type="document"):
        import numpy as np

        return np.stack([self.embed_one(t) for t in texts])


class RecordingReranker(Reranker):
    name = "recording"

    def __init__(self, answer=None, fail=False):
        super().__init__()
        self.answer, self.fail, self.sent = answer, fail, []

    def _score(self, query, documents):
        self.sent.append((query, list(documents)))
        if self.fail:
            raise RuntimeError("backend down")
        return self.answer(documents) if callable(self.answer) else self.answer


class ChitChatPlanner:
    name = "chitchat"

    def plan(self, query, session=None, *, context_type=None, target_uris=()):
        return QueryPlan(reasoning="a greeting needs no retrieval", queries=(), planner=self.name)


def vec(score):
    return [score, math.sqrt(1 - score * score), 0.0, 0.0]


@pytest.fixture
def svc(tmp_path):
    store = LocalVectorStore(None, dimension=4)
    store.upsert(
        [
            ContextRecord.build(tenant="t", uri="cairn://resources/kb/a.md", level=2, text="alpha text", vector=vec(0.9)),
            ContextRecord.build(tenant="t", uri="cairn://resources/kb/b.md", level=2, text="beta text", vector=vec(0.8)),
            ContextRecord.build(tenant="t", uri="cairn://resources/kb/c.md", level=2, text="gamma text", vector=vec(0.7)),
        ]
    )
    return Cairn(store, TableEmbedder(), "t", sessions=open_session_store("sqlite", path=tmp_path / "s.db"))


def test_the_reranker_reorders_and_the_trace_says_so(svc):
    svc.reranker = RecordingReranker(answer=lambda docs: [0.95 if "beta" in d else 0.2 for d in docs])
    res = svc.search("which text?", limit=1)
    assert [m.uri for m in res.resources] == ["cairn://resources/kb/b.md"]
    stats = res.query_results[0].trace.stats
    assert stats.mode == "thinking" and stats.rerank_used and stats.rerank_fallback is None
    # 2·limit candidates were handed on to the reranker: c.md (third by vector) was not sent
    assert [d.split()[0] for d in svc.reranker.sent[0][1]] == ["alpha", "beta"]


def test_a_failing_reranker_keeps_vector_scores_and_is_counted(svc):
    svc.reranker = RecordingReranker(fail=True)
    res = svc.search("which text?", limit=2)
    assert [m.uri for m in res.resources] == ["cairn://resources/kb/a.md", "cairn://resources/kb/b.md"]
    assert res.query_results[0].trace.stats.rerank_fallback == "error"
    assert any(e.kind == "fallback" for e in res.query_results[0].trace.events)


def test_find_does_not_rerank_unless_asked(svc):
    svc.reranker = RecordingReranker(answer=lambda docs: [0.5] * len(docs))
    svc.find("which text?")
    assert svc.reranker.sent == []
    svc.find("which text?", rerank=True)
    assert len(svc.reranker.sent) == 1


def test_zero_planned_queries_return_an_empty_result_without_retrieval(svc):
    svc.planner = ChitChatPlanner()
    before = dict(svc.store.metrics.calls)
    res = svc.search("hi there!")
    assert res.total == 0 and res.query_plan.planner == "chitchat" and res.query_plan.queries == ()
    assert dict(svc.store.metrics.calls) == before  # no vector call at all


def test_search_with_a_session_stores_the_prefetched_context(svc):
    session = svc.sessions.create("t", user="ann")
    svc.sessions.append("t", session.id, "user", "tell me about alpha")
    res = svc.search("and the details?", session_id=session.id, limit=2)
    view = svc.sessions.get("t", session.id)
    assert view.prefetched == res.to_dict()
    assert res.query_plan is not None


def test_statistics_are_recorded_per_retrieval(svc):
    svc.find("which text?")
    svc.search("which text?")
    snap = svc.stats.snapshot()
    assert snap.total.queries == 2


def test_limit_counts_documents_even_when_one_document_fills_the_first_page(tmp_path):
    store = LocalVectorStore(None, dimension=4)
    long_doc = [ContextRecord.build(tenant="t", uri=f"cairn://resources/kb/long.md#{n}", level=2,
                                    text=f"long text {n}", vector=vec(0.95 - n * 0.001)) for n in range(30)]
    others = [ContextRecord.build(tenant="t", uri=f"cairn://resources/kb/{name}.md", level=2, text=f"{name} text",
                                  vector=vec(score)) for name, score in (("a", 0.8), ("b", 0.7), ("c", 0.6))]
    store.upsert(long_doc + others)
    svc = Cairn(store, TableEmbedder(), "t")
    res = svc.find("which text?", limit=3, hybrid=False, include_provenance=True)
    assert [m.uri for m in res.resources] == ["cairn://resources/kb/long.md#0", "cairn://resources/kb/a.md",
                                              "cairn://resources/kb/b.md"]
    assert res.query_results[0].trace.stats.stop_reason == "deepened"  # 6 chunks of long.md filled the first page
    thinking = svc.find("which text?", limit=3, hybrid=False, mode="thinking")  # its global search pages 30 deep
    assert [m.uri for m in thinking.resources] == [m.uri for m in res.resources]
    every_chunk = svc.find("which text?", limit=3, hybrid=False, collapse_chunks=False)
    assert [m.uri for m in every_chunk.resources] == [f"cairn://resources/kb/long.md#{n}" for n in range(3)]
