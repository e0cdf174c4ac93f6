"""One tenant's records in memory: rows that are only ever appended, and a live mask.

A partition's rows are its segments' rows in commit order, then the rows this process wrote
since: a write appends every record it puts (a new one or a new version) and marks the rows it
replaces or deletes dead. So opening a partition is laying its segments side by side (the
vectors stay memory-mapped, one block per segment, no copy) and reading which rows are live
(:mod:`.local_persistence` keeps that mask with each commit), never replaying ids record by
record. The id -> row table is built the first time a write or a fetch needs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cairn.ports.vectorstores import local_keywords as kw
from cairn.ports.vectorstores.local_columns import ColumnChunk, Columns
from cairn.ports.vectorstores.local_filter import LocalFilter, PreFilter
from cairn.ports.vectorstores.local_segments import LazyDocs, indexed_text


class Blocks:
    """Row-aligned unit vectors as a few matrices side by side: the segments' memory maps, then
    one in-memory tail that grows geometrically (a small write never copies a big matrix)."""

    def __init__(self, dimension: int, blocks: Sequence[np.ndarray] = ()) -> None:
        self.dimension = dimension
        self.blocks = [b for b in blocks if len(b)]
        self._buffer: np.ndarray | None = None  # the tail: ``blocks[-1]`` is a view of its first rows
        self._starts = np.cumsum([0] + [len(b) for b in self.blocks])

    @property
    def n(self) -> int:
        return int(self._starts[-1])

    def append(self, vectors: np.ndarray) -> None:
        add = len(vectors)
        if not add:
            return
        buf, used = self._buffer, (len(self.blocks[-1]) if self._buffer is not None else 0)
        if buf is None or buf.shape[0] < used + add:
            grown = np.empty((max(2 * used, used + add, 1024), self.dimension), dtype=np.float32)
            if buf is not None:
                grown[:used] = buf[:used]
                self.blocks.pop()
            buf = self._buffer = grown
            self.blocks.append(buf[:0])
        buf[used : used + add] = vectors
        self.blocks[-1] = buf[: used + add]
        self._starts = np.cumsum([0] + [len(b) for b in self.blocks])

    def row(self, r: int) -> np.ndarray:
        b = int(np.searchsorted(self._starts, r, side="right")) - 1
        return self.blocks[b][r - int(self._starts[b])]

    def scores(self, queries: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """``queries @ vectors.T`` over every row (or only ``rows``, sorted), block by block."""
        parts = []
        for b, block in enumerate(self.blocks):
            lo, hi = int(self._starts[b]), int(self._starts[b + 1])
            if rows is None:
                parts.append(queries @ block.T)
                continue
            sel = rows[np.searchsorted(rows, lo) : np.searchsorted(rows, hi)]
            if len(sel) == hi - lo:
                parts.append(queries @ block.T)
            elif len(sel):
                parts.append(queries @ block[sel - lo].T)
        return np.concatenate(parts, axis=1) if parts else np.zeros((len(queries), 0), dtype=np.float32)

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The vectors of ``rows`` (sorted), as one matrix."""
        out = np.empty((len(rows), self.dimension), dtype=np.float32)
        for b, block in enumerate(self.blocks):
            lo, hi = np.searchsorted(rows, [self._starts[b], self._starts[b + 1]])
            if hi > lo:
                out[lo:hi] = block[rows[lo:hi] - int(self._starts[b])]
        return out


