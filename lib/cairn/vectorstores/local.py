"""The embedded default: exact cosine over a numpy matrix, a partition per tenant, persisted
to a folder (one subfolder per tenant: ``records.jsonl`` + ``vectors.npy``).

Writes go to memory and then to disk atomically (write a temporary file, rename), so a new
process finds the data again and a crash never leaves half a file behind.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import VectorStoreError
from ..models import ContextRecord
from .base import Capabilities, VectorHit, VectorQuery, VectorStore

Predicate = Callable[[Mapping[str, Any]], bool]


class _Partition:
    """One tenant's records: dumps (without vectors) and a row-aligned vector matrix."""

    def __init__(self, dimension: int) -> None:
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.docs: list[dict[str, Any]] = []
        self.matrix = np.zeros((0, dimension), dtype=np.float32)

    def upsert(self, records: list[ContextRecord]) -> None:
        new_vecs: list[list[float]] = []
        latest = {rec.id: rec for rec in records}  # the last write of an id in one batch wins
        for rec in latest.values():
            doc = rec.model_dump(mode="json", exclude={"vector"})
            row = self.rows.get(rec.id)
            if row is None:
                self.rows[rec.id] = len(self.ids)
                self.ids.append(rec.id)
                self.docs.append(doc)
                new_vecs.append(rec.vector or [])
            else:
                self.docs[row] = doc
                self.matrix[row] = _unit(np.asarray([rec.vector], dtype=np.float32))[0]
        if new_vecs:
            self.matrix = np.vstack([self.matrix, _unit(np.asarray(new_vecs, dtype=np.float32))])

    def delete(self, ids: list[str]) -> int:
        doomed = {self.rows[i] for i in ids if i in self.rows}
        if not doomed:
            return 0
        keep = [r for r in range(len(self.ids)) if r not in doomed]
        self.ids = [self.ids[r] for r in keep]
        self.docs = [self.docs[r] for r in keep]
        self.matrix = self.matrix[keep]
        self.rows = {i: n for n, i in enumerate(self.ids)}
        return len(doomed)

    def mask(self, predicate: Predicate | None) -> np.ndarray | None:
        if predicate is None:
            return None
        return np.fromiter((predicate(d) for d in self.docs), dtype=bool, count=len(self.docs))


