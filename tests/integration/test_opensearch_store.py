"""The OpenSearch store through the real opensearch-py client, over HTTP, against the emulator."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from typing import Any

import pytest

from cairn.core.config import OpenSearchSettings
from cairn.core.errors import FilterError, VectorStoreRequestError, VectorStoreUnavailable
from cairn.core.models import ContextRecord
from cairn.ports.vectorstores import SearchMode, VectorQuery
from cairn.ports.vectorstores.fusion import fuse
from cairn.ports.vectorstores.opensearch import OpenSearchVectorStore, doc_id
from tests.emulators.opensearch_emulator import (
    OpenSearchEmulator,
    make_opensearch_store,
    start_opensearch_emulator,
)

pytestmark = pytest.mark.integration
DIM = 4
INDEX = "cairn-test"


@pytest.fixture
def emulator() -> Iterator[OpenSearchEmulator]:
    emu = start_opensearch_emulator()
    yield emu
    emu.stop()


@pytest.fixture
def store(emulator: OpenSearchEmulator) -> Iterator[OpenSearchVectorStore]:
    s = make_opensearch_store(emulator, DIM, index=INDEX)
    yield s
    s.close()


def vec(i: int) -> list[float]:
    return [1.0, math.sin(i), math.cos(i), 0.1 * i]


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def rec(i: int, tenant: str = "acme", **fields: Any) -> ContextRecord:
    fields.setdefault("title", f"Document {i}")
    fields.setdefault("abstract", f"abstract number {i}")
    fields.setdefault("metadata", {"n": i, "lang": "en" if i % 2 else "de"})
    return ContextRecord.build(tenant=tenant, uri=f"cairn://resources/docs/d{i}.md", level=2, vector=vec(i), **fields)


def dense(tenant: str = "acme", i: int = 0, limit: int = 3, flt: dict[str, Any] | None = None) -> VectorQuery:
    return VectorQuery(tenant=tenant, vector=vec(i), limit=limit, filter=flt)


# ----------------------------------------------------------------------- index and round trip


def test_index_is_created_once_with_the_knn_mapping(emulator: OpenSearchEmulator, store: OpenSearchVectorStore) -> None:
    store.upsert([rec(1)])
    store.upsert([rec(2)])
    assert emulator.requests["create_index"] == 1
    idx = emulator.index(INDEX)
    assert idx.knn_enabled
    props = idx.mappings["properties"]
    assert props["vector"] == {
        "type": "knn_vector", "dimension": DIM,
        "method": {"name": "hnsw", "space_type": "cosinesimil", "engine": "lucene"},
    }
    for name in ("tenant", "id", "uri", "parent_uri", "ancestors", "context_type", "owner", "tags", "content_hash"):
        assert props[name]["type"] == "keyword", name
    assert props["title"]["type"] == "keyword" and props["title"]["fields"]["text"]["type"] == "text"
    assert props["abstract"]["type"] == "text" and props["text"]["fields"]["keyword"]["type"] == "keyword"
    assert {props[n]["type"] for n in ("depth", "level", "created_at", "updated_at", "active_count")} <= {"long", "double"}
    assert props["metadata"]["properties"]["lang"] == {"type": "keyword"}  # the dynamic template
    assert props["metadata"]["properties"]["n"] == {"type": "long"}
    other = make_opensearch_store(emulator, DIM, index=INDEX)  # a new process finds the index in place
    other.upsert([rec(3)])
    assert emulator.requests["create_index"] == 1


def test_faiss_engine_mapping(emulator: OpenSearchEmulator) -> None:
    make_opensearch_store(emulator, DIM, index="faiss-idx", engine="faiss").upsert([rec(1)])
    assert emulator.index("faiss-idx").mappings["properties"]["vector"]["method"]["engine"] == "faiss"


def test_round_trip_and_cosine_scores(store: OpenSearchVectorStore) -> None:
    records = [rec(i, tags=["t"]) for i in range(5)]
    assert store.upsert(records) == 5
    assert store.fetch("acme", [records[3].id, records[1].id, "missing"]) == [records[3], records[1]]
    hits = store.query(dense(i=2, limit=5))
    assert hits[0].record == records[2].without_vector()
    for hit in hits:  # OpenSearch's (1 + cos) / 2 is turned back into the cosine
        assert hit.score == pytest.approx(cosine(vec(2), vec(hit.record.metadata["n"])))  # type: ignore[arg-type]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    with_vectors = store.query(VectorQuery(tenant="acme", vector=vec(2), limit=1, include_vectors=True))
    assert with_vectors[0].record.vector == vec(2)


def test_missing_index_reads_as_empty(emulator: OpenSearchEmulator, store: OpenSearchVectorStore) -> None:
    assert store.query(dense()) == []
    assert store.query_many([dense(), dense(i=1)]) == [[], []]
    assert store.count("acme") == 0
    assert store.fetch("acme", ["x"]) == []
    assert store.delete("acme", ["x"]) == 0
    assert store.delete_by_filter("acme", {"level": 2}) == 0
    assert INDEX not in emulator.state.indices  # reads never create the index


# ----------------------------------------------------------------------- tenancy and filters


def test_tenants_never_collide_or_leak(emulator: OpenSearchEmulator, store: OpenSearchVectorStore) -> None:
    a, b = rec(1, tenant="acme"), rec(1, tenant="globex")
    shared = b.model_copy(update={"id": a.id})  # the same record id in two tenants
    store.upsert([a, shared])
    assert set(emulator.index(INDEX).live) == {doc_id("acme", a.id), doc_id("globex", a.id)}
    assert store.count("acme") == 1 and store.count("globex") == 1
    match_all = {"$or": [{"level": 2}, {"level": {"$ne": 2}}]}
    hits = store.query(dense("acme", 1, limit=10, flt=match_all))
    assert [h.record.tenant for h in hits] == ["acme"]
    assert store.fetch("globex", [a.id])[0].tenant == "globex"
    with pytest.raises(FilterError):
        store.query(dense("acme", flt={"tenant": "globex"}))
    assert store.delete_by_filter("acme", match_all) == 1
    assert store.count("globex") == 1


def test_filter_goes_inside_the_knn_clause_with_the_tenant(emulator: OpenSearchEmulator, store: OpenSearchVectorStore) -> None:
    store.upsert([rec(i) for i in range(10)])
    flt = {"metadata.n": {"$gte": 8}}
    hits = store.query(dense(i=0, limit=2, flt=flt))  # the nearest neighbours of 0 are all filtered out
    assert sorted(h.record.metadata["n"] for h in hits) == [8, 9]  # efficient filtering still finds k
    body = emulator.bodies("search")[-1].json()
    assert set(body["query"]) == {"knn"}
    knn = body["query"]["knn"]["vector"]
    assert knn["k"] == 2 and body["size"] == 2
    clauses = knn["filter"]["bool"]["filter"]
    assert clauses[0] == {"term": {"tenant": "acme"}}
    assert clauses[1] == {"range": {"metadata.n": {"gte": 8}}}
    assert body["_source"] == {"excludes": ["vector"]}


def test_count_and_delete_by_filter(emulator: OpenSearchEmulator, store: OpenSearchVectorStore) -> None:
    store.upsert([rec(i) for i in range(6)] + [rec(9, tenant="globex")])
    assert store.count("acme") == 6
    assert store.count("acme", {"metadata.lang": "en"}) == 3
    assert store.count("acme", {"metadata.n": {"$in": [1, 2, 40]}}) == 2
    assert store.delete_by_filter("acme", {"metadata.lang": "de"}) == 3
    assert store.count("acme") == 3 and store.count("globex") == 1
    dbq = emulator.bodies("delete_by_query")[-1].json()
    assert dbq["query"]["bool"]["filter"][0] == {"term": {"tenant": "acme"}}
    assert store.delete("acme", [rec(1).id, rec(2).id]) == 1  # rec(2) was already deleted
    assert store.count("acme") == 2


# ----------------------------------------------------------------------- batching


def test_query_many_is_one_msearch_and_equals_single_queries(emulator: OpenSearchEmulator, store: OpenSearchVectorStore) -> None:
    store.upsert([rec(i) for i in range(12)])
    requests = [dense(i=i, limit=3, flt={"metadata.lang": "en"} if i % 2 else None) for i in range(4)]
    emulator.reset_log()
    batched = store.query_many(requests)
    assert dict(emulator.requests) == {"msearch": 1}
    singles = [store.query(r) for r in requests]
    assert batched == singles
    assert all(len(hits) == 3 for hits in batched)


def test_bulk_upserts_are_chunked_and_refreshed_once(emulator: OpenSearchEmulator) -> None:
    store = make_opensearch_store(emulator, DIM, index=INDEX, bulk_max_docs=3)
    store.upsert([rec(i) for i in range(7)])
    bulks = emulator.bodies("bulk")
    assert [len(b.ndjson()) // 2 for b in bulks] == [3, 3, 1]
    assert [b.params.get("refresh") for b in bulks] == ["false", "false", "wait_for"]
    assert store.count("acme") == 7
    by_bytes = make_opensearch_store(emulator, DIM, index="bytes", bulk_max_bytes=1500)
    by_bytes.upsert([rec(i) for i in range(4)])
    assert all(len(b.body) <= 1500 for b in emulator.bodies("bulk")[3:])
    assert len(emulator.bodies("bulk")) > 4 and by_bytes.count("acme") == 4


def test_bulk_item_errors_name_the_record_and_reason(store: OpenSearchVectorStore) -> None:
    store.upsert([rec(1)])  # metadata.n is now a long
    with pytest.raises(VectorStoreRequestError) as err:
        store.upsert([rec(2, metadata={"n": "not a number"})])
    assert err.value.retryable is False
    assert "mapper_parsing_exception" in err.value.message and "metadata.n" in err.value.message


# ----------------------------------------------------------------------- keyword and hybrid


def test_keyword_and_hybrid(emulator: OpenSearchEmulator, store: OpenSearchVectorStore) -> None:
    store.upsert([
        rec(1, title="Refund policy", abstract="how refunds work"),
        rec(2, abstract="refund refund refund timelines"),
        rec(3, abstract="travel expenses"),
        rec(4, tenant="globex", title="Refund policy", abstract="refunds"),
    ])
    kw = store.query(VectorQuery(tenant="acme", text="refund", mode=SearchMode.KEYWORD, limit=5))
    assert {h.record.uri[-5:] for h in kw} == {"d1.md", "d2.md"}  # token match, tenant-scoped
    body = emulator.bodies("search")[-1].json()["query"]["bool"]
    assert body["must"][0]["multi_match"]["fields"] == ["title.text^2", "abstract", "text"]
    assert body["filter"][0] == {"term": {"tenant": "acme"}}
    emulator.reset_log()
    hybrid = VectorQuery(tenant="acme", vector=vec(3), text="refund", mode=SearchMode.HYBRID, limit=3)
    fused = store.query(hybrid)
    assert dict(emulator.requests) == {"msearch": 1}
    assert len(emulator.bodies("msearch")[0].ndjson()) == 4  # dense + keyword in one round trip
    dense_hits = [(h.record.id, h.score) for h in store.query(VectorQuery(tenant="acme", vector=vec(3), limit=20))]
    kw_hits = [(h.record.id, h.score) for h in store.query(VectorQuery(tenant="acme", text="refund", mode=SearchMode.KEYWORD, limit=20))]
    expected = fuse(dense_hits, kw_hits, 3, depth=20)
    assert [h.record.id for h in fused] == [i for i, _ in expected]
    assert [h.score for h in fused] == pytest.approx([s for _, s in expected])
    assert store.capabilities().hybrid and store.capabilities().keyword and store.capabilities().batched_queries


# ----------------------------------------------------------------------- failures


def test_throttled_twice_then_success(emulator: OpenSearchEmulator, store: OpenSearchVectorStore) -> None:
    store.upsert([rec(1)])
    emulator.fail_next(status=429, times=2, route="search")
    assert len(store.query(dense(i=1))) == 1
    assert emulator.requests["search"] == 3


def test_persistent_503_is_retryable_unavailable(emulator: OpenSearchEmulator) -> None:
    store = make_opensearch_store(emulator, DIM, index=INDEX, max_retries=2)
    emulator.fail_next(status=503, times=100)
    with pytest.raises(VectorStoreUnavailable) as err:
        store.count("acme")
    assert err.value.retryable is True
    assert "503" in err.value.message and "SERVICE_UNAVAILABLE" in err.value.message
    assert emulator.requests["count"] == 3


def test_timeouts_are_retried(emulator: OpenSearchEmulator) -> None:
    store = make_opensearch_store(emulator, DIM, index=INDEX, timeout_s=1.0, max_retries=1)
    emulator.delay_next(3.0, route="count")  # well past the timeout; the retry has room on a loaded machine
    assert store.count("acme") == 0
    assert emulator.requests["count"] == 2


def test_400_is_not_retryable_and_carries_the_vendor_reason(emulator: OpenSearchEmulator, store: OpenSearchVectorStore) -> None:
    store.upsert([rec(1)])  # metadata.n is a long
    with pytest.raises(VectorStoreRequestError) as err:
        store.query(dense(flt={"metadata.n": "abc"}))
    assert err.value.retryable is False
    assert "query_shard_exception" in err.value.message and 'For input string: "abc"' in err.value.message
    assert emulator.requests["search"] == 1  # not retried
    with pytest.raises(VectorStoreRequestError, match="For input string"):
        store.query_many([dense(), dense(flt={"metadata.n": "abc"})])


def test_sigv4_signs_requests_for_serverless(emulator: OpenSearchEmulator) -> None:
    from botocore.credentials import Credentials

    store = make_opensearch_store(
        emulator, DIM, index=INDEX, auth="sigv4", region="eu-west-1", service="aoss",
        credentials=Credentials("AKIDEXAMPLE", "secret", "session-token"),
    )
    store.upsert([rec(1)])
    bulk = emulator.bodies("bulk")[-1]
    auth = bulk.headers["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/aoss/aws4_request" in auth and "x-amz-content-sha256" in auth
    assert bulk.headers["x-amz-content-sha256"] == hashlib.sha256(bulk.body).hexdigest()
    assert bulk.headers["x-amz-security-token"] == "session-token"


def test_from_settings_with_sigv4_uses_the_boto3_credential_chain(
    emulator: OpenSearchEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    settings = OpenSearchSettings(url=emulator.url, index=INDEX, auth="sigv4", region="us-east-1", service="es")
    store = OpenSearchVectorStore.from_settings(settings, DIM)
    assert store.count("acme") == 0
    assert "/us-east-1/es/aws4_request" in emulator.log[-1].headers["authorization"]
    assert "Credential=AKIDENV/" in emulator.log[-1].headers["authorization"]


def test_unreachable_cluster_is_retryable_unavailable() -> None:
    store = OpenSearchVectorStore(dimension=DIM, url="http://127.0.0.1:9", max_retries=1, backoff_s=0.001, timeout_s=1)
    with pytest.raises(VectorStoreUnavailable) as err:
        store.query(dense())
    assert err.value.retryable is True and "could not be reached" in err.value.message


def test_an_embedder_of_another_dimension_is_refused_at_start(emulator: OpenSearchEmulator, store: OpenSearchVectorStore) -> None:
    from cairn.app.services import Services
    from cairn.core.config import Settings
    from cairn.core.errors import DimensionMismatch

    class Sized:
        name = "sized"

        def __init__(self, dimension: int) -> None:
            self.dimension = dimension

    settings = Settings(store=OpenSearchSettings(url=emulator.url, index=INDEX))
    assert Services(settings, embedder=Sized(384)).store.index_dimension() is None  # no index yet: it will be made
    store.upsert([rec(1)])  # the index now exists, with DIM
    assert store.index_dimension() == DIM
    with pytest.raises(DimensionMismatch, match=f"holds {DIM}-dimensional"):
        Services(settings, embedder=Sized(384)).store  # noqa: B018
