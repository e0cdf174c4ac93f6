"""Queries: cosine ranking with the same scores everywhere, batches equal to single queries,
keyword and hybrid search where the backend declares them, and the limits every backend enforces."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cairn.core.errors import FilterError, RecordValidationError, RequestError
from cairn.core.filters import ALL_OPERATORS
from cairn.ports.vectorstores.base import MAX_BATCH_QUERIES, SearchMode, VectorStore
from cairn.ports.vectorstores.fusion import fuse
from tests.contract.support import (
    DIM,
    NAMES,
    SPECS,
    build,
    cosine,
    names_of,
    query,
    seed,
    vec,
)

pytestmark = pytest.mark.contract


def test_results_are_ranked_by_cosine_with_the_same_scores_on_every_backend(store: VectorStore, tenant: str) -> None:
    records = seed(store, tenant)
    q = vec((0, 1.0), (1, 0.5), (2, 0.1))
    hits = store.query(query(tenant, q, limit=len(NAMES)))
    expected = sorted(NAMES, key=lambda n: -cosine(q, SPECS[n][2]["vector"]))
    assert [names_of([h], records).pop() for h in hits] == expected
    for h in hits:
        assert h.score == pytest.approx(cosine(q, h.record.vector or _vector_of(records, h.record.id)), abs=1e-4)
    top3 = store.query(query(tenant, q, limit=3))
    assert [h.record.id for h in top3] == [h.record.id for h in hits[:3]]


def test_query_many_equals_single_queries(store: VectorStore, new_tenant: Callable[[], str]) -> None:
    one, two = new_tenant(), new_tenant()
    seed(store, one)
    seed(store, two, ("a", "c", "g"))
    batch = [
        query(one, vec((0, 1.0)), limit=3),
        query(one, vec((1, 1.0)), limit=5, filter={"level": 2, "tags": {"$nin": ["faq"]}}),
        query(two, vec((4, 1.0)), limit=2),
        query(one, vec((2, 1.0)), limit=4, filter={"ancestors": {"$in": ["cairn://resources/docs"]}}),
    ]
    many = store.query_many(batch)
    singles = [store.query(q) for q in batch]
    assert [[(h.record.id, round(h.score, 5)) for h in hits] for hits in many] == [
        [(h.record.id, round(h.score, 5)) for h in hits] for hits in singles
    ]
    assert all(h.record.tenant == two for h in many[2]) and len(many[2]) == 2
    assert store.query_many([]) == []


def test_capabilities_are_declared(store: VectorStore) -> None:
    caps = store.capabilities()
    assert caps.filter_operators == ALL_OPERATORS
    assert caps.max_upsert_batch >= 100
    assert caps.hybrid <= caps.keyword  # hybrid needs keyword search
    if not caps.keyword:
        with pytest.raises(RequestError, match="does not support keyword"):
            store.query(query("anyone", text="refunds", mode=SearchMode.KEYWORD))


def test_keyword_search_ranks_by_bm25_within_the_filter_and_tenant(
    store: VectorStore, new_tenant: Callable[[], str]
) -> None:
    if not store.capabilities().keyword:
        pytest.skip(f"the {store.backend} backend declares no keyword search")
    tenant, other = new_tenant(), new_tenant()
    records = seed(store, tenant)
    seed(store, other, ("a",))
    hits = store.query(query(tenant, text="refunds", mode=SearchMode.KEYWORD, limit=10))
    found = [names_of([h], records).pop() for h in hits]
    # the records that mention refunds, but not the folder's overview "e" (L1): it lists its children's
    # abstracts, so it would compete with the very child it lists (matched by meaning only)
    assert found[0] == "a" and set(found) == {"a", "d"}
    assert all(h.score > 0 for h in hits) and [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    filtered = store.query(query(tenant, text="refunds", mode=SearchMode.KEYWORD, filter={"level": {"$lt": 2}}))
    assert names_of(filtered, records) == {"d"}
    assert store.query(query(tenant, text="zebra", mode=SearchMode.KEYWORD)) == []
    # words are matched by their stem: "refunding" finds the records that say "refunds"
    stemmed = store.query(query(tenant, text="Refunding", mode=SearchMode.KEYWORD, limit=10))
    assert {names_of([h], records).pop() for h in stemmed} == {"a", "d"}


def test_hybrid_search_fuses_dense_and_keyword_scores(store: VectorStore, tenant: str) -> None:
    if not store.capabilities().hybrid:
        pytest.skip(f"the {store.backend} backend declares no hybrid search")
    records = seed(store, tenant)
    q = vec((1, 1.0))  # dense favours c ("Error codes"), keyword favours a, d ("refunds")
    hits = store.query(query(tenant, q, text="refunds", mode=SearchMode.HYBRID, limit=3))
    assert len(hits) == 3
    dense = [(h.record.id, h.score) for h in store.query(query(tenant, q, limit=20))]
    keyword = [(h.record.id, h.score) for h in store.query(query(tenant, text="refunds", mode=SearchMode.KEYWORD, limit=20))]
    expected = dict(fuse(dense, keyword, 3, depth=20))
    assert [h.record.id for h in hits] == list(expected)
    for h in hits:
        assert h.score == pytest.approx(expected[h.record.id], abs=1e-5) and 0.0 <= h.score <= 1.0
    assert "a" in names_of(hits, records)  # second in dense, first in keyword: kept by fusion
    gibberish = store.query(query(tenant, q, text="qwzx plorf", mode=SearchMode.HYBRID, limit=3))
    assert [h.score for h in gibberish] == pytest.approx([0.7 * max(s, 0.0) for _, s in dense[:3]], abs=1e-5)  # no keyword bonus
    only_skills = store.query(query(tenant, q, text="refunds", mode=SearchMode.HYBRID, filter={"context_type": "skill"}))
    assert names_of(only_skills, records) == {"g"}



def test_a_hybrid_query_can_let_the_keywords_lead(store: VectorStore, tenant: str) -> None:
    # what a query in a language the embedder was not trained on asks for (cairn.engine.stages.retrieve)
    if not store.capabilities().hybrid:
        pytest.skip(f"the {store.backend} backend declares no hybrid search")
    seed(store, tenant)
    q = vec((1, 1.0))  # dense favours c, keyword a, d
    dense = [(h.record.id, h.score) for h in store.query(query(tenant, q, limit=20))]
    keyword = [(h.record.id, h.score) for h in store.query(query(tenant, text="refunds", mode=SearchMode.KEYWORD, limit=20))]
    led = store.query(query(tenant, q, text="refunds", mode=SearchMode.HYBRID, limit=3, dense_weight=0.0))
    assert [h.record.id for h in led] == [k for k, _ in fuse(dense, keyword, 3, depth=20, dense_weight=0.0)]
    # the records with the query's word first (a, d); c, first by cosine, only behind them at 0
    assert {h.record.id for h in led[:2]} == {k for k, _ in keyword} and all(h.score == 0 for h in led[2:])
    with pytest.raises(ValueError, match="dense_weight"):
        query(tenant, q, text="refunds", mode=SearchMode.HYBRID, dense_weight=1.5)

def test_a_hybrid_search_inside_a_folder_keeps_the_whole_searchs_scale(store: VectorStore, tenant: str) -> None:
    # thinking mode searches inside folders after a search of everything: given that search's best
    # BM25 (keyword_scale), a record scores inside the folder what it scored in the whole search
    if not store.capabilities().hybrid:
        pytest.skip(f"the {store.backend} backend declares no hybrid search")
    records = seed(store, tenant)
    q = vec((2, 1.0))
    everywhere = store.query(query(tenant, q, text="invoices", mode=SearchMode.HYBRID, limit=10))
    keyword = {h.record.id: h.score for h in store.query(query(tenant, text="invoices", mode=SearchMode.KEYWORD, limit=10))}
    assert {h.record.id: h.keyword for h in everywhere if h.keyword is not None} == pytest.approx(keyword)
    best = max(keyword.values())
    assert max(keyword, key=keyword.get) == records["b"].id  # the best keyword match lies outside the folder
    inside = {"parent_uri": "cairn://resources/docs"}  # the guide folder's own records (d, e), not b
    alone = store.query(query(tenant, q, text="invoices", mode=SearchMode.HYBRID, filter=inside))
    scaled = store.query(query(tenant, q, text="invoices", mode=SearchMode.HYBRID, filter=inside, keyword_scale=best))
    assert names_of(scaled, records) == names_of(alone, records) == {"d", "e"}
    whole = {h.record.id: h.score for h in everywhere}
    assert {h.record.id: h.score for h in scaled} == pytest.approx({h.record.id: whole[h.record.id] for h in scaled}, abs=1e-5)
    # on its own scale the folder's best keyword match counts as a full match, and scores higher
    assert max(h.score for h in alone) > max(h.score for h in scaled) + 0.05
    with pytest.raises(ValueError, match="keyword_scale"):
        query(tenant, q, text="invoices", mode=SearchMode.HYBRID, keyword_scale=0.0)


# ------------------------------------------------------------------ limits


def test_wrong_dimensions_are_refused(store: VectorStore, tenant: str) -> None:
    with pytest.raises(RecordValidationError, match=f"3 dimensions; this store holds {DIM}"):
        store.upsert([build(tenant, "a", vector=[1.0, 0.0, 0.0])])
    assert store.count(tenant) == 0
    with pytest.raises(RequestError, match=f"query vector has {DIM + 1} dimensions"):
        store.query(query(tenant, [1.0] * (DIM + 1)))


def test_limits_are_enforced_with_clear_errors(store: VectorStore, tenant: str) -> None:
    with pytest.raises(ValueError, match="less than or equal to 1000"):
        query(tenant, limit=1001)
    with pytest.raises(RequestError, match=f"at most {MAX_BATCH_QUERIES} queries, got {MAX_BATCH_QUERIES + 1}"):
        store.query_many([query(tenant)] * (MAX_BATCH_QUERIES + 1))
    for bad in ("", "../x", "a b", "x" * 64):
        with pytest.raises(RequestError, match="invalid tenant"):
            store.query(query(bad))
        with pytest.raises(RequestError, match="invalid tenant"):
            store.count(bad)
    with pytest.raises(RequestError, match="non-empty filter"):
        store.delete_by_filter(tenant, {})


def test_an_invalid_filter_is_refused_with_every_problem(store: VectorStore, tenant: str) -> None:
    bad = {"metadata.year": {"$regex": "^20"}, "$or": [{"level": 2}, {"tags": {"$in": "a"}}], "year": 1}
    with pytest.raises(FilterError) as info:
        store.query(query(tenant, filter=bad))
    paths = {p.path for p in info.value.problems}
    assert {"filter.metadata.year.$regex", "filter.$or[1].tags.$in", "filter.year"} <= paths
    assert "3 problems" in info.value.message and "$regex" in info.value.message
    with pytest.raises(FilterError):
        store.count(tenant, bad)
    with pytest.raises(FilterError):
        store.delete_by_filter(tenant, bad)


def _vector_of(records: dict, rid: str) -> list[float]:
    return next(r.vector for r in records.values() if r.id == rid)
