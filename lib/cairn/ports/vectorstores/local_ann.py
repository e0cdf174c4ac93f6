"""Sub-linear dense search for big partitions: an inverted-file index (faiss ``IndexIVFFlat``,
inner product over the unit vectors), built in the background, kept beside the segments.

* **When**: a partition of at least ``min_rows`` live rows, with faiss installed (the ``ann``
  extra) and the store's ``ann`` setting ``auto``. Smaller partitions, scoped queries whose
  pre-filter keeps less than half the rows, and ``ann = "exact"`` use exact search.
* **What it covers**: the rows of the partition's oldest segments (at least 99 % of its rows);
  rows written since are scored exactly and merged in, and replaced or deleted rows are dropped
  by the live mask, so a write never waits for the index. When the uncovered rows pass 1/32 of
  the partition, or a compaction rewrites a covered segment, the index is built again.
* **Recall**: scores of the candidates are exact inner products; how many lists a query visits
  (``nprobe``) is chosen at build time on the tenant's own vectors: the smallest that gives
  recall@10 >= ``RECALL`` against exact search on a sample of its rows.
* **On disk**: ``ann-<key>.faiss`` and ``ann-<key>.json`` (which segments it covers, its rows,
  nprobe). Derived data: a missing or stale file means exact search until the next build.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cairn.core.logging import get_logger

RECALL = 0.98  # on queries made from the tenant's rows; held-out MiniLM queries land ~0.01-0.02 lower
COVER = 0.99  # the index covers the oldest segments holding at least this share of the rows (the rest: exact)
STALE = 1 / 32  # rebuilt when the rows it does not cover (scored exactly) pass this share
_NPROBES = (4, 8, 16, 32, 64, 128, 256)
_log = get_logger(__name__)


def faiss_module() -> Any | None:
    try:
        import faiss
    except ImportError:
        return None
    return faiss


class AnnIndex:
    """An IVF index over partition rows ``[0, rows)`` (the segments ``files``), ids = row numbers."""

    def __init__(self, index: Any, rows: int, files: tuple[str, ...], nprobe: int) -> None:
        self.index, self.rows, self.files, self.nprobe = index, rows, files, nprobe
        index.nprobe = nprobe

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best rows per query (``-1`` where fewer) and their inner products."""
        scores, rows = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        return scores, rows

    @classmethod
    def build(cls, vectors: Any, rows: int, live: np.ndarray, files: tuple[str, ...], seed: int = 7) -> AnnIndex:
        """Train on a sample of the live rows of ``[0, rows)``, add them all, choose nprobe."""
        faiss = faiss_module()
        assert faiss is not None
        live_rows = np.flatnonzero(live[:rows])
        dim = vectors.dimension
        nlist = int(min(4096, max(16, math.sqrt(len(live_rows)))))
        rng = np.random.default_rng(seed)
        sample = np.sort(rng.choice(live_rows, size=min(len(live_rows), 40 * nlist), replace=False))
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        index.train(vectors.take(sample))
        for lo in range(0, len(live_rows), 65536):
            part = live_rows[lo : lo + 65536]
            index.add_with_ids(vectors.take(part), part.astype(np.int64))
        out = cls(index, rows, files, _NPROBES[-1])
        out.nprobe = index.nprobe = out._tune(vectors, live_rows, rng)
        return out

    def _tune(self, vectors: Any, live_rows: np.ndarray, rng: np.random.Generator, k: int = 10) -> int:
        """The smallest nprobe whose recall@k against exact search is >= RECALL, on queries like
        the tenant's own: each between a sampled row and its 2k-th nearest row (not a stored point)."""
        picked = np.sort(rng.choice(live_rows, size=min(64, len(live_rows)), replace=False))
        rows = vectors.take(picked)
        near = vectors.scores(rows, live_rows)  # over the live rows of the covered range
        far = min(2 * k, len(live_rows) - 1)
        other = live_rows[np.argpartition(-near, far, axis=1)[:, far]]
        queries = rows + vectors.take(np.sort(other))[np.argsort(np.argsort(other))]
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        exact = vectors.scores(queries, live_rows)
        truth = [set(live_rows[np.argpartition(-s, k)[:k]].tolist()) for s in exact]
        for nprobe in _NPROBES:
            self.index.nprobe = nprobe
            _, got = self.index.search(queries, k)
            recall = sum(len(truth[i] & set(got[i].tolist())) for i in range(len(truth))) / (k * len(truth))
            if recall >= RECALL:
                return nprobe
        return _NPROBES[-1]

    # ------------------------------------------------------------ on disk

    @staticmethod
    def key(files: Sequence[str]) -> str:
        return hashlib.sha256("\n".join(files).encode()).hexdigest()[:16]

    def save(self, folder: Path) -> None:
        faiss = faiss_module()
        assert faiss is not None
        key = self.key(self.files)
        tmp = folder / f"ann-{key}.faiss.{os.getpid()}.tmp"
        faiss.write_index(self.index, str(tmp))
        os.replace(tmp, folder / f"ann-{key}.faiss")
        meta = {"files": list(self.files), "rows": self.rows, "nprobe": self.nprobe}
        (folder / f"ann-{key}.json").write_text(json.dumps(meta))
        for old in folder.glob("ann-*"):
            if not old.name.startswith(f"ann-{key}."):
                old.unlink(missing_ok=True)

    @classmethod
    def load(cls, folder: Path, files: Sequence[str]) -> AnnIndex | None:
        """The saved index covering a prefix of ``files`` (the partition's segments), if any."""
        faiss = faiss_module()
        if faiss is None:
            return None
        for meta_path in folder.glob("ann-*.json"):
            try:
                meta = json.loads(meta_path.read_text())
                covered = tuple(meta["files"])
                if tuple(files[: len(covered)]) != covered:
                    continue
                index = faiss.read_index(str(meta_path.with_suffix(".faiss")), faiss.IO_FLAG_MMAP)
                return cls(index, int(meta["rows"]), covered, int(meta["nprobe"]))
            except (OSError, ValueError, KeyError, TypeError, RuntimeError):
                continue
        return None


def covered_files(files: Sequence[tuple[str, int]]) -> tuple[tuple[str, ...], int]:
    """The oldest segments holding at least :data:`COVER` of the rows, and their row count."""
    total = sum(rows for _, rows in files)
    out: list[str] = []
    at = 0
    for name, rows in files:
        if at >= COVER * total and out:
            break
        out.append(name)
        at += rows
    return tuple(out), at


class AnnBuilder:
    """Builds indexes one at a time on a background thread (a build at 1M rows takes minutes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy: set[str] = set()

    def busy(self, key: str) -> bool:
        with self._lock:
            return key in self._busy

    def start(self, key: str, build: Any, done: Any) -> None:
        with self._lock:
            if self._busy:
                return  # one build at a time: the machine has queries to answer
            self._busy.add(key)

        def run() -> None:
            try:
                done(build())
            except Exception as exc:  # exact search goes on; the next query may try again
                _log.warning("ann_build_failed", error=repr(exc))
            finally:
                with self._lock:
                    self._busy.discard(key)

        threading.Thread(target=run, name="cairn-ann", daemon=True).start()
