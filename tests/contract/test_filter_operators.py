"""Every filter operator selects the same records on every backend: one shared table, and the
tenant boundary that no filter can cross."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from cairn.core.errors import FilterError, UnsupportedFilterError
from cairn.core.models import ContextRecord
from cairn.ports.vectorstores.base import VectorStore
from tests.contract.support import (
    NAMES,
    T2023,
    build,
    names_of,
    query,
    seed,
    settle,
    upsert,
)

pytestmark = pytest.mark.contract

ALL = set(NAMES)
GUIDE = "cairn://resources/docs/guide"

# (filter, expected record names) on the fixed record set of support.py
TABLE: list[tuple[dict[str, Any], set[str]]] = [
    ({"level": 2}, {"a", "b", "c", "f", "g"}),
    ({"level": {"$eq": 0}}, {"d"}),
    ({"tags": "faq"}, {"a", "b"}),
    ({"tags": {"$ne": "faq"}}, {"c", "d", "e", "f", "g"}),
    ({"metadata.lang": {"$ne": "en"}}, {"b", "d", "e", "f", "g"}),
    ({"metadata.year": {"$gt": 2020}}, {"b", "c", "f"}),
    ({"metadata.year": {"$gte": 2020, "$lt": 2024}}, {"a", "b", "f"}),
    ({"metadata.year": {"$lte": 2021}}, {"a", "f"}),
    ({"metadata.rating": {"$gt": 4}}, {"a", "g"}),
    ({"created_at": {"$gte": datetime(2023, 1, 1, tzinfo=UTC)}}, {"b", "c"}),
    ({"created_at": {"$lt": "2023-01-01T00:00:00Z", "$gt": 0}}, {"a"}),
    ({"updated_at": {"$lt": T2023}}, {"c", "d", "e", "f", "g"}),
    ({"active_count": {"$gt": 0}}, {"a"}),
    ({"context_type": {"$in": ["memory", "skill"]}}, {"f", "g"}),
    ({"tags": {"$in": []}}, set()),
    ({"tags": {"$nin": ["faq", "prefs"]}}, {"c", "d", "e", "g"}),
    ({"tags": {"$nin": []}}, ALL),
    ({"tags": {"$all": ["faq", "howto"]}}, {"a"}),
    ({"tags": {"$all": []}}, set()),
    ({"owner": {"$exists": True}}, {"f"}),
    ({"owner": "alice"}, {"f"}),
    ({"owner": None}, ALL - {"f"}),
    ({"tags": {"$exists": False}}, {"c", "e"}),
    ({"metadata.year": {"$ne": None}}, {"a", "b", "c", "f"}),
    ({"metadata.lang": {"$in": ["de", None]}}, {"d", "e", "g"}),
    ({"metadata.lang": {"$nin": ["en", "fr"]}}, {"d", "e", "g"}),
    ({"metadata.draft": True}, {"b"}),
    ({"metadata.draft": False}, {"a", "f"}),
    ({"metadata.draft": {"$ne": True}}, ALL - {"b"}),
    ({"metadata.draft": {"$in": [True]}}, {"b"}),
    ({"metadata.authors": "bob"}, {"a", "b"}),
    ({"metadata.authors": {"$all": ["ann", "bob"]}}, {"a"}),
    ({"metadata.authors": {"$nin": ["bob"]}}, {"c", "d", "e", "f", "g"}),
    ({"metadata.rating": {"$in": [3, 5]}}, {"c", "g"}),
    ({"metadata.year": {"$in": [2020, 2024]}}, {"a", "c"}),
    ({"metadata.nowhere": {"$exists": False}}, ALL),
    ({"metadata.nowhere": "x"}, set()),
    ({"$or": [{"tags": "prefs"}, {"metadata.lang": "de"}]}, {"f", "g"}),
    ({"$and": [{"tags": "howto"}, {"level": 2}]}, {"a", "g"}),
    ({"ancestors": GUIDE}, {"a", "b"}),
    ({"ancestors": {"$in": ["cairn://resources/docs"]}, "level": {"$in": [0, 1]}}, {"d", "e"}),
    ({"parent_uri": GUIDE}, {"a", "b"}),
    ({"parent_uri": None}, set()),
    ({"uri": GUIDE}, {"d", "e"}),
    ({"title": "Guide"}, {"d", "e"}),
    ({"level": {"$not": {"$gt": 0}}}, {"d"}),
    ({"$not": {"tags": "howto"}}, {"b", "c", "e", "f"}),
    ({"$nor": [{"tags": "faq"}, {"context_type": "skill"}]}, {"c", "d", "e", "f"}),
    ({"$nor": [{"metadata.lang": "en"}, {"metadata.year": {"$exists": True}}]}, {"d", "e", "g"}),
    ({"tags": {"$not": {"$all": ["faq", "howto"]}}}, ALL - {"a"}),
    ({"$not": {"metadata.authors": {"$in": ["ann", "cy"]}}}, ALL - {"a", "g"}),
    (
        {"$or": [
            {"$and": [{"tags": "faq"}, {"metadata.lang": "fr"}]},
            {"$not": {"level": {"$lte": 1}}, "context_type": "skill"},
        ]},
        {"b", "g"},
    ),
]


def _label(row: tuple[dict[str, Any], set[str]]) -> str:
    return str(row[0])[:70]


_SEEDED: dict[int, tuple[str, dict[str, ContextRecord]]] = {}


@pytest.fixture
def seeded(store: VectorStore, new_tenant: Callable[[], str]) -> tuple[str, dict[str, ContextRecord]]:
    """The fixed records in one tenant per store, written once for the whole table (read-only)."""
    if id(store) not in _SEEDED:
        tenant = f"table-{new_tenant()}"
        _SEEDED[id(store)] = (tenant, seed(store, tenant))
    return _SEEDED[id(store)]


@pytest.mark.parametrize("flt,expected", TABLE, ids=[_label(r) for r in TABLE])
def test_filter_selects_the_same_records_everywhere(
    store: VectorStore, seeded: tuple[str, dict[str, ContextRecord]], flt: dict[str, Any], expected: set[str]
) -> None:
    tenant, records = seeded
    hits = store.query(query(tenant, filter=flt, limit=50))
    assert names_of(hits, records) == expected
    assert store.count(tenant, flt) == len(expected)


def test_a_negated_range_on_metadata_is_exact_or_refused(
    store: VectorStore, seeded: tuple[str, dict[str, ContextRecord]]
) -> None:
    """``$not $gt`` must also match records without the field; a backend that cannot say so refuses."""
    tenant, records = seeded
    flt = {"metadata.year": {"$not": {"$gt": 2021}}}
    try:
        hits = store.query(query(tenant, filter=flt, limit=50))
    except UnsupportedFilterError as exc:
        assert "metadata.year" in exc.message and "$exists" in exc.message
        return
    assert names_of(hits, records) == {"a", "d", "e", "f", "g"}


def test_delete_by_filter_removes_exactly_the_matching_records(store: VectorStore, tenant: str) -> None:
    records = seed(store, tenant)
    assert store.delete_by_filter(tenant, {"tags": "faq", "metadata.lang": {"$ne": "fr"}}) == 1
    settle(store, lambda: store.count(tenant) == len(records) - 1)
    left = store.fetch(tenant, [r.id for r in records.values()])
    assert names_of(left, records) == set(NAMES) - {"a"}
    assert store.delete_by_filter(tenant, {"metadata.nowhere": "x"}) == 0


def test_count_with_and_without_filter(store: VectorStore, tenant: str) -> None:
    seed(store, tenant)
    assert store.count(tenant) == len(NAMES)
    assert store.count(tenant, {"context_type": "resource"}) == 5
    assert store.count(tenant, {"tags": {"$in": []}}) == 0


# ------------------------------------------------------------------ tenant isolation


def test_no_filter_reaches_another_tenant(store: VectorStore, new_tenant: Callable[[], str]) -> None:
    mine, theirs = new_tenant(), new_tenant()
    own = seed(store, mine, ("a",))
    other = seed(store, theirs)
    their_ids = [r.id for r in other.values()]
    their_only_uri = other["g"].uri
    probes = [
        {"id": {"$in": their_ids}},
        {"id": other["b"].id},
        {"uri": their_only_uri},
        {"$or": [{"uri": their_only_uri}, {"id": {"$in": their_ids}}]},
        {"uri": {"$ne": own["a"].uri}},
        {"$not": {"id": own["a"].id}},
    ]
    for flt in probes:
        assert store.query(query(mine, filter=flt, limit=50)) == [], flt
        assert store.count(mine, flt) == 0, flt
        assert store.delete_by_filter(mine, flt) == 0, flt
    assert store.fetch(mine, their_ids) == []
    assert store.delete(mine, their_ids) == 0
    assert store.count(theirs) == len(NAMES)
    hits = store.query(query(mine, limit=50))
    assert [h.record.tenant for h in hits] == [mine]


def test_the_tenant_cannot_be_named_in_a_filter(store: VectorStore, tenant: str) -> None:
    with pytest.raises(FilterError, match="tenant"):
        store.query(query(tenant, filter={"tenant": "someone-else"}))
    with pytest.raises(FilterError, match="tenant"):
        store.count(tenant, {"$or": [{"tenant": {"$exists": True}}, {"level": 2}]})


def test_the_same_record_id_in_two_tenants_stays_two_records(
    store: VectorStore, new_tenant: Callable[[], str]
) -> None:
    one, two = new_tenant(), new_tenant()
    shared = "shared-id-0001"
    upsert(store, [build(one, "a", title="one's").model_copy(update={"id": shared})])
    upsert(store, [build(two, "a", title="two's").model_copy(update={"id": shared})])
    assert [r.title for r in store.fetch(one, [shared])] == ["one's"]
    assert store.delete(one, [shared]) == 1
    settle(store, lambda: store.count(one) == 0)
    assert [r.title for r in store.fetch(two, [shared])] == ["two's"]
    assert [h.record.title for h in store.query(query(two, filter={"id": shared}))] == ["two's"]
