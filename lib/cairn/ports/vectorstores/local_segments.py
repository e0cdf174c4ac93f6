"""The embedded store's files for one committed write: a segment, and the partition's live mask.

A segment file: ``CAIRNSEG1\\n``, an 8-byte little-endian header length, a JSON header
``{"rows", "dimension", "ids_bytes", "docs_bytes", "deleted_bytes", "pad"}``, the ids as a JSON
list, the records as JSON lines (without vectors), the deleted ids as a JSON list, ``pad`` zero
bytes so the vectors start on a 64-byte boundary (a memory map numpy hands to BLAS; an unaligned
one runs ~50x slower, so segments written before the padding are read into memory), then
``rows x dimension`` float32 unit vectors.

A live-mask file (``live-N.bits``, named by the manifest of generation N): ``CAIRNLIVE1\\n``, a
JSON header line ``{"rows", "live"}``, then one bit per row of the partition's segments laid side
by side (1: the row is its id's latest version and not deleted). It is what lets a process open a
partition without replaying every segment's ids: derived data, validated on read, and recomputed
from the segments when missing or damaged.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cairn.ports.vectorstores import keywords
from cairn.ports.vectorstores import local_keywords as kw
from cairn.ports.vectorstores.local_columns import ColumnChunk

_MAGIC = b"CAIRNSEG1\n"
_LIVE_MAGIC = b"CAIRNLIVE1\n"
_ALIGN = 64  # vectors start at a multiple of this in a segment file

WRITE_STEPS = (
    "locked",             # the exclusive lock is held, nothing written yet
    "segment_written",    # the new segment's bytes are written, not yet synced
    "segment_synced",     # the segment is durable; the manifest does not name it yet
    "manifest_written",   # the new manifest is in its temporary file
    "manifest_replaced",  # the commit point has passed
    "committed",          # the folder is synced; the lock is about to be released
    "compaction_written",   # a merged segment is durable, not yet named by the manifest
    "compaction_replaced",  # the manifest names the merged segment; old files not yet removed
    "compaction_cleaned",   # the retired segment files are removed
)

_fault_hook: Callable[[str], None] | None = None


def set_fault_hook(hook: Callable[[str], None] | None) -> None:
    """Install (or remove) a callable told the name of every write step (for fault injection)."""
    global _fault_hook
    _fault_hook = hook


def step(name: str) -> None:
    if _fault_hook is not None:
        _fault_hook(name)




class Segment:
    """One committed write: the records it put (ids, JSON lines, unit vectors) and the ids it deleted.

    Records are parsed from their lines only when asked for (:meth:`doc`), so a compaction moves
    lines and vectors without parsing or re-encoding a single record.
    """

    def __init__(
        self, docs: list[dict[str, Any]], vectors: np.ndarray, deleted: Sequence[str] = (),
        postings: kw.Postings | None = None, columns: ColumnChunk | None = None,
    ) -> None:
        self.ids = [d["id"] for d in docs]
        self.lines: Sequence[bytes] = [json.dumps(d, ensure_ascii=False).encode() for d in docs]
        self._docs: list[dict[str, Any] | None] = list(docs)
        self.vectors = vectors
        self.deleted = list(deleted)
        self.postings = postings
        self.columns = columns

    @classmethod
    def from_raw(
        cls, ids: list[str], lines: Sequence[bytes], vectors: np.ndarray, deleted: Sequence[str],
        postings: kw.Postings | None = None, columns: ColumnChunk | None = None,
    ) -> Segment:
        seg = cls.__new__(cls)
        seg.ids, seg.lines, seg.vectors, seg.deleted = ids, lines, vectors, list(deleted)
        seg._docs = [None] * len(ids)
        seg.postings, seg.columns = postings, columns
        return seg

    def column_chunk(self) -> ColumnChunk:
        """This segment's filter columns (built from its records when not attached yet)."""
        if self.columns is None:
            self.columns = ColumnChunk.of_docs(self.docs)
        return self.columns

    def raw_docs(self) -> list[dict[str, Any] | bytes]:
        """Each row as held: its parsed dump, or its JSON line when not read yet."""
        return [d or line for d, line in zip(self._docs, self.lines, strict=True)]

    def keyword_postings(self) -> kw.Postings:
        """This segment's keyword postings (built from its records when not attached yet)."""
        if self.postings is None:
            self.postings = kw.Postings.of_texts([indexed_text(self.doc(r)) for r in range(len(self.ids))])
        return self.postings

    def doc(self, row: int) -> dict[str, Any]:
        doc = self._docs[row]
        if doc is None:
            doc = self._docs[row] = json.loads(self.lines[row])
        return doc

    @property
    def docs(self) -> list[dict[str, Any]]:
        return [self.doc(r) for r in range(len(self.ids))]


def indexed_text(doc: Mapping[str, Any]) -> str:
    """What keyword search reads of a record (:func:`cairn.ports.vectorstores.keywords.record_text`)."""
    return keywords.record_text(doc)


