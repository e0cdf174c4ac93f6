"""Pinecone translation: golden tables, rejections, and agreement with the local semantics."""

from __future__ import annotations

import operator
from typing import Any

import pytest

from cairn.core.errors import UnsupportedFilterError
from cairn.core.filters import parse
from cairn.core.filters.local import equal
from cairn.core.filters.pinecone import (
    MATCH_NOTHING,
    NATIVE_OPERATORS,
    SUPPORTED_OPERATORS,
    translate,
)
from cairn.core.filters.tree import ALL_OPERATORS, Compare, Or

pytestmark = pytest.mark.unit

JAN_2024 = 1704067200.0

GOLDEN: list[tuple[dict[str, Any] | None, dict[str, Any] | None]] = [
    (None, None),
    ({}, None),
    # pass-through: $eq, ranges, $in, $exists, $and, $or; record fields by name, metadata as md_<key>
    ({"level": 2}, {"level": {"$eq": 2}}),
    ({"metadata.lang": "en"}, {"md_lang": {"$eq": "en"}}),
    ({"metadata.a.b": "x"}, {"md_a.b": {"$eq": "x"}}),
    ({"metadata.public": True}, {"md_public": {"$eq": True}}),
    ({"tags": "draft"}, {"tags": {"$eq": "draft"}}),
    (
        {"context_type": "memory", "level": {"$gte": 1}},
        {"$and": [{"context_type": {"$eq": "memory"}}, {"level": {"$gte": 1}}]},
    ),
    (
        {"metadata.year": {"$gt": 2019, "$lte": 2024}},
        {"$and": [{"md_year": {"$gt": 2019}}, {"md_year": {"$lte": 2024}}]},
    ),
    ({"metadata.year": {"$lt": 2000.5}}, {"md_year": {"$lt": 2000.5}}),
    (
        {"ancestors": {"$in": ["cairn://user", "cairn://agent"]}},
        {"ancestors": {"$in": ["cairn://user", "cairn://agent"]}},
    ),
    ({"metadata.n": {"$in": [1, 2.5, "x"]}}, {"md_n": {"$in": [1, 2.5, "x"]}}),
    ({"owner": {"$exists": True}}, {"owner": {"$exists": True}}),
    (
        {"$or": [{"level": 0}, {"tags": "faq"}]},
        {"$or": [{"level": {"$eq": 0}}, {"tags": {"$eq": "faq"}}]},
    ),
    (
        {"$and": [{"level": 1}, {"$and": [{"depth": 2}, {"depth": {"$lt": 5}}]}]},
        {"$and": [{"level": {"$eq": 1}}, {"depth": {"$eq": 2}}, {"depth": {"$lt": 5}}]},
    ),
    # datetimes are epoch seconds
    (
        {"created_at": {"$gte": "2024-01-01T00:00:00Z"}},
        {"created_at": {"$gte": JAN_2024}},
    ),
    # null: missing-or-null is "key absent" (Pinecone stores no nulls)
    ({"owner": None}, {"owner": {"$exists": False}}),
    ({"owner": {"$ne": None}}, {"owner": {"$exists": True}}),
    (
        {"metadata.k": {"$in": ["a", None]}},
        {"$or": [{"md_k": {"$exists": False}}, {"md_k": {"$in": ["a"]}}]},
    ),
    (
        {"metadata.k": {"$nin": ["a", None]}},
        {"$and": [{"md_k": {"$exists": True}}, {"md_k": {"$nin": ["a"]}}]},
    ),
    # $ne / $nin also match records without the key (Pinecone's own do not)
    (
        {"metadata.lang": {"$ne": "en"}},
        {"$or": [{"md_lang": {"$ne": "en"}}, {"md_lang": {"$exists": False}}]},
    ),
    (
        {"tags": {"$nin": ["a", "b"]}},
        {"$or": [{"tags": {"$nin": ["a", "b"]}}, {"tags": {"$exists": False}}]},
    ),
    # ... except on record fields every record has
    ({"level": {"$ne": 2}}, {"level": {"$ne": 2}}),
    ({"context_type": {"$nin": ["skill"]}}, {"context_type": {"$nin": ["skill"]}}),
    # bools are not accepted by Pinecone's $in / $nin
    (
        {"metadata.flag": {"$in": [True, "yes"]}},
        {"$or": [{"md_flag": {"$in": ["yes"]}}, {"md_flag": {"$eq": True}}]},
    ),
    (
        {"metadata.flag": {"$in": [True, False]}},
        {"$or": [{"md_flag": {"$eq": True}}, {"md_flag": {"$eq": False}}]},
    ),
    (
        {"metadata.flag": {"$nin": [True]}},
        {"$or": [{"md_flag": {"$ne": True}}, {"md_flag": {"$exists": False}}]},
    ),
    # $all: an $and of single-value $in
    (
        {"tags": {"$all": ["a", "b"]}},
        {"$and": [{"tags": {"$in": ["a"]}}, {"tags": {"$in": ["b"]}}]},
    ),
    ({"metadata.f": {"$all": [True]}}, {"md_f": {"$eq": True}}),
    # empty lists
    ({"tags": {"$in": []}}, MATCH_NOTHING),
    ({"tags": {"$nin": []}}, None),
    ({"tags": {"$all": []}}, MATCH_NOTHING),
    ({"level": 1, "tags": {"$nin": []}}, {"level": {"$eq": 1}}),
    # $not and $nor by De Morgan
    (
        {"$not": {"tags": "x"}},
        {"$or": [{"tags": {"$ne": "x"}}, {"tags": {"$exists": False}}]},
    ),
    ({"metadata.lang": {"$not": {"$ne": "en"}}}, {"md_lang": {"$eq": "en"}}),
    (
        {"$not": {"metadata.lang": {"$in": ["en", "de"]}}},
        {"$or": [{"md_lang": {"$nin": ["en", "de"]}}, {"md_lang": {"$exists": False}}]},
    ),
    ({"$not": {"tags": {"$nin": ["a"]}}}, {"tags": {"$in": ["a"]}}),
    ({"$not": {"owner": {"$exists": True}}}, {"owner": {"$exists": False}}),
    (
        {"tags": {"$not": {"$all": ["a", "b"]}}},
        {
            "$or": [
                {"tags": {"$ne": "a"}},
                {"tags": {"$ne": "b"}},
                {"tags": {"$exists": False}},
            ]
        },
    ),
    ({"level": {"$not": {"$gt": 1}}}, {"level": {"$lte": 1}}),
    (
        {"created_at": {"$not": {"$gte": 5, "$lt": 10}}},
        {"$or": [{"created_at": {"$lt": 5}}, {"created_at": {"$gte": 10}}]},
    ),
    (
        {"$nor": [{"level": 0}, {"tags": "faq"}]},
        {
            "$and": [
                {"level": {"$ne": 0}},
                {"$or": [{"tags": {"$ne": "faq"}}, {"tags": {"$exists": False}}]},
            ]
        },
    ),
    (
        {"$nor": [{"$and": [{"level": 2}, {"metadata.lang": "en"}]}, {"owner": None}]},
        {
            "$and": [
                {
                    "$or": [
                        {"level": {"$ne": 2}},
                        {"md_lang": {"$ne": "en"}},
                        {"md_lang": {"$exists": False}},
                    ]
                },
                {"owner": {"$exists": True}},
            ]
        },
    ),
    ({"$not": {"$not": {"tags": "x"}}}, {"tags": {"$eq": "x"}}),
    # a sibling $exists makes the "or missing" arm redundant
    (
        {"metadata.k": {"$exists": True, "$ne": "a"}},
        {"$and": [{"md_k": {"$exists": True}}, {"md_k": {"$ne": "a"}}]},
    ),
]


