"""The emulator's own filter semantics, checked against hand-computed expectations.

Each row: a Pinecone filter and the ids (of the records below) that Pinecone's documented
semantics select. The semantics are those the emulator's docstring cites.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.emulators.pinecone_emulator import PineconeHTTPError, matches, validate_filter

pytestmark = pytest.mark.unit

RECORDS: dict[str, dict[str, Any]] = {
    "a": {"genre": "drama", "year": 2019.0, "tags": ["x", "y"], "draft": True},
    "b": {"genre": "comedy", "year": 2021.0, "tags": ["y"]},
    "c": {"genre": "documentary", "year": 2020.0, "draft": False},
    "d": {"year": 1.0},
    "e": {},
}

GOLDEN: list[tuple[dict[str, Any], set[str]]] = [
    ({"genre": "drama"}, {"a"}),  # implicit $eq
    ({"genre": {"$eq": "comedy"}}, {"b"}),
    ({"genre": {"$ne": "drama"}}, {"b", "c"}),  # $ne needs the field: d and e have none
    ({"year": {"$gt": 2019}}, {"b", "c"}),
    ({"year": {"$gte": 2019}}, {"a", "b", "c"}),
    ({"year": {"$lt": 2020}}, {"a", "d"}),
    ({"year": {"$lte": 2020, "$gte": 2020}}, {"c"}),  # two operators on one field: AND
    ({"year": 2020}, {"c"}),  # an int matches the stored 64-bit float
    ({"genre": {"$in": ["comedy", "drama"]}}, {"a", "b"}),
    ({"genre": {"$nin": ["comedy", "drama"]}}, {"c"}),  # $nin needs the field too
    ({"tags": "x"}, {"a"}),  # a list field matches when any element does
    ({"tags": {"$in": ["y"]}}, {"a", "b"}),
    ({"tags": {"$nin": ["x"]}}, {"b"}),
    ({"tags": {"$ne": "y"}}, set()),  # every record with tags has a "y"
    ({"genre": {"$exists": True}}, {"a", "b", "c"}),
    ({"genre": {"$exists": False}}, {"d", "e"}),
    ({"draft": True}, {"a"}),
    ({"draft": {"$ne": True}}, {"c"}),
    ({"year": True}, set()),  # a boolean never equals a number (unlike Python's True == 1)
    ({"year": {"$eq": 1}}, {"d"}),
    ({"genre": {"$gt": 0}}, set()),  # a range never matches a string field
    ({"$or": [{"genre": "drama"}, {"year": {"$lt": 2}}]}, {"a", "d"}),
    ({"$and": [{"tags": "y"}, {"year": {"$gt": 2020}}]}, {"b"}),
    ({"genre": {"$in": ["drama"]}, "year": {"$gt": 2019}}, set()),  # top-level keys: AND
    ({"$or": [{"genre": {"$exists": False}}, {"draft": False}]}, {"c", "d", "e"}),
    ({}, {"a", "b", "c", "d", "e"}),
]


@pytest.mark.parametrize(("flt", "expected"), GOLDEN, ids=[str(f) for f, _ in GOLDEN])
def test_filter_golden_table(flt: dict[str, Any], expected: set[str]) -> None:
    validate_filter(flt)
    assert {rid for rid, md in RECORDS.items() if matches(md, flt)} == expected


REJECTED: list[tuple[Any, str]] = [
    ({"genre": {"$regex": "d.*"}}, "unsupported operator '$regex'"),
    ({"$not": {"genre": "drama"}}, "unknown logical operator '$not'"),
    ({"year": {"$gt": "2019"}}, "expected a number"),
    ({"year": {"$gt": True}}, "expected a number"),
    ({"genre": {"$in": "drama"}}, "non-empty array"),
    ({"genre": {"$in": []}}, "non-empty array"),
    ({"genre": {"$in": [True]}}, "strings or numbers"),
    ({"genre": None}, "operand None is invalid"),
    ({"genre": ["drama"]}, "operand ['drama'] is invalid"),
    ({"genre": {"$eq": {"x": 1}}}, "expected a string, number or boolean"),
    ({"genre": {"$exists": 1}}, "expected a boolean"),
    ({"$or": []}, "non-empty array"),
    ({"$and": {"genre": "drama"}}, "non-empty array"),
    ({"genre": {}}, "empty operator object"),
    (["genre"], "must be a JSON object"),
]


@pytest.mark.parametrize(("flt", "message"), REJECTED, ids=[str(f) for f, _ in REJECTED])
def test_invalid_filters_are_400(flt: Any, message: str) -> None:
    with pytest.raises(PineconeHTTPError) as err:
        validate_filter(flt)
    assert err.value.status == 400
    assert message in err.value.message
