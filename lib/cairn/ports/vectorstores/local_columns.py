"""The record fields a filter reads, as columns kept beside each segment (``seg-N.col``).

A filter on ``uri``, ``parent_uri``, ``ancestors``, ``context_type``, ``tags``, ``level``, ... is
answered from columns, never by reading the records: per keyword field, the rows holding each
value (a :class:`~.local_keywords.Postings` table: value -> rows) and which rows hold one; per
numeric field, one float per row. Each write builds the columns of its own records (a
:class:`ColumnChunk`) and saves them beside its segment, so a process that opens the partition
reads them instead of parsing every record, and a write costs the next scoped query nothing.
:class:`Columns` lays a partition's chunks side by side (their rows are the partition's rows),
merging the newest when they pile up. Derived data: a missing or damaged file is rebuilt from
its segment's records.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cairn.core.filters import tree as t
from cairn.ports.vectorstores import local_keywords as kw

KEYWORD = tuple(sorted(t.KEYWORD_FIELDS | t.KEYWORD_LIST_FIELDS))
NUMERIC = tuple(sorted(t.NUMERIC_FIELDS))
MAX_CHUNKS = 16
_MAGIC = b"CAIRNCOL1\n"


def _values(doc: Mapping[str, Any], field: str) -> list[Any]:
    value = doc.get(field)
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [v for v in value if v is not None]
    return [value]


class ColumnChunk:
    """Some rows' fields: ``keyword(f) = (value -> rows table, rows holding one, all strings)``,
    ``numeric(f)`` one float per row (None unless every row holds exactly one number). A chunk
    opened from its file reads each field the first time a filter asks for it."""

    __slots__ = ("n", "_keyword", "_numeric", "_saved")

    def __init__(self, n: int, keyword: dict[str, tuple[kw.Postings, np.ndarray, bool]] | None = None,
                 numeric: dict[str, np.ndarray | None] | None = None, saved: _Saved | None = None) -> None:
        self.n = n
        self._keyword = dict(keyword or {})
        self._numeric = dict(numeric or {})
        self._saved = saved

    def keyword(self, field: str) -> tuple[kw.Postings, np.ndarray, bool]:
        if field not in self._keyword:
            self._read(field)
        return self._keyword[field]

    def numeric(self, field: str) -> np.ndarray | None:
        if field not in self._numeric:
            self._read(field)
        return self._numeric[field]

    def _read(self, field: str) -> None:
        saved = self._saved
        if saved is not None and field in NUMERIC and field not in saved.head["numeric"]:
            self._numeric[field] = None  # some row holds no single number there: no column
            return
        got = saved.read(field) if saved is not None else None
        if got is None:  # the file went away or is damaged: from the records
            whole = saved.rebuild() if saved is not None else ColumnChunk(self.n)
            self._keyword.update(whole._keyword)
            self._numeric.update(whole._numeric)
            self._saved = None
        elif field in NUMERIC:
            self._numeric[field] = got  # type: ignore[assignment]
        else:
            self._keyword[field] = got  # type: ignore[assignment]

    @classmethod
    def of_docs(cls, docs: Any) -> ColumnChunk:
        """The columns of ``docs`` (record dumps by row: a list, or a partition's lazy records)."""
        keyword = {}
        for field in KEYWORD:
            values = [_values(d, field) for d in docs]
            strings = all(isinstance(v, str) for vs in values for v in vs)
            present = np.fromiter((bool(vs) for vs in values), dtype=bool, count=len(docs))
            keyword[field] = (kw.Postings.build(values if strings else [[] for _ in docs]), present, strings)
        numeric: dict[str, np.ndarray | None] = {}
        for field in NUMERIC:
            nums = [d.get(field) for d in docs]
            ok = all(t.is_number(v) and abs(v) < 2**53 for v in nums)
            numeric[field] = np.asarray(nums, dtype=np.float64) if ok else None
        return cls(len(docs), keyword, numeric)

    @classmethod
    def merged(cls, parts: Sequence[tuple[ColumnChunk, np.ndarray]], n: int) -> ColumnChunk:
        """One chunk over ``n`` rows from ``parts``: each a chunk and, per row, its new row (-1: dropped)."""
        keyword = {}
        for field in KEYWORD:
            present = np.zeros(n, dtype=bool)
            for chunk, where in parts:
                kept = where >= 0
                present[where[kept]] = chunk.keyword(field)[1][kept]
            strings = all(chunk.keyword(field)[2] for chunk, _ in parts)
            table = kw.merge([(chunk.keyword(field)[0], where) for chunk, where in parts], n)
            keyword[field] = (table, present, strings)
        numeric: dict[str, np.ndarray | None] = {}
        for field in NUMERIC:
            col: np.ndarray | None = np.zeros(n, dtype=np.float64)
            for chunk, where in parts:
                src = chunk.numeric(field)
                if src is None or col is None:
                    col = None
                    break
                kept = where >= 0
                col[where[kept]] = src[kept]
            numeric[field] = col
        return cls(n, keyword, numeric)


class Columns:
    """A partition's column chunks side by side: what the pre-filter (:mod:`.local_filter`) reads."""

    def __init__(self, docs: Any, chunks: Sequence[ColumnChunk] | None = None) -> None:
        self.docs = docs  # the partition's records by row (read by the predicate where no column answers)
        self.chunks: list[ColumnChunk] = list(chunks) if chunks is not None else [ColumnChunk.of_docs(docs)]
        self._cache: dict[tuple[str, str], Any] = {}
        self.n = sum(c.n for c in self.chunks)

    def add(self, chunk: ColumnChunk) -> None:
        self.chunks.append(chunk)
        self.n += chunk.n
        self._cache.clear()
        if len(self.chunks) > MAX_CHUNKS:  # merge the newest (tiered: each older one no bigger than them)
            start, total = len(self.chunks) - 2, self.chunks[-1].n + self.chunks[-2].n
            while start > 0 and self.chunks[start - 1].n <= total:
                start -= 1
                total += self.chunks[start].n
            parts, at = [], 0
            for c in self.chunks[start:]:
                parts.append((c, np.arange(at, at + c.n, dtype=np.int64)))
                at += c.n
            self.chunks[start:] = [ColumnChunk.merged(parts, at)]

    def strings_only(self, field: str) -> bool:
        return all(c.keyword(field)[2] for c in self.chunks)

    def present(self, field: str) -> np.ndarray:
        key = ("present", field)
        if key not in self._cache:
            self._cache[key] = np.concatenate([c.keyword(field)[1] for c in self.chunks] or [np.zeros(0, dtype=bool)])
        return self._cache[key]

    def numeric(self, field: str) -> np.ndarray | None:
        key = ("numeric", field)
        if key not in self._cache:
            cols = [c.numeric(field) for c in self.chunks]
            self._cache[key] = None if any(c is None for c in cols) else np.concatenate(cols or [np.zeros(0)])  # type: ignore[arg-type]
        return self._cache[key]

    def rows_equal(self, field: str, value: Any) -> np.ndarray:
        out = np.zeros(self.n, dtype=bool)
        if not isinstance(value, str):
            return out
        at = 0
        for c in self.chunks:
            table = c.keyword(field)[0]
            span = table.span(value)
            if span is not None:
                out[at + np.asarray(table.rows[span[0] : span[1]], dtype=np.int64)] = True
            at += c.n
        return out


# ---------------------------------------------------------------- on disk, beside a segment


def sidecar(segment: Path) -> Path:
    return segment.with_suffix(".col")


def save(path: Path, chunk: ColumnChunk, segment_bytes: int) -> None:
    """Write ``chunk`` at ``path`` (a temporary file, then a rename; derived data, no fsync)."""
    arrays: dict[str, np.ndarray] = {}
    head: dict[str, Any] = {"rows": chunk.n, "segment_bytes": segment_bytes, "strings": {}, "numeric": []}
    for field in KEYWORD:
        table, present, strings = chunk.keyword(field)
        head["strings"][field] = strings
        arrays[f"{field}.values"] = np.frombuffer(json.dumps(table.terms, ensure_ascii=False).encode(), dtype=np.uint8)
        arrays[f"{field}.indptr"], arrays[f"{field}.rows"] = table.indptr, table.rows
        arrays[f"{field}.present"] = np.packbits(present)
    for field in NUMERIC:
        col = chunk.numeric(field)
        if col is not None:
            head["numeric"].append(field)
            arrays[f"{field}.numeric"] = col
    arrays["head"] = np.frombuffer(_MAGIC + json.dumps(head).encode(), dtype=np.uint8)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        np.savez(fh, **arrays)  # type: ignore[arg-type]
    os.replace(tmp, path)


class _Saved:
    """A chunk's file, read field by field; ``rebuild`` makes the chunk from the records instead."""

    def __init__(self, path: Path, rows: int, head: dict[str, Any], rebuild: Callable[[], ColumnChunk]) -> None:
        self.path, self.rows, self.head, self.rebuild = path, rows, head, rebuild

    def read(self, field: str) -> tuple[kw.Postings, np.ndarray, bool] | np.ndarray | None:
        rows = self.rows
        try:
            with np.load(self.path, allow_pickle=False) as data:
                if field in NUMERIC:
                    col = data[f"{field}.numeric"]
                    return col if len(col) == rows else None
                values = json.loads(data[f"{field}.values"].tobytes())
                indptr, prows = data[f"{field}.indptr"], data[f"{field}.rows"]
                present = np.unpackbits(data[f"{field}.present"], count=rows).astype(bool)
        except (OSError, ValueError, KeyError, TypeError, EOFError):
            return None
        if len(indptr) != len(values) + 1 or int(indptr[-1]) != len(prows):
            return None
        table = kw.Postings(values, indptr, prows, np.ones(len(prows), np.float32), np.zeros(rows, np.float32))
        return table, present, bool(self.head["strings"][field])


def load(path: Path, rows: int, segment_bytes: int, rebuild: Callable[[], ColumnChunk]) -> ColumnChunk | None:
    """The chunk saved at ``path``, its fields read when first asked for, if its header says it is
    for a segment of ``rows`` rows and ``segment_bytes`` bytes; else None (the caller rebuilds it)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            raw = data["head"].tobytes()
    except (OSError, ValueError, KeyError, TypeError, EOFError):
        return None
    try:
        head = json.loads(raw[len(_MAGIC) :]) if raw.startswith(_MAGIC) else None
        if head is None or head["rows"] != rows or head["segment_bytes"] != segment_bytes:
            return None
        if set(head["strings"]) != set(KEYWORD):
            return None
    except (ValueError, KeyError, TypeError):
        return None
    return ColumnChunk(rows, saved=_Saved(path, rows, head, rebuild))
