"""The Pinecone store through the real pinecone SDK, over HTTP, against the data-plane emulator."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

import httpx
import pytest

from cairn.core.config import PineconeSettings
from cairn.core.errors import RecordValidationError, VectorStoreRequestError, VectorStoreUnavailable
from cairn.core.models import ContextRecord
from cairn.ports.vectorstores import VectorQuery
from cairn.ports.vectorstores.pinecone import PineconeVectorStore
from tests.emulators.pinecone_emulator import (
    MAX_METADATA_BYTES,
    MAX_REQUEST_BYTES,
    PineconeEmulator,
    make_pinecone_store,
    start_pinecone_emulator,
)

pytestmark = pytest.mark.integration
DIM = 8


@pytest.fixture
def emulator() -> Iterator[PineconeEmulator]:
    em = start_pinecone_emulator(DIM, api_key="test-key")
    yield em
    em.stop()


@pytest.fixture
def store(emulator: PineconeEmulator) -> Iterator[PineconeVectorStore]:
    s = make_pinecone_store(emulator, DIM)
    yield s
    s.close()


def onehot(i: int, tilt: float = 0.0) -> list[float]:
    v = [0.0] * DIM
    v[i % DIM] = 1.0
    v[(i + 1) % DIM] = tilt
    return v


def rec(tenant: str, name: str, vec: list[float], level: int = 2, **kw: object) -> ContextRecord:
    return ContextRecord.build(tenant=tenant, uri=f"cairn://resources/docs/{name}", level=level, vector=vec, **kw)


def query(tenant: str, vec: list[float], limit: int = 10, **kw: object) -> VectorQuery:
    return VectorQuery(tenant=tenant, vector=vec, limit=limit, **kw)  # type: ignore[arg-type]


def test_records_round_trip_through_the_sdk(store: PineconeVectorStore) -> None:
    a = rec("acme", "a.md", onehot(0), title="A", abstract="about a", text="body a", tags=["x", "y"],
            metadata={"year": 2021, "score": 0.5, "draft": False, "authors": ["ann", "bob"]},
            created_at=1_700_000_000.5, active_count=3, content_hash="h1")
    b = rec("acme", "b", onehot(3), level=0, title="B dir")
    assert store.upsert([a, b]) == 2
    assert store.fetch("acme", [a.id, b.id, "missing"]) == [a, b]
    hits = store.query(query("acme", onehot(0, tilt=0.5), include_vectors=True))
    assert [h.record.uri for h in hits] == [a.uri, b.uri]
    assert hits[0].score == pytest.approx(1 / math.sqrt(1.25))  # cosine similarity, as returned
    assert hits[0].record == a
    assert hits[1].score == pytest.approx(0.0)


def test_namespaces_isolate_tenants(store: PineconeVectorStore, emulator: PineconeEmulator) -> None:
    store.upsert([rec("acme", "a.md", onehot(0)), rec("beta", "a.md", onehot(0)), rec("beta", "b.md", onehot(1))])
    assert set(emulator.namespaces) == {"acme", "beta"}
    assert [h.record.tenant for h in store.query(query("acme", onehot(0)))] == ["acme"]
    assert (store.count("acme"), store.count("beta"), store.count("nobody")) == (1, 2, 0)
    assert store.delete("acme", [rec("beta", "b.md", onehot(1)).id]) == 0  # beta's id is not in acme


def test_more_than_1000_records_go_in_several_upserts(store: PineconeVectorStore,
                                                       emulator: PineconeEmulator) -> None:
    records = [rec("acme", f"r{i}.md", onehot(i, tilt=i / 2500)) for i in range(2500)]
    assert store.upsert(records) == 2500
    sizes = [len(r.body["vectors"]) for r in emulator.requests if r.path == "/vectors/upsert"]
    assert sizes == [1000, 1000, 500]
    assert store.count("acme") == 2500


def test_more_than_2mb_goes_in_several_upserts(store: PineconeVectorStore, emulator: PineconeEmulator) -> None:
    body = "lorem ipsum " * 660  # ~8 KB of text per record: 400 records are ~3.5 MB
    records = [rec("acme", f"big{i}.md", onehot(i), text=body, abstract=body[:2000]) for i in range(400)]
    assert store.upsert(records) == 400
    upserts = [r for r in emulator.requests if r.path == "/vectors/upsert"]
    assert len(upserts) >= 2
    assert all(r.status == 200 for r in upserts)  # none hit the emulator's 2 MB cap (413)
    assert sum(len(r.body["vectors"]) for r in upserts) == 400
    assert store.truncations == 0


def test_oversized_metadata_is_cut_and_counted(store: PineconeVectorStore, emulator: PineconeEmulator) -> None:
    wide = "\U0001f600"  # 4 bytes in UTF-8: 8,000 of them are 32 KB
    big = rec("acme", "emoji.md", onehot(0), text=wide * 8000, abstract=wide * 2000,
              metadata={"notes": "n" * 5000})
    small = rec("acme", "small.md", onehot(1), text="short")
    assert store.upsert([big, small]) == 2
    assert store.truncations == 1  # text alone was cut; abstract and the small record were not
    stored = emulator.namespaces["acme"][big.id].metadata or {}
    assert len(json.dumps(stored, ensure_ascii=False).encode()) <= MAX_METADATA_BYTES
    got = store.fetch("acme", [big.id])[0]
    assert 0 < len(got.text) < len(big.text) and big.text.startswith(got.text)
    assert got.abstract == big.abstract and got.metadata == {"notes": "n" * 5000}


def test_cuts_account_for_json_escaping(store: PineconeVectorStore, emulator: PineconeEmulator) -> None:
    escaped = rec("acme", "quotes.md", onehot(0), text='"\n' * 4000, metadata={"notes": "n" * 30_000})
    store.upsert([escaped])  # the emulator answers 400 if the metadata is over 40 KB
    assert store.truncations == 1
    stored = emulator.namespaces["acme"][escaped.id].metadata or {}
    assert 39_000 < len(json.dumps(stored, ensure_ascii=False, separators=(",", ":")).encode()) <= 40_000


def test_metadata_too_large_even_without_text_is_refused(store: PineconeVectorStore) -> None:
    huge = rec("acme", "huge.md", onehot(0), metadata={"blob": "z" * 45_000})
    with pytest.raises(RecordValidationError, match="shorten its title, tags, ancestors or metadata"):
        store.upsert([huge])


def test_429_twice_then_success_is_retried(store: PineconeVectorStore, emulator: PineconeEmulator) -> None:
    store.upsert([rec("acme", "a.md", onehot(0))])
    emulator.fail_next(429, times=2, message="Too many requests")
    hits = store.query(query("acme", onehot(0)))
    assert [h.record.uri for h in hits] == ["cairn://resources/docs/a.md"]
    assert [r.status for r in emulator.requests if r.path == "/query"] == [429, 429, 200]
    assert store.retries == 2


def test_persistent_500_becomes_vector_store_unavailable(store: PineconeVectorStore,
                                                          emulator: PineconeEmulator) -> None:
    emulator.fail_next(500, times=10, message="internal error")
    with pytest.raises(VectorStoreUnavailable) as err:
        store.query(query("acme", onehot(0)))
    assert err.value.retryable is True
    assert "internal error" in err.value.message
    assert emulator.count("/query") == 1 + store.max_retries  # cairn's retries only, not the SDK's too
    assert store.metrics.errors["query"] == 1


def test_a_timeout_is_retried(emulator: PineconeEmulator) -> None:
    fast = PineconeVectorStore(dimension=DIM, index_host=emulator.host, api_key="test-key",
                               timeout_s=0.8, max_retries=2, backoff_s=0.001)
    try:  # the timeout leaves room for a loaded CI machine; the delays are well past it
        fast.upsert([rec("acme", "a.md", onehot(0))])
        emulator.delay_next(2.5)
        assert fast.count("acme") == 1
        assert fast.retries == 1
        emulator.delay_next(2.5, times=3)
        with pytest.raises(VectorStoreUnavailable, match="Timeout"):
            fast.count("acme")
    finally:
        fast.close()


def test_400_is_a_request_error_with_the_vendor_message(store: PineconeVectorStore,
                                                        emulator: PineconeEmulator) -> None:
    emulator.fail_next(400, message="Invalid filter: field 'x' is bad")
    with pytest.raises(VectorStoreRequestError) as err:
        store.query(query("acme", onehot(0)))
    assert err.value.retryable is False
    assert "Invalid filter: field 'x' is bad" in err.value.message
    assert emulator.count("/query") == 1  # never retried


def test_a_real_400_from_the_index_carries_its_message(emulator: PineconeEmulator) -> None:
    wrong = PineconeVectorStore(dimension=DIM // 2, index_host=emulator.host, api_key="test-key", backoff_s=0.001)
    try:
        with pytest.raises(VectorStoreRequestError, match="does not match the dimension of the index 8"):
            wrong.upsert([rec("acme", "a.md", [1.0, 0.0, 0.0, 0.0])])
    finally:
        wrong.close()


def test_query_many_equals_single_queries(store: PineconeVectorStore, emulator: PineconeEmulator) -> None:
    store.upsert([rec("acme", f"r{i}.md", onehot(i, tilt=0.3), tags=[f"t{i % 2}"]) for i in range(8)])
    requests = [query("acme", onehot(i), limit=3, filter={"tags": f"t{i % 2}"} if i % 2 else None) for i in range(4)]
    before = emulator.count("/query")
    batched = store.query_many(requests)
    assert emulator.count("/query") - before == 4  # concurrent requests, one per query
    assert batched == [store.query(r) for r in requests]
    assert store.capabilities().batched_queries is False


def test_delete_by_filter_and_count(store: PineconeVectorStore) -> None:
    records = [rec("acme", f"r{i}.md", onehot(i), metadata={"kind": "old" if i < 3 else "new"}) for i in range(5)]
    store.upsert(records + [rec("beta", "r0.md", onehot(0), metadata={"kind": "old"})])
    assert store.count("acme", {"metadata.kind": "old"}) == 3
    assert store.count("acme", {"metadata.kind": {"$ne": "old"}}) == 2
    assert store.delete_by_filter("acme", {"metadata.kind": "old"}) == 3
    assert store.count("acme") == 2
    assert {r.uri for r in store.fetch("acme", [r.id for r in records])} == {records[3].uri, records[4].uri}
    assert store.count("beta", {"metadata.kind": "old"}) == 1  # another tenant is untouched
    assert store.delete("acme", [records[3].id, records[0].id]) == 1


def test_count_past_the_top_k_ceiling_pages_by_metadata(store: PineconeVectorStore,
                                                         emulator: PineconeEmulator) -> None:
    store.upsert([rec("acme", f"r{i}.md", onehot(i, tilt=0.1)) for i in range(10_050)])
    assert store.count("acme", {"level": 2}) == 10_050
    assert emulator.count("/vectors/fetch_by_metadata") == 11  # pages of 1,000 after the capped query


def test_emulator_rejects_what_pinecone_rejects(emulator: PineconeEmulator) -> None:
    from pinecone import Index
    from pinecone.errors.exceptions import ApiError, PayloadTooLargeError

    index = Index(host=emulator.host, api_key="test-key")
    too_big = [{"id": f"v{i}", "values": onehot(i), "metadata": {"t": "x" * 30_000}} for i in range(80)]
    assert len(json.dumps({"vectors": too_big})) > MAX_REQUEST_BYTES
    with pytest.raises(PayloadTooLargeError):
        index.upsert(vectors=too_big)
    too_many = [{"id": f"v{i}", "values": onehot(i)} for i in range(1001)]
    with pytest.raises(ApiError, match="exceeds the maximum of 1000 vectors") as err:
        index.upsert(vectors=too_many)
    assert err.value.status_code == 400
    with pytest.raises(ApiError, match="null metadata values are not supported"):
        index.upsert(vectors=[{"id": "n", "values": onehot(0), "metadata": {"owner": None}}])
    index.close()
    assert emulator.namespaces.get("", {}) == {}  # nothing was written
    response = httpx.get(f"{emulator.host}/no/such/route", headers={"Api-Key": "test-key"})
    assert response.status_code == 404 and response.json()["code"] == 5
    assert httpx.post(f"{emulator.host}/query", json={}).status_code == 401  # no Api-Key


def test_store_from_settings(emulator: PineconeEmulator) -> None:
    settings = PineconeSettings(api_key="test-key", index_host=emulator.host, backoff_s=0.001, max_retries=1)
    s = PineconeVectorStore.from_settings(settings, DIM)
    try:
        s.upsert([rec("acme", "a.md", onehot(0))])
        emulator.fail_next(503, times=2)
        with pytest.raises(VectorStoreUnavailable):
            s.count("acme")
        assert emulator.count("/describe_index_stats") == 2 and s.count("acme") == 1
    finally:
        s.close()


class SizedEmbedder:
    """Only what the start-up check reads: a name and a dimension."""

    name = "sized"

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension


def test_an_embedder_of_another_dimension_is_refused_at_start(emulator: PineconeEmulator) -> None:
    from cairn.app.services import Services
    from cairn.core.config import Settings
    from cairn.core.errors import DimensionMismatch

    settings = Settings(store=PineconeSettings(api_key=emulator.api_key or "k", index_host=emulator.host))
    assert Services(settings, embedder=SizedEmbedder(DIM)).store.index_dimension() == DIM
    with pytest.raises(DimensionMismatch, match=f"makes 384-dimensional vectors .* holds {DIM}-dimensional"):
        Services(settings, embedder=SizedEmbedder(384)).store  # noqa: B018
