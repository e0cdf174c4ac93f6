"""Translate a filter tree into a Pinecone metadata filter, exactly or not at all.

**Storage layout** (written by the Pinecone store): record fields are metadata keys of their
own name; user metadata key ``k`` is stored as ``md_<k>``; null values and empty lists are
not stored (Pinecone rejects nulls), so "missing" is "key absent". The tenant is the
namespace and never appears in a filter.

**Pinecone's native dialect** (docs.pinecone.io, "Filter by metadata"): ``$eq $ne $gt $gte
$lt $lte $in $nin $exists $and $or``. ``$eq`` and ``$in`` on a list of strings match when any
element matches. Ranges take numbers only. ``$in``/``$nin`` take strings and numbers (not
bools; at most 10,000 values). ``$ne`` and ``$nin`` only match records that *have* the key
(Pinecone changed this in 2024; MongoDB also matches records without it), and on a list they
match when no element is equal. There is no ``$not``, ``$nor`` or ``$all``.

**How cairn's semantics (see :mod:`cairn.core.filters.local`) are kept exactly:**

* ``$ne`` / ``$nin`` become ``{"$or": [<native>, {key: {"$exists": false}}]}``, except on
  record fields every record has (``uri``, ``level``, ...), where the native form is exact;
* bools in ``$in`` / ``$nin`` become ``$eq`` / ``$ne`` clauses;
* ``$all: [a, b]`` becomes ``{"$and": [{key: {"$in": [a]}}, {key: {"$in": [b]}}]}``;
* ``$not`` and ``$nor`` are pushed down to the leaves by De Morgan's laws, negating each leaf
  exactly (``not $eq`` is the emulated ``$ne``, ``not $exists`` flips, ``not $all`` is an
  ``$or`` of ``$ne`` and missing);
* a filter that matches nothing is ``{"$and": [{"uri": {"$exists": true}}, {"uri": {"$exists":
  false}}]}``; one that matches everything is None.

**Rejected** (:class:`~cairn.core.errors.UnsupportedFilterError`): a negated range (``$not``/``$nor``
around ``$gt $gte $lt $lte``) on a ``metadata.`` field. Its complement must also match records
whose value is a string or a bool, which Pinecone cannot test for. On numeric record fields
(always present, always numbers) the range is simply flipped (``not $gt`` is ``$lte``).
"""

from __future__ import annotations

from typing import Any

from cairn.core.errors import FilterProblem, UnsupportedFilterError
from cairn.core.filters import tree as t

NATIVE_OPERATORS: frozenset[str] = frozenset(
    {
        "$eq",
        "$ne",
        "$gt",
        "$gte",
        "$lt",
        "$lte",
        "$in",
        "$nin",
        "$exists",
        "$and",
        "$or",
    }
)
# Every operator is accepted: $all, $not and $nor are emulated (see the module docstring).
SUPPORTED_OPERATORS: frozenset[str] = t.ALL_OPERATORS
METADATA_KEY_PREFIX = "md_"
MATCH_NOTHING: dict[str, Any] = {
    "$and": [{"uri": {"$exists": True}}, {"uri": {"$exists": False}}]
}

_FLIPPED = {"$gt": "$lte", "$gte": "$lt", "$lt": "$gte", "$lte": "$gt"}


def translate(node: t.FilterNode | None) -> dict[str, Any] | None:
    """The Pinecone filter for ``node`` (None: no filter, match all)."""
    if node is None or isinstance(node, t.MatchAll):
        return None
    if isinstance(node, t.MatchNone):
        return {"$and": [dict(c) for c in MATCH_NOTHING["$and"]]}
    translator = _Translator()
    out = translator.positive(node)
    if translator.problems:
        raise UnsupportedFilterError(translator.problems)
    return out


def storage_key(field: str) -> str:
    """The Pinecone metadata key that holds ``field``."""
    kind, name = t.split_field(field)
    return METADATA_KEY_PREFIX + name if kind == "metadata" else name


def _and(clauses: list[dict[str, Any]]) -> dict[str, Any]:
    flat: list[dict[str, Any]] = []
    for clause in clauses:
        flat.extend(clause["$and"] if list(clause) == ["$and"] else [clause])
    return flat[0] if len(flat) == 1 else {"$and": flat}


def _or(clauses: list[dict[str, Any]]) -> dict[str, Any]:
    flat: list[dict[str, Any]] = []
    for clause in clauses:
        flat.extend(clause["$or"] if list(clause) == ["$or"] else [clause])
    return flat[0] if len(flat) == 1 else {"$or": flat}


def _or_missing(
    field: str, clause: dict[str, Any], present: frozenset[str]
) -> dict[str, Any]:
    """``clause``, or the field is missing.

    The missing arm is left out for fields every record has, and for fields that an enclosing
    ``$and`` already requires to exist (``present``).
    """
    if t.always_present(field) or field in present:
        return clause
    return _or([clause, {storage_key(field): {"$exists": False}}])


