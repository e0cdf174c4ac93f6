"""Writes and reads: every field survives a round trip; upserts are idempotent; deletes delete."""

from __future__ import annotations

import pytest

from cairn.ports.vectorstores.base import VectorStore
from tests.contract.support import NAMES, build, names_of, query, seed, settle, upsert

pytestmark = pytest.mark.contract


def test_every_record_field_survives_a_round_trip(store: VectorStore, tenant: str) -> None:
    written = seed(store, tenant)
    fetched = {r.id: r for r in store.fetch(tenant, [r.id for r in written.values()])}
    assert set(fetched) == {r.id for r in written.values()}
    for name, rec in written.items():
        got = fetched[rec.id]
        assert got.vector == pytest.approx(_unit(rec.vector), abs=1e-5) or got.vector == pytest.approx(
            rec.vector, abs=1e-5
        ), name
        assert got.without_vector().model_dump() == rec.without_vector().model_dump(), name
        for key, value in rec.metadata.items():  # types too: 2020 stays an int, False a bool
            # Pinecone keeps every number as a float64, so a whole float (3.0) may come back as 3.
            kinds = (int, float) if isinstance(value, float) else (type(value),)
            assert type(got.metadata[key]) in kinds, (name, key)
    assert fetched[written["a"].id].owner is None and fetched[written["f"].id].owner == "alice"
    assert fetched[written["c"].id].tags == [] and fetched[written["d"].id].parent_uri == "cairn://resources/docs"


def test_query_results_carry_the_whole_record(store: VectorStore, tenant: str) -> None:
    written = seed(store, tenant, ("a",))
    (hit,) = store.query(query(tenant, limit=5))
    assert hit.record.without_vector().model_dump() == written["a"].without_vector().model_dump()
    assert hit.record.vector is None
    (with_vec,) = store.query(query(tenant, limit=5, include_vectors=True))
    assert with_vec.record.vector is not None and len(with_vec.record.vector) == len(written["a"].vector or [])


def test_the_same_upsert_twice_changes_nothing(store: VectorStore, tenant: str) -> None:
    written = seed(store, tenant)
    upsert(store, list(written.values()))
    assert store.count(tenant) == len(NAMES)
    assert len(store.query(query(tenant, limit=50))) == len(NAMES)


def test_an_upsert_replaces_the_record_with_the_same_id(store: VectorStore, tenant: str) -> None:
    seed(store, tenant, ("a", "b"))
    newer = build(tenant, "a", title="Refunds (2024)", tags=["new"], metadata={"year": 2024})
    upsert(store, [newer])
    assert store.count(tenant) == 2
    (got,) = store.fetch(tenant, [newer.id])
    assert (got.title, got.tags, got.metadata) == ("Refunds (2024)", ["new"], {"year": 2024})
    settle(store, lambda: store.count(tenant, {"tags": "new"}) == 1)
    assert names_of(store.query(query(tenant, filter={"tags": "faq"})), {"b": build(tenant, "b")}) == {"b"}


def test_delete_removes_only_the_given_ids_and_counts_what_existed(store: VectorStore, tenant: str) -> None:
    written = seed(store, tenant)
    doomed = [written["a"].id, written["g"].id, "no-such-id"]
    assert store.delete(tenant, doomed) == 2
    settle(store, lambda: store.count(tenant) == len(NAMES) - 2)
    assert store.count(tenant) == len(NAMES) - 2
    assert store.fetch(tenant, doomed) == []
    left = names_of(store.query(query(tenant, limit=50)), written)
    assert left == set(NAMES) - {"a", "g"}
    assert store.delete(tenant, [written["a"].id]) == 0


def test_an_unknown_tenant_is_empty(store: VectorStore, tenant: str) -> None:
    assert store.count(tenant) == 0
    assert store.query(query(tenant)) == []
    assert store.fetch(tenant, ["x"]) == []
    assert store.delete(tenant, ["x"]) == 0
    assert store.delete_by_filter(tenant, {"level": 2}) == 0


def _unit(v: list[float] | None) -> list[float]:
    norm = sum(x * x for x in v or []) ** 0.5
    return [x / norm for x in v or []]
