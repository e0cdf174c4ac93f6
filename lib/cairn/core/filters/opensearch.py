"""Translate a filter tree into an OpenSearch query clause (a ``bool`` query in filter context).

**Storage layout** (written by the OpenSearch store): record fields are top-level fields
(keyword: ``id uri parent_uri ancestors context_type owner tags content_hash title``;
numeric: ``depth level created_at updated_at active_count``); user metadata key ``k`` is
``metadata.<k>`` (strings mapped as keyword by a dynamic template, numbers and bools by
dynamic mapping). The store adds the ``tenant`` term itself; a user filter cannot name it.

**How cairn's semantics (see :mod:`cairn.core.filters.local`) map onto OpenSearch, exactly:**

* ``$eq`` is ``term``; ``$in`` is ``terms`` (``term`` for one value). On a multi-valued
  keyword field both match when any value matches, as cairn's ``$eq``/``$in`` do.
* ``$ne``, ``$nin`` and ``$not`` are ``bool.must_not``, which also matches documents without
  the field: the exact complement, as cairn requires. ``$nor`` is one ``must_not`` listing its clauses.
* ``$all`` is a ``bool.filter`` of one ``term`` per value.
* ranges are ``range`` queries; the ranges on one field inside one ``$and`` are merged
  into a single ``range``. A ``range`` never matches a missing field.
* ``$exists`` is the ``exists`` query; OpenSearch indexes neither ``null`` nor ``[]``, which
  is exactly cairn's "missing" (``{f: null}`` is ``must_not exists``).
* ``$or`` is ``bool.should`` with ``minimum_should_match: 1``; ``$and`` is ``bool.filter`` (its
  negated children are gathered in one ``must_not``).
* a filter that matches nothing is ``{"match_none": {}}``; one that matches all is None.

**Types.** ``parse`` rejects values of the wrong type for record fields (a string for
``level``, a number for ``uri``, a range on a keyword field). A ``metadata.`` key is mapped by
OpenSearch from the first value written, so it holds one type per index; filter a metadata key
with values of that type. (A value of another type is coerced by OpenSearch, e.g. ``term 5``
matches the keyword ``"5"``, where cairn's type-strict equality would not.)
"""

from __future__ import annotations

from typing import Any

from cairn.core.filters import tree as t

NATIVE_OPERATORS: frozenset[str] = t.ALL_OPERATORS
SUPPORTED_OPERATORS: frozenset[str] = t.ALL_OPERATORS
MATCH_NOTHING: dict[str, Any] = {"match_none": {}}

_RANGE_KEYS = {"$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}


def translate(node: t.FilterNode | None) -> dict[str, Any] | None:
    """The OpenSearch query clause for ``node`` (None: no filter, match all)."""
    if node is None or isinstance(node, t.MatchAll):
        return None
    if isinstance(node, t.MatchNone):
        return dict(MATCH_NOTHING)
    return _clause(node)


def field_name(field: str) -> str:
    """The OpenSearch field that holds ``field``."""
    kind, name = t.split_field(field)
    return f"metadata.{name}" if kind == "metadata" else name


def _clause(node: t.FilterNode) -> dict[str, Any]:
    if isinstance(node, t.And):
        return _and([_clause(c) for c in node.children])
    if isinstance(node, t.Or):
        return {
            "bool": {
                "should": [_clause(c) for c in node.children],
                "minimum_should_match": 1,
            }
        }
    if isinstance(node, t.Not):
        return _not(_clause(node.child))
    if isinstance(node, t.Exists):
        exists = {"exists": {"field": field_name(node.field)}}
        return exists if node.exists else _not(exists)
    if isinstance(node, t.Membership):
        return _membership(node)
    if isinstance(node, t.Compare):
        return _compare(node)
    raise TypeError(f"constant {node!r} below the root; parse() folds these away")


def _compare(node: t.Compare) -> dict[str, Any]:
    name = field_name(node.field)
    if node.op in _RANGE_KEYS:
        return {"range": {name: {_RANGE_KEYS[node.op]: node.value}}}
    term = {"term": {name: node.value}}
    return term if node.op == "$eq" else _not(term)


def _membership(node: t.Membership) -> dict[str, Any]:
    name = field_name(node.field)
    if node.op == "$all":
        return _and([{"term": {name: v}} for v in node.values])
    if len(node.values) == 1:
        any_of: dict[str, Any] = {"term": {name: node.values[0]}}
    else:
        any_of = {"terms": {name: list(node.values)}}
    return any_of if node.op == "$in" else _not(any_of)


def _not(clause: dict[str, Any]) -> dict[str, Any]:
    """The complement of ``clause``.

    A double negation is removed, and the complement of an ``$or`` is one ``must_not`` over
    its clauses (a document is excluded when it matches any of them: that is ``$nor``).
    """
    inner = clause.get("bool") if list(clause) == ["bool"] else None
    if (
        inner is not None
        and list(inner) == ["must_not"]
        and len(inner["must_not"]) == 1
    ):
        return inner["must_not"][0]
    if (
        inner is not None
        and set(inner) == {"should", "minimum_should_match"}
        and inner["minimum_should_match"] == 1
    ):
        return {"bool": {"must_not": list(inner["should"])}}
    return {"bool": {"must_not": [clause]}}


def _and(clauses: list[dict[str, Any]]) -> dict[str, Any]:
    """A conjunction: positive clauses in ``filter``, negated ones in ``must_not``."""
    positive: list[dict[str, Any]] = []
    negative: list[dict[str, Any]] = []
    for clause in clauses:
        inner = clause.get("bool") if list(clause) == ["bool"] else None
        if inner is not None and set(inner) <= {"filter", "must_not"}:
            positive.extend(inner.get("filter", []))
            negative.extend(inner.get("must_not", []))
        else:
            positive.append(clause)
    positive = _merge_ranges(positive)
    if len(positive) == 1 and not negative:
        return positive[0]
    body: dict[str, Any] = {}
    if positive:
        body["filter"] = positive
    if negative:
        body["must_not"] = negative
    return {"bool": body}


def _merge_ranges(clauses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge ``range`` clauses on the same field whose bounds do not overlap in kind."""
    out: list[dict[str, Any]] = []
    ranges: dict[str, dict[str, Any]] = {}
    for clause in clauses:
        if list(clause) != ["range"] or len(clause["range"]) != 1:
            out.append(clause)
            continue
        ((name, bounds),) = clause["range"].items()
        merged = ranges.get(name)
        if merged is not None and not set(merged) & set(bounds):
            merged.update(bounds)
            continue
        fresh = dict(bounds)
        ranges[name] = fresh
        out.append({"range": {name: fresh}})
    return out