class Lines(Sequence[bytes]):
    """A segment's records as its JSON lines, cut from the segment's bytes when read: ``buf`` (the
    segment file's memory map, or bytes) from ``offset``, ``length`` bytes. Where each line starts
    comes from the segment's saved offsets (:func:`read_offsets`) or from one numpy scan for the
    newlines (JSON escapes every newline), made when first needed: no object per record at open."""

    __slots__ = ("buf", "n", "offset", "length", "_starts", "_ends")

    def __init__(self, buf: Any, n: int, offset: int = 0, length: int | None = None) -> None:
        self.buf, self.n, self.offset = buf, n, offset
        self.length = len(buf) - offset if length is None else length
        self._starts: np.ndarray | None = None
        self._ends: np.ndarray | None = None

    def __len__(self) -> int:
        return self.n

    def scan(self) -> np.ndarray:
        """Where each line starts, found by scanning for the newlines (checks the count of lines)."""
        raw = np.frombuffer(self.buf, dtype=np.uint8, count=self.length, offset=self.offset) if self.length else np.zeros(0, np.uint8)
        newlines = np.flatnonzero(raw == 10)
        if len(newlines) != max(self.n - 1, 0):
            raise ValueError(f"{len(newlines) + 1} record lines where the header says {self.n}")
        return np.concatenate([[0], newlines + 1]).astype(np.int64)[: self.n]

    def set_starts(self, starts: np.ndarray) -> None:
        self._starts = np.asarray(starts, dtype=np.int64)
        self._ends = np.append(self._starts[1:] - 1, self.length).astype(np.int64)

    def starts(self) -> np.ndarray:
        if self._starts is None:
            self.set_starts(self.scan())
        return self._starts  # type: ignore[return-value]

    def _cut(self, row: int) -> bytes:
        starts = self.starts()
        assert self._ends is not None
        return bytes(self.buf[self.offset + starts[row] : self.offset + self._ends[row]])

    def __getitem__(self, row):
        if isinstance(row, slice):
            return [self._cut(r) for r in range(*row.indices(self.n))]
        if not -self.n <= row < self.n:
            raise IndexError(row)
        return self._cut(row % self.n)

    def joined(self) -> bytes:
        return bytes(self.buf[self.offset : self.offset + self.length])


def line_starts(lines: Sequence[bytes]) -> np.ndarray:
    """Where each of ``lines`` starts once they are joined with newlines (as a segment stores them)."""
    if isinstance(lines, Lines):
        return lines.starts()
    lengths = np.fromiter((len(line) + 1 for line in lines), dtype=np.int64, count=len(lines))
    return np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if len(lines) else np.zeros(0, np.int64)


def offsets_sidecar(segment: Path) -> Path:
    return segment.with_suffix(".off")


