"""The local reranker (dense cosine on the full text fused with BM25) with the real LocalEmbedder."""

from __future__ import annotations

import numpy as np
import pytest

from cairn.core.errors import ConfigError
from cairn.core.models import Candidate, ContextRecord
from cairn.ports.rerank import build_reranker
from cairn.ports.rerank.local import LocalReranker, _windows, bm25_scores

pytestmark = pytest.mark.unit


def leaf(name: str, text: str, score: float, title: str = "") -> Candidate:
    rec = ContextRecord.build(tenant="acme", uri=f"cairn://resources/handbook/{name}", level=2, text=text, title=title)
    return Candidate(record=rec, score=score)


def directory(name: str, abstract: str, score: float) -> Candidate:
    rec = ContextRecord.build(tenant="acme", uri=f"cairn://resources/{name}", level=0, title=name, abstract=abstract)
    return Candidate(record=rec, score=score)


# The vector scores put the relevant text last, as a summary-level hit can.
POOL = [
    leaf("invoices", "Invoices are emailed on the first day of each month as PDF files.", 0.62),
    leaf("travel", "Employees book flights through the travel portal; hotels above 200 euros need approval.", 0.58),
    directory("billing", "Billing policies: invoices, payment methods and the billing page.", 0.57),
    leaf("refunds", "Customers can request a refund within 30 days of purchase. Refunds are paid back "
                    "to the original card within five business days.", 0.41),
]


@pytest.fixture(scope="module")
def reranker(embedder):
    return LocalReranker(embedder)


def test_relevant_text_comes_first(reranker):
    out = reranker.rerank("how long until my refund reaches my card?", POOL)
    assert out.candidates[0].uri.endswith("/refunds")
    assert out.fallback is None and out.used and out.sent == 4
    assert all(0.0 <= c.score <= 1.0 for c in out.candidates)


def test_an_unrelated_candidate_scores_low_on_an_absolute_scale(reranker):
    out = reranker.rerank("refund to the original card", POOL)
    by = {c.uri.rsplit("/", 1)[1]: c.score for c in out.candidates}
    assert by["refunds"] > 0.5
    assert by["travel"] < by["refunds"] / 2


def test_bm25_adds_lexical_evidence_the_embedding_blurs(embedder):
    # Two near-identical texts that differ only in an order number the query names.
    pool = [
        leaf("a", "Order AX-1093 was shipped on Monday.", 0.5),
        leaf("b", "Order QZ-7781 was shipped on Monday.", 0.5),
    ]
    dense_only = LocalReranker(embedder, dense_weight=1.0).rerank("where is order QZ-7781", pool)
    fused = LocalReranker(embedder).rerank("where is order QZ-7781", pool)
    gap_dense = abs(dense_only.scores[0] - dense_only.scores[1])
    assert fused.candidates[0].uri.endswith("/b")
    assert abs(fused.scores[0] - fused.scores[1]) > gap_dense


def test_bm25_is_zero_when_no_term_is_shared():
    assert np.all(bm25_scores("zebra", ["apples and pears", "the sea"]) == 0)
    scores = bm25_scores("pears", ["apples and pears", "the sea"])
    assert scores[0] > 0 and scores[1] == 0


def test_windows_cover_head_and_tail():
    text = "a" * 100 + "b" * 100 + "c" * 100
    parts = _windows(text, 100, 3)
    assert parts == ["a" * 100, "b" * 100, "c" * 100]
    assert _windows(text, 100, 1) == ["a" * 100]
    assert _windows("short", 100, 4) == ["short"]


def test_more_windows_let_the_model_read_past_its_first_window(embedder):
    filler = " ".join(f"Section {n} describes office furniture, desks and chairs." for n in range(60))
    long = leaf("long", filler + " Finally: refunds are paid back to the original card within five days.", 0.5)
    other = leaf("other", "Desks and chairs are ordered through facilities.", 0.5)
    head_only = LocalReranker(embedder, dense_weight=1.0).dense_scores("refund to my card", [long.record.text])[0]
    windowed = LocalReranker(embedder, dense_weight=1.0, windows=4).dense_scores("refund to my card",
                                                                               [long.record.text])[0]
    assert windowed > head_only
    out = LocalReranker(embedder, windows=4).rerank("refund to my card", [other, long])
    assert out.candidates[0].uri.endswith("/long")


def test_invalid_options_are_rejected(embedder):
    with pytest.raises(ConfigError, match="dense_weight"):
        LocalReranker(embedder, dense_weight=1.5)
    with pytest.raises(ConfigError, match="windows"):
        LocalReranker(embedder, windows=0)


def test_factory_builds_the_local_reranker(embedder):
    r = build_reranker("local", embedder=embedder, dense_weight=0.6)
    assert isinstance(r, LocalReranker) and r.dense_weight == 0.6 and r.name == "local:local-minilm"


class CountingEmbedder:
    """The real local embedder under another name (as a paid remote embedder is), counting texts."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.dimension, self.texts = inner, "bedrock:counting", inner.dimension, []

    def embed(self, texts):
        self.texts += list(texts)
        return self.inner.embed(texts)


def with_stored_vectors(embedder, pool):
    """The candidates as the Rerank task reads them back: each record with the vector the store holds."""
    vectors = embedder.embed([c.record.rerank_text for c in pool])
    return [c.model_copy(update={"record": c.record.model_copy(update={"vector": [float(x) for x in v]})})
            for c, v in zip(pool, vectors)]


def test_stored_vectors_embed_the_query_only_and_rank_as_the_texts_do(embedder):
    counting = CountingEmbedder(embedder)
    pool = with_stored_vectors(embedder, POOL)
    out = LocalReranker(counting).rerank("how long until my refund reaches the card?", pool)  # auto: stored
    assert counting.texts == ["how long until my refund reaches the card?"]  # one call, no candidate re-embedded
    by_text = LocalReranker(embedder, vectors="text").rerank("how long until my refund reaches the card?", pool)
    assert [c.record.uri for c in out.candidates] == [c.record.uri for c in by_text.candidates]
    assert out.candidates[0].record.uri.endswith("/refunds")


def test_a_candidate_without_a_stored_vector_sends_the_set_down_the_text_path(embedder):
    counting = CountingEmbedder(embedder)
    pool = with_stored_vectors(embedder, POOL)
    pool[1] = POOL[1]  # no vector
    LocalReranker(counting, vectors="stored").rerank("refund", pool)
    assert len(counting.texts) == 1 + len(POOL)


def test_auto_re_embeds_texts_only_with_the_local_model(embedder):
    assert LocalReranker(embedder).stored_vectors is False  # free locally: the full text is read
    assert LocalReranker(CountingEmbedder(embedder)).stored_vectors is True
    with pytest.raises(ConfigError, match="vectors must be one of auto, stored, text"):
        LocalReranker(embedder, vectors="both")
