"""OpenSearch translation: golden tables and agreement with the local semantics."""

from __future__ import annotations

import operator
from typing import Any

import pytest

from cairn.core.filters import parse
from cairn.core.filters.local import equal
from cairn.core.filters.opensearch import SUPPORTED_OPERATORS, translate
from cairn.core.filters.tree import ALL_OPERATORS

pytestmark = pytest.mark.unit

JAN_2024 = 1704067200.0


def _not(*clauses: dict[str, Any]) -> dict[str, Any]:
    return {"bool": {"must_not": list(clauses)}}


def _should(*clauses: dict[str, Any]) -> dict[str, Any]:
    return {"bool": {"should": list(clauses), "minimum_should_match": 1}}


GOLDEN: list[tuple[dict[str, Any] | None, dict[str, Any] | None]] = [
    (None, None),
    ({}, None),
    # term on record fields and metadata.<key>
    ({"level": 2}, {"term": {"level": 2}}),
    ({"context_type": "memory"}, {"term": {"context_type": "memory"}}),
    ({"metadata.lang": "en"}, {"term": {"metadata.lang": "en"}}),
    ({"metadata.a.b": "x"}, {"term": {"metadata.a.b": "x"}}),
    ({"metadata.public": True}, {"term": {"metadata.public": True}}),
    (
        {"tags": "draft"},
        {"term": {"tags": "draft"}},
    ),  # any value of a multi-valued keyword
    # term vs terms
    ({"tags": {"$in": ["a"]}}, {"term": {"tags": "a"}}),
    (
        {"ancestors": {"$in": ["cairn://user", "cairn://agent"]}},
        {"terms": {"ancestors": ["cairn://user", "cairn://agent"]}},
    ),
    ({"metadata.n": {"$in": [1, 2.5]}}, {"terms": {"metadata.n": [1, 2.5]}}),
    # negations are must_not (which matches documents without the field, as cairn requires)
    ({"metadata.lang": {"$ne": "en"}}, _not({"term": {"metadata.lang": "en"}})),
    ({"tags": {"$nin": ["a", "b"]}}, _not({"terms": {"tags": ["a", "b"]}})),
    ({"tags": {"$nin": ["a"]}}, _not({"term": {"tags": "a"}})),
    # ranges, merged per field; datetimes are epoch seconds
    ({"depth": {"$gte": 3}}, {"range": {"depth": {"gte": 3}}}),
    (
        {"metadata.year": {"$gt": 2019, "$lte": 2024}},
        {"range": {"metadata.year": {"gt": 2019, "lte": 2024}}},
    ),
    (
        {"created_at": {"$gte": "2024-01-01T00:00:00Z"}},
        {"range": {"created_at": {"gte": JAN_2024}}},
    ),
    (
        {"$and": [{"level": {"$gte": 1}}, {"depth": 2}, {"level": {"$lt": 2}}]},
        {
            "bool": {
                "filter": [
                    {"range": {"level": {"gte": 1, "lt": 2}}},
                    {"term": {"depth": 2}},
                ]
            }
        },
    ),
    (
        {"$and": [{"level": {"$gt": 1}}, {"level": {"$gt": 0}}]},
        {
            "bool": {
                "filter": [
                    {"range": {"level": {"gt": 1}}},
                    {"range": {"level": {"gt": 0}}},
                ]
            }
        },
    ),
    # null and $exists
    ({"owner": None}, _not({"exists": {"field": "owner"}})),
    ({"owner": {"$ne": None}}, {"exists": {"field": "owner"}}),
    ({"tags": {"$exists": True}}, {"exists": {"field": "tags"}}),
    ({"metadata.k": {"$exists": False}}, _not({"exists": {"field": "metadata.k"}})),
    (
        {"metadata.k": {"$in": ["a", None]}},
        _should(
            _not({"exists": {"field": "metadata.k"}}), {"term": {"metadata.k": "a"}}
        ),
    ),
    (
        {"metadata.k": {"$nin": ["a", "b", None]}},
        {
            "bool": {
                "filter": [{"exists": {"field": "metadata.k"}}],
                "must_not": [{"terms": {"metadata.k": ["a", "b"]}}],
            }
        },
    ),
    # $all
    (
        {"tags": {"$all": ["a", "b"]}},
        {"bool": {"filter": [{"term": {"tags": "a"}}, {"term": {"tags": "b"}}]}},
    ),
    ({"tags": {"$all": ["a"]}}, {"term": {"tags": "a"}}),
    # empty lists
    ({"tags": {"$in": []}}, {"match_none": {}}),
    ({"tags": {"$nin": []}}, None),
    ({"tags": {"$all": []}}, {"match_none": {}}),
    ({"level": 1, "tags": {"$nin": []}}, {"term": {"level": 1}}),
    # logical operators and nesting
    (
        {"context_type": "memory", "level": 2, "owner": {"$ne": "bob"}},
        {
            "bool": {
                "filter": [
                    {"term": {"context_type": "memory"}},
                    {"term": {"level": 2}},
                ],
                "must_not": [{"term": {"owner": "bob"}}],
            }
        },
    ),
    (
        {"$or": [{"level": 0}, {"tags": "faq"}]},
        _should({"term": {"level": 0}}, {"term": {"tags": "faq"}}),
    ),
    (
        {"$nor": [{"level": 0}, {"tags": "faq"}]},
        _not({"term": {"level": 0}}, {"term": {"tags": "faq"}}),
    ),
    (
        {"$not": {"level": 2, "metadata.lang": "en"}},
        _not(
            {
                "bool": {
                    "filter": [
                        {"term": {"level": 2}},
                        {"term": {"metadata.lang": "en"}},
                    ]
                }
            }
        ),
    ),
    (
        {"metadata.year": {"$not": {"$gt": 2021}}},
        _not({"range": {"metadata.year": {"gt": 2021}}}),
    ),
    ({"tags": {"$not": {"$nin": ["a"]}}}, {"term": {"tags": "a"}}),
    ({"$not": {"$not": {"tags": "x"}}}, {"term": {"tags": "x"}}),
    (
        {
            "$and": [
                {"$or": [{"level": 1}, {"level": 2}]},
                {"$not": {"metadata.public": False}},
            ]
        },
        {
            "bool": {
                "filter": [_should({"term": {"level": 1}}, {"term": {"level": 2}})],
                "must_not": [{"term": {"metadata.public": False}}],
            }
        },
    ),
    (
        {
            "$or": [
                {
                    "$and": [
                        {"context_type": "resource"},
                        {"metadata.year": {"$lt": 2021}},
                    ]
                },
                {"owner": "bob"},
            ]
        },
        _should(
            {
                "bool": {
                    "filter": [
                        {"term": {"context_type": "resource"}},
                        {"range": {"metadata.year": {"lt": 2021}}},
                    ]
                }
            },
            {"term": {"owner": "bob"}},
        ),
    ),
]


