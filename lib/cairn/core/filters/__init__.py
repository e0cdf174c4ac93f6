"""Mongo-style filters: parsed and validated once, then translated per backend.

``parse`` turns a filter dict into an immutable :mod:`~cairn.core.filters.tree` (or None: match
all). Translators read the tree: :mod:`.local` (a predicate over records),
:mod:`.pinecone` (a Pinecone metadata filter) and :mod:`.opensearch` (a bool query). The
language and its semantics are documented in ``docs/filters.md``.
"""

from cairn.core.filters.parse import MAX_CLAUSES, MAX_DEPTH, MAX_LIST_VALUES, parse
from cairn.core.filters.tree import (
    ALL_OPERATORS,
    RECORD_FIELDS,
    And,
    Compare,
    Exists,
    FilterNode,
    MatchAll,
    MatchNone,
    Membership,
    Not,
    Or,
)

__all__ = [
    "ALL_OPERATORS",
    "MAX_CLAUSES",
    "MAX_DEPTH",
    "MAX_LIST_VALUES",
    "RECORD_FIELDS",
    "And",
    "Compare",
    "Exists",
    "FilterNode",
    "MatchAll",
    "MatchNone",
    "Membership",
    "Not",
    "Or",
    "parse",
]