@pytest.mark.parametrize(("filter", "expected"), GOLDEN)
def test_pinecone_golden(
    filter: dict[str, Any] | None, expected: dict[str, Any] | None
) -> None:
    assert translate(parse(filter)) == expected


REJECTED: list[tuple[dict[str, Any], str, str]] = [
    (
        {"metadata.year": {"$not": {"$gt": 2020}}},
        "filter.metadata.year.$gt",
        (
            '"$not"/"$nor" around "$gt" on "metadata.year" cannot be expressed exactly by the pinecone backend: '
            "the complement would also have to match records whose value is not a number, which Pinecone cannot test; "
            'write the complement explicitly, e.g. {"$or": [{"metadata.year": {"$lte": 2020}}, '
            '{"metadata.year": {"$exists": false}}]}'
        ),
    ),
    (
        {"$nor": [{"metadata.when": {"$lt": "2024-01-01"}}]},
        "filter.metadata.when.$lt",
        'around "$lt" on "metadata.when"',
    ),
]


@pytest.mark.parametrize(("filter", "path", "message"), REJECTED)
def test_pinecone_rejects(filter: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(UnsupportedFilterError) as caught:
        translate(parse(filter))
    (problem,) = caught.value.problems
    assert problem.path == path
    assert message in problem.message
    assert caught.value.to_dict()["error"] == "unsupported_filter"


def test_pinecone_reports_every_unsupported_clause() -> None:
    node = parse({"$nor": [{"metadata.a": {"$gt": 1}}, {"metadata.b": {"$lte": 2}}]})
    with pytest.raises(UnsupportedFilterError) as caught:
        translate(node)
    assert [p.path for p in caught.value.problems] == [
        "filter.metadata.a.$gt",
        "filter.metadata.b.$lte",
    ]


def test_pinecone_declares_operators() -> None:
    assert SUPPORTED_OPERATORS == ALL_OPERATORS
    assert NATIVE_OPERATORS == ALL_OPERATORS - {"$not", "$nor", "$all"}


def test_translate_accepts_a_hand_built_tree() -> None:
    node = Or(
        (Compare("metadata.x", "$eq", 1), Compare("uri", "$eq", "cairn://resources"))
    )
    assert translate(node) == {
        "$or": [{"md_x": {"$eq": 1}}, {"uri": {"$eq": "cairn://resources"}}]
    }


# --- agreement with the local semantics, through an emulator of Pinecone's documented dialect ---------


from tests.unit import test_filters_local as LOCAL  # noqa: E402 - the shared local cases

_RANGE = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}


