"""Every backend keeps the identity of the embedder that filled it, and a different one is refused.

MiniLM and multilingual-e5-small are both 384-dimensional: a dimension check lets a switch
between them through, and the index answers noise. The identity (provider, model, dimension,
declared languages) is kept in the local tenant's side table, the OpenSearch mapping's ``_meta``
and a marker record of a reserved Pinecone namespace, each through its real client.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from cairn.core.errors import EmbedderMismatch
from cairn.core.models import ContextRecord, Level
from cairn.ports.embeddings.identity import EmbedderIdentity, check_identity
from cairn.ports.vectorstores.base import VectorQuery, VectorStore
from tests.contract.support import DIM, vec


class _Named:
    """An embedder as far as its identity goes."""

    def __init__(self, name: str, languages: frozenset[str] | None) -> None:
        self.name, self.dimension, self.languages = name, DIM, languages


MINILM = _Named("local-minilm", frozenset({"en"}))
E5 = _Named("local-multilingual-e5-small", None)


@pytest.fixture(params=("local", "pinecone-emulator", "opensearch-emulator"))
def fresh(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[VectorStore]:
    """A store of its own (an identity is per index on Pinecone and OpenSearch)."""
    if request.param == "local":
        from cairn.ports.vectorstores.local import LocalVectorStore

        store: VectorStore = LocalVectorStore(tmp_path / "store", dimension=DIM)
        yield store
        store.close()
    elif request.param == "pinecone-emulator":
        from tests.emulators.pinecone_emulator import make_pinecone_store, start_pinecone_emulator

        emulator = start_pinecone_emulator(DIM)
        yield make_pinecone_store(emulator, DIM)
        emulator.stop()
    else:
        from tests.emulators.opensearch_emulator import make_opensearch_store

        yield make_opensearch_store(request.getfixturevalue("opensearch_emulator"), DIM, index=f"id-{uuid.uuid4().hex[:8]}")


def _record(tenant: str, name: str) -> ContextRecord:
    return ContextRecord.build(tenant=tenant, uri=f"cairn://resources/docs/{name}.md", level=Level.DETAIL,
                               title=name, abstract=name, text=name, vector=vec((0, 1.0)))


def test_a_new_tenant_records_its_embedder_with_its_first_write_and_a_same_dimension_switch_is_refused(fresh: VectorStore) -> None:
    tenant = "acme"
    assert check_identity(MINILM, fresh, tenant) == "pending"
    assert fresh.embedder_identity(tenant) is None  # nothing written for a tenant that stores nothing
    fresh.upsert([_record(tenant, "refunds")])
    assert EmbedderIdentity.from_dict(fresh.embedder_identity(tenant) or {}) == EmbedderIdentity.of(MINILM)
    assert check_identity(MINILM, fresh, tenant) == "matched"
    with pytest.raises(EmbedderMismatch) as caught:
        check_identity(E5, fresh, tenant)
    message = caught.value.message
    assert "local/minilm (8-d, languages: en)" in message and "local/multilingual-e5-small (8-d, languages: many)" in message
    assert "cairn reindex" in message and "CAIRN_EMBEDDER=local" in message


def test_an_index_from_before_identities_adopts_the_configured_embedder(fresh: VectorStore) -> None:
    tenant = "old"
    fresh.upsert([_record(tenant, "refunds")])  # written without any check: an index from an older cairn
    assert fresh.embedder_identity(tenant) is None
    assert check_identity(E5, fresh, tenant) == "adopted"
    assert EmbedderIdentity.from_dict(fresh.embedder_identity(tenant) or {}) == EmbedderIdentity.of(E5)
    with pytest.raises(EmbedderMismatch):
        check_identity(MINILM, fresh, tenant)


def test_the_identity_is_invisible_to_searches_and_counts(fresh: VectorStore) -> None:
    tenant = "quiet"
    fresh.upsert([_record(tenant, "refunds")])
    fresh.keep_embedder_identity(tenant, EmbedderIdentity.of(MINILM).as_dict())
    assert fresh.count(tenant) == 1
    hits = fresh.query(VectorQuery(tenant=tenant, vector=vec((0, 1.0)), limit=10))
    assert [h.record.title for h in hits] == ["refunds"]


def test_scan_lists_every_record_of_a_tenant_in_pages_and_no_other_tenants(fresh: VectorStore) -> None:
    fresh.upsert([_record("scan", f"doc-{n:03d}") for n in range(23)] + [_record("other", "theirs")])
    fresh.keep_embedder_identity("scan", EmbedderIdentity.of(MINILM).as_dict())
    pages = list(fresh.scan("scan", batch=10))
    assert [len(p) for p in pages][:2] == [10, 10]
    titles = sorted(r.title for page in pages for r in page)
    assert titles == [f"doc-{n:03d}" for n in range(23)]
