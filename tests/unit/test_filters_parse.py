"""Parsing and validation of Mongo-style filters: normalised trees and every problem at once."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime
from typing import Any

import pytest

from cairn.core.errors import FilterError, FilterProblem
from cairn.core.filters import (
    MAX_CLAUSES,
    MAX_DEPTH,
    MAX_LIST_VALUES,
    And,
    Compare,
    Exists,
    MatchNone,
    Membership,
    Not,
    Or,
    parse,
)

pytestmark = pytest.mark.unit

EPOCH_2024 = 1704067200.0  # 2024-01-01T00:00:00Z

NORMALISED: list[tuple[dict[str, Any], Any]] = [
    # implicit $eq and implicit $and
    ({"level": 2}, Compare("level", "$eq", 2)),
    (
        {"context_type": "memory", "level": 2},
        And((Compare("context_type", "$eq", "memory"), Compare("level", "$eq", 2))),
    ),
    (
        {"metadata.year": {"$gt": 2019, "$lte": 2024}},
        And(
            (
                Compare("metadata.year", "$gt", 2019),
                Compare("metadata.year", "$lte", 2024),
            )
        ),
    ),
    # dotted paths: everything after "metadata." is the key
    ({"metadata.a.b": "x"}, Compare("metadata.a.b", "$eq", "x")),
    ({"tags": {"$ne": "draft"}}, Compare("tags", "$ne", "draft")),
    # null means missing
    ({"owner": None}, Exists("owner", False)),
    ({"owner": {"$eq": None}}, Exists("owner", False)),
    ({"owner": {"$ne": None}}, Exists("owner", True)),
    ({"owner": {"$exists": True}}, Exists("owner", True)),
    (
        {"metadata.k": {"$in": ["a", None]}},
        Or((Exists("metadata.k", False), Membership("metadata.k", "$in", ("a",)))),
    ),
    (
        {"metadata.k": {"$nin": ["a", None]}},
        And((Exists("metadata.k", True), Membership("metadata.k", "$nin", ("a",)))),
    ),
    ({"metadata.k": {"$in": [None]}}, Exists("metadata.k", False)),
    # empty lists
    ({"tags": {"$in": []}}, MatchNone()),
    ({"tags": {"$nin": []}}, None),
    ({"tags": {"$all": []}}, MatchNone()),
    ({"level": 1, "tags": {"$in": []}}, MatchNone()),
    ({"$or": [{"level": 1}, {"tags": {"$nin": []}}]}, None),
    ({"$or": [{"level": 1}, {"tags": {"$in": []}}]}, Compare("level", "$eq", 1)),
    # duplicates removed; bools are not numbers
    (
        {"metadata.k": {"$in": ["a", "a", 1, True, 1.0]}},
        Membership("metadata.k", "$in", ("a", 1, True)),
    ),
    ({"tags": {"$all": ["a", "b"]}}, Membership("tags", "$all", ("a", "b"))),
    # logical operators
    (
        {"$and": [{"level": 1}, {"$and": [{"depth": 2}]}]},
        And((Compare("level", "$eq", 1), Compare("depth", "$eq", 2))),
    ),
    (
        {"$or": [{"level": 1}, {"depth": 2}]},
        Or((Compare("level", "$eq", 1), Compare("depth", "$eq", 2))),
    ),
    ({"$or": [{"level": 1}]}, Compare("level", "$eq", 1)),
    (
        {"$nor": [{"level": 1}, {"depth": 2}]},
        Not(Or((Compare("level", "$eq", 1), Compare("depth", "$eq", 2)))),
    ),
    ({"$not": {"level": 1}}, Not(Compare("level", "$eq", 1))),
    ({"$not": {"$not": {"level": 1}}}, Compare("level", "$eq", 1)),
    ({"$not": {"owner": None}}, Exists("owner", True)),
    (
        {"metadata.year": {"$not": {"$gt": 2020}}},
        Not(Compare("metadata.year", "$gt", 2020)),
    ),
    (
        {"level": {"$not": {"$gte": 1, "$lt": 2}}},
        Not(And((Compare("level", "$gte", 1), Compare("level", "$lt", 2)))),
    ),
    # datetimes become epoch seconds
    (
        {"created_at": {"$gte": datetime(2024, 1, 1, tzinfo=UTC)}},
        Compare("created_at", "$gte", EPOCH_2024),
    ),
    (
        {"created_at": {"$gte": datetime(2024, 1, 1)}},
        Compare("created_at", "$gte", EPOCH_2024),
    ),
    (
        {"created_at": {"$gte": date(2024, 1, 1)}},
        Compare("created_at", "$gte", EPOCH_2024),
    ),
    (
        {"created_at": {"$lt": "2024-01-01T00:00:00Z"}},
        Compare("created_at", "$lt", EPOCH_2024),
    ),
    (
        {"updated_at": "2024-01-01T01:00:00+01:00"},
        Compare("updated_at", "$eq", EPOCH_2024),
    ),
    (
        {"metadata.when": {"$gt": "2024-01-01"}},
        Compare("metadata.when", "$gt", EPOCH_2024),
    ),
    (
        {"metadata.when": "2024-01-01"},
        Compare("metadata.when", "$eq", "2024-01-01"),
    ),  # equality keeps strings
    (
        {"metadata.seen": {"$in": [datetime(2024, 1, 1, tzinfo=UTC)]}},
        Membership("metadata.seen", "$in", (EPOCH_2024,)),
    ),
]


@pytest.mark.parametrize(("filter", "expected"), NORMALISED)
def test_parse_normalises(filter: dict[str, Any], expected: Any) -> None:
    assert parse(filter) == expected


@pytest.mark.parametrize("empty", [None, {}])
def test_no_filter_matches_all(empty: Any) -> None:
    assert parse(empty) is None


def test_tree_is_immutable() -> None:
    node = parse({"level": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.value = 2  # type: ignore[union-attr]


REJECTED: list[tuple[dict[str, Any], str, str]] = [
    (
        {"uri": {"$regex": "^cairn"}},
        "filter.uri.$regex",
        'operator "$regex" is not supported; supported: $eq $ne $gt $gte $lt $lte $in $nin $exists $all $not',
    ),
    (
        {"$where": "this.level > 1"},
        "filter.$where",
        'operator "$where" is not supported at the top level; supported: $and $or $nor $not, or a field name',
    ),
    (
        {"tags": {"$elemMatch": {"$eq": "a"}}},
        "filter.tags.$elemMatch",
        'operator "$elemMatch" is not supported',
    ),
    ({"$gt": 5}, "filter.$gt", 'operator "$gt" needs a field'),
    (
        {"level": {"$or": [{"$eq": 1}]}},
        "filter.level.$or",
        'logical operator "$or" cannot be used inside a field; put it at the top level',
    ),
    ({"$and": []}, "filter.$and", '"$and" needs a non-empty list of filters; got []'),
    ({"$or": []}, "filter.$or", '"$or" needs a non-empty list of filters; got []'),
    (
        {"$nor": {"level": 1}},
        "filter.$nor",
        '"$nor" needs a list of filters; got object {"level": 1}',
    ),
    (
        {"$or": [{"level": 1}, 5]},
        "filter.$or[1]",
        "expected a filter object; got number 5",
    ),
    (
        {"$or": [{"level": 1}, {}]},
        "filter.$or[1]",
        "an empty object is not a filter here",
    ),
    ({"$not": [{"level": 1}]}, "filter.$not", "expected a filter object; got list"),
    (
        {"tags": {"$in": "a"}},
        "filter.tags.$in",
        '"$in" needs a list of values; got string "a"',
    ),
    (
        {"tags": {"$nin": 3}},
        "filter.tags.$nin",
        '"$nin" needs a list of values; got number 3',
    ),
    (
        {"tags": {"$all": "a"}},
        "filter.tags.$all",
        '"$all" needs a list of values; got string "a"',
    ),
    (
        {"tags": {"$all": ["a", None]}},
        "filter.tags.$all[1]",
        '"$all" values must be strings, numbers, bools or datetimes; got null',
    ),
    (
        {"metadata.k": {"$in": ["a", {"b": 1}]}},
        "filter.metadata.k.$in[1]",
        '"$in" values must be strings, numbers, bools, null or datetimes; got object {"b": 1}',
    ),
    (
        {"metadata.year": {"$gt": "soon"}},
        "filter.metadata.year.$gt",
        '"$gt" needs a number or a datetime (ISO 8601); got string "soon"',
    ),
    (
        {"metadata.year": {"$lte": True}},
        "filter.metadata.year.$lte",
        "got bool true (bools are not numbers)",
    ),
    (
        {"metadata.year": {"$lt": None}},
        "filter.metadata.year.$lt",
        '"$lt" needs a number or a datetime (ISO 8601); got null',
    ),
    (
        {"metadata.year": {"$gt": float("nan")}},
        "filter.metadata.year.$gt",
        '"$gt" needs a finite number',
    ),
    (
        {"metadata.year": float("inf")},
        "filter.metadata.year",
        '"$eq" needs a finite number',
    ),
    (
        {"uri": {"$gt": 5}},
        "filter.uri.$gt",
        '"$gt" needs a numeric field; "uri" holds strings',
    ),
    ({"level": "2"}, "filter.level", '"level" holds numbers; got string "2"'),
    ({"level": True}, "filter.level", '"level" holds numbers; got bool true'),
    ({"tags": 5}, "filter.tags", '"tags" holds strings; got number 5'),
    (
        {"level": {"$in": [1, "2"]}},
        "filter.level.$in[1]",
        '"level" holds numbers; got string "2"',
    ),
    (
        {"tags": ["a", "b"]},
        "filter.tags",
        (
            '"$eq" needs a single value (string, number, bool, null or datetime); got list ["a", "b"]; '
            'use "$in" to match any of several values or "$all" to require all of them'
        ),
    ),
    (
        {"owner": {"$exists": 1}},
        "filter.owner.$exists",
        '"$exists" needs true or false; got number 1',
    ),
    ({"level": {}}, "filter.level", "an empty object is not a condition"),
    (
        {"metadata.year": {"$not": 5}},
        "filter.metadata.year.$not",
        '"$not" needs an object of operators',
    ),
    (
        {"metadata": {"year": 2020}},
        "filter.metadata",
        'needs a key: write "metadata.year"',
    ),
    (
        {"metadata.": 1},
        "filter.metadata.",
        'is not a valid metadata key; write "metadata.<key>"',
    ),
    (
        {"metadata.year": {"y": 1}},
        "filter.metadata.year",
        "nested objects are not supported",
    ),
    (
        {"metadata.year": {"$gt": 1, "y": 1}},
        "filter.metadata.year.y",
        "cannot mix operators and plain keys",
    ),
    (
        {"tenant": "acme"},
        "filter.tenant",
        (
            '"tenant" cannot be filtered: the tenant comes from the caller\'s credentials: '
            "a filter can neither read nor override it"
        ),
    ),
    (
        {"$or": [{"tenant": "other"}, {"level": 1}]},
        "filter.$or[0].tenant",
        '"tenant" cannot be filtered',
    ),
    ({"vector": [0.1]}, "filter.vector", '"vector" cannot be filtered'),
    ({"text": "hello"}, "filter.text", '"text" cannot be filtered'),
    ({"abstract": "hello"}, "filter.abstract", '"abstract" cannot be filtered'),
    (
        {"year": 2020},
        "filter.year",
        (
            'unknown field "year"; record fields: active_count ancestors content_hash context_type created_at depth id '
            'level owner parent_uri tags title updated_at uri; user metadata fields go under "metadata.", '
            'e.g. "metadata.year"'
        ),
    ),
    ({"level.x": 1}, "filter.level.x", 'unknown field "level.x"'),
]


@pytest.mark.parametrize(("filter", "path", "message"), REJECTED)
def test_parse_rejects(filter: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(FilterError) as caught:
        parse(filter)
    problems = caught.value.problems
    assert [p.path for p in problems] == [path]
    assert message in problems[0].message
    assert caught.value.to_dict()["error"] == "invalid_filter"


def test_every_problem_is_reported_at_once() -> None:
    bad = {
        "tenant": "other",
        "metadata.year": {"$regex": "20", "$gt": "soon"},
        "$or": [{"level": 1}, {"tags": {"$in": "a"}}, {"foo": 1}],
        "$and": [],
    }
    with pytest.raises(FilterError) as caught:
        parse(bad)
    assert [p.path for p in caught.value.problems] == [
        "filter.tenant",
        "filter.metadata.year.$regex",
        "filter.metadata.year.$gt",
        "filter.$or[1].tags.$in",
        "filter.$or[2].foo",
        "filter.$and",
    ]
    assert str(caught.value).startswith("6 problems in filter:\n  - filter.tenant: ")


def test_not_a_mapping_is_rejected() -> None:
    with pytest.raises(FilterError) as caught:
        parse([{"level": 1}])  # type: ignore[arg-type]
    assert caught.value.problems == [
        FilterProblem("filter", 'a filter must be an object; got list [{"level": 1}]')
    ]


def _nested(levels: int) -> dict[str, Any]:
    doc: dict[str, Any] = {"level": 1}
    for _ in range(levels - 1):
        doc = {"$and": [doc]}
    return doc


def test_nesting_up_to_the_limit_is_accepted() -> None:
    assert parse(_nested(MAX_DEPTH)) == Compare("level", "$eq", 1)


def test_nesting_beyond_the_limit_is_rejected() -> None:
    with pytest.raises(FilterError) as caught:
        parse(_nested(MAX_DEPTH + 1))
    (problem,) = caught.value.problems
    assert problem.path == "filter" + ".$and[0]" * MAX_DEPTH
    assert (
        problem.message
        == f"the filter is nested deeper than the limit of {MAX_DEPTH} levels"
    )


def test_too_many_clauses_is_rejected() -> None:
    many = {"$or": [{"metadata.k": i} for i in range(MAX_CLAUSES + 1)]}
    with pytest.raises(FilterError) as caught:
        parse(many)
    assert caught.value.problems == [
        FilterProblem(
            "filter",
            f"the filter has {MAX_CLAUSES + 1} clauses; the limit is {MAX_CLAUSES}",
        )
    ]
    assert parse({"$or": [{"metadata.k": i} for i in range(MAX_CLAUSES)]}) is not None


def test_too_many_list_values_is_rejected() -> None:
    assert (
        parse({"tags": {"$in": [str(i) for i in range(MAX_LIST_VALUES)]}}) is not None
    )
    with pytest.raises(FilterError) as caught:
        parse({"tags": {"$in": [str(i) for i in range(MAX_LIST_VALUES + 1)]}})
    assert caught.value.problems == [
        FilterProblem(
            "filter.tags.$in",
            f'"$in" has {MAX_LIST_VALUES + 1} values; the limit is {MAX_LIST_VALUES}',
        )
    ]
