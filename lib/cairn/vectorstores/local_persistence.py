"""How the embedded store keeps a partition on disk: an append-only segment log per tenant.

One folder per tenant under ``<home>/tenants/<storage name>/``::

    MANIFEST            {"format", "tenant", "dimension", "generation", "segments": [...]}
    seg-0000000007.bin  one committed write: the records it put and the ids it deleted
    .lock               the writers' inter-process lock (flock)

* **A write** (an upsert batch, a delete) takes the partition's exclusive file lock, reads
  the manifest and catches up with what other processes committed, writes ONE new segment
  (only the records of this write), fsyncs it, then replaces the manifest atomically
  (temporary file, fsync, ``os.replace``, fsync of the folder). The manifest is the commit
  point: a process killed at any instant leaves the old manifest (the write is absent; a
  re-run makes it) or the new one (the write is complete). Nothing is rewritten.
* **A read** takes no lock: it stats the manifest and, when it changed, reads it and applies
  only the segments it has not seen (or reloads after a compaction). Segments are immutable.
* **Compaction** merges the newest segments into one (tiered, so a partition holds a few
  segments whatever its history) and, when the whole log is merged, drops overwritten and
  deleted rows. It runs under the lock and commits through the same manifest replace; the
  files it retires are removed after the commit, and a reader that loses the race re-reads.
* **Faults** are injected on purpose: :func:`set_fault_hook` installs a callable that is
  called with the name of every write step (:data:`WRITE_STEPS`); tests make it kill the
  process at each step in turn.
* **Tenant names** map to folder names injectively on case-insensitive file systems
  (:func:`cairn.storage_names.tenant_folder`): ``GLOBEX`` and ``globex`` never share a folder.

A segment file: ``CAIRNSEG1\\n``, an 8-byte little-endian header length, a JSON header
``{"rows", "dimension", "docs_bytes", "deleted_bytes", "pad"}``, the records as JSON lines
(without vectors), the deleted ids as a JSON list, ``pad`` zero bytes so the vectors start on a
64-byte boundary (a memory map numpy hands to BLAS; an unaligned one runs ~50x slower, so
segments written before the padding are read into memory), then ``rows x dimension`` float32
unit vectors.
Beside each segment, ``seg-N.kw`` holds its keyword postings (:mod:`.local_keywords`): derived
data, rebuilt from the segment when missing (stores written before it existed) or damaged.

Opening reads no record: the vectors are memory-mapped (copy-on-write) and each record's JSON
line is parsed when a row is first looked at (:class:`LazyDocs`).
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from ..errors import PartitionUnreadable, VectorStoreError
from ..storage_names import tenant_folder as storage_name
from . import local_keywords as kw

FORMAT = "cairn-local-2"
MANIFEST = "MANIFEST"
LOCK = ".lock"
LEGACY_DOCS, LEGACY_VECTORS = "records.jsonl", "vectors.npy"
_MAGIC = b"CAIRNSEG1\n"
_SEGMENT_RE = re.compile(r"^seg-\d{10}\.(bin|kw)$")
MAX_SEGMENTS = 8  # past this, the newest segments are merged (tiered)
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


def _step(name: str) -> None:
    if _fault_hook is not None:
        _fault_hook(name)



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

    def to_json(self) -> bytes:
        body = {
            "format": FORMAT, "tenant": self.tenant, "dimension": self.dimension, "generation": self.generation,
            "segments": [{"file": s.file, "rows": s.rows, "deletes": s.deletes} for s in self.segments],
        }
        return json.dumps(body, indent=1).encode()


class Segment:
    """One committed write: the records it put (ids, JSON lines, unit vectors) and the ids it deleted.

    Records are parsed from their lines only when asked for (:meth:`doc`), so a compaction moves
    lines and vectors without parsing or re-encoding a single record.
    """

    def __init__(
        self, docs: list[dict[str, Any]], vectors: np.ndarray, deleted: Sequence[str] = (),
        postings: kw.Postings | None = None,
    ) -> None:
        self.ids = [d["id"] for d in docs]
        self.lines = [json.dumps(d, ensure_ascii=False).encode() for d in docs]
        self._docs: list[dict[str, Any] | None] = list(docs)
        self.vectors = vectors
        self.deleted = list(deleted)
        self.postings = postings

    @classmethod
    def from_raw(
        cls, ids: list[str], lines: list[bytes], vectors: np.ndarray, deleted: Sequence[str],
        postings: kw.Postings | None = None,
    ) -> Segment:
        seg = cls.__new__(cls)
        seg.ids, seg.lines, seg.vectors, seg.deleted = ids, lines, vectors, list(deleted)
        seg._docs = [None] * len(ids)
        seg.postings = postings
        return seg

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
    """What keyword search reads of a record: title, abstract and text."""
    return " ".join(filter(None, (doc.get("title"), doc.get("abstract"), doc.get("text"))))


class LazyDocs:
    """Record dumps by row, each parsed from its JSON line the first time it is read."""

    __slots__ = ("_items",)

    def __init__(self, items: list[dict[str, Any] | bytes]) -> None:
        self._items = items

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, row: int) -> dict[str, Any]:
        item = self._items[row]
        if isinstance(item, bytes):
            item = self._items[row] = json.loads(item)
        return item

    def __setitem__(self, row: int, doc: dict[str, Any]) -> None:
        self._items[row] = doc

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self[r] for r in range(len(self._items)))

    def append(self, doc: dict[str, Any]) -> None:
        self._items.append(doc)

    def keep(self, rows: Sequence[int]) -> LazyDocs:
        return LazyDocs([self._items[r] for r in rows])


@dataclass
class Snapshot:
    """A partition's live rows, as the manifest says: ids, record dumps, a unit-vector matrix and
    the keyword chunks (each segment's postings, with the partition row of each of its rows)."""

    manifest: Manifest
    ids: list[str]
    docs: LazyDocs
    matrix: np.ndarray
    chunks: list[tuple[kw.Postings, np.ndarray]] = field(default_factory=list)


def _size(path: Path) -> int:
    return os.path.getsize(path)


def _fsync_dir(path: Path) -> None:
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
    docs = b"\n".join(seg.lines)
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
        _step("segment_written")
        fh.flush()
        os.fsync(fh.fileno())


def read_segment(path: Path, dimension: int) -> Segment:
    with open(path, "rb") as fh:
        if fh.read(len(_MAGIC)) != _MAGIC:
            raise ValueError(f"{path.name} is not a cairn segment")
        (hlen,) = struct.unpack("<Q", fh.read(8))
        head = json.loads(fh.read(hlen))
        rows, dim = int(head["rows"]), int(head["dimension"])
        if dim != dimension:
            raise ValueError(f"{path.name} holds {dim}-d vectors, the store holds {dimension}-d")
        sizes = (head["ids_bytes"], head["docs_bytes"], head["deleted_bytes"])
        ids_raw, docs_raw, deleted_raw = (fh.read(n) for n in sizes)
        at = fh.tell() + int(head.get("pad", 0))
    if [len(ids_raw), len(docs_raw), len(deleted_raw)] != list(sizes) or os.path.getsize(path) != at + 4 * rows * dim:
        raise ValueError(f"{path.name} is truncated")
    ids, lines = json.loads(ids_raw), docs_raw.split(b"\n") if rows else []
    if len(ids) != rows or len(lines) != rows:
        raise ValueError(f"{path.name} holds {len(ids)} ids and {len(lines)} records, its header says {rows}")
    # copy-on-write: opening reads no vector; an in-place change stays in this process
    if not rows:
        vectors = np.zeros((0, dim), np.float32)
    elif at % _ALIGN == 0:
        vectors = np.memmap(path, dtype="<f4", mode="c", offset=at, shape=(rows, dim))
    else:  # written before the padding: unaligned in a map (numpy would not use BLAS on it), so read it
        vectors = np.fromfile(path, dtype="<f4", count=rows * dim, offset=at).reshape(rows, dim)
    return Segment.from_raw(ids, lines, vectors, json.loads(deleted_raw))


# ---------------------------------------------------------------- one partition's folder


class PartitionFiles:
    """One tenant's folder: read its manifest and segments, commit writes under its lock."""

    def __init__(self, root: Path, tenant: str, dimension: int) -> None:
        self.tenant = tenant
        self.dimension = dimension
        self.dir = root / storage_name(tenant)
        self.manifest_path = self.dir / MANIFEST
        self._lock_fd: int | None = None
        self._lock_depth = 0

    # ------------------------------------------------------------ errors

    def unreadable(self, problem: object) -> PartitionUnreadable:
        return PartitionUnreadable(
            f"the local store's partition for tenant {self.tenant!r} at {self.dir} is unreadable: {problem}. "
            f"Other tenants are not affected. To repair it, move that folder aside and ingest this "
            f"tenant's content again (or restore the folder from a backup)."
        )

    # ------------------------------------------------------------ reading

    def signature(self) -> tuple[int, ...] | None:
        """Changes whenever a commit replaces the manifest (a stat, no read); None if absent."""
        for path in (self.manifest_path, self.dir / LEGACY_DOCS):
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise self.unreadable(exc) from exc
            return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
        return None

    def read_manifest(self) -> Manifest | None:
        try:
            raw = self.manifest_path.read_bytes()
        except FileNotFoundError:
            return self._legacy_manifest()
        except OSError as exc:
            raise self.unreadable(exc) from exc
        try:
            body = json.loads(raw)
            if body.get("format") != FORMAT:
                raise ValueError(f"unknown format {body.get('format')!r}")
            man = Manifest(
                tenant=str(body["tenant"]), dimension=int(body["dimension"]), generation=int(body["generation"]),
                segments=tuple(SegmentRef(str(s["file"]), int(s["rows"]), int(s["deletes"])) for s in body["segments"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise self.unreadable(f"{MANIFEST}: {exc}") from exc
        if man.tenant != self.tenant:
            raise self.unreadable(f"its {MANIFEST} belongs to tenant {man.tenant!r}")
        return man

    def _legacy_manifest(self) -> Manifest | None:
        if not (self.dir / LEGACY_DOCS).exists():
            return None
        try:
            dim = np.load(self.dir / LEGACY_VECTORS, mmap_mode="r").shape[-1]
        except (OSError, ValueError) as exc:
            raise self.unreadable(exc) from exc
        return Manifest(tenant=self.tenant, dimension=int(dim), legacy=True)

    def check_dimension(self, man: Manifest) -> None:
        if man.dimension != self.dimension:
            raise PartitionUnreadable(
                f"the local store's partition for tenant {self.tenant!r} at {self.dir} holds "
                f"{man.dimension}-d vectors; this store holds {self.dimension}-d: was it built with another "
                f"embedder? Use that embedder, or move the folder aside and ingest again."
            )

    def load(self, attempts: int = 5) -> Snapshot | None:
        """The whole partition (None when it has never been written)."""
        for attempt in range(attempts):
            man = self.read_manifest()
            if man is None:
                return None
            self.check_dimension(man)
            try:
                segments = self._legacy_segments() if man.legacy else self.read_segments(man.segments)
            except FileNotFoundError:  # a compaction retired a file after we read the manifest
                if attempt == attempts - 1:
                    raise
                continue
            return replay(man, segments, self.dimension)
        return None  # pragma: no cover

    def read_segments(self, refs: Sequence[SegmentRef]) -> list[Segment]:
        out = []
        for ref in refs:
            try:
                seg = read_segment(self.dir / ref.file, self.dimension)
            except FileNotFoundError:
                raise
            except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
                raise self.unreadable(f"{ref.file}: {exc}") from exc
            out.append(self._with_postings(seg, self.dir / ref.file))
        return out

    def _with_postings(self, seg: Segment, path: Path) -> Segment:
        """Attach the segment's saved keyword postings; rebuild and save them when missing."""
        seg.postings = kw.load(kw.sidecar(path), len(seg.ids), _size(path))
        if seg.postings is None:
            try:
                kw.save(kw.sidecar(path), seg.keyword_postings(), _size(path))
            except OSError:  # a read-only home: keep them in memory
                pass
        return seg

    def _legacy_segments(self) -> list[Segment]:
        try:
            with open(self.dir / LEGACY_DOCS, encoding="utf-8") as fh:
                docs = [json.loads(line) for line in fh if line.strip()]
            matrix = np.load(self.dir / LEGACY_VECTORS)
        except (OSError, ValueError) as exc:
            raise self.unreadable(exc) from exc
        if matrix.shape != (len(docs), self.dimension):
            raise self.unreadable(
                f"{LEGACY_VECTORS} holds vectors of shape {matrix.shape}, expected ({len(docs)}, {self.dimension})"
            )
        return [Segment(docs, np.asarray(matrix, dtype=np.float32))]

    # ------------------------------------------------------------ writing

    @contextmanager
    def locked(self) -> Iterator[None]:
        """The partition's exclusive inter-process lock (re-entrant within this object)."""
        if self._lock_depth == 0:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                _lock_file(fd)
            except BaseException:
                os.close(fd)
                raise
            self._lock_fd = fd
        self._lock_depth += 1
        try:
            if self._lock_depth == 1:
                _step("locked")
            yield
        finally:
            self._lock_depth -= 1
            if self._lock_depth == 0 and self._lock_fd is not None:
                fd, self._lock_fd = self._lock_fd, None
                _unlock_file(fd)
                os.close(fd)

    def commit(self, base: Manifest | None, seg: Segment) -> Manifest:
        """Append ``seg`` after ``base`` (the manifest read under the lock). Caller holds the lock."""
        assert self._lock_depth > 0, "commit needs the partition lock"
        segments: tuple[SegmentRef, ...] = ()
        generation = 0
        if base is not None and base.legacy:  # first write in the segment format: carry format 1 over
            legacy = self._legacy_segments()[0]
            generation = 1
            segments = (self._write(generation, legacy),)
        elif base is not None:
            segments, generation = base.segments, base.generation
        generation += 1
        man = Manifest(self.tenant, self.dimension, generation, segments + (self._write(generation, seg),))
        self._replace_manifest(man, "manifest_written", "manifest_replaced")
        _step("committed")
        if base is not None and base.legacy:
            for name in (LEGACY_DOCS, LEGACY_VECTORS):
                (self.dir / name).unlink(missing_ok=True)
        return man

    def _write(self, generation: int, seg: Segment) -> SegmentRef:
        name = f"seg-{generation:010d}.bin"
        kw.sidecar(self.dir / name).unlink(missing_ok=True)  # a killed writer's, for another segment
        write_segment(self.dir / name, seg, self.dimension)
        _fsync_dir(self.dir)
        _step("segment_synced")
        kw.save(kw.sidecar(self.dir / name), seg.keyword_postings(), _size(self.dir / name))
        return SegmentRef(name, len(seg.ids), len(seg.deleted))

    def _replace_manifest(self, man: Manifest, written: str, replaced: str) -> None:
        tmp = self.dir / f"{MANIFEST}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(man.to_json())
            fh.flush()
            os.fsync(fh.fileno())
        _step(written)
        os.replace(tmp, self.manifest_path)
        _step(replaced)
        _fsync_dir(self.dir)

    def compact_if_needed(self, man: Manifest, max_segments: int | None = None) -> Manifest:
        """Merge the newest segments when there are too many (tiered). Caller holds the lock."""
        start = merge_start(man.segments, MAX_SEGMENTS if max_segments is None else max_segments)
        if start is None:
            return man
        merged = merge(self.read_segments(man.segments[start:]), full=start == 0, dimension=self.dimension)
        generation = man.generation + 1
        ref = self._write(generation, merged)
        _step("compaction_written")
        new = Manifest(self.tenant, self.dimension, generation, man.segments[:start] + (ref,))
        self._replace_manifest(new, "manifest_written", "compaction_replaced")
        self.remove_orphans(new)
        _step("compaction_cleaned")
        return new

    def remove_orphans(self, man: Manifest) -> None:
        """Remove segment files the manifest does not name (retired, or left by a killed writer)."""
        keep = {s.file for s in man.segments} | {kw.sidecar(Path(s.file)).name for s in man.segments}
        for path in self.dir.iterdir():
            if (_SEGMENT_RE.match(path.name) and path.name not in keep) or path.name.endswith(".tmp"):
                path.unlink(missing_ok=True)


# ---------------------------------------------------------------- pure functions


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


def replay(man: Manifest, segments: Sequence[Segment], dimension: int) -> Snapshot:
    """The live rows after applying ``segments`` in order (no record is parsed)."""
    where = _live(segments)
    docs = LazyDocs([segments[s]._docs[r] or segments[s].lines[r] for s, r in where.values()])
    matrix = _gather(segments, where, dimension).reshape(len(where), dimension)
    chunks = [(seg.keyword_postings(), m) for seg, m in zip(segments, _new_rows(segments, where), strict=True) if len(seg.ids)]
    return Snapshot(man, list(where), docs, matrix, chunks)


def merge(segments: Sequence[Segment], *, full: bool, dimension: int) -> Segment:
    """One segment equivalent to ``segments`` applied in order; ``full`` drops its tombstones.
    Records are moved as their stored lines, never parsed; keyword postings are merged."""
    where = _live(segments)
    deleted = [] if full else sorted({i for seg in segments for i in seg.deleted} - where.keys())
    lines = [segments[s].lines[r] for s, r in where.values()]
    maps = _new_rows(segments, where)
    postings = kw.merge([(seg.keyword_postings(), m) for seg, m in zip(segments, maps, strict=True)], len(where))
    return Segment.from_raw(list(where), lines, _gather(segments, where, dimension), deleted, postings)


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


# ---------------------------------------------------------------- the file lock


try:
    import fcntl

    def _lock_file(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)

    def _unlock_file(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

except ImportError:  # pragma: no cover - Windows
    import msvcrt
    import time

    def _lock_file(fd: int) -> None:
        while True:
            try:
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)  # type: ignore[attr-defined]
                return
            except OSError:
                time.sleep(0.05)

    def _unlock_file(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]


# ---------------------------------------------------------------- the store's view of its folder


class PartitionLike(Protocol):
    ids: list[str]

    def put(self, docs: list[dict[str, Any]], unit_vectors: np.ndarray, postings: kw.Postings | None = None) -> None: ...

    def delete(self, ids: list[str]) -> int: ...


P = TypeVar("P", bound=PartitionLike)


class DiskPartitions(Generic[P]):
    """Keeps a process's in-memory partitions in step with the folder ``root`` (``<home>/tenants``).

    ``build`` turns a loaded :class:`Snapshot` into the store's partition object; ``parts`` (the
    store's dict of loaded partitions) is passed to every call and updated in place.
    """

    def __init__(self, root: Path, dimension: int, build: Callable[[Snapshot], P]) -> None:
        self.root = root
        self.dimension = dimension
        self._build = build
        self._files: dict[str, PartitionFiles] = {}
        self._seen: dict[str, tuple[tuple[int, ...] | None, Manifest]] = {}
        dims = stored_dimensions(root)
        if dims and dimension not in dims:
            raise VectorStoreError(
                f"local store at {root.parent} holds vectors of {', '.join(map(str, sorted(dims)))} dimensions; "
                f"this store holds {dimension}: was it built with another embedder?"
            )

    def files(self, tenant: str) -> PartitionFiles:
        files = self._files.get(tenant)
        if files is None:
            migrate_legacy_folder(self.root, tenant)
            files = self._files[tenant] = PartitionFiles(self.root, tenant, self.dimension)
        return files

    def forget(self, tenant: str, parts: dict[str, P]) -> None:
        parts.pop(tenant, None)
        self._seen.pop(tenant, None)

    def refresh(self, tenant: str, parts: dict[str, P]) -> None:
        """Apply what other processes committed since this process last looked (a stat if nothing)."""
        files = self.files(tenant)
        sig = files.signature()
        seen = self._seen.get(tenant)
        if seen is not None and seen[0] == sig and tenant in parts:
            return
        try:
            self._catch_up(tenant, files, files.read_manifest(), sig, parts)
        except BaseException:
            self.forget(tenant, parts)
            raise

    @contextmanager
    def writing(self, tenant: str, parts: dict[str, P]) -> Iterator[Callable[[Segment], None]]:
        """Hold the tenant's lock, catch up, and yield ``commit(segment)``; compact afterwards."""
        files = self.files(tenant)
        with files.locked():
            try:
                self._catch_up(tenant, files, files.read_manifest(), None, parts)
                committed: list[Manifest] = []

                def commit(seg: Segment) -> None:
                    seen = self._seen.get(tenant)
                    committed.append(files.commit(seen[1] if seen else None, seg))
                    self._seen[tenant] = (files.signature(), committed[-1])

                yield commit
                if committed:
                    self._seen[tenant] = (None, files.compact_if_needed(committed[-1]))
                    self._seen[tenant] = (files.signature(), self._seen[tenant][1])
            except BaseException:
                self.forget(tenant, parts)
                raise

    def _catch_up(
        self, tenant: str, files: PartitionFiles, man: Manifest | None, sig: tuple[int, ...] | None,
        parts: dict[str, P],
    ) -> None:
        if man is None:
            self.forget(tenant, parts)
            return
        files.check_dimension(man)
        seen, part = self._seen.get(tenant), parts.get(tenant)
        old = seen[1] if seen is not None else None
        fresh = part is not None and old is not None
        if fresh and old == man:
            pass
        elif fresh and not (old.legacy or man.legacy) and man.segments[: len(old.segments)] == old.segments:  # type: ignore[union-attr]
            try:
                segments = files.read_segments(man.segments[len(old.segments):])  # type: ignore[union-attr]
            except FileNotFoundError:  # compacted meanwhile: load it whole
                return self._load(tenant, files, sig, parts)
            for seg in segments:
                if seg.deleted:
                    part.delete(seg.deleted)  # type: ignore[union-attr]
                if seg.ids:
                    part.put(seg.docs, seg.vectors, seg.keyword_postings())  # type: ignore[union-attr]
        else:
            return self._load(tenant, files, sig, parts)
        self._seen[tenant] = (sig, man)

    def _load(self, tenant: str, files: PartitionFiles, sig: tuple[int, ...] | None, parts: dict[str, P]) -> None:
        try:
            snap = files.load()
        except FileNotFoundError as exc:
            raise files.unreadable(f"a segment the manifest names is missing ({exc.filename})") from exc
        if snap is None:
            self.forget(tenant, parts)
            return
        parts[tenant] = self._build(snap)
        self._seen[tenant] = (sig, snap.manifest)


def stored_dimensions(root: Path) -> set[int]:
    """The vector dimensions the partitions under ``root`` declare (unreadable ones are skipped)."""
    dims: set[int] = set()
    if not root.is_dir():
        return dims
    for tdir in root.iterdir():
        try:
            if (tdir / MANIFEST).exists():
                dims.add(int(json.loads((tdir / MANIFEST).read_bytes())["dimension"]))
            elif (tdir / LEGACY_VECTORS).exists():
                dims.add(int(np.load(tdir / LEGACY_VECTORS, mmap_mode="r").shape[-1]))
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            continue
    return dims


def migrate_legacy_folder(root: Path, tenant: str) -> None:
    """Move a folder named by the tenant itself (before :func:`storage_name`) to its new name.

    Only a folder whose listed name is exactly the tenant's moves; on a case-insensitive file
    system a folder two tenants already shared stays with the tenant whose name it carries.
    """
    new = storage_name(tenant)
    if new == tenant or not root.is_dir() or (root / new).exists():
        return
    try:
        if tenant in os.listdir(root):
            os.rename(root / tenant, root / new)
    except OSError:  # another process moved it first, or a read-only disk: leave it
        pass
