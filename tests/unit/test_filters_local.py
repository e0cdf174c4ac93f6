"""The local predicate: cairn's reference filter semantics, checked on a small set of records."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.core.filters import parse
from cairn.core.filters.local import SUPPORTED_OPERATORS, compile, equal
from cairn.core.filters.tree import ALL_OPERATORS
from cairn.core.models import ContextRecord

pytestmark = pytest.mark.unit

JAN_2024 = 1704067200.0


def _spec(**fields: Any) -> dict[str, Any]:
    return fields


def _records() -> dict[str, dict[str, Any]]:
    specs: dict[str, dict[str, Any]] = {
        "root": _spec(uri="cairn://resources", level=0),
        "guide": _spec(
            uri="cairn://resources/docs/guide.md",
            level=2,
            title="Guide",
            tags=["howto", "draft"],
            metadata={
                "year": 2020,
                "lang": "en",
                "public": True,
                "topics": ["search", "vectors"],
            },
            created_at=JAN_2024,
            active_count=3,
        ),
        "faq": _spec(
            uri="cairn://resources/docs/faq.md",
            level=2,
            tags=["faq"],
            metadata={"year": 2023.5, "lang": "de", "public": False, "score": 1},
            created_at=JAN_2024 - 86400,
        ),
        "prefs": _spec(
            uri="cairn://user/bob/memories/prefs",
            level=1,
            metadata={"year": "2021", "public": 1, "score": True},
            created_at=JAN_2024 + 86400,
        ),
        "skill": _spec(
            uri="cairn://agent/skills/search",
            level=0,
            tags=["tool"],
            metadata={"topics": []},
        ),
    }
    return {
        name: ContextRecord.build(tenant="acme", **spec).model_dump()
        for name, spec in specs.items()
    }


RECORDS = _records()
ALL = set(RECORDS)

CASES: list[tuple[dict[str, Any] | None, set[str]]] = [
    (None, ALL),
    ({}, ALL),
    # record fields, implicit $eq / $and
    ({"level": 2}, {"guide", "faq"}),
    ({"level": 2, "tags": "faq"}, {"faq"}),
    ({"context_type": "memory"}, {"prefs"}),
    ({"owner": "bob"}, {"prefs"}),
    ({"uri": "cairn://resources"}, {"root"}),
    ({"title": "Guide"}, {"guide"}),
    ({"title": ""}, ALL - {"guide"}),
    ({"depth": {"$gte": 3, "$lt": 4}}, {"guide", "faq", "skill"}),
    ({"active_count": {"$gt": 0}}, {"guide"}),
    # list fields: any element
    ({"tags": "draft"}, {"guide"}),
    ({"ancestors": "cairn://resources/docs"}, {"guide", "faq"}),
    ({"ancestors": {"$in": ["cairn://user", "cairn://agent"]}}, {"prefs", "skill"}),
    ({"tags": {"$all": ["howto", "draft"]}}, {"guide"}),
    ({"tags": {"$all": ["howto", "faq"]}}, set()),
    ({"metadata.topics": {"$all": ["search"]}}, {"guide"}),
    # $ne / $nin / $not also match missing fields
    ({"tags": {"$ne": "draft"}}, ALL - {"guide"}),
    ({"metadata.lang": {"$ne": "en"}}, ALL - {"guide"}),
    ({"metadata.lang": {"$nin": ["en", "de"]}}, {"root", "prefs", "skill"}),
    ({"owner": {"$ne": "bob"}}, ALL - {"prefs"}),
    ({"metadata.year": {"$not": {"$gt": 2021}}}, ALL - {"faq"}),
    ({"tags": {"$not": {"$all": ["howto", "draft"]}}}, ALL - {"guide"}),
    # null, $exists, empty lists count as missing
    ({"owner": None}, ALL - {"prefs"}),
    ({"owner": {"$ne": None}}, {"prefs"}),
    ({"parent_uri": None}, {"root"}),
    ({"tags": None}, {"root", "prefs"}),
    ({"tags": {"$exists": True}}, {"guide", "faq", "skill"}),
    ({"metadata.topics": {"$exists": False}}, ALL - {"guide"}),
    ({"metadata.lang": {"$in": ["en", None]}}, ALL - {"faq"}),
    ({"metadata.lang": {"$nin": ["en", None]}}, {"faq"}),
    ({"metadata.nope": {"$exists": False}}, ALL),
    # empty operand lists
    ({"tags": {"$in": []}}, set()),
    ({"tags": {"$nin": []}}, ALL),
    ({"tags": {"$all": []}}, set()),
    # ranges: numbers only (a string "2021" and missing values never match)
    ({"metadata.year": {"$gte": 2020}}, {"guide", "faq"}),
    ({"metadata.year": {"$gt": 2020, "$lt": 2024}}, {"faq"}),
    ({"metadata.year": {"$lt": 3000}}, {"guide", "faq"}),
    ({"metadata.lang": {"$gt": 0}}, set()),
    ({"metadata.public": {"$gte": 0}}, {"prefs"}),  # True is not a number; 1 is
    # type-strict equality: bools are not numbers, strings are not numbers
    ({"metadata.public": True}, {"guide"}),
    ({"metadata.public": 1}, {"prefs"}),
    ({"metadata.score": 1}, {"faq"}),
    ({"metadata.score": 1.0}, {"faq"}),
    ({"metadata.score": True}, {"prefs"}),
    ({"metadata.year": "2021"}, {"prefs"}),
    ({"metadata.year": 2021}, set()),
    ({"metadata.public": {"$in": [True, 0]}}, {"guide"}),
    # datetimes
    ({"created_at": {"$gte": "2024-01-01T00:00:00Z"}}, {"guide", "prefs"}),
    ({"created_at": {"$lt": "2024-01-01"}}, {"root", "faq", "skill"}),
    # logical operators and nesting
    ({"$or": [{"level": 0}, {"tags": "faq"}]}, {"root", "skill", "faq"}),
    ({"$nor": [{"level": 0}, {"tags": "faq"}]}, {"guide", "prefs"}),
    ({"$not": {"level": 2, "metadata.lang": "en"}}, ALL - {"guide"}),
    (
        {
            "$and": [
                {"$or": [{"level": 1}, {"level": 2}]},
                {"$not": {"metadata.public": False}},
            ]
        },
        {"guide", "prefs"},
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
        {"guide", "prefs"},
    ),
]


@pytest.mark.parametrize(("filter", "expected"), CASES)
def test_local_predicate(filter: dict[str, Any] | None, expected: set[str]) -> None:
    predicate = compile(parse(filter))
    assert {name for name, record in RECORDS.items() if predicate(record)} == expected


def test_compile_none_matches_everything() -> None:
    assert compile(None)({}) is True


def test_record_without_metadata_dict() -> None:
    predicate = compile(parse({"metadata.year": {"$ne": 1}}))
    assert predicate({"uri": "cairn://resources"}) is True
    assert predicate({"uri": "cairn://resources", "metadata": None}) is True


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (1, 1.0, True),
        (True, 1, False),
        (1, True, False),
        (False, 0, False),
        ("1", 1, False),
        ("a", "a", True),
        (True, True, True),
    ],
)
def test_equality_is_type_strict(a: Any, b: Any, same: bool) -> None:
    assert equal(a, b) is same


def test_local_supports_every_operator() -> None:
    assert SUPPORTED_OPERATORS == ALL_OPERATORS
    assert len(ALL_OPERATORS) == 14