def _stored(record: dict[str, Any]) -> dict[str, Any]:
    """What the Pinecone store writes: no nulls, no empty lists, metadata as md_<key>."""
    out = {k: v for k, v in record.items() if k not in ("metadata", "vector", "tenant")}
    out.update({f"md_{k}": v for k, v in record["metadata"].items()})
    return {k: v for k, v in out.items() if v is not None and v != []}


def _pinecone_match(doc: dict[str, Any], flt: dict[str, Any]) -> bool:
    """Pinecone's documented semantics; $ne/$nin only match records that have the key."""
    assert flt, "empty filter clause"
    results = []
    for key, cond in flt.items():
        if key == "$and":
            results.append(all(_pinecone_match(doc, c) for c in cond))
        elif key == "$or":
            results.append(any(_pinecone_match(doc, c) for c in cond))
        else:
            assert not key.startswith("$"), (
                f"operator {key} is not in Pinecone's dialect"
            )
            results.append(
                all(_pinecone_op(doc, key, op, value) for op, value in cond.items())
            )
    return all(results)


def _pinecone_op(doc: dict[str, Any], key: str, op: str, value: Any) -> bool:
    assert op in NATIVE_OPERATORS, f"operator {op} is not in Pinecone's dialect"
    if op == "$exists":
        return (key in doc) is value
    if key not in doc:
        return False
    stored = doc[key] if isinstance(doc[key], list) else [doc[key]]
    if op in ("$in", "$nin"):
        assert all(not isinstance(v, bool) for v in value), (
            "Pinecone's $in/$nin take strings and numbers"
        )
        hit = any(equal(s, v) for s in stored for v in value)
        return hit if op == "$in" else not hit
    if op in ("$eq", "$ne"):
        hit = any(equal(s, value) for s in stored)
        return hit if op == "$eq" else not hit
    return any(not isinstance(s, (bool, str)) and _RANGE[op](s, value) for s in stored)


@pytest.mark.parametrize(("filter", "expected"), LOCAL.CASES)
def test_pinecone_agrees_with_local(
    filter: dict[str, Any] | None, expected: set[str]
) -> None:
    try:
        native = translate(parse(filter))
    except UnsupportedFilterError as error:  # only a negated range on a metadata field
        assert "cannot be expressed exactly by the pinecone backend" in str(error)
        assert filter == {"metadata.year": {"$not": {"$gt": 2021}}}
        return
    matched = {
        name
        for name, record in LOCAL.RECORDS.items()
        if native is None or _pinecone_match(_stored(record), native)
    }
    assert matched == expected
