"""scale_ann: the local store's ANN index (faiss IVF, :mod:`cairn.ports.vectorstores.local_ann`) against
exact search, through the store, one BLAS thread.

* **Synthetic, at size** (``CAIRN_ANN_SIZES``, default ``100000,1000000``): records with vectors
  from the Gaussian mixture of :mod:`benchmarks.scale` (2,000 centres, as perf_store.py); 200
  queries from the same mixture (other draws). Reports the index build time (background thread, measured
  from the first query to the index being ready), unscoped dense p50/p99 with the index and
  exact (same folder, ``ann="exact"``), and recall@10 of the index's answers against exact.
* **Real MiniLM vectors**: the vectors the benchmarks' embedding cache holds
  (benchmarks/results/cache/embeddings-local-minilm: passages of scifact, cranfield, dstc11, ...
  embedded by the local model); 500 of them held out as queries, the rest stored. Skipped when
  the cache is empty (run the quality suites first).
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

SUITE = "scale_ann"
D, NQ, K = 384, 200, 10
CACHE = Path(__file__).parent / "results" / "cache" / "embeddings-local-minilm" / "vectors.npy"


def _store(path: Path, vectors: np.ndarray, min_rows: int):
    from cairn.core.models import ContextRecord
    from cairn.ports.vectorstores.local import LocalVectorStore

    store = LocalVectorStore(path, dimension=D, ann_min_rows=min_rows)
    for s in range(0, len(vectors), 20_000):
        store.upsert([ContextRecord(id=f"r{i}", tenant="ann", uri=f"cairn://resources/ann/d{i % 100}/r{i}",
                                    parent_uri=f"cairn://resources/ann/d{i % 100}", depth=3, level=2,
                                    context_type="resource", vector=vectors[i].tolist())
                      for i in range(s, min(len(vectors), s + 20_000))])
    return store


def _p(samples: list[float], q: float) -> float:
    return round(float(np.percentile(samples, q)) * 1000, 3)


def measure(path: Path, vectors: np.ndarray, queries: np.ndarray, min_rows: int) -> dict:
    from cairn.ports.vectorstores import VectorQuery
    from cairn.ports.vectorstores.local import LocalVectorStore

    t0 = time.perf_counter()
    store = _store(path, vectors, min_rows)
    build_store_s = time.perf_counter() - t0
    exact = LocalVectorStore(path, dimension=D, ann="exact")

    def ask(s, q):
        return [h.record.id for h in s.query(VectorQuery(tenant="ann", vector=q.tolist(), limit=K))]

    with threadpool_limits(1):
        ask(store, queries[0])  # starts the background build
        t0 = time.perf_counter()
        part = store._parts["ann"]
        while part.ann is None and time.perf_counter() - t0 < 3600:
            time.sleep(0.2)
        index_s = time.perf_counter() - t0
        lat: dict[str, list[float]] = {"ann": [], "exact": []}
        answers: dict[str, list[list[str]]] = {"ann": [], "exact": []}
        for q in queries:
            for name, s in (("ann", store), ("exact", exact)):
                t = time.perf_counter()
                answers[name].append(ask(s, q))
                lat[name].append(time.perf_counter() - t)
    recall = sum(len(set(a) & set(e)) for a, e in zip(answers["ann"], answers["exact"], strict=True)) / (K * len(queries))
    ann = part.ann
    return {"records": len(vectors), "upsert_s": round(build_store_s, 1), "index_build_s": round(index_s, 1),
            "nlist": int(ann.index.nlist) if ann else None, "nprobe": ann.nprobe if ann else None,
            "dense_p50_ms": {"ann": _p(lat["ann"], 50), "exact": _p(lat["exact"], 50)},
            "dense_p99_ms": {"ann": _p(lat["ann"], 99), "exact": _p(lat["exact"], 99)},
            "recall_at_10": round(recall, 4)}


def run(data: Path, limit_queries: int | None = None) -> dict:
    from benchmarks.scale import Mixture

    sizes = [int(s) for s in re.split(r"[,\s]+", os.environ.get("CAIRN_ANN_SIZES", "100000,1000000")) if s]
    result: dict = {"load_before": round(os.getloadavg()[0], 1), "synthetic": [], "real_minilm": None}
    nq = limit_queries or NQ
    with tempfile.TemporaryDirectory(prefix="cairn-ann-") as tmp:
        for n in sizes:
            both = Mixture().draw(n + nq)  # the queries from the same topics as the records
            vectors, queries = both[:n], both[n:]
            result["synthetic"].append(measure(Path(tmp) / f"s{n}", vectors, queries, min_rows=min(n, 100_000)))
            print(result["synthetic"][-1], flush=True)
            del vectors, both
        if CACHE.exists():
            real = np.load(CACHE).astype(np.float32)
            real /= np.linalg.norm(real, axis=1, keepdims=True)
            rng = np.random.default_rng(5)
            held = rng.choice(len(real), size=min(500, len(real) // 10), replace=False)
            rest = np.setdiff1d(np.arange(len(real)), held)
            result["real_minilm"] = measure(Path(tmp) / "real", real[rest], real[held], min_rows=1000)
    result["load_after"] = round(os.getloadavg()[0], 1)
    return result