@pytest.mark.parametrize(("filter", "expected"), GOLDEN)
def test_opensearch_golden(
    filter: dict[str, Any] | None, expected: dict[str, Any] | None
) -> None:
    assert translate(parse(filter)) == expected


def test_opensearch_declares_operators() -> None:
    assert SUPPORTED_OPERATORS == ALL_OPERATORS


# --- agreement with the local semantics, through an evaluator of the OpenSearch queries used -------


from tests.unit import test_filters_local as LOCAL  # noqa: E402 - the shared local cases

_RANGE = {"gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le}


def _indexed(doc: dict[str, Any], name: str) -> list[Any]:
    """The indexed values of a field: nulls and empty arrays index nothing."""
    value: Any = doc
    for part in name.split(".", 1) if name.startswith("metadata.") else [name]:
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return []
    return [v for v in value if v is not None] if isinstance(value, list) else [value]


def _os_match(doc: dict[str, Any], query: dict[str, Any]) -> bool:
    ((kind, body),) = query.items()
    if kind == "bool":
        return _os_bool(doc, body)
    if kind == "match_none":
        return False
    if kind == "exists":
        return bool(_indexed(doc, body["field"]))
    ((name, arg),) = body.items()
    values = _indexed(doc, name)
    if kind == "term":
        return any(equal(v, arg) for v in values)
    if kind == "terms":
        return any(equal(v, a) for v in values for a in arg)
    assert kind == "range", kind
    return any(
        not isinstance(v, (bool, str))
        and all(_RANGE[op](v, bound) for op, bound in arg.items())
        for v in values
    )


def _os_bool(doc: dict[str, Any], body: dict[str, Any]) -> bool:
    assert set(body) <= {"filter", "must_not", "should", "minimum_should_match"}, body
    if not all(_os_match(doc, q) for q in body.get("filter", [])):
        return False
    if any(_os_match(doc, q) for q in body.get("must_not", [])):
        return False
    should = body.get("should", [])
    needed = body.get(
        "minimum_should_match", 0 if "filter" in body else 1 if should else 0
    )
    return sum(_os_match(doc, q) for q in should) >= needed


@pytest.mark.parametrize(("filter", "expected"), LOCAL.CASES)
def test_opensearch_agrees_with_local(
    filter: dict[str, Any] | None, expected: set[str]
) -> None:
    query = translate(parse(filter))
    matched = {
        name
        for name, record in LOCAL.RECORDS.items()
        if query is None or _os_match(record, query)
    }
    assert matched == expected
