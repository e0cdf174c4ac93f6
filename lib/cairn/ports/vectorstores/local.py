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
  :mod:`cairn.core.filters.local`, only on the rows the rest of an ``$and`` left alive. The result
  is always exactly what that predicate says.
* **Dense** search is one matrix product per tenant for a whole ``query_many`` batch,
  restricted to the union of the batch's pre-filtered rows when that is small.
* **Keyword** search is BM25 over the stemmed words (:mod:`.keywords`) of title + abstract +
  text, indexed incrementally (:mod:`.local_keywords`): a write indexes only its records, the
  records it replaces or deletes become tombstones, and scores use the live rows' statistics;
  **hybrid** fuses dense and BM25 scores (a convex combination, :mod:`.fusion`, as OpenSearch).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from cairn.core.errors import VectorStoreError
from cairn.core.models import ContextRecord, ScoreExplanation
from cairn.core.text import AUTO, LanguagePolicy
from cairn.ports.vectorstores import local_keywords as kw
from cairn.ports.vectorstores import local_persistence as persist
from cairn.ports.vectorstores.base import Capabilities, SearchMode, VectorHit, VectorQuery, VectorStore, validate_tenant
from cairn.ports.vectorstores.fusion import fuse, hybrid_depth, hybrid_explanation
from cairn.ports.vectorstores.local_ann import STALE, AnnBuilder, AnnIndex, covered_files, faiss_module
from cairn.ports.vectorstores.local_columns import ColumnChunk
from cairn.ports.vectorstores.local_columns import Columns as _Columns  # noqa: F401  (the filter tests reach them here)
from cairn.ports.vectorstores.local_disk import DiskPartitions
from cairn.ports.vectorstores.local_filter import LocalFilter
from cairn.ports.vectorstores.local_filter import PreFilter as _PreFilter  # noqa: F401
from cairn.ports.vectorstores.local_partition import Blocks, Partition
from cairn.ports.vectorstores.local_side import SideTable, overlay

_SUBSET_FRACTION = 0.5  # score only the pre-filtered rows when they are fewer than this share
_COMPACT_DEAD = 4096  # an in-memory store drops its dead rows past this many (and past its live ones)
ANN_MIN_ROWS = 200_000  # below, exact search is as fast (benchmarks/README.md, issue 21)


