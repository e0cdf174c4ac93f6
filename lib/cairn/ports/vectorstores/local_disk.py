"""The store's view of its folder: keeps a process's in-memory partitions in step with what every
process committed (:mod:`.local_persistence` holds the files and their format)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from cairn.core.errors import VectorStoreError
from cairn.core.storage_names import tenant_folder as storage_name
from cairn.ports.vectorstores import local_keywords as kw
from cairn.ports.vectorstores.local_columns import ColumnChunk
from cairn.ports.vectorstores.local_persistence import LEGACY_VECTORS, MANIFEST, Manifest, PartitionFiles, Snapshot
from cairn.ports.vectorstores.local_segments import Segment

# ---------------------------------------------------------------- the store's view of its folder


class PartitionLike(Protocol):
    ids: list[str]
    live: np.ndarray
    files: tuple[tuple[str, int], ...]

    def put(self, docs: list[dict[str, Any]], unit_vectors: np.ndarray, postings: kw.Postings | None = None,
            columns: ColumnChunk | None = None) -> None: ...

    def append(self, docs: Sequence[dict[str, Any] | bytes], unit_vectors: np.ndarray,
               postings: kw.Postings | None = None, ids: list[str] | None = None,
               columns: ColumnChunk | None = None) -> None: ...

    def adopt_live(self, live: np.ndarray) -> None: ...

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
                    seen, part = self._seen.get(tenant), parts.get(tenant)
                    live = part.live if part is not None else None  # the partition after this write
                    committed.append(files.commit(seen[1] if seen else None, seg, live))
                    self._seen[tenant] = (files.signature(), committed[-1])
                    _note_files(part, committed[-1])

                yield commit
                if committed:
                    compacted = files.compact_if_needed(committed[-1])
                    if compacted is not committed[-1]:  # its rows moved: opened again (cheap) when next read
                        self.forget(tenant, parts)
                    else:
                        self._seen[tenant] = (files.signature(), compacted)
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
            self._apply(part, segments, files.read_live(man))  # type: ignore[arg-type]
        else:
            return self._load(tenant, files, sig, parts)
        self._seen[tenant] = (sig, man)
        _note_files(part, man)

    @staticmethod
    def _apply(part: P, segments: Sequence[Segment], live: np.ndarray | None) -> None:
        """Bring ``part`` up to ``segments`` committed after what it holds: their rows appended as
        they are, then the commit's live mask; without one (an older writer), record by record."""
        if live is not None and len(live) == len(part.ids) + sum(len(seg.ids) for seg in segments):
            for seg in segments:
                if seg.ids:
                    part.append(seg.raw_docs(), seg.vectors, seg.keyword_postings(), list(seg.ids), seg.column_chunk())
            part.adopt_live(live)
            return
        for seg in segments:
            if seg.deleted:
                part.delete(seg.deleted)
            if seg.ids:
                part.put(seg.docs, seg.vectors, seg.keyword_postings(), seg.column_chunk())

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


def _note_files(part: PartitionLike | None, man: Manifest) -> None:
    """Record which segments (file, rows) hold ``part``'s rows, side by side, after a commit or a
    catch-up: what the ANN index covers is counted in them (:func:`.local_ann.covered_files`). Left
    as it was when the rows do not line up (a partition that is re-read whole next)."""
    refs = tuple((ref.file, ref.rows) for ref in man.segments)
    if part is not None and not man.legacy and sum(rows for _, rows in refs) == len(part.ids):
        part.files = refs