def _unit(mat: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return mat / norms


class LocalVectorStore(VectorStore):
    backend = "local"

    def __init__(self, path: str | Path | None, *, dimension: int) -> None:
        super().__init__(dimension=dimension)
        self.path = Path(path) if path is not None else None
        self._parts: dict[str, _Partition] = {}
        self._lock = threading.RLock()
        if self.path is not None:
            self._load_all()

    # ---------------------------------------------------------------- persistence

    def _tenant_dir(self, tenant: str) -> Path:
        assert self.path is not None
        return self.path / "tenants" / tenant

    def _load_all(self) -> None:
        root = self.path / "tenants"  # type: ignore[operator]
        if not root.is_dir():
            return
        for tdir in sorted(root.iterdir()):
            if (tdir / "records.jsonl").exists():
                self._parts[tdir.name] = self._load(tdir)

    def _load(self, tdir: Path) -> _Partition:
        part = _Partition(self.dimension)
        try:
            with open(tdir / "records.jsonl", encoding="utf-8") as fh:
                part.docs = [json.loads(line) for line in fh if line.strip()]
            part.matrix = np.load(tdir / "vectors.npy")
        except (OSError, ValueError) as exc:
            raise VectorStoreError(f"local store at {tdir} is unreadable: {exc}") from exc
        if part.matrix.shape != (len(part.docs), self.dimension):
            raise VectorStoreError(
                f"local store at {tdir} holds vectors of shape {part.matrix.shape}, expected "
                f"({len(part.docs)}, {self.dimension}); was it built with another embedder?"
            )
        part.ids = [d["id"] for d in part.docs]
        part.rows = {i: n for n, i in enumerate(part.ids)}
        return part

    def _save(self, tenant: str) -> None:
        if self.path is None:
            return
        part = self._parts[tenant]
        tdir = self._tenant_dir(tenant)
        tdir.mkdir(parents=True, exist_ok=True)
        tmp_docs, tmp_vecs = tdir / "records.jsonl.tmp", tdir / "vectors.tmp.npy"
        with open(tmp_docs, "w", encoding="utf-8") as fh:
            for doc in part.docs:
                fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
        np.save(tmp_vecs, part.matrix)
        os.replace(tmp_vecs, tdir / "vectors.npy")
        os.replace(tmp_docs, tdir / "records.jsonl")

    def _part(self, tenant: str) -> _Partition | None:
        return self._parts.get(tenant)

    # ---------------------------------------------------------------- hooks

    def _capabilities(self) -> Capabilities:
        from ..filters import local as local_filters

        return Capabilities(
            keyword=False,
            hybrid=False,
            batched_queries=True,
            max_upsert_batch=100_000,
            filter_operators=local_filters.SUPPORTED_OPERATORS,
        )

    def _translate_filter(self, tree: Any) -> Predicate | None:
        from ..filters import local as local_filters

        return None if tree is None else local_filters.compile(tree)

    def _upsert(self, tenant: str, records: list[ContextRecord]) -> int:
        with self._lock:
            part = self._parts.setdefault(tenant, _Partition(self.dimension))
            part.upsert(records)
            self._save(tenant)
        return len(records)

    def _query(self, request: VectorQuery, native_filter: Predicate | None) -> list[VectorHit]:
        return self._query_many([request], [native_filter])[0]

    def _query_many(
        self, requests: list[VectorQuery], native_filters: list[Predicate | None]
    ) -> list[list[VectorHit]]:
        with self._lock:
            results: list[list[VectorHit]] = [[] for _ in requests]
            by_tenant: dict[str, list[int]] = {}
            for n, req in enumerate(requests):
                by_tenant.setdefault(req.tenant, []).append(n)
            for tenant, idx in by_tenant.items():
                part = self._part(tenant)
                if part is None or not part.ids:
                    continue
                queries = _unit(np.asarray([requests[n].vector for n in idx], dtype=np.float32))
                scores = queries @ part.matrix.T  # one matrix product for the whole batch
                for row, n in enumerate(idx):
                    results[n] = self._top(part, scores[row], requests[n], part.mask(native_filters[n]))
            return results

    def _top(self, part: _Partition, scores: np.ndarray, req: VectorQuery, mask: np.ndarray | None) -> list[VectorHit]:
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        k = min(req.limit, len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = sorted(top, key=lambda r: (-scores[r], part.ids[r]))
        hits = []
        for r in top:
            if not np.isfinite(scores[r]):
                break
            doc = part.docs[r]
            vec = part.matrix[r].tolist() if req.include_vectors else None
            hits.append(VectorHit(record=ContextRecord.model_validate({**doc, "vector": vec}), score=float(scores[r])))
        return hits

    def _fetch(self, tenant: str, ids: list[str]) -> list[ContextRecord]:
        part = self._part(tenant)
        if part is None:
            return []
        out = []
        for i in ids:
            r = part.rows.get(i)
            if r is not None:
                out.append(ContextRecord.model_validate({**part.docs[r], "vector": part.matrix[r].tolist()}))
        return out

    def _delete(self, tenant: str, ids: list[str]) -> int:
        with self._lock:
            part = self._part(tenant)
            n = part.delete(ids) if part else 0
            if n:
                self._save(tenant)
            return n

    def _delete_by_filter(self, tenant: str, native_filter: Predicate | None) -> int:
        with self._lock:
            part = self._part(tenant)
            if part is None:
                return 0
            mask = part.mask(native_filter)
            ids = [i for i, m in zip(part.ids, mask if mask is not None else [True] * len(part.ids)) if m]
            return self._delete(tenant, ids)

    def _count(self, tenant: str, native_filter: Predicate | None) -> int:
        part = self._part(tenant)
        if part is None:
            return 0
        mask = part.mask(native_filter)
        return len(part.ids) if mask is None else int(mask.sum())
