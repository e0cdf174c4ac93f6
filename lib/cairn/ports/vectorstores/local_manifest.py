"""What a partition of the embedded store is, read from its manifest: the segments it lists, and how
they replay into one snapshot (the live rows, each id at its latest version) or merge into one
segment. Pure functions of the segments; the files and the lock are :mod:`.local_persistence`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from cairn.ports.vectorstores import local_keywords as kw
from cairn.ports.vectorstores.local_columns import ColumnChunk
from cairn.ports.vectorstores.local_segments import LazyDocs, Segment

FORMAT = "cairn-local-2"


@dataclass(frozen=True)
class SegmentRef:
    file: str
    rows: int
    deletes: int

    @property
    def weight(self) -> int:
        return self.rows + self.deletes + 1


@dataclass(frozen=True)
class Manifest:
    tenant: str
    dimension: int
    generation: int = 0
    segments: tuple[SegmentRef, ...] = ()
    legacy: bool = False  # read from records.jsonl + vectors.npy (format 1); no segment yet
    live: str | None = None  # the live-mask file of this commit (None: work it out from the segments)

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.segments)

    def to_json(self) -> bytes:
        body = {
            "format": FORMAT, "tenant": self.tenant, "dimension": self.dimension, "generation": self.generation,
            "segments": [{"file": s.file, "rows": s.rows, "deletes": s.deletes} for s in self.segments],
            "live": self.live,
        }
        return json.dumps(body, indent=1).encode()


@dataclass
class Snapshot:
    """A partition as the manifest says: its segments' rows side by side (ids, record dumps, one
    vector block per segment), which of them are live, and the keyword chunks (each segment's
    postings, with the partition row of each of its rows, -1 when dead)."""

    manifest: Manifest
    ids: list[str]
    docs: LazyDocs
    blocks: list[np.ndarray]
    live: np.ndarray
    chunks: list[tuple[kw.Postings, np.ndarray]] = field(default_factory=list)
    columns: list[ColumnChunk] = field(default_factory=list)  # one per segment


def _live(segments: Sequence[Segment]) -> dict[str, tuple[int, int]]:
    """id -> (segment, row) of its latest put, applying segments in order (deletes, then puts)."""
    where: dict[str, tuple[int, int]] = {}
    for s, seg in enumerate(segments):
        for i in seg.deleted:
            where.pop(i, None)
        for r, i in enumerate(seg.ids):
            where.pop(i, None)  # a re-inserted id moves to the end, as a fresh insert would
            where[i] = (s, r)
    return where


def _gather(segments: Sequence[Segment], where: dict[str, tuple[int, int]], dimension: int) -> np.ndarray:
    """The live rows' vectors, in ``where``'s order: one copy, segment by segment."""
    if len(segments) == 1 and len(where) == len(segments[0].ids):
        return segments[0].vectors  # the memory map itself: nothing read yet
    n = len(where)
    out = np.empty((n, dimension), dtype=np.float32)
    seg_of = np.fromiter((s for s, _ in where.values()), dtype=np.int64, count=n)
    row_of = np.fromiter((r for _, r in where.values()), dtype=np.int64, count=n)
    for s, seg in enumerate(segments):
        pos = np.flatnonzero(seg_of == s)
        if len(pos):
            out[pos] = seg.vectors[row_of[pos]]
    return out


def _new_rows(segments: Sequence[Segment], where: dict[str, tuple[int, int]]) -> list[np.ndarray]:
    """Per segment: each of its rows' position in ``where`` (-1: overwritten or deleted)."""
    n = len(where)
    seg_of = np.fromiter((s for s, _ in where.values()), dtype=np.int64, count=n)
    row_of = np.fromiter((r for _, r in where.values()), dtype=np.int64, count=n)
    out = []
    for s, seg in enumerate(segments):
        pos = np.flatnonzero(seg_of == s)
        m = np.full(len(seg.ids), -1, dtype=np.int64)
        m[row_of[pos]] = pos
        out.append(m)
    return out


def live_mask(segments: Sequence[Segment]) -> np.ndarray:
    """Which rows of ``segments`` laid side by side are live, worked out from their ids (the slow
    way: only for a partition whose commit saved no mask)."""
    offsets = np.cumsum([0] + [len(seg.ids) for seg in segments])
    live = np.zeros(int(offsets[-1]), dtype=bool)
    where = _live(segments)
    if where:
        live[np.fromiter((offsets[s] + r for s, r in where.values()), dtype=np.int64, count=len(where))] = True
    return live


def replay(man: Manifest, segments: Sequence[Segment], dimension: int, live: np.ndarray | None = None) -> Snapshot:
    """The partition ``segments`` make, side by side (no record is parsed, no vector read), with
    ``live`` (the mask the commit saved) or, without it, the mask worked out from the ids."""
    ids: list[str] = []
    docs = LazyDocs()
    for seg in segments:
        ids.extend(seg.ids)
        docs.extend(seg.lines if not any(seg._docs) else seg.raw_docs())
    if live is None or len(live) != len(ids):
        live = live_mask(segments)
    chunks, at = [], 0
    for seg in segments:
        rows = np.arange(at, at + len(seg.ids), dtype=np.int64)
        if len(rows):
            chunks.append((seg.keyword_postings(), np.where(live[at : at + len(rows)], rows, -1)))
        at += len(rows)
    blocks = [seg.vectors.reshape(len(seg.ids), dimension) for seg in segments]
    return Snapshot(man, ids, docs, blocks, live, chunks, [seg.column_chunk() for seg in segments])


def merge(segments: Sequence[Segment], *, full: bool, dimension: int) -> Segment:
    """One segment equivalent to ``segments`` applied in order; ``full`` drops its tombstones.
    Records are moved as their stored lines, never parsed; keyword postings and columns are merged."""
    where = _live(segments)
    deleted = [] if full else sorted({i for seg in segments for i in seg.deleted} - where.keys())
    lines = [segments[s].lines[r] for s, r in where.values()]
    maps = _new_rows(segments, where)
    postings = kw.merge([(seg.keyword_postings(), m) for seg, m in zip(segments, maps, strict=True)], len(where))
    columns = ColumnChunk.merged([(seg.column_chunk(), m) for seg, m in zip(segments, maps, strict=True)], len(where))
    return Segment.from_raw(list(where), lines, _gather(segments, where, dimension), deleted, postings, columns)


def merge_start(refs: Sequence[SegmentRef], max_segments: int) -> int | None:
    """Index of the first segment to merge, or None. Tiered: the newest segments, plus each older
    one no heavier than what is merged so far, so big segments are rewritten rarely."""
    if len(refs) <= max_segments:
        return None
    start = len(refs) - 2
    total = refs[-1].weight + refs[-2].weight
    while start > 0 and refs[start - 1].weight <= total:
        start -= 1
        total += refs[start].weight
    return 0 if start + 1 > max_segments else start
