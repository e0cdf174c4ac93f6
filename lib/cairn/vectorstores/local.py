"""The embedded default: exact cosine over a numpy matrix, a partition per tenant, persisted
to a folder (one subfolder per tenant: an append-only segment log, :mod:`.local_persistence`).

A write takes the partition's inter-process lock, catches up with other processes' commits,
appends one segment and replaces the manifest atomically; a read stats the manifest and
applies only what it has not seen. So concurrent processes never lose each other's writes,
a process killed at any instant leaves a store that loads, and a write costs its own size.
Partitions load lazily, one tenant at a time: an unreadable one fails only its tenant's calls.

* **Filters** are evaluated by a vectorised pre-filter: the record fields (``uri``,
  ``parent_uri``, ``ancestors``, ``context_type``, ``owner``, ``tags``, ``level``, ...) get
  inverted indexes and numpy columns, built lazily per partition; rows written since (new or
  replaced) are checked by the predicate until they are an eighth of the partition, then the
  columns are built again, so a write never costs the next scoped query the whole tenant, and
  the usual scope filter is a few numpy operations instead of a Python call per record.
  Anything else (``metadata.*``) is evaluated by the reference predicate of
  :mod:`cairn.filters.local`, only on the rows the rest of an ``$and`` left alive. The result
  is always exactly what that predicate says.
* **Dense** search is one matrix product per tenant for a whole ``query_many`` batch,
  restricted to the union of the batch's pre-filtered rows when that is small.
* **Keyword** search is BM25 over the stemmed words (:mod:`.keywords`) of title + abstract +
  text, indexed incrementally (:mod:`.local_keywords`): a write indexes only its records, the
  records it replaces or deletes become tombstones, and scores use the live rows' statistics;
  **hybrid** fuses dense and BM25 scores (a convex combination, :mod:`.fusion`, as OpenSearch).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import VectorStoreError
from ..filters import tree as t
from ..models import ContextRecord
from ..text import AUTO, LanguagePolicy
from . import local_keywords as kw
from . import local_persistence as persist
from .base import Capabilities, SearchMode, VectorHit, VectorQuery, VectorStore, validate_tenant
from .fusion import fuse, hybrid_depth
from .local_side import SideTable, overlay

Predicate = Callable[[Mapping[str, Any]], bool]
_SUBSET_FRACTION = 0.5  # score only the pre-filtered rows when they are fewer than this share
_REBUILD_ROWS = 2048  # rows written since the columns were built, checked one by one, before a rebuild


class LocalFilter:
    """A translated filter: the parsed tree (for the pre-filter) and the reference predicate."""

    __slots__ = ("node", "predicate")

    def __init__(self, node: t.FilterNode) -> None:
        from ..filters import local as local_filters

        self.node = node
        self.predicate: Predicate = local_filters.compile(node)

    def __call__(self, record: Mapping[str, Any]) -> bool:
        return self.predicate(record)


class _Columns:
    """Vectorised views of a partition's record fields; built on first use, per field."""

    def __init__(self, docs: persist.LazyDocs) -> None:
        self.docs = docs
        self.n = len(docs)
        self._inverted: dict[str, dict[str, np.ndarray] | None] = {}
        self._present: dict[str, np.ndarray] = {}
        self._numeric: dict[str, np.ndarray | None] = {}

    def inverted(self, field: str) -> dict[str, np.ndarray] | None:
        """value -> rows holding it; None when a value is not a string (then no shortcut)."""
        if field not in self._inverted:
            from ..filters.local import values_of

            rows: dict[str, list[int]] = {}
            present = np.zeros(self.n, dtype=bool)
            strings_only = True
            for r, doc in enumerate(self.docs):
                values = values_of(doc, field)
                present[r] = bool(values)
                strings_only = strings_only and all(isinstance(v, str) for v in values)
                for v in values:
                    rows.setdefault(v, []).append(r)
            self._present[field] = present
            self._inverted[field] = (
                {v: np.asarray(rs, dtype=np.int64) for v, rs in rows.items()} if strings_only else None
            )
        return self._inverted[field]

    def present(self, field: str) -> np.ndarray:
        self.inverted(field)
        return self._present[field]

    def numeric(self, field: str) -> np.ndarray | None:
        """One float per row; None unless every row holds exactly one number."""
        if field not in self._numeric:
            values = [doc.get(field) for doc in self.docs]
            ok = all(t.is_number(v) and abs(v) < 2**53 for v in values)  # type: ignore[arg-type]  # is_number: a number
            self._numeric[field] = np.asarray(values, dtype=np.float64) if ok else None
        return self._numeric[field]

    def rows_equal(self, field: str, value: Any) -> np.ndarray:
        out = np.zeros(self.n, dtype=bool)
        index = self.inverted(field)
        if index is not None and isinstance(value, str) and value in index:
            out[index[value]] = True
        return out


