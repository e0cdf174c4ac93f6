"""The typed, immutable filter tree that ``parse`` produces and every translator reads.

The tree is already normalised, so translators never see sugar:

* implicit ``$eq`` and implicit ``$and`` are explicit nodes;
* ``$nor`` is ``Not(Or(...))``; a field-level ``$not`` is ``Not`` of that field's clauses;
* comparisons with ``null`` are ``Exists`` nodes (``{f: null}`` is ``Exists(f, False)``,
  ``$ne: null`` is ``Exists(f, True)``; ``null`` inside ``$in``/``$nin`` is split out);
* datetimes are epoch seconds (floats);
* constants are folded: ``$in: []`` is ``MatchNone``, ``$nin: []`` is ``MatchAll``, and they
  are simplified away inside ``And``/``Or``/``Not`` so that at most the root is a constant;
* ``And``/``Or`` are flattened and never have fewer than two children.

A field is the path the user wrote: a record field (``level``) or ``metadata.<key>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scalar = str | int | float | bool

EQUALITY_OPS = frozenset({"$eq", "$ne"})
RANGE_OPS = frozenset({"$gt", "$gte", "$lt", "$lte"})
MEMBERSHIP_OPS = frozenset({"$in", "$nin", "$all"})
FIELD_OPS = (
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$in",
    "$nin",
    "$exists",
    "$all",
)
LOGICAL_OPS = ("$and", "$or", "$not", "$nor")
ALL_OPERATORS = frozenset(FIELD_OPS + LOGICAL_OPS)

METADATA_PREFIX = "metadata."

# Record fields a filter may name, with the kind of value they hold.
KEYWORD_FIELDS = frozenset(
    {"id", "uri", "parent_uri", "context_type", "owner", "title", "content_hash"}
)
KEYWORD_LIST_FIELDS = frozenset({"ancestors", "tags"})
NUMERIC_FIELDS = frozenset(
    {"depth", "level", "created_at", "updated_at", "active_count"}
)
RECORD_FIELDS = KEYWORD_FIELDS | KEYWORD_LIST_FIELDS | NUMERIC_FIELDS
# Record fields every stored record has, with a non-null, non-empty value.
ALWAYS_PRESENT_FIELDS = frozenset(
    {"id", "uri", "context_type", "title", "content_hash"} | NUMERIC_FIELDS
)


def is_number(value: object) -> bool:
    """True for ints and floats; bools are not numbers."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def split_field(field: str) -> tuple[Literal["record", "metadata"], str]:
    """``"level"`` -> ``("record", "level")``; ``"metadata.year"`` -> ``("metadata", "year")``."""
    if field.startswith(METADATA_PREFIX):
        return "metadata", field[len(METADATA_PREFIX) :]
    return "record", field


def always_present(field: str) -> bool:
    """True when every stored record has a non-null value for ``field``."""
    return field in ALWAYS_PRESENT_FIELDS


@dataclass(frozen=True)
class Compare:
    """``field op value`` with op in ``$eq $ne $gt $gte $lt $lte``; value is never null.

    Range values are numbers (datetimes already converted to epoch seconds).
    """

    field: str
    op: str
    value: Scalar


@dataclass(frozen=True)
class Membership:
    """``$in`` (any value matches), ``$nin`` (none matches) or ``$all`` (every value present).

    ``values`` is non-empty, deduplicated and null-free.
    """

    field: str
    op: str
    values: tuple[Scalar, ...]


@dataclass(frozen=True)
class Exists:
    """The field is present (not missing, not null, not an empty list) when ``exists``."""

    field: str
    exists: bool


@dataclass(frozen=True)
class And:
    children: tuple[FilterNode, ...]


@dataclass(frozen=True)
class Or:
    children: tuple[FilterNode, ...]


@dataclass(frozen=True)
class Not:
    """The complement: matches exactly the records ``child`` does not match."""

    child: FilterNode


@dataclass(frozen=True)
class MatchAll:
    """Matches every record (e.g. ``$nin: []``). ``parse`` returns None instead at the root."""


@dataclass(frozen=True)
class MatchNone:
    """Matches no record (e.g. ``$in: []``); a store may skip the search altogether."""


FilterNode = Compare | Membership | Exists | And | Or | Not | MatchAll | MatchNone
Leaf = Compare | Membership | Exists


def make_and(children: list[FilterNode]) -> FilterNode:
    """An ``And`` that is flattened and constant-folded."""
    flat: list[FilterNode] = []
    for child in children:
        if isinstance(child, MatchNone):
            return MatchNone()
        if isinstance(child, MatchAll):
            continue
        flat.extend(child.children if isinstance(child, And) else (child,))
    if not flat:
        return MatchAll()
    return flat[0] if len(flat) == 1 else And(tuple(flat))


def make_or(children: list[FilterNode]) -> FilterNode:
    """An ``Or`` that is flattened and constant-folded."""
    flat: list[FilterNode] = []
    for child in children:
        if isinstance(child, MatchAll):
            return MatchAll()
        if isinstance(child, MatchNone):
            continue
        flat.extend(child.children if isinstance(child, Or) else (child,))
    if not flat:
        return MatchNone()
    return flat[0] if len(flat) == 1 else Or(tuple(flat))


def make_not(child: FilterNode) -> FilterNode:
    """A ``Not`` with constants and double negation folded."""
    if isinstance(child, MatchAll):
        return MatchNone()
    if isinstance(child, MatchNone):
        return MatchAll()
    if isinstance(child, Not):
        return child.child
    if isinstance(child, Exists):
        return Exists(child.field, not child.exists)
    return Not(child)


def fields_of(node: FilterNode) -> set[str]:
    """Every field the filter reads."""
    if isinstance(node, (Compare, Membership, Exists)):
        return {node.field}
    if isinstance(node, (And, Or)):
        return set().union(*(fields_of(c) for c in node.children))
    if isinstance(node, Not):
        return fields_of(node.child)
    return set()
