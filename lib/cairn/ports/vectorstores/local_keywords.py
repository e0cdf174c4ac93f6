"""The embedded store's keyword index: BM25 over immutable postings chunks, merged at query time.

A write indexes only what it adds: its records' words (:func:`cairn.ports.vectorstores.keywords.tokenize`)
become one :class:`Postings` chunk (a term -> (rows, term frequencies) table, CSR arrays). A
:class:`KeywordIndex` holds a partition's chunks with, for each chunk, the partition row of each
of its rows (``-1`` once the record is replaced or deleted: a tombstone). A query gathers each
query word's postings from every chunk, keeps the live ones and scores them with the statistics
of the live rows only (document count, document frequencies, average length), so a score is
exactly what one BM25 index built over the partition now would give: the ``lucene`` variant of
``bm25s`` (the store's previous engine), ``k1`` 1.5, ``b`` 0.75, idf ``log(1 + (N - df + 0.5) /
(df + 0.5))``. Nothing is ever rebuilt for the whole tenant; when chunks pile up, the newest are
merged (tiered), which costs their own size.

On disk a chunk sits beside the segment it indexes (``seg-N.kw``, :func:`save` / :func:`load`):
derived data, written after the segment and validated on read; a missing or damaged file is
rebuilt from the segment's records (so stores written before the index existed still open).
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cairn.ports.vectorstores import keywords

K1, B = 1.5, 0.75
_MAGIC = b"CAIRNKW3\n"  # 2: arrays 8-byte aligned; 3: L1 overviews not indexed (keywords.record_text). Older files are rebuilt
MAX_CHUNKS = 12
MAX_GATHERED = 1_000_000  # postings a partition keeps gathered between writes (16 bytes each: 16 MB at most)


class Postings:
    """One immutable chunk: for each term, the chunk rows holding it and how often; each row's length."""

    __slots__ = ("terms", "indptr", "rows", "tfs", "lengths", "_vocab")

    def __init__(self, terms: list[str], indptr: np.ndarray, rows: np.ndarray, tfs: np.ndarray, lengths: np.ndarray) -> None:
        self.terms, self.indptr, self.rows, self.tfs, self.lengths = terms, indptr, rows, tfs, lengths
        self._vocab: dict[str, int] | None = None

    @property
    def n_rows(self) -> int:
        return len(self.lengths)

    def span(self, term: str) -> tuple[int, int] | None:
        if self._vocab is None:
            self._vocab = {t: i for i, t in enumerate(self.terms)}
        i = self._vocab.get(term)
        return None if i is None else (int(self.indptr[i]), int(self.indptr[i + 1]))

    @classmethod
    def build(cls, token_lists: Sequence[Sequence[str]]) -> Postings:
        vocab: dict[str, int] = {}
        ids = [vocab.setdefault(tok, len(vocab)) for toks in token_lists for tok in toks]
        lengths = np.fromiter((len(t) for t in token_lists), dtype=np.int64, count=len(token_lists))
        n = max(len(token_lists), 1)
        key = np.asarray(ids, dtype=np.int64) * n + np.repeat(np.arange(len(token_lists), dtype=np.int64), lengths)
        uniq, counts = np.unique(key, return_counts=True)
        return cls._from_sorted(list(vocab), uniq // n, uniq % n, counts.astype(np.float32), lengths.astype(np.float32))

    @classmethod
    def of_texts(cls, texts: Sequence[str]) -> Postings:
        return cls.build(keywords.tokenize(list(texts)) if texts else [])

    @classmethod
    def _from_sorted(cls, terms: list[str], term: np.ndarray, row: np.ndarray, tf: np.ndarray, lengths: np.ndarray) -> Postings:
        counts = np.bincount(term, minlength=len(terms)) if len(terms) else np.zeros(0, dtype=np.int64)
        indptr = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return cls(terms, indptr, row.astype(np.int32), tf.astype(np.float32), lengths)


def merge(parts: Sequence[tuple[Postings, np.ndarray]], n_rows: int) -> Postings:
    """One chunk over ``n_rows`` rows from ``parts``: each a chunk and, per chunk row, its new row
    (``-1``: dropped). Costs the size of the parts, never more."""
    vocab: dict[str, int] = {}
    terms, rows, tfs = [], [], []
    lengths = np.zeros(n_rows, dtype=np.float32)
    for post, new_row in parts:
        gid = np.fromiter((vocab.setdefault(t, len(vocab)) for t in post.terms), dtype=np.int64, count=len(post.terms))
        entry_term = np.repeat(gid, np.diff(post.indptr))
        moved = new_row[post.rows] if len(post.rows) else np.zeros(0, dtype=np.int64)
        live = moved >= 0
        terms.append(entry_term[live])
        rows.append(moved[live])
        tfs.append(np.asarray(post.tfs)[live])
        kept = new_row >= 0
        lengths[new_row[kept]] = np.asarray(post.lengths)[kept]
    term = np.concatenate(terms) if terms else np.zeros(0, dtype=np.int64)
    row = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    tf = np.concatenate(tfs) if tfs else np.zeros(0, dtype=np.float32)
    used = np.zeros(len(vocab), dtype=bool)
    used[term] = True
    renumber = np.cumsum(used) - 1  # drop terms no live row holds
    names = [t for t, keep in zip(vocab, used, strict=True) if keep]
    term = renumber[term]
    order = np.lexsort((row, term))
    return Postings._from_sorted(names, term[order], row[order], tf[order], lengths)


# ---------------------------------------------------------------- a partition's index


class KeywordIndex:
    """A partition's chunks, each with its rows' partition rows; BM25 over the live rows."""

    def __init__(self) -> None:
        self.chunks: list[Postings] = []
        self.maps: list[np.ndarray] = []  # per chunk: chunk row -> partition row, -1 when dead
        self.lengths = np.zeros(0, dtype=np.float32)  # per partition row
        self.owner = np.zeros(0, dtype=np.int64)  # per partition row: the chunk holding it
        self.owner_row = np.zeros(0, dtype=np.int64)
        # each term's live postings as last gathered from the chunks, until the index changes: a
        # conversation's turns, and the turn searched alone and with the one before, ask for the same words
        self._gathered: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._gathered_size = 0

    @property
    def n(self) -> int:
        return len(self.lengths)

    @classmethod
    def of_chunks(cls, chunks: Sequence[tuple[Postings, np.ndarray]], n: int) -> KeywordIndex:
        """An index over ``n`` partition rows from chunks and their rows' partition rows (-1: dead)."""
        index = cls()
        index.lengths = np.zeros(n, dtype=np.float32)
        index.owner = np.full(n, -1, dtype=np.int64)
        index.owner_row = np.zeros(n, dtype=np.int64)
        for c, (post, where) in enumerate(chunks):
            live = np.flatnonzero(where >= 0)
            index.chunks.append(post)
            index.maps.append(where)
            index.lengths[where[live]] = np.asarray(post.lengths)[live]
            index.owner[where[live]] = c
            index.owner_row[where[live]] = live
        if len(index.chunks) > MAX_CHUNKS:
            index._compact()
        return index

    def add(self, post: Postings, partition_rows: np.ndarray) -> None:
        """Index ``post`` whose row ``i`` is partition row ``partition_rows[i]`` (new or replaced)."""
        self._forget()
        partition_rows = np.asarray(partition_rows, dtype=np.int64)
        top = int(partition_rows.max(initial=-1)) + 1
        if top > self.n:
            grow = top - self.n
            self.lengths = np.concatenate([self.lengths, np.zeros(grow, dtype=np.float32)])
            self.owner = np.concatenate([self.owner, np.full(grow, -1, dtype=np.int64)])
            self.owner_row = np.concatenate([self.owner_row, np.zeros(grow, dtype=np.int64)])
        old = self.owner[partition_rows]
        for c in np.unique(old[old >= 0]):
            self.maps[c][self.owner_row[partition_rows[old == c]]] = -1  # the replaced versions
        self.chunks.append(post)
        self.maps.append(partition_rows.copy())
        self.owner[partition_rows] = len(self.chunks) - 1
        self.owner_row[partition_rows] = np.arange(len(partition_rows))
        self.lengths[partition_rows] = np.asarray(post.lengths)
        if len(self.chunks) > MAX_CHUNKS:
            self._compact()

    def kill(self, rows: np.ndarray) -> None:
        """Partition rows ``rows`` are replaced or deleted: their postings become tombstones."""
        self._forget()
        rows = np.asarray(rows, dtype=np.int64)
        old = self.owner[rows]
        for c in np.unique(old[old >= 0]):
            self.maps[c][self.owner_row[rows[old == c]]] = -1
        self.owner[rows] = -1
        self.lengths[rows] = 0

    def keep(self, keep: np.ndarray) -> None:
        """Only partition rows ``keep`` (sorted) stay, renumbered from 0 (a delete)."""
        self._forget()
        newpos = np.full(self.n + 1, -1, dtype=np.int64)  # the extra slot maps -1 to -1
        newpos[keep] = np.arange(len(keep))
        self.maps = [newpos[m] for m in self.maps]
        self.lengths, self.owner, self.owner_row = self.lengths[keep], self.owner[keep], self.owner_row[keep]

    def _compact(self) -> None:
        """Merge the newest chunks (tiered: each older one no bigger than what is merged so far)."""
        start, total = len(self.chunks) - 2, self.chunks[-1].n_rows + self.chunks[-2].n_rows
        while start > 0 and self.chunks[start - 1].n_rows <= total:
            start -= 1
            total += self.chunks[start].n_rows
        live = np.sort(np.concatenate([m[m >= 0] for m in self.maps[start:]]))
        local = np.full(self.n + 1, -1, dtype=np.int64)
        local[live] = np.arange(len(live))
        merged = merge([(p, local[m]) for p, m in zip(self.chunks[start:], self.maps[start:], strict=True)], len(live))
        self.chunks, self.maps = self.chunks[:start] + [merged], self.maps[:start] + [live]
        self.owner[live] = start
        self.owner_row[live] = np.arange(len(live))

    def scores(self, text: str, language: str | None = None, within: np.ndarray | None = None) -> np.ndarray | None:
        """BM25 of every partition row for ``text`` (its words read in ``language`` when the tenant
        fixed one, else in its detected language); None when no query word occurs in a live row.
        ``within`` (a mask of partition rows, the query's filter): the statistics are those of the
        rows it keeps."""
        live = self.owner >= 0  # replaced or deleted rows count for nothing (their lengths are 0)
        if within is not None:
            live &= within
        n = int(np.count_nonzero(live))
        total = float(self.lengths.sum() if within is None else self.lengths[live].sum())
        if not n or total <= 0:
            return None
        avgdl = total / n
        out: np.ndarray | None = None
        for term, weight in _weights(keywords.tokenize([text], language)[0]).items():
            rows, tfs = self._postings(term)
            if within is not None and len(rows):
                kept = within[rows]
                rows, tfs = rows[kept], tfs[kept]
            if not len(rows):
                continue
            df = len(rows)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            norm = K1 * ((1 - B) + B * self.lengths[rows] / avgdl)
            if out is None:
                out = np.zeros(self.n, dtype=np.float64)
            out[rows] += weight * idf * tfs / (norm + tfs)  # a live row sits in one chunk: no repeats
        return out

    def _forget(self) -> None:
        self._gathered, self._gathered_size = {}, 0

    def _postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """The live rows holding ``term`` and its frequency in each (kept until the index changes,
        up to ``MAX_GATHERED`` postings in all)."""
        found = self._gathered.get(term)
        if found is None:
            found = self._gather(term)
            if self._gathered_size + len(found[0]) > MAX_GATHERED:
                self._forget()
            self._gathered[term] = found
            self._gathered_size += len(found[0])
        return found

    def _gather(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        rows, tfs = [], []
        for post, where in zip(self.chunks, self.maps, strict=True):
            span = post.span(term)
            if span is None or span[0] == span[1]:
                continue
            r = where[post.rows[span[0] : span[1]]]
            live = r >= 0
            rows.append(r[live])
            tfs.append(np.asarray(post.tfs[span[0] : span[1]], dtype=np.float64)[live])
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        return np.concatenate(rows), np.concatenate(tfs)


def _weights(tokens: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for tok in tokens:  # a repeated query word counts as often as it is repeated (as bm25s)
        out[tok] = out.get(tok, 0) + 1
    return out


# ---------------------------------------------------------------- on disk, beside a segment


def sidecar(segment: Path) -> Path:
    return segment.with_suffix(".kw")


def save(path: Path, post: Postings, segment_bytes: int) -> None:
    """Write ``post`` to ``path`` atomically (a temporary file, then a rename); derived data, so
    no fsync: a damaged or missing file is rebuilt from its segment (of ``segment_bytes`` bytes)."""
    terms = json.dumps(post.terms, ensure_ascii=False).encode()
    head = json.dumps({"rows": post.n_rows, "terms": len(post.terms), "nnz": len(post.rows), "terms_bytes": len(terms),
                       "segment_bytes": segment_bytes}).encode()
    pad = -(len(_MAGIC) + 8 + len(head) + len(terms)) % 8  # aligned arrays: numpy reads them at full speed
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(_MAGIC + struct.pack("<Q", len(head)) + head + terms + b" " * pad)
        for arr, dtype in _layout(post):
            fh.write(np.ascontiguousarray(arr, dtype=dtype).tobytes())
    os.replace(tmp, path)


def load(path: Path, rows: int, segment_bytes: int) -> Postings | None:
    """The chunk saved at ``path`` if it is whole and indexes a segment of ``rows`` rows and
    ``segment_bytes`` bytes; else None."""
    try:
        raw = np.memmap(path, dtype=np.uint8, mode="r") if path.stat().st_size else None
        if raw is None or bytes(raw[: len(_MAGIC)]) != _MAGIC:
            return None
        at = len(_MAGIC)
        (hlen,) = struct.unpack("<Q", bytes(raw[at : at + 8]))
        head = json.loads(bytes(raw[at + 8 : at + 8 + hlen]))
        at += 8 + hlen
        terms = json.loads(bytes(raw[at : at + head["terms_bytes"]]))
        at += head["terms_bytes"]
        at += -at % 8
        n, t, nnz = int(head["rows"]), int(head["terms"]), int(head["nnz"])
        if n != rows or head.get("segment_bytes") != segment_bytes or len(terms) != t or len(raw) != at + 4 * n + 8 * (t + 1) + 8 * nnz:
            return None
        arrays = []
        for count, dtype, size in ((t + 1, "<i8", 8), (n, "<f4", 4), (nnz, "<i4", 4), (nnz, "<f4", 4)):
            arrays.append(np.frombuffer(raw, dtype=dtype, count=count, offset=at))
            at += count * size
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None  # damaged: rebuilt by the caller
    indptr, lengths, prows, tfs = arrays
    return Postings(terms, indptr, prows, tfs, lengths)


def _layout(post: Postings) -> tuple[tuple[np.ndarray, str], ...]:
    """The arrays of a saved chunk, in their order on disk (the 8-byte ones first)."""
    return ((post.indptr, "<i8"), (post.lengths, "<f4"), (post.rows, "<i4"), (post.tfs, "<f4"))
