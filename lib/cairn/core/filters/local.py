"""The reference semantics of cairn filters, as a predicate over records.

This module *is* the specification the Pinecone and OpenSearch translators must agree with
(they follow MongoDB's query semantics, with the differences listed below). A record is a
dict shaped like ``ContextRecord.model_dump()``; a field is a record field by name or
``metadata.<key>`` (looked up in the record's flat ``metadata`` dict).

* **Values of a field.** A list-valued field (``tags``, ``ancestors``, a list metadata value)
  contributes each of its elements; a scalar contributes itself. A field is **missing** when
  it is absent, ``None`` or an empty list (no backend can tell these apart: Pinecone stores no
  nulls and OpenSearch does not index nulls or empty arrays).
* **Equality** is type-strict: strings equal strings, numbers equal numbers (``1 == 1.0``),
  bools equal bools; ``True`` is not ``1`` and ``"1"`` is not ``1``.
* ``$eq v`` matches when *any* value of the field equals ``v``; ``$ne v`` is its exact
  complement, so it also matches records where the field is missing.
* ``$in [..]`` matches when any value of the field equals any listed value; ``$nin`` is its
  complement (matches missing too). ``$in: []`` matches nothing; ``$nin: []`` matches all.
* ``$all [..]`` matches when every listed value is among the field's values (list ⊇ values);
  ``$all: []`` matches nothing (as in MongoDB).
* ``{f: null}`` / ``$eq: null`` mean missing; ``$ne: null`` means present; ``$exists`` tests
  presence. ``null`` inside ``$in`` / ``$nin`` means the same (``parse`` rewrites all of
  these to ``Exists``).
* **Ranges** (``$gt $gte $lt $lte``) compare numbers only (datetimes are epoch seconds); they
  match when any *numeric* value of the field satisfies them, so they never match a missing
  field, a string or a bool.
* ``$not`` / ``$nor`` are exact complements (they match records where the field is missing);
  ``$and`` / ``$or`` are the usual conjunction and disjunction.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from cairn.core.filters import tree as t

Predicate = Callable[[Mapping[str, Any]], bool]

SUPPORTED_OPERATORS: frozenset[str] = t.ALL_OPERATORS

_RANGE: dict[str, Callable[[Any, Any], bool]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}


def compile(
    node: t.FilterNode | None,
) -> Predicate:  # the fixed public name (shadows the builtin)
    """A predicate that is True for the records ``node`` matches (every record for None)."""
    if node is None or isinstance(node, t.MatchAll):
        return lambda record: True
    if isinstance(node, t.MatchNone):
        return lambda record: False
    if isinstance(node, t.And):
        parts = [compile(c) for c in node.children]
        return lambda record: all(p(record) for p in parts)
    if isinstance(node, t.Or):
        parts = [compile(c) for c in node.children]
        return lambda record: any(p(record) for p in parts)
    if isinstance(node, t.Not):
        inner = compile(node.child)
        return lambda record: not inner(record)
    return _leaf(node)


def values_of(record: Mapping[str, Any], field: str) -> list[Any]:
    """The values of ``field`` in ``record``: [] when missing, the elements of a list."""
    kind, name = t.split_field(field)
    source = (record.get("metadata") or {}) if kind == "metadata" else record
    value = source.get(name) if isinstance(source, Mapping) else None
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [v for v in value if v is not None]
    return [value]


def equal(a: Any, b: Any) -> bool:
    """Type-strict equality: bools only equal bools, numbers numbers, strings strings."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if t.is_number(a) and t.is_number(b):
        return bool(a == b)
    return isinstance(a, str) and isinstance(b, str) and a == b


def _leaf(node: t.FilterNode) -> Predicate:
    if isinstance(node, t.Exists):
        return _exists(node)
    if isinstance(node, t.Membership):
        return _membership(node)
    if isinstance(node, t.Compare):
        return _compare(node)
    raise TypeError(f"not a filter node: {node!r}")


def _exists(node: t.Exists) -> Predicate:
    field, wanted = node.field, node.exists
    return lambda record: bool(values_of(record, field)) == wanted


def _compare(node: t.Compare) -> Predicate:
    field, value = node.field, node.value
    if node.op in _RANGE:
        cmp = _RANGE[node.op]
        return lambda record: any(
            t.is_number(v) and cmp(v, value) for v in values_of(record, field)
        )
    def eq(record: Mapping[str, Any]) -> bool:
        return any(equal(v, value) for v in values_of(record, field))

    if node.op == "$eq":
        return eq
    return lambda record: not eq(record)


def _membership(node: t.Membership) -> Predicate:
    field, wanted = node.field, node.values

    def hits(record: Mapping[str, Any]) -> list[bool]:
        present = values_of(record, field)
        return [any(equal(v, w) for v in present) for w in wanted]

    if node.op == "$all":
        return lambda record: bool(wanted) and all(hits(record))
    if node.op == "$in":
        return lambda record: any(hits(record))
    return lambda record: not any(hits(record))
