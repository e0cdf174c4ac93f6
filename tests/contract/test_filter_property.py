"""Property: for random filters and random records, the local predicate, the Pinecone translation
(evaluated by the Pinecone emulator) and the OpenSearch translation (evaluated by the OpenSearch
emulator) select the same records, and no generated filter raises anything but a FilterError.

Two runs: a large one straight through the emulators' evaluator functions (fast, no HTTP), and a
smaller one through the real stores and SDKs over HTTP. One value type per metadata key, since
OpenSearch maps a key by its first value and coerces others (docs/filters.md, "Types").
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.core.errors import FilterError, UnsupportedFilterError
from cairn.core.filters import local as local_filters
from cairn.core.filters import opensearch as os_filters
from cairn.core.filters import parse
from cairn.core.filters import pinecone as pc_filters
from cairn.core.models import ContextRecord
from cairn.ports.vectorstores.base import VectorQuery
from cairn.ports.vectorstores.local import _Columns, _PreFilter
from cairn.ports.vectorstores.opensearch import index_body
from cairn.ports.vectorstores.pinecone import record_to_metadata
from tests.contract.support import DIM
from tests.emulators import pinecone_emulator
from tests.emulators.opensearch_index import Index
from tests.emulators.opensearch_query import evaluate

pytestmark = pytest.mark.contract

WORDS = ["en", "fr", "de", "x", ""]
TAGS = ["faq", "howto", "search"]
DIRS = ["cairn://resources/a", "cairn://resources/b", "cairn://resources/a/c"]
YEARS = [2019, 2020, 2021]
RATINGS = [0.5, 1.5, 3.0]

# field -> (strategy of one comparable value, kind)
FIELDS: dict[str, tuple[st.SearchStrategy[Any], str]] = {
    "metadata.year": (st.sampled_from(YEARS + [2020.5]), "number"),
    "metadata.rating": (st.sampled_from(RATINGS + [1, 2]), "number"),
    "metadata.lang": (st.sampled_from(WORDS), "string"),
    "metadata.draft": (st.booleans(), "bool"),
    "metadata.authors": (st.sampled_from(["ann", "bob", "cy"]), "string"),
    "tags": (st.sampled_from(TAGS), "string"),
    "ancestors": (st.sampled_from(DIRS + ["cairn://resources"]), "string"),
    "parent_uri": (st.sampled_from(DIRS), "string"),
    "owner": (st.sampled_from(["alice", "bob"]), "string"),
    "level": (st.sampled_from([0, 1, 2]), "number"),
    "active_count": (st.sampled_from([0, 1, 5]), "number"),
}


@st.composite
def field_condition(draw: st.DrawFn, field: str) -> Any:
    value, kind = FIELDS[field]
    ops = ["$eq", "$ne", "$in", "$nin", "$all", "$exists", "null", "bare", "invalid"]
    if kind == "number":
        ops += ["$gt", "$gte", "$lt", "$lte", "range2"]
    op = draw(st.sampled_from(ops))
    if op == "bare":
        return draw(value)
    if op == "invalid":  # must be refused with a FilterError, never anything else
        return draw(st.sampled_from([{"$gt": "text"}, {"$in": "a"}, {"$regex": "^a"}, {"$exists": 1}, ["a", "b"]]))
    if op == "null":
        return draw(st.sampled_from([None, {"$eq": None}, {"$ne": None}]))
    if op == "$exists":
        return {"$exists": draw(st.booleans())}
    if op in ("$in", "$nin", "$all"):
        values = draw(st.lists(value, max_size=3))
        if op != "$all" and draw(st.booleans()) and draw(st.booleans()):
            values.append(None)
        return {op: values}
    if op == "range2":
        return {"$gte": draw(value), "$lt": draw(value)}
    return {op: draw(value)}


@st.composite
def leaf(draw: st.DrawFn) -> dict[str, Any]:
    field = draw(st.sampled_from(sorted(FIELDS)))
    cond = draw(field_condition(field))
    if isinstance(cond, dict) and not any(k == "$exists" for k in cond) and draw(st.integers(0, 5)) == 0:
        cond = {"$not": cond}
    return {field: cond}


def filters() -> st.SearchStrategy[dict[str, Any]]:
    def extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        many = st.lists(children, min_size=1, max_size=3)
        return st.one_of(
            st.builds(lambda cs: {"$and": cs}, many),
            st.builds(lambda cs: {"$or": cs}, many),
            st.builds(lambda cs: {"$nor": cs}, many),
            st.builds(lambda c: {"$not": c}, children),
            st.builds(lambda a, b: {**a, **b}, children, children),  # implicit $and (keys may merge)
        )

    return st.recursive(leaf(), extend, max_leaves=6)


@st.composite
def records(draw: st.DrawFn, tenant: str = "prop") -> list[ContextRecord]:
    out = []
    for n in range(draw(st.integers(1, 8))):
        directory = draw(st.sampled_from(DIRS))
        metadata: dict[str, Any] = {}
        for key, pool in (("year", st.sampled_from(YEARS)), ("rating", st.sampled_from(RATINGS)),
                          ("lang", st.sampled_from(WORDS)), ("draft", st.booleans()),
                          ("authors", st.lists(st.sampled_from(["ann", "bob", "cy"]), max_size=2, unique=True))):
            if draw(st.booleans()):
                metadata[key] = draw(pool)
        level = draw(st.sampled_from([0, 1, 2]))
        uri = f"{directory}/doc{n}.md" if level == 2 else f"{directory}/dir{n}"
        user = draw(st.sampled_from([None, "alice", "bob"]))
        if user is not None:
            uri = f"cairn://user/{user}/memories/m{n}"
        out.append(ContextRecord.build(
            tenant=tenant, uri=uri, level=level, tags=draw(st.lists(st.sampled_from(TAGS), max_size=2, unique=True)),
            metadata=metadata, active_count=draw(st.sampled_from([0, 1, 5])),
            vector=[1.0] + [float(n)] + [0.0] * (DIM - 2),
        ))
    return out


def _translate_all(flt: dict[str, Any]) -> tuple[Any, Any, Any] | None:
    """Parse and translate; None when the filter is rightly refused (a FilterError, nothing else)."""
    try:
        tree = parse(flt)
    except FilterError:
        return None
    try:
        pinecone = pc_filters.translate(tree)
    except UnsupportedFilterError:
        pinecone = "unsupported"
    return tree, pinecone, os_filters.translate(tree)


def _local_ids(tree: Any, recs: list[ContextRecord]) -> set[str]:
    predicate = local_filters.compile(tree)
    return {r.id for r in recs if predicate(r.model_dump(mode="json"))}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flt=filters(), recs=records())
def test_translations_agree_with_the_local_predicate(flt: dict[str, Any], recs: list[ContextRecord]) -> None:
    translated = _translate_all(flt)
    if translated is None:
        return
    tree, pinecone, opensearch = translated
    expected = _local_ids(tree, recs)

    docs = [r.model_dump(mode="json") for r in recs]  # the local store's pre-filter: same answer
    if tree is not None:
        mask = _PreFilter(_Columns(docs)).mask(tree)
        assert {recs[i].id for i in range(len(recs)) if mask[i]} == expected

    if pinecone != "unsupported":
        if pinecone is not None:
            pinecone_emulator.validate_filter(pinecone)
        got = {r.id for r in recs if pinecone is None or pinecone_emulator.matches(record_to_metadata(r), pinecone)}
        assert got == expected, pinecone

    body = index_body(DIM, "lucene")
    index = Index.create("prop", body["settings"], body["mappings"])
    for r in recs:
        assert index.index_doc(r.id, r.model_dump(mode="json"), create=False)["status"] in (200, 201)
    index.refresh()
    query = opensearch if opensearch is not None else {"match_all": {}}
    assert set(evaluate(index, query)) == expected, opensearch


@pytest.fixture(scope="module")
def http_stores(_stores: dict[str, Any]) -> list[Any]:
    return [_stores["get"](b) for b in ("local", "pinecone-emulator", "opensearch-emulator")]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(flt=filters(), recs=records())
def test_stores_select_the_same_records(http_stores: list[Any], flt: dict[str, Any], recs: list[ContextRecord]) -> None:
    tenant = f"prop-{uuid.uuid4().hex[:12]}"
    recs = [r.model_copy(update={"tenant": tenant}) for r in recs]
    results = {}
    for store in http_stores:
        store.upsert(recs)
        try:
            hits = store.query(VectorQuery(tenant=tenant, vector=[1.0] * DIM, filter=flt, limit=100))
        except UnsupportedFilterError:
            assert store.backend == "pinecone"
            continue
        except FilterError:
            return  # refused by parse, identically everywhere
        results[store.backend] = {h.record.id for h in hits}
    tree = parse(flt)
    assert all(ids == _local_ids(tree, recs) for ids in results.values()), results
