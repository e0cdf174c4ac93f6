"""How the embedded store keeps a partition on disk: an append-only segment log per tenant.

One folder per tenant under ``<home>/tenants/<storage name>/``::

    MANIFEST            {"format", "tenant", "dimension", "generation", "segments": [...], "live"}
    seg-0000000007.bin  one committed write: the records it put and the ids it deleted
    live-0000000007.bits  which rows of the segments are live after commit 7
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
  (:func:`cairn.core.storage_names.tenant_folder`): ``GLOBEX`` and ``globex`` never share a folder.

The files of one write (segments, the live mask) are :mod:`.local_segments`. Beside each
segment, ``seg-N.kw`` holds its keyword postings (:mod:`.local_keywords`): derived data, rebuilt
from the segment when missing (stores written before it existed) or damaged.

Opening replays nothing: the segments' rows are laid side by side in commit order (vectors
memory-mapped, copy-on-write; each record's JSON line parsed when a row is first looked at,
:class:`LazyDocs`), and the manifest names the live mask its commit saved (``live-N.bits``:
which rows are their id's latest version). Only a partition without one (written by an older
cairn, or its mask damaged) replays the segments' ids to work it out, once.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from cairn.core.errors import PartitionUnreadable
from cairn.core.storage_names import tenant_folder as storage_name
from cairn.ports.vectorstores import local_columns as cols
from cairn.ports.vectorstores import local_keywords as kw
from cairn.ports.vectorstores.local_columns import ColumnChunk
from cairn.ports.vectorstores.local_manifest import (
    FORMAT,
    Manifest,
    SegmentRef,
    Snapshot,
    merge,
    merge_start,
    replay,
)
from cairn.ports.vectorstores.local_segments import (  # noqa: F401  (re-exported: the store's files are one module to callers)
    WRITE_STEPS,
    LazyDocs,
    Lines,
    Segment,
    fsync_dir,
    indexed_text,
    line_starts,
    offsets_sidecar,
    read_live,
    read_offsets,
    read_segment,
    save_offsets,
    set_fault_hook,
    size,
    step,
    write_live,
    write_segment,
)

MANIFEST = "MANIFEST"
LOCK = ".lock"
LEGACY_DOCS, LEGACY_VECTORS = "records.jsonl", "vectors.npy"
_SEGMENT_RE = re.compile(r"^(seg-\d{10}\.(bin|kw|col|off)|live-\d{10}\.bits)$")
MAX_SEGMENTS = 8  # past this, the newest segments are merged (tiered)


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
                live=str(body["live"]) if body.get("live") else None,
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
            return replay(man, segments, self.dimension, self.read_live(man))
        return None  # pragma: no cover

    def read_live(self, man: Manifest) -> np.ndarray | None:
        """The live mask ``man``'s commit saved, if it is there and whole."""
        return read_live(self.dir / man.live, man.rows) if man.live else None

    def read_segments(self, refs: Sequence[SegmentRef]) -> list[Segment]:
        out = []
        for ref in refs:
            try:
                seg = self._with_postings(read_segment(self.dir / ref.file, self.dimension), self.dir / ref.file)
            except FileNotFoundError:
                raise
            except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
                raise self.unreadable(f"{ref.file}: {exc}") from exc
            out.append(seg)
        return out

    def _with_postings(self, seg: Segment, path: Path) -> Segment:
        """Attach the segment's saved line offsets, keyword postings and filter columns; rebuild and
        save each when missing (the offsets' scan also checks the segment's count of lines)."""
        if isinstance(seg.lines, Lines):
            starts = read_offsets(offsets_sidecar(path), seg.lines, size(path))
            if starts is None:
                starts = seg.lines.scan()
                try:
                    save_offsets(offsets_sidecar(path), starts, size(path))
                except OSError:  # a read-only home
                    pass
            seg.lines.set_starts(starts)
        seg.postings = kw.load(kw.sidecar(path), len(seg.ids), size(path))
        if seg.postings is None:
            try:
                kw.save(kw.sidecar(path), seg.keyword_postings(), size(path))
            except OSError:  # a read-only home: keep them in memory
                pass
        seg.columns = cols.load(cols.sidecar(path), len(seg.ids), size(path), lambda: ColumnChunk.of_docs(seg.docs))
        if seg.columns is None:
            try:
                cols.save(cols.sidecar(path), seg.column_chunk(), size(path))
            except OSError:
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
                step("locked")
            yield
        finally:
            self._lock_depth -= 1
            if self._lock_depth == 0 and self._lock_fd is not None:
                fd, self._lock_fd = self._lock_fd, None
                _unlock_file(fd)
                os.close(fd)

    def commit(self, base: Manifest | None, seg: Segment, live: np.ndarray | None = None) -> Manifest:
        """Append ``seg`` after ``base`` (the manifest read under the lock), with the partition's
        live mask after it (``live``, over every row of the segments, this one's last). Caller holds the lock."""
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
        segments += (self._write(generation, seg),)
        man = Manifest(self.tenant, self.dimension, generation, segments, live=self._write_live(generation, segments, live))
        self._replace_manifest(man, "manifest_written", "manifest_replaced")
        step("committed")
        if base is not None and base.legacy:
            for name in (LEGACY_DOCS, LEGACY_VECTORS):
                (self.dir / name).unlink(missing_ok=True)
        return man

    def _write(self, generation: int, seg: Segment) -> SegmentRef:
        name = f"seg-{generation:010d}.bin"
        for side in (kw.sidecar, cols.sidecar, offsets_sidecar):  # a killed writer's, for another segment
            side(self.dir / name).unlink(missing_ok=True)
        write_segment(self.dir / name, seg, self.dimension)
        fsync_dir(self.dir)
        step("segment_synced")
        kw.save(kw.sidecar(self.dir / name), seg.keyword_postings(), size(self.dir / name))
        cols.save(cols.sidecar(self.dir / name), seg.column_chunk(), size(self.dir / name))
        save_offsets(offsets_sidecar(self.dir / name), line_starts(seg.lines), size(self.dir / name))
        return SegmentRef(name, len(seg.ids), len(seg.deleted))

    def _write_live(self, generation: int, segments: Sequence[SegmentRef], live: np.ndarray | None) -> str | None:
        """Save the live mask of the commit ``generation`` (None when unknown or not covering ``segments``)."""
        if live is None or len(live) != sum(s.rows for s in segments):
            return None
        name = f"live-{generation:010d}.bits"
        write_live(self.dir / name, live)
        return name

    def _replace_manifest(self, man: Manifest, written: str, replaced: str) -> None:
        tmp = self.dir / f"{MANIFEST}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(man.to_json())
            fh.flush()
            os.fsync(fh.fileno())
        step(written)
        os.replace(tmp, self.manifest_path)
        step(replaced)
        fsync_dir(self.dir)

    def compact_if_needed(self, man: Manifest, max_segments: int | None = None) -> Manifest:
        """Merge the newest segments when there are too many (tiered). Caller holds the lock.
        The merged segment holds the live rows of the segments it replaces, in order, so the
        live mask is the older segments' part of ``man``'s, then ones."""
        start = merge_start(man.segments, MAX_SEGMENTS if max_segments is None else max_segments)
        if start is None:
            return man
        merged = merge(self.read_segments(man.segments[start:]), full=start == 0, dimension=self.dimension)
        generation = man.generation + 1
        ref = self._write(generation, merged)
        step("compaction_written")
        segments = man.segments[:start] + (ref,)
        old = self.read_live(man)
        kept = sum(s.rows for s in man.segments[:start])
        live = None if old is None else np.concatenate([old[:kept], np.ones(ref.rows, dtype=bool)])
        new = Manifest(self.tenant, self.dimension, generation, segments, live=self._write_live(generation, segments, live))
        self._replace_manifest(new, "manifest_written", "compaction_replaced")
        self.remove_orphans(new)
        step("compaction_cleaned")
        return new

    def remove_orphans(self, man: Manifest) -> None:
        """Remove segment files the manifest does not name (retired, or left by a killed writer)."""
        keep = {s.file for s in man.segments} | {man.live}
        keep |= {side(Path(s.file)).name for s in man.segments for side in (kw.sidecar, cols.sidecar, offsets_sidecar)}
        for path in self.dir.iterdir():
            if (_SEGMENT_RE.match(path.name) and path.name not in keep) or path.name.endswith(".tmp"):
                path.unlink(missing_ok=True)


# ---------------------------------------------------------------- pure functions


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