_NUMERIC_CMP = {
    "$eq": np.equal, "$ne": np.not_equal, "$gt": np.greater, "$gte": np.greater_equal,
    "$lt": np.less, "$lte": np.less_equal,
}


class _PreFilter:
    """Boolean masks for filter trees over one partition, exactly as the reference predicate."""

    def __init__(self, cols: _Columns) -> None:
        self.cols = cols

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
        return fast if fast is not None else self._scan(node, np.arange(n))

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
            rows = np.flatnonzero(out)
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
            return "keyword" if self.cols.inverted(field) is not None else None
        if field in t.NUMERIC_FIELDS:
            return "numeric" if self.cols.numeric(field) is not None else None
        return None

    def _scan(self, node: t.FilterNode, rows: np.ndarray) -> np.ndarray:
        from ..filters.local import compile as compile_predicate

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


class _Partition:
    """One tenant's records: dumps (without vectors), a row-aligned vector matrix, lazy indexes."""

    def __init__(self, dimension: int) -> None:
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.docs = persist.LazyDocs([])
        self.matrix = np.zeros((0, dimension), dtype=np.float32)
        self.keywords = kw.KeywordIndex()
        self._buffer: np.ndarray | None = None  # ``matrix`` is a view of its first rows, when set
        self._columns: _Columns | None = None  # over the rows as they were when built
        self._base = np.zeros(0, dtype=np.int64)  # per row: its row in ``_columns``, -1 if written since

    def put(self, docs: list[dict[str, Any]], unit_vectors: np.ndarray, postings: kw.Postings | None = None) -> None:
        """Insert or replace record dumps (with their unit vectors and keyword postings, row-aligned) by id."""
        new_rows: list[int] = []
        at = np.empty(len(docs), dtype=np.int64)
        for n, doc in enumerate(docs):
            row = self.rows.get(doc["id"])
            if row is None:
                row = self.rows[doc["id"]] = len(self.ids)
                self.ids.append(doc["id"])
                self.docs.append(doc)
                new_rows.append(n)
            else:
                self.docs[row] = doc
                self.matrix[row] = unit_vectors[n]
            at[n] = row
        if new_rows:
            self._append_rows(unit_vectors[new_rows])
        if postings is None:
            postings = kw.Postings.of_texts([persist.indexed_text(d) for d in docs])
        self.keywords.add(postings, at)
        if self._columns is not None:  # the written rows leave the columns: the predicate checks them
            self._base = np.concatenate([self._base, np.full(len(self.ids) - len(self._base), -1, dtype=np.int64)])
            self._base[at] = -1

    def _append_rows(self, vectors: np.ndarray) -> None:
        """Append to the matrix in place when its buffer has room (grown by 1/8): a small write
        into a big partition does not copy the whole matrix."""
        n, add = self.matrix.shape[0], len(vectors)
        buf = self._buffer
        if buf is None or self.matrix.base is not buf or buf.shape[0] < n + add:
            buf = np.empty((n + add + n // 8 + 1024, self.matrix.shape[1]), dtype=np.float32)
            buf[:n] = self.matrix
            self._buffer = buf
        buf[n : n + add] = vectors
        self.matrix = buf[: n + add]

    def delete(self, ids: list[str]) -> int:
        doomed = {self.rows[i] for i in ids if i in self.rows}
        if not doomed:
            return 0
        keep = [r for r in range(len(self.ids)) if r not in doomed]
        self.ids = [self.ids[r] for r in keep]
        self.docs = self.docs.keep(keep)
        self.matrix = self.matrix[keep]
        self.rows = {i: n for n, i in enumerate(self.ids)}
        self.keywords.keep(np.asarray(keep, dtype=np.int64))
        if self._columns is not None:
            self._base = self._base[keep]
        return len(doomed)

    def mask(self, native: LocalFilter | None) -> np.ndarray | None:
        if native is None:
            return None
        n = len(self.ids)
        known = self._base >= 0
        if self._columns is None or n - int(known.sum()) > max(_REBUILD_ROWS, n // 8):
            self._columns = _Columns(self.docs.keep(range(n)))  # a frozen view: later writes do not move it
            self._base, known = np.arange(n, dtype=np.int64), np.ones(n, dtype=bool)
        inner = _PreFilter(self._columns).mask(native.node)
        if known.all():
            return inner[self._base]
        out = np.zeros(n, dtype=bool)
        out[known] = inner[self._base[known]]
        fresh = np.flatnonzero(~known)
        out[fresh] = np.fromiter((native.predicate(self.docs[int(r)]) for r in fresh), dtype=np.bool_, count=len(fresh))
        return out


def _partition_of(snap: persist.Snapshot) -> _Partition:
    part = _Partition(snap.matrix.shape[1])
    part.ids, part.docs, part.matrix = snap.ids, snap.docs, snap.matrix
    part.rows = {i: n for n, i in enumerate(part.ids)}
    part.keywords = kw.KeywordIndex.of_chunks(snap.chunks, len(part.ids))
    return part


def _dump(records: list[ContextRecord]) -> tuple[list[dict[str, Any]], np.ndarray]:
    """Record dumps (without vectors) and their unit vectors; the last write of an id in one batch wins."""
    latest = list({rec.id: rec for rec in records}.values())
    docs = [rec.model_dump(mode="json", exclude={"vector"}) for rec in latest]
    return docs, _unit(np.asarray([rec.vector or [] for rec in latest], dtype=np.float32))


def _unit(mat: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return mat / norms


def _ranked(scores: np.ndarray, rows: np.ndarray, ids: list[str], k: int) -> list[tuple[int, float]]:
    """The ``k`` best (row, score) pairs, best first, ties by id; ``rows`` maps positions to rows."""
    if k <= 0 or not len(scores):
        return []
    k = min(k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    pairs = [(int(rows[p]), float(scores[p])) for p in top if np.isfinite(scores[p])]
    return sorted(pairs, key=lambda rs: (-rs[1], ids[rs[0]]))


_BLAS_LOCK = threading.Lock()


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """Run the enclosed matrix products on one BLAS thread, then restore the setting.

    A query is a matrix-vector product: memory-bound, so extra threads barely help, and on a
    busy machine (or a 2-vCPU Lambda) waking them costs more than the product itself
    (measured: 8 ms vs 5 ms at 100k x 384). threadpoolctl finds the BLAS numpy loaded.
    """
    with _BLAS_LOCK, _blas_controller().limit(limits=1, user_api="blas"):
        yield


@lru_cache(maxsize=1)
def _blas_controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


class LocalVectorStore(VectorStore):
    backend = "local"

    def __init__(self, path: str | Path | None, *, dimension: int, languages: LanguagePolicy = AUTO) -> None:
        super().__init__(dimension=dimension)
        self.path = Path(path) if path is not None else None
        # a tenant's fixed language: its queries' words are read in it (documents: each its own, detected)
        self.languages = languages
        self._parts: dict[str, _Partition] = {}
        self._lock = threading.RLock()
        self._disk = (
            persist.DiskPartitions(self.path / "tenants", dimension, _partition_of) if self.path is not None else None
        )
        self._sides: dict[str, SideTable] = {}

    # ---------------------------------------------------------------- bookkeeping beside the index

    def _side(self, tenant: str) -> SideTable:
        with self._lock:
            side = self._sides.get(tenant)
            if side is None:
                folder = self._disk.files(tenant).dir if self._disk is not None else None
                side = self._sides[tenant] = SideTable(folder)
            return side

    def record_uses(self, tenant: str, uses: Mapping[str, int], now: float) -> int:
        """Count ``uses[id]`` more uses of each record, last used at ``now``, in the tenant's side
        table: no segment is written and no index changes. Returns the records counted (ids no
        longer stored are dropped)."""
        validate_tenant(tenant)
        with self._lock:
            part = self._part(tenant)
            if part is None:
                return 0
            known = {i: (int(n), int(part.docs[part.rows[i]].get("active_count") or 0))
                     for i, n in uses.items() if i in part.rows and n > 0}
        if known:
            try:
                self._side(tenant).add_uses(known, now)
            except sqlite3.Error as exc:
                raise VectorStoreError(f"could not record uses for tenant {tenant!r}: {exc}", retryable=True) from exc
        return len(known)

    def learned(self, tenant: str, key: str) -> Any:
        """A fact learned about ``tenant`` and kept with it (JSON), or None."""
        return self._side(validate_tenant(tenant)).fact(key)

    def learn(self, tenant: str, key: str, value: Any) -> None:
        """Keep ``value`` (JSON) as what was learned about ``tenant`` under ``key``, for every process."""
        self._side(validate_tenant(tenant)).learn(key, value)

    def close(self) -> None:
        with self._lock:
            for side in self._sides.values():
                side.close()
            self._sides.clear()

    # ---------------------------------------------------------------- persistence

    def _part(self, tenant: str) -> _Partition | None:
        """The tenant's partition, brought up to the latest commit on disk (a stat when unchanged)."""
        with self._lock:
            if self._disk is not None:
                self._disk.refresh(tenant, self._parts)
            return self._parts.get(tenant)

    @contextmanager
    def _writing(self, tenant: str) -> Iterator[tuple[_Partition, Callable[[persist.Segment], None]]]:
        """The tenant's up-to-date partition under the inter-process lock, and a ``commit``.

        The caller changes the partition in memory and commits the segment that says what it
        changed; if anything fails before the commit, the in-memory partition is dropped and
        reloaded from disk on the next call.
        """
        with self._lock:
            if self._disk is None:
                yield self._parts.setdefault(tenant, _Partition(self.dimension)), lambda seg: None
                return
            with self._disk.writing(tenant, self._parts) as commit:
                yield self._parts.setdefault(tenant, _Partition(self.dimension)), commit

    # ---------------------------------------------------------------- hooks

    def _capabilities(self) -> Capabilities:
        from ..filters import local as local_filters

        return Capabilities(
            keyword=True,
            hybrid=True,
            batched_queries=True,
            max_upsert_batch=100_000,
            filter_operators=local_filters.SUPPORTED_OPERATORS,
        )

    def _translate_filter(self, tree: Any) -> LocalFilter | None:
        return None if tree is None else LocalFilter(tree)

    def _upsert(self, tenant: str, records: list[ContextRecord]) -> int:
        docs, vectors = _dump(records)
        postings = kw.Postings.of_texts([persist.indexed_text(d) for d in docs])  # outside the lock
        with self._writing(tenant) as (part, commit):
            part.put(docs, vectors, postings)
            commit(persist.Segment(docs, vectors, postings=postings))
        return len(records)

    def _query(self, request: VectorQuery, native_filter: LocalFilter | None) -> list[VectorHit]:
        return self._query_many([request], [native_filter])[0]

    def _query_many(
        self, requests: list[VectorQuery], native_filters: list[LocalFilter | None]
    ) -> list[list[VectorHit]]:
        with self._lock:
            results: list[list[VectorHit]] = [[] for _ in requests]
            by_tenant: dict[str, list[int]] = {}
            for n, req in enumerate(requests):
                by_tenant.setdefault(req.tenant, []).append(n)
            for tenant, idx in by_tenant.items():
                part = self._part(tenant)
                if part is None or not part.ids:
                    continue
                masks = {n: part.mask(native_filters[n]) for n in idx}
                dense = self._dense_rankings(part, [(requests[n], masks[n]) for n in idx])
                for n, ranking in zip(idx, dense, strict=True):
                    results[n] = self._finish(part, requests[n], masks[n], ranking)
            return results

    def _dense_rankings(
        self, part: _Partition, batch: list[tuple[VectorQuery, np.ndarray | None]]
    ) -> list[list[tuple[int, float]]]:
        """Cosine rankings for every query of ``batch`` that has a vector: one matrix product."""
        wanted = [(n, q, m) for n, (q, m) in enumerate(batch) if q.mode is not SearchMode.KEYWORD]
        out: list[list[tuple[int, float]]] = [[] for _ in batch]
        if not wanted:
            return out
        rows = np.arange(len(part.ids))
        if all(m is not None for _, _, m in wanted):
            union = np.logical_or.reduce([m for _, _, m in wanted if m is not None])
            if union.sum() < _SUBSET_FRACTION * len(rows):
                rows = np.flatnonzero(union)
        matrix = part.matrix if len(rows) == len(part.ids) else part.matrix[rows]
        queries = _unit(np.asarray([q.vector for _, q, _ in wanted], dtype=np.float32))
        with _one_blas_thread():
            scores = queries @ matrix.T  # one matrix product for the whole batch
        for (n, q, mask), row_scores in zip(wanted, scores, strict=True):
            if mask is not None:
                row_scores = np.where(mask[rows], row_scores, -np.inf)
            depth = hybrid_depth(q.limit) if q.mode is SearchMode.HYBRID else q.limit
            out[n] = _ranked(row_scores, rows, part.ids, depth)
        return out

    def _finish(
        self, part: _Partition, req: VectorQuery, mask: np.ndarray | None, dense: list[tuple[int, float]]
    ) -> list[VectorHit]:
        if req.mode is SearchMode.DENSE:
            ranked = dense
        else:
            keyword = self._keyword_ranking(part, req, mask)
            ranked = keyword if req.mode is SearchMode.KEYWORD else fuse(dense, keyword, req.limit, depth=hybrid_depth(req.limit))
        used = self._side(req.tenant).uses(part.ids[r] for r, _ in ranked)
        return [self._hit(part, r, s, req, used.get(part.ids[r])) for r, s in ranked]

    def _keyword_ranking(self, part: _Partition, req: VectorQuery, mask: np.ndarray | None) -> list[tuple[int, float]]:
        scores = part.keywords.scores(req.text or "", self.languages.for_tenant(req.tenant))
        if scores is None:
            return []
        keep = scores > 0
        if mask is not None:
            keep &= mask
        rows = np.flatnonzero(keep)
        depth = hybrid_depth(req.limit) if req.mode is SearchMode.HYBRID else req.limit
        return _ranked(scores[rows].astype(np.float64), rows, part.ids, depth)

    @staticmethod
    def _hit(part: _Partition, row: int, score: float, req: VectorQuery, used: tuple[int, float] | None) -> VectorHit:
        vec = part.matrix[row].tolist() if req.include_vectors else None
        return VectorHit(record=ContextRecord.model_validate({**overlay(part.docs[row], used), "vector": vec}), score=score)

    def _fetch(self, tenant: str, ids: list[str]) -> list[ContextRecord]:
        part = self._part(tenant)
        if part is None:
            return []
        rows = [(i, part.rows[i]) for i in ids if i in part.rows]
        used = self._side(tenant).uses(i for i, _ in rows)
        return [
            ContextRecord.model_validate({**overlay(part.docs[r], used.get(i)), "vector": part.matrix[r].tolist()})
            for i, r in rows
        ]

    def _delete(self, tenant: str, ids: list[str]) -> int:
        with self._writing(tenant) as (part, commit):
            return self._delete_rows(tenant, part, commit, ids)

    def _delete_by_filter(self, tenant: str, native_filter: LocalFilter | None) -> int:
        with self._writing(tenant) as (part, commit):  # the filter sees every commit before it
            mask = part.mask(native_filter)
            ids = part.ids if mask is None else [part.ids[r] for r in np.flatnonzero(mask)]
            return self._delete_rows(tenant, part, commit, list(ids))

    def _delete_rows(self, tenant: str, part: _Partition, commit: Callable[[persist.Segment], None], ids: list[str]) -> int:
        doomed = sorted({i for i in ids if i in part.rows})
        if not doomed:
            return 0
        n = part.delete(doomed)
        commit(persist.Segment([], np.zeros((0, self.dimension), dtype=np.float32), doomed))
        self._side(tenant).forget_uses(doomed)
        return n

    def _count(self, tenant: str, native_filter: LocalFilter | None) -> int:
        with self._lock:
            part = self._part(tenant)
            if part is None:
                return 0
            mask = part.mask(native_filter)
            return len(part.ids) if mask is None else int(mask.sum())