class Partition:
    """One tenant's rows: ids, record dumps (parsed when first read), vectors, keyword index, and
    which rows are live. Dead rows (replaced or deleted) stay until the segments are compacted."""

    def __init__(
        self, dimension: int, ids: list[str] | None = None, docs: LazyDocs | None = None,
        blocks: Sequence[np.ndarray] = (), live: np.ndarray | None = None, keywords: kw.KeywordIndex | None = None,
        columns: Sequence[ColumnChunk] | None = None,
    ) -> None:
        self.ids: list[str] = ids if ids is not None else []
        self.docs = docs if docs is not None else LazyDocs([])
        self.vectors = Blocks(dimension, blocks)
        self.live = live if live is not None else np.ones(len(self.ids), dtype=bool)
        self.keywords = keywords if keywords is not None else kw.KeywordIndex()
        self.n_live = int(self.live.sum())
        self._rows: dict[str, int] | None = None
        self.files: tuple[tuple[str, int], ...] = ()  # the segments (file, rows) this partition was opened from
        self.ann: Any = None  # the ANN index over its first rows (:mod:`.local_ann`), when one serves
        self.ann_looked = False  # the folder was searched for a saved index
        self.columns = Columns(self.docs, columns if columns is not None else [ColumnChunk.of_docs(self.docs)])

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def rows(self) -> dict[str, int]:
        """id -> its live row (built on first use: a query never needs it)."""
        if self._rows is None:
            ids = self.ids
            self._rows = {ids[r]: r for r in np.flatnonzero(self.live).tolist()}
        return self._rows

    def live_rows(self) -> np.ndarray:
        return np.flatnonzero(self.live)

    # ------------------------------------------------------------ writing

    def put(self, docs: list[dict[str, Any]], unit_vectors: np.ndarray, postings: kw.Postings | None = None,
            columns: ColumnChunk | None = None) -> None:
        """Insert or replace records by id (their unit vectors, keyword postings and columns row-aligned)."""
        rows = self.rows
        replaced = [rows[d["id"]] for d in docs if d["id"] in rows]
        self.append(docs, unit_vectors, postings, columns=columns)
        self.kill(np.asarray(replaced, dtype=np.int64))

    def append(self, docs: Sequence[dict[str, Any] | bytes], unit_vectors: np.ndarray,
               postings: kw.Postings | None = None, ids: list[str] | None = None,
               columns: ColumnChunk | None = None) -> None:
        """Append rows as they are (the caller says which older rows they replace)."""
        start, add = self.n, len(docs)
        ids = ids if ids is not None else [d["id"] for d in docs if isinstance(d, dict)]
        self.ids.extend(ids)
        self.docs.extend(docs)
        self.vectors.append(unit_vectors)
        self.live = np.concatenate([self.live, np.ones(add, dtype=bool)])
        self.n_live += add
        if self._rows is not None:
            for r, i in enumerate(ids, start):
                self._rows[i] = r
        if postings is None:
            postings = kw.Postings.of_texts([indexed_text(self.docs[r]) for r in range(start, start + add)])
        self.keywords.add(postings, np.arange(start, start + add, dtype=np.int64))
        self.columns.add(columns if columns is not None else ColumnChunk.of_docs([self.docs[r] for r in range(start, start + add)]))

    def kill(self, rows: np.ndarray) -> None:
        """Rows ``rows`` are replaced or deleted: no query sees them again."""
        rows = rows[self.live[rows]] if len(rows) else rows
        if not len(rows):
            return
        self.live[rows] = False
        self.n_live -= len(rows)
        self.keywords.kill(rows)
        if self._rows is not None:
            for r in rows.tolist():
                if self._rows.get(self.ids[r]) == r:
                    del self._rows[self.ids[r]]

    def adopt_live(self, live: np.ndarray) -> None:
        """Take the live mask a commit saved (rows appended as they are, then this)."""
        self.kill(np.flatnonzero(self.live & ~live))

    def delete(self, ids: list[str]) -> int:
        rows = self.rows
        doomed = np.asarray(sorted({rows[i] for i in ids if i in rows}), dtype=np.int64)
        self.kill(doomed)
        return len(doomed)

    def compacted(self) -> Partition:
        """The live rows alone (for a partition that is never reloaded from disk)."""
        keep = self.live_rows()
        self.keywords.keep(keep)
        where = np.full(self.n, -1, dtype=np.int64)
        where[keep] = np.arange(len(keep))
        parts, at = [], 0
        for chunk in self.columns.chunks:
            parts.append((chunk, where[at : at + chunk.n]))
            at += chunk.n
        columns = [ColumnChunk.merged(parts, len(keep))]
        return Partition(self.vectors.dimension, [self.ids[r] for r in keep.tolist()], self.docs.keep(keep.tolist()),
                         [self.vectors.take(keep)], None, self.keywords, columns)

    # ------------------------------------------------------------ reading

    def vector(self, row: int) -> np.ndarray:
        return self.vectors.row(row)

    def mask(self, native: LocalFilter | None) -> np.ndarray | None:
        """The rows a query may return: the live rows passing ``native``; None means every row."""
        if native is None:
            return None if self.n_live == self.n else self.live
        alive = None if self.n_live == self.n else self.live
        out = PreFilter(self.columns, alive).mask(native.node)
        return out if alive is None else out & alive