def save_offsets(path: Path, starts: np.ndarray, segment_bytes: int) -> None:
    """Save where each of a segment's record lines starts (derived data: a temporary file, then a
    rename, no fsync), headed by the segment's size and row count it was made for."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        np.save(fh, np.concatenate([[segment_bytes, len(starts)], starts]).astype("<i8"), allow_pickle=False)
    os.replace(tmp, path)


def read_offsets(path: Path, lines: Lines, segment_bytes: int) -> np.ndarray | None:
    """The line starts saved at ``path`` (memory-mapped) if they were made for this segment and look
    right at a sample of rows (each line before a start ends in a newline); else None."""
    try:
        saved = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    if saved.dtype != np.dtype("<i8") or saved.ndim != 1 or len(saved) != lines.n + 2:
        return None
    if int(saved[0]) != segment_bytes or int(saved[1]) != lines.n:
        return None
    starts = saved[2:]
    if lines.n and int(starts[0]) != 0:
        return None
    sample = np.unique(np.linspace(1, max(lines.n - 1, 1), num=min(64, max(lines.n - 1, 0)), dtype=np.int64))
    for r in sample if lines.n > 1 else ():
        at = int(starts[r])
        if not 0 < at <= lines.length or lines.buf[lines.offset + at - 1] != 10:
            return None
    return starts


class LazyDocs:
    """Record dumps by row, each parsed from its JSON line the first time it is read. Rows come in
    chunks (a segment's :class:`Lines`, a write's dumps), appended, never copied."""

    __slots__ = ("_chunks", "_starts", "_parsed")

    def __init__(self, items: Sequence[dict[str, Any] | bytes] = ()) -> None:
        self._chunks: list[Sequence[dict[str, Any] | bytes]] = []
        self._starts = [0]
        self._parsed: dict[int, dict[str, Any]] = {}
        self.extend(items)

    def __len__(self) -> int:
        return self._starts[-1]

    def raw(self, row: int) -> dict[str, Any] | bytes:
        """Row ``row`` as held: its parsed dump, or its JSON line when not read yet."""
        doc = self._parsed.get(row)
        if doc is not None:
            return doc
        c = bisect_right(self._starts, row) - 1
        if not 0 <= row < self._starts[-1]:
            raise IndexError(row)
        return self._chunks[c][row - self._starts[c]]

    def __getitem__(self, row: int) -> dict[str, Any]:
        item = self.raw(row)
        if isinstance(item, (bytes, bytearray)):
            item = self._parsed[row] = json.loads(item)
        return item

    def __setitem__(self, row: int, doc: dict[str, Any]) -> None:
        self._parsed[row] = doc

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self[r] for r in range(len(self)))

    def append(self, doc: dict[str, Any]) -> None:
        self.extend([doc])

    def extend(self, docs: Sequence[dict[str, Any] | bytes]) -> None:
        if len(docs):
            self._chunks.append(docs)
            self._starts.append(self._starts[-1] + len(docs))

    def keep(self, rows: Sequence[int]) -> LazyDocs:
        return LazyDocs([self.raw(r) for r in rows])


def size(path: Path) -> int:
    return os.path.getsize(path)


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # not possible on every platform; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_segment(path: Path, seg: Segment, dimension: int) -> None:
    ids = json.dumps(seg.ids, ensure_ascii=False).encode()
    docs = seg.lines.joined() if isinstance(seg.lines, Lines) else b"\n".join(seg.lines)
    deleted = json.dumps(seg.deleted, ensure_ascii=False).encode()
    vectors = np.ascontiguousarray(seg.vectors, dtype="<f4").reshape(len(seg.ids), dimension)
    body = len(_MAGIC) + 8 + len(ids) + len(docs) + len(deleted)
    for pad in range(_ALIGN):  # the vectors start on a 64-byte boundary: a memory map BLAS can use
        header = json.dumps({"rows": len(seg.ids), "dimension": dimension, "ids_bytes": len(ids),
                             "docs_bytes": len(docs), "deleted_bytes": len(deleted), "pad": pad}).encode()
        if (body + len(header) + pad) % _ALIGN == 0:
            break
    with open(path, "wb") as fh:
        fh.write(_MAGIC + struct.pack("<Q", len(header)) + header + ids + docs + deleted + b"\0" * pad)
        fh.write(vectors.tobytes())
        step("segment_written")
        fh.flush()
        os.fsync(fh.fileno())


def read_segment(path: Path, dimension: int) -> Segment:
    """Open a segment: its header and ids are read, its record lines stay in a read-only memory map
    of the file (segments are never changed in place) and its vectors in a copy-on-write one."""
    with open(path, "rb") as fh:
        total = os.fstat(fh.fileno()).st_size
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if total else b""
    if mm[: len(_MAGIC)] != _MAGIC:
        raise ValueError(f"{path.name} is not a cairn segment")
    (hlen,) = struct.unpack("<Q", mm[len(_MAGIC) : len(_MAGIC) + 8])
    at = len(_MAGIC) + 8 + hlen
    head = json.loads(mm[len(_MAGIC) + 8 : at])
    rows, dim = int(head["rows"]), int(head["dimension"])
    if dim != dimension:
        raise ValueError(f"{path.name} holds {dim}-d vectors, the store holds {dimension}-d")
    ids_at, docs_at = at, at + int(head["ids_bytes"])
    deleted_at = docs_at + int(head["docs_bytes"])
    at = deleted_at + int(head["deleted_bytes"]) + int(head.get("pad", 0))
    if total != at + 4 * rows * dim:
        raise ValueError(f"{path.name} is truncated")
    ids, lines = json.loads(mm[ids_at:docs_at]), Lines(mm, rows, docs_at, deleted_at - docs_at)
    deleted_raw = mm[deleted_at : deleted_at + int(head["deleted_bytes"])]
    if len(ids) != rows:
        raise ValueError(f"{path.name} holds {len(ids)} ids, its header says {rows}")
    # copy-on-write: opening reads no vector; an in-place change stays in this process
    if not rows:
        vectors = np.zeros((0, dim), np.float32)
    elif at % _ALIGN == 0:
        vectors = np.memmap(path, dtype="<f4", mode="c", offset=at, shape=(rows, dim))
    else:  # written before the padding: unaligned in a map (numpy would not use BLAS on it), so read it
        vectors = np.fromfile(path, dtype="<f4", count=rows * dim, offset=at).reshape(rows, dim)
    return Segment.from_raw(ids, lines, vectors, json.loads(deleted_raw))


def write_live(path: Path, live: np.ndarray) -> None:
    """Save a partition's live mask at ``path`` (a temporary file, then a rename)."""
    head = json.dumps({"rows": int(len(live)), "live": int(np.count_nonzero(live))}).encode() + b"\n"
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(_LIVE_MAGIC + head + np.packbits(live).tobytes())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_live(path: Path, rows: int) -> np.ndarray | None:
    """The live mask saved at ``path`` if it is whole and covers ``rows`` rows; else None."""
    try:
        raw = path.read_bytes()
        if not raw.startswith(_LIVE_MAGIC):
            return None
        end = raw.index(b"\n", len(_LIVE_MAGIC))
        head = json.loads(raw[len(_LIVE_MAGIC) : end])
        bits = np.frombuffer(raw, dtype=np.uint8, offset=end + 1)
        if int(head["rows"]) != rows or len(bits) != (rows + 7) // 8:
            return None
        live = np.unpackbits(bits, count=rows).astype(bool)
        return live if int(np.count_nonzero(live)) == int(head["live"]) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
