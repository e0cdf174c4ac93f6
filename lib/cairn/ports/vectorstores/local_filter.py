"""The embedded store's filters: the reference predicate, and a vectorised pre-filter over a
partition's record fields (inverted indexes and numpy columns, built lazily per field) that
gives exactly what the predicate says. Anything the columns cannot answer (``metadata.*``,
mixed types) is evaluated by the predicate, only on the rows the rest of an ``$and`` left alive.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from cairn.core.filters import tree as t
from cairn.ports.vectorstores.local_columns import Columns

Predicate = Callable[[Mapping[str, Any]], bool]


class LocalFilter:
    """A translated filter: the parsed tree (for the pre-filter) and the reference predicate."""

    __slots__ = ("node", "predicate")

    def __init__(self, node: t.FilterNode) -> None:
        from cairn.core.filters import local as local_filters

        self.node = node
        self.predicate: Predicate = local_filters.compile(node)

    def __call__(self, record: Mapping[str, Any]) -> bool:
        return self.predicate(record)


_NUMERIC_CMP = {
    "$eq": np.equal, "$ne": np.not_equal, "$gt": np.greater, "$gte": np.greater_equal,
    "$lt": np.less, "$lte": np.less_equal,
}


class PreFilter:
    """Boolean masks for filter trees over one partition, exactly as the reference predicate."""

    def __init__(self, cols: Columns, alive: np.ndarray | None = None) -> None:
        self.cols = cols
        self.alive = alive  # the rows worth asking the predicate about (None: all)

    def mask(self, node: t.FilterNode) -> np.ndarray:
        n = self.cols.n
        if isinstance(node, t.MatchAll):
            return np.ones(n, dtype=bool)
        if isinstance(node, t.MatchNone):
            return np.zeros(n, dtype=bool)
        if isinstance(node, t.Not):
            return ~self.mask(node.child)
        if isinstance(node, t.Or):
            out = np.zeros(n, dtype=bool)
            for child in node.children:
                out |= self.mask(child)
            return out
        if isinstance(node, t.And):
            return self._and(node.children)
        fast = self._leaf(node)
        return fast if fast is not None else self._scan(node, self._rows())

    def _rows(self) -> np.ndarray:
        return np.arange(self.cols.n) if self.alive is None else np.flatnonzero(self.alive)

    def _and(self, children: tuple[t.FilterNode, ...]) -> np.ndarray:
        out = np.ones(self.cols.n, dtype=bool)
        slow: list[t.FilterNode] = []
        for child in children:
            fast = self.mask(child) if self._vectorised(child) else None
            if fast is None:
                slow.append(child)
            else:
                out &= fast
        if slow:  # the predicate runs only on the rows the fast children left alive
            rows = np.flatnonzero(out if self.alive is None else out & self.alive)
            node = slow[0] if len(slow) == 1 else t.And(tuple(slow))
            out = self._scan(node, rows)
        return out

    def _vectorised(self, node: t.FilterNode) -> bool:
        if isinstance(node, (t.And, t.Or)):
            return all(self._vectorised(c) for c in node.children)
        if isinstance(node, t.Not):
            return self._vectorised(node.child)
        if isinstance(node, (t.MatchAll, t.MatchNone)):
            return True
        return self._kind(node.field) is not None

    def _kind(self, field: str) -> str | None:
        if field in t.KEYWORD_FIELDS or field in t.KEYWORD_LIST_FIELDS:
            return "keyword" if self.cols.strings_only(field) else None
        if field in t.NUMERIC_FIELDS:
            return "numeric" if self.cols.numeric(field) is not None else None
        return None

    def _scan(self, node: t.FilterNode, rows: np.ndarray) -> np.ndarray:
        from cairn.core.filters.local import compile as compile_predicate

        predicate, docs = compile_predicate(node), self.cols.docs
        out = np.zeros(self.cols.n, dtype=bool)
        out[rows] = np.fromiter((predicate(docs[r]) for r in rows), dtype=bool, count=len(rows))
        return out

    def _leaf(self, node: t.FilterNode) -> np.ndarray | None:
        field = node.field  # type: ignore[union-attr]
        kind = self._kind(field)
        if kind is None:
            return None
        if isinstance(node, t.Exists):
            present = self.cols.present(field) if kind == "keyword" else np.ones(self.cols.n, dtype=bool)
            return present if node.exists else ~present
        if kind == "keyword":
            return self._keyword(node)
        return self._numeric(node, self.cols.numeric(field))  # type: ignore[arg-type]

    def _keyword(self, node: t.FilterNode) -> np.ndarray:
        cols, field = self.cols, node.field  # type: ignore[union-attr]
        if isinstance(node, t.Compare):  # ranges never match strings
            eq = cols.rows_equal(field, node.value) if node.op in ("$eq", "$ne") else np.zeros(cols.n, dtype=bool)
            return ~eq if node.op == "$ne" else eq
        assert isinstance(node, t.Membership)
        if node.op == "$all":
            out = np.ones(cols.n, dtype=bool)
            for v in node.values:
                out &= cols.rows_equal(field, v)
            return out
        out = np.zeros(cols.n, dtype=bool)
        for v in node.values:
            out |= cols.rows_equal(field, v)
        return ~out if node.op == "$nin" else out

    def _numeric(self, node: t.FilterNode, col: np.ndarray) -> np.ndarray:
        def equal(v: Any) -> np.ndarray:
            return col == v if t.is_number(v) else np.zeros(len(col), dtype=bool)

        if isinstance(node, t.Compare):
            if node.op in ("$eq", "$ne"):
                eq = equal(node.value)
                return ~eq if node.op == "$ne" else eq
            if not t.is_number(node.value):
                return np.zeros(len(col), dtype=bool)
            return _NUMERIC_CMP[node.op](col, node.value)
        assert isinstance(node, t.Membership)
        if node.op == "$all":
            out = np.ones(len(col), dtype=bool)
            for v in node.values:
                out &= equal(v)
            return out
        out = np.zeros(len(col), dtype=bool)
        for v in node.values:
            out |= equal(v)
        return ~out if node.op == "$nin" else out