def _partition_of(snap: persist.Snapshot) -> Partition:
    keywords = kw.KeywordIndex.of_chunks(snap.chunks, len(snap.ids))
    part = Partition(snap.manifest.dimension, snap.ids, snap.docs, snap.blocks, snap.live, keywords, snap.columns)
    part.files = tuple((ref.file, ref.rows) for ref in snap.manifest.segments)
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

    def __init__(
        self, path: str | Path | None, *, dimension: int, languages: LanguagePolicy = AUTO, ann: str = "auto",
        ann_min_rows: int = ANN_MIN_ROWS,
    ) -> None:
        """``ann``: ``auto`` (an ANN index for unscoped dense search in partitions of at least
        ``ann_min_rows`` live rows, when faiss is installed) or ``exact`` (always exact)."""
        super().__init__(dimension=dimension)
        if ann not in ("auto", "exact"):
            raise VectorStoreError(f"the local store's ann setting is {ann!r}; it is 'auto' or 'exact'")
        self.ann, self.ann_min_rows = ann, ann_min_rows
        self._ann_builder = AnnBuilder()
        self.path = Path(path) if path is not None else None
        # a tenant's fixed language: its queries' words are read in it (documents: each its own, detected)
        self.languages = languages
        self._parts: dict[str, Partition] = {}
        self._lock = threading.RLock()
        self._disk = (
            DiskPartitions(self.path / "tenants", dimension, _partition_of) if self.path is not None else None
        )
        self._sides: dict[str, tuple[SideTable, object]] = {}  # tenant -> its side table, and the folder it opened in

    # ---------------------------------------------------------------- bookkeeping beside the index

    def _side(self, tenant: str) -> SideTable:
        """The tenant's side table; opened again when its folder was replaced (a reindex swapped it)."""
        generation = self._index_generation(tenant)
        with self._lock:
            side, opened_in = self._sides.get(tenant, (None, None))
            if side is not None and opened_in != generation:
                side.close()
                side = None
            if side is None:
                folder = self._disk.files(tenant).dir if self._disk is not None else None
                side = SideTable(folder)
                self._sides[tenant] = (side, generation)
            return side

    def size_bytes(self, tenant: str) -> int | None:
        """The bytes of the tenant's folder on disk (None in memory): what its records, keyword index and
        side tables take."""
        if self._disk is None:
            return None
        folder = self._disk.files(tenant).dir
        return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0

    def _index_generation(self, tenant: str) -> object:
        """The tenant folder's identity on disk (device, inode): a reindex swaps the folder for
        another, so this changes; a stat, no read. None in memory or before the first write."""
        if self._disk is None:
            return None
        try:
            st = os.stat(self._disk.files(tenant).dir)
        except FileNotFoundError:
            return None
        return (st.st_dev, st.st_ino)

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
            for side, _ in self._sides.values():
                side.close()
            self._sides.clear()

    # ---------------------------------------------------------------- persistence

    def _part(self, tenant: str) -> Partition | None:
        """The tenant's partition, brought up to the latest commit on disk (a stat when unchanged)."""
        with self._lock:
            if self._disk is not None:
                self._disk.refresh(tenant, self._parts)
            return self._parts.get(tenant)

    @contextmanager
    def _writing(self, tenant: str) -> Iterator[tuple[Partition, Callable[[persist.Segment], None]]]:
        """The tenant's up-to-date partition under the inter-process lock, and a ``commit``.

        The caller changes the partition in memory and commits the segment that says what it
        changed; if anything fails before the commit, the in-memory partition is dropped and
        reloaded from disk on the next call.
        """
        with self._lock:
            if self._disk is None:
                part = self._parts.setdefault(tenant, Partition(self.dimension))
                yield part, lambda seg: None
                if part.n - part.n_live > max(_COMPACT_DEAD, part.n_live):
                    self._parts[tenant] = part.compacted()
                return
            with self._disk.writing(tenant, self._parts) as commit:
                yield self._parts.setdefault(tenant, Partition(self.dimension)), commit

    # ---------------------------------------------------------------- hooks

    def _capabilities(self) -> Capabilities:
        from cairn.core.filters import local as local_filters

        return Capabilities(
            keyword=True,
            hybrid=True,
            batched_queries=True,
            max_upsert_batch=100_000,
            filter_operators=local_filters.SUPPORTED_OPERATORS,
            keyword_statistics_of_filter=True,
        )

    def _translate_filter(self, tree: Any) -> LocalFilter | None:
        return None if tree is None else LocalFilter(tree)

    def _upsert(self, tenant: str, records: list[ContextRecord]) -> int:
        docs, vectors = _dump(records)
        postings = kw.Postings.of_texts([persist.indexed_text(d) for d in docs])  # outside the lock
        columns = ColumnChunk.of_docs(docs)
        with self._writing(tenant) as (part, commit):
            part.put(docs, vectors, postings, columns)
            commit(persist.Segment(docs, vectors, postings=postings, columns=columns))
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
                if part is None or not part.n_live:
                    continue
                masks = {n: part.mask(native_filters[n]) for n in idx}
                dense = self._dense_rankings(part, [(requests[n], masks[n]) for n in idx], self._ann_for(tenant, part))
                for n, ranking in zip(idx, dense, strict=True):
                    results[n] = self._finish(part, requests[n], masks[n], ranking)
            return results

    def _dense_rankings(
        self, part: Partition, batch: list[tuple[VectorQuery, np.ndarray | None]], ann: AnnIndex | None = None,
    ) -> list[list[tuple[int, float]]]:
        """Cosine rankings for every query of ``batch`` that has a vector: one matrix product, or
        the ANN index where it serves (unscoped or loosely filtered queries of a big partition)."""
        wanted = [(n, q, m) for n, (q, m) in enumerate(batch) if q.mode is not SearchMode.KEYWORD]
        out: list[list[tuple[int, float]]] = [[] for _ in batch]
        if not wanted:
            return out
        subset: np.ndarray | None = None
        if all(m is not None for _, _, m in wanted):
            union = np.logical_or.reduce([m for _, _, m in wanted if m is not None])
            if union.sum() < _SUBSET_FRACTION * part.n:
                subset = np.flatnonzero(union)
        queries = _unit(np.asarray([q.vector for _, q, _ in wanted], dtype=np.float32))
        if subset is None and ann is not None:
            approx = [self._ann_ranking(part, ann, qv, q, m) for qv, (_, q, m) in zip(queries, wanted, strict=True)]
            if all(r is not None for r in approx):
                for (n, _, _), ranking in zip(wanted, approx, strict=True):
                    out[n] = ranking  # type: ignore[assignment]
                return out
        rows = subset if subset is not None else np.arange(part.n)
        with _one_blas_thread():
            scores = part.vectors.scores(queries, subset)  # one matrix product (per block) for the whole batch
        for (n, q, mask), row_scores in zip(wanted, scores, strict=True):
            if mask is not None:
                row_scores = np.where(mask[rows], row_scores, -np.inf)
            depth = hybrid_depth(q.limit) if q.mode is SearchMode.HYBRID else q.limit
            out[n] = _ranked(row_scores, rows, part.ids, depth)
        return out

    # ---------------------------------------------------------------- the ANN index

    def _ann_for(self, tenant: str, part: Partition) -> AnnIndex | None:
        """The partition's ANN index when it serves (built in the background when missing or stale)."""
        if self.ann != "auto" or part.n_live < self.ann_min_rows or faiss_module() is None:
            return None
        folder = self._disk.files(tenant).dir if self._disk is not None else None
        if part.ann is None and not part.ann_looked and folder is not None:
            part.ann_looked = True
            found = AnnIndex.load(folder, [f for f, _ in part.files])
            part.ann = found if found is not None and found.rows <= part.n else None
        ann = part.ann
        if (ann is None or part.n - ann.rows > STALE * part.n) and not self._ann_builder.busy(tenant):
            self._build_ann(tenant, part, folder)
        return ann

    def _build_ann(self, tenant: str, part: Partition, folder: Path | None) -> None:
        files, rows = covered_files(part.files) if part.files else ((), part.n)
        if rows < self.ann_min_rows // 2:
            return
        frozen = Blocks(self.dimension, list(part.vectors.blocks))  # the writer may append meanwhile
        live = part.live[:rows].copy()

        def done(index: AnnIndex) -> None:
            if folder is not None:
                try:
                    index.save(folder)  # first: once queries use it, other processes can read it too
                except (OSError, RuntimeError):
                    pass  # a read-only home: this process keeps it
            part.ann = index

        self._ann_builder.start(tenant, lambda: AnnIndex.build(frozen, rows, live, files), done)

    @staticmethod
    def _ann_ranking(
        part: Partition, ann: AnnIndex, qv: np.ndarray, req: VectorQuery, mask: np.ndarray | None
    ) -> list[tuple[int, float]] | None:
        """The ANN ranking of one query: candidates from the index over its rows, the rows written
        since scored exactly, dead or filtered-out rows dropped; None when too few survive (exact then)."""
        depth = hybrid_depth(req.limit) if req.mode is SearchMode.HYBRID else req.limit
        visible = mask if mask is not None else (part.live if part.n_live < part.n else None)
        share = 1.0 if visible is None else max(float(np.count_nonzero(visible[: ann.rows])) / max(ann.rows, 1), 1e-9)
        if share < _SUBSET_FRACTION:
            return None
        k = min(ann.rows, int(depth / share * 1.5) + depth)
        scores, rows = ann.search(qv[None, :], k)
        keep = rows[0] >= 0
        cand, cand_scores = rows[0][keep], scores[0][keep]
        if visible is not None:
            seen = visible[cand]
            cand, cand_scores = cand[seen], cand_scores[seen]
        if len(cand) < min(depth, int(share * ann.rows)):
            return None
        tail = np.arange(ann.rows, part.n)
        if len(tail):
            tail_scores = part.vectors.scores(qv[None, :], tail)[0]
            if visible is not None:
                tail_scores = np.where(visible[tail], tail_scores, -np.inf)
            cand, cand_scores = np.concatenate([cand, tail]), np.concatenate([cand_scores, tail_scores])
        return _ranked(cand_scores.astype(np.float64), cand, part.ids, depth)

    def _finish(
        self, part: Partition, req: VectorQuery, mask: np.ndarray | None, dense: list[tuple[int, float]]
    ) -> list[VectorHit]:
        bm25: dict[int, float] = {}  # hybrid: each row's BM25 score, reported with its hit
        arms: dict[int, tuple[float, float, float]] = {}  # hybrid: each row's (w, cosine, normalised BM25)
        if req.mode is SearchMode.DENSE:
            ranked = dense
        else:
            keyword = self._keyword_ranking(part, req, mask)
            ranked = keyword if req.mode is SearchMode.KEYWORD else fuse(
                dense, keyword, req.limit, depth=hybrid_depth(req.limit), dense_weight=req.dense_weight,
                keyword_scale=req.keyword_scale, parts=arms)
            if req.mode is SearchMode.HYBRID:
                bm25 = dict(keyword)
        used = self._side(req.tenant).uses(part.ids[r] for r, _ in ranked)
        return [self._hit(part, r, s, req, used.get(part.ids[r]), bm25.get(r), hybrid_explanation(arms.get(r)))
                for r, s in ranked]

    def _keyword_ranking(self, part: Partition, req: VectorQuery, mask: np.ndarray | None) -> list[tuple[int, float]]:
        within = mask if req.keyword_statistics == "filter" else None
        scores = part.keywords.scores(req.text or "", self.languages.for_tenant(req.tenant), within)
        if scores is None:
            return []
        keep = scores > 0
        if mask is not None:
            keep &= mask
        rows = np.flatnonzero(keep)
        depth = hybrid_depth(req.limit) if req.mode is SearchMode.HYBRID else req.limit
        return _ranked(scores[rows].astype(np.float64), rows, part.ids, depth)

    @staticmethod
    def _hit(part: Partition, row: int, score: float, req: VectorQuery, used: tuple[int, float] | None,
             keyword: float | None = None, explanation: ScoreExplanation | None = None) -> VectorHit:
        vec = part.vector(row).tolist() if req.include_vectors else None
        return VectorHit(record=ContextRecord.model_validate({**overlay(part.docs[row], used), "vector": vec}), score=score,
                         keyword=keyword, explanation=explanation)

    def _fetch(self, tenant: str, ids: list[str]) -> list[ContextRecord]:
        part = self._part(tenant)
        if part is None:
            return []
        rows = [(i, part.rows[i]) for i in ids if i in part.rows]
        used = self._side(tenant).uses(i for i, _ in rows)
        return [
            ContextRecord.model_validate({**overlay(part.docs[r], used.get(i)), "vector": part.vector(r).tolist()})
            for i, r in rows
        ]

    def _scan(self, tenant: str, batch: int) -> Iterator[list[ContextRecord]]:
        part = self._part(tenant)
        ids = sorted(part.rows) if part is not None else []
        for start in range(0, len(ids), batch):
            yield self._fetch(tenant, ids[start : start + batch])

    def _delete(self, tenant: str, ids: list[str]) -> int:
        with self._writing(tenant) as (part, commit):
            return self._delete_rows(tenant, part, commit, ids)

    def _delete_by_filter(self, tenant: str, native_filter: LocalFilter | None) -> int:
        with self._writing(tenant) as (part, commit):  # the filter sees every commit before it
            mask = part.mask(native_filter)
            rows = part.live_rows() if mask is None else np.flatnonzero(mask)
            ids = [part.ids[r] for r in rows.tolist()]
            return self._delete_rows(tenant, part, commit, list(ids))

    def _delete_rows(self, tenant: str, part: Partition, commit: Callable[[persist.Segment], None], ids: list[str]) -> int:
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
            return part.n_live if mask is None else int(mask.sum())
