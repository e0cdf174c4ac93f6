"""The OpenSearch emulator's own semantics, on a golden table written from OpenSearch's docs.

These rows are what a later property test relies on when it compares cairn's filters with the
emulator, so each states a documented OpenSearch behaviour, not cairn's.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.emulators.opensearch_index import ApiError, Index, filter_source
from tests.emulators.opensearch_query import evaluate, search

pytestmark = pytest.mark.unit

MAPPINGS: dict[str, Any] = {
    "dynamic_templates": [
        {"meta_strings": {"path_match": "meta.*", "match_mapping_type": "string", "mapping": {"type": "keyword"}}}
    ],
    "properties": {
        "tags": {"type": "keyword"},
        "code": {"type": "keyword"},
        "n": {"type": "long"},
        "x": {"type": "double"},
        "flag": {"type": "boolean"},
        "note": {"type": "keyword"},
        "body": {"type": "text"},
        "vec": {"type": "knn_vector", "dimension": 2,
                "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}},
    },
}

DOCS: dict[str, dict[str, Any]] = {
    "a": {"tags": ["x", "y"], "code": "A", "n": 1, "x": 0.5, "flag": True, "note": None, "body": "the quick brown fox",
          "meta": {"lang": "en", "title": "Hello World"}, "vec": [1.0, 0.0]},
    "b": {"tags": ["y"], "code": "b", "n": 5, "x": 2.5, "flag": False, "note": [], "body": "brown fox brown fox",
          "meta": {"lang": "de"}, "vec": [0.0, 1.0]},
    "c": {"code": "5", "n": 10, "note": [None], "body": "a lazy dog", "meta": {"lang": "EN", "year": 2021},
          "vec": [1.0, 1.0]},
    "d": {"tags": [], "note": "", "free": "Hello There", "when": "2024-01-05", "vec": [-1.0, 0.2]},
}


@pytest.fixture(scope="module")
def index() -> Index:
    idx = Index.create("golden", {"index": {"knn": True}}, MAPPINGS)
    for doc_id, doc in DOCS.items():
        assert idx.index_doc(doc_id, doc, create=False)["status"] == 201
    idx.refresh()
    return idx


GOLDEN: list[tuple[str, dict[str, Any], set[str]]] = [
    ("term on a multi-valued keyword matches any value", {"term": {"tags": "x"}}, {"a"}),
    ("term matches every doc holding the value", {"term": {"tags": "y"}}, {"a", "b"}),
    ("keyword term is case-sensitive", {"term": {"code": "a"}}, set()),
    ("a number against a keyword field compares as a string", {"term": {"code": 5}}, {"c"}),
    ("a string against a long field compares as a number", {"term": {"n": "5"}}, {"b"}),
    ("a fraction never equals a long", {"term": {"n": 1.5}}, set()),
    ("term on an unmapped field matches nothing", {"term": {"nope": "x"}}, set()),
    ("boolean term accepts the string 'true'", {"term": {"flag": "true"}}, {"a"}),
    ("terms: any value", {"terms": {"tags": ["x", "zzz"]}}, {"a"}),
    ("terms with an empty list matches nothing", {"terms": {"tags": []}}, set()),
    ("must_not matches documents missing the field", {"bool": {"must_not": [{"term": {"tags": "x"}}]}},
     {"b", "c", "d"}),
    ("range never matches a missing field", {"range": {"n": {"lt": 100}}}, {"a", "b", "c"}),
    ("range gt/lte", {"range": {"n": {"gt": 1, "lte": 10}}}, {"b", "c"}),
    ("range with a fractional bound on a long", {"range": {"n": {"gte": 4.5}}}, {"b", "c"}),
    ("range on a keyword compares strings", {"range": {"code": {"gte": "B"}}}, {"b"}),
    ("range on a double", {"range": {"x": {"gt": 0.5}}}, {"b"}),
    ("exists ignores null", {"exists": {"field": "note"}}, {"d"}),
    ("exists ignores an empty array", {"exists": {"field": "tags"}}, {"a", "b"}),
    ("exists on an object path sees its sub-fields", {"exists": {"field": "meta"}}, {"a", "b", "c"}),
    ("exists on an unmapped field", {"exists": {"field": "nope"}}, set()),
    ("dynamic template maps meta strings to keyword", {"term": {"meta.title": "Hello World"}}, {"a"}),
    ("...so a token does not match them", {"term": {"meta.title": "hello"}}, set()),
    ("a default dynamic string is text: term matches a token", {"term": {"free": "hello"}}, {"d"}),
    ("...and its .keyword sub-field holds the exact value", {"term": {"free.keyword": "Hello There"}}, {"d"}),
    ("dynamic numbers are numeric", {"range": {"meta.year": {"gte": 2000}}}, {"c"}),
    ("date detection maps ISO dates", {"range": {"when": {"gte": "2024-01-01", "lt": "2024-02-01"}}}, {"d"}),
    ("should alone needs one match", {"bool": {"should": [{"term": {"tags": "x"}}, {"term": {"code": "b"}}]}},
     {"a", "b"}),
    ("should next to a filter is optional",
     {"bool": {"filter": [{"exists": {"field": "code"}}], "should": [{"term": {"tags": "x"}}]}}, {"a", "b", "c"}),
    ("minimum_should_match 2",
     {"bool": {"should": [{"term": {"tags": "y"}}, {"term": {"n": 5}}, {"term": {"code": "A"}}],
               "minimum_should_match": 2}}, {"a", "b"}),
    ("minimum_should_match as a percentage",
     {"bool": {"should": [{"term": {"tags": "y"}}, {"term": {"n": 5}}], "minimum_should_match": "100%"}}, {"b"}),
    ("an empty bool matches all", {"bool": {}}, {"a", "b", "c", "d"}),
    ("match_all", {"match_all": {}}, {"a", "b", "c", "d"}),
    ("match on text is analysed (or)", {"match": {"body": "Brown DOG"}}, {"a", "b", "c"}),
    ("match with operator and", {"match": {"body": {"query": "quick fox", "operator": "and"}}}, {"a"}),
    ("match on a keyword field is exact", {"match": {"meta.lang": "en"}}, {"a"}),
    ("ids", {"ids": {"values": ["a", "d", "zz"]}}, {"a", "d"}),
]


@pytest.mark.parametrize(("why", "query", "expected"), GOLDEN, ids=[row[0] for row in GOLDEN])
def test_golden_query_semantics(index: Index, why: str, query: dict[str, Any], expected: set[str]) -> None:
    assert set(evaluate(index, query)) == expected, why


def test_knn_filter_inside_the_clause_filters_during_the_search(index: Index) -> None:
    inside = {"knn": {"vec": {"vector": [1.0, 0.0], "k": 1, "filter": {"term": {"tags": "y"}}}}}
    post = {"bool": {"must": [{"knn": {"vec": {"vector": [1.0, 0.0], "k": 1}}}],
                     "filter": [{"term": {"code": "b"}}]}}
    assert set(evaluate(index, inside)) == {"a"}  # nearest among the filtered set
    assert set(evaluate(index, post)) == set()  # the nearest neighbour (a) is then filtered out
    inside_b = {"knn": {"vec": {"vector": [1.0, 0.0], "k": 1, "filter": {"term": {"code": "b"}}}}}
    assert set(evaluate(index, inside_b)) == {"b"}


def test_knn_cosinesimil_score_is_one_plus_cos_over_two(index: Index) -> None:
    scores = evaluate(index, {"knn": {"vec": {"vector": [1.0, 0.0], "k": 4}}})
    assert scores["a"] == pytest.approx(1.0)
    assert scores["b"] == pytest.approx(0.5)
    assert scores["c"] == pytest.approx((1 + 1 / math.sqrt(2)) / 2)
    assert scores["d"] == pytest.approx((1 - 1 / math.sqrt(1.04)) / 2)


def test_bm25_prefers_more_occurrences_and_follows_lucene_formula(index: Index) -> None:
    scores = evaluate(index, {"match": {"body": "brown"}})
    assert scores["b"] > scores["a"]
    # docs with body: 3, avgdl = (4 + 4 + 3) / 3; "brown" is in 2 of them
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    avgdl = 11 / 3
    assert scores["a"] == pytest.approx(idf * 1 / (1 + 1.2 * (1 - 0.75 + 0.75 * 4 / avgdl)))


def test_filter_context_does_not_score(index: Index) -> None:
    scores = evaluate(index, {"bool": {"filter": [{"term": {"tags": "y"}}]}})
    assert scores == {"a": 0.0, "b": 0.0}


def test_search_size_ordering_and_source_filtering(index: Index) -> None:
    out = search(index, {"query": {"knn": {"vec": {"vector": [1.0, 0.1], "k": 3}}}, "size": 2,
                         "_source": {"excludes": ["vec", "meta.*"]}})
    hits = out["hits"]["hits"]
    assert [h["_id"] for h in hits] == ["a", "c"]
    assert out["hits"]["total"] == {"value": 3, "relation": "eq"}
    assert "vec" not in hits[0]["_source"] and hits[0]["_source"]["meta"] == {}
    assert filter_source({"a": {"b": 1, "c": 2}, "d": 3}, ["a.b"]) == {"a": {"b": 1}}


def test_writes_are_searchable_only_after_refresh_but_get_is_realtime() -> None:
    idx = Index.create("fresh", {}, {})
    idx.index_doc("1", {"k": "v"}, create=False)
    assert evaluate(idx, {"match_all": {}}) == {}
    assert idx.get_doc("1", True)["found"] is True
    idx.refresh()
    assert set(evaluate(idx, {"match_all": {}})) == {"1"}


def test_document_errors_are_per_item() -> None:
    idx = Index.create("typed", {"index": {"knn": True}}, MAPPINGS)
    bad_vec = idx.index_doc("1", {"vec": [1.0, 2.0, 3.0]}, create=False)
    assert bad_vec["status"] == 400 and "dimension mismatch" in bad_vec["error"]["reason"]
    bad_long = idx.index_doc("2", {"n": "abc"}, create=False)
    assert bad_long["error"]["type"] == "mapper_parsing_exception"
    assert idx.index_doc("3", {"n": 3}, create=True)["status"] == 201
    assert idx.index_doc("3", {"n": 4}, create=True)["status"] == 409


@pytest.mark.parametrize(
    ("query", "root_type", "fragment"),
    [
        ({"nope": {}}, "parsing_exception", "unknown query [nope]"),
        ({"term": {"n": "abc"}}, "query_shard_exception", "For input string"),
        ({"knn": {"vec": {"vector": [1.0], "k": 1}}}, "illegal_argument_exception", "invalid dimension: 1"),
        ({"knn": {"tags": {"vector": [1.0, 0.0], "k": 1}}}, "query_shard_exception", "is not knn_vector type"),
    ],
)
def test_query_errors_look_like_opensearch(index: Index, query: dict[str, Any], root_type: str, fragment: str) -> None:
    with pytest.raises(ApiError) as err:
        search(index, {"query": query})
    assert err.value.status == 400
    assert (err.value.root_type or err.value.type) == root_type
    assert fragment in (err.value.root_reason or err.value.reason)


def test_knn_method_needs_the_knn_setting() -> None:
    with pytest.raises(ApiError, match="index.knn setting is false"):
        Index.create("noknn", {}, MAPPINGS)