def _any_equal(field: str, values: tuple[t.Scalar, ...]) -> dict[str, Any]:
    key = storage_key(field)
    plain = [v for v in values if not isinstance(v, bool)]
    parts: list[dict[str, Any]] = [{key: {"$in": plain}}] if plain else []
    parts += [{key: {"$eq": v}} for v in values if isinstance(v, bool)]
    return _or(parts)


def _none_equal(field: str, values: tuple[t.Scalar, ...]) -> dict[str, Any]:
    """Present, and no value of the field is among ``values`` (Pinecone's own $nin)."""
    key = storage_key(field)
    plain = [v for v in values if not isinstance(v, bool)]
    parts: list[dict[str, Any]] = [{key: {"$nin": plain}}] if plain else []
    parts += [{key: {"$ne": v}} for v in values if isinstance(v, bool)]
    return _and(parts)


def _contains(field: str, value: t.Scalar) -> dict[str, Any]:
    op, operand = ("$eq", value) if isinstance(value, bool) else ("$in", [value])
    return {storage_key(field): {op: operand}}


def _required(node: t.And) -> frozenset[str]:
    """Fields that ``node`` requires to exist through an ``Exists(field, True)`` child."""
    return frozenset(
        c.field for c in node.children if isinstance(c, t.Exists) and c.exists
    )


class _Translator:
    def __init__(self) -> None:
        self.problems: list[FilterProblem] = []

    def positive(
        self, node: t.FilterNode, present: frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        """``node`` in Pinecone's dialect; ``present``: fields an enclosing ``$and`` requires."""
        if isinstance(node, t.And):
            inner = present | _required(node)
            return _and([self.positive(c, inner) for c in node.children])
        if isinstance(node, t.Or):
            return _or([self.positive(c, present) for c in node.children])
        if isinstance(node, t.Not):
            return self.negative(node.child, present)
        if isinstance(node, t.Exists):
            return {storage_key(node.field): {"$exists": node.exists}}
        if isinstance(node, t.Membership):
            return self.membership(node, present)
        if isinstance(node, t.Compare):
            clause = {storage_key(node.field): {node.op: node.value}}
            return (
                _or_missing(node.field, clause, present) if node.op == "$ne" else clause
            )
        raise TypeError(f"constant {node!r} below the root; parse() folds these away")

    def membership(self, node: t.Membership, present: frozenset[str]) -> dict[str, Any]:
        if node.op == "$in":
            return _any_equal(node.field, node.values)
        if node.op == "$nin":
            return _or_missing(
                node.field, _none_equal(node.field, node.values), present
            )
        return _and([_contains(node.field, v) for v in node.values])

    def negative(self, node: t.FilterNode, present: frozenset[str]) -> dict[str, Any]:
        """The exact complement of ``node``, with no ``$not``."""
        if isinstance(node, t.And):
            return _or([self.negative(c, present) for c in node.children])
        if isinstance(node, t.Or):
            return _and([self.negative(c, present) for c in node.children])
        if isinstance(node, t.Not):
            return self.positive(node.child, present)
        if isinstance(node, t.Exists):
            return {storage_key(node.field): {"$exists": not node.exists}}
        if isinstance(node, t.Membership):
            return self.negative_membership(node, present)
        if isinstance(node, t.Compare):
            return self.negative_compare(node, present)
        raise TypeError(f"constant {node!r} below the root; parse() folds these away")

    def negative_membership(
        self, node: t.Membership, present: frozenset[str]
    ) -> dict[str, Any]:
        if node.op in ("$in", "$nin"):
            flipped = t.Membership(
                node.field, "$nin" if node.op == "$in" else "$in", node.values
            )
            return self.positive(flipped, present)
        key = storage_key(node.field)
        lacking = [{key: {"$ne": v}} for v in node.values]
        return _or_missing(node.field, _or(lacking), present)

    def negative_compare(
        self, node: t.Compare, present: frozenset[str]
    ) -> dict[str, Any]:
        if node.op in ("$eq", "$ne"):
            flipped = t.Compare(
                node.field, "$ne" if node.op == "$eq" else "$eq", node.value
            )
            return self.positive(flipped, present)
        if node.field in t.NUMERIC_FIELDS:
            return {storage_key(node.field): {_FLIPPED[node.op]: node.value}}
        flipped_op = _FLIPPED[node.op]
        self.problems.append(
            FilterProblem(
                f"filter.{node.field}.{node.op}",
                f'"$not"/"$nor" around "{node.op}" on "{node.field}" cannot be expressed exactly by the '
                "pinecone backend: the complement would also have to match records whose value is not "
                "a number, which Pinecone cannot test; write the complement explicitly, e.g. "
                f'{{"$or": [{{"{node.field}": {{"{flipped_op}": {node.value!r}}}}}, '
                f'{{"{node.field}": {{"$exists": false}}}}]}}',
            )
        )
        return {}
