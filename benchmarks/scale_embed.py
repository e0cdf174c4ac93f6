"""scale_embed: the embedded model on every core, against one shared session, side by side.

* **ingest**: texts per second embedding 512 real passages (the scale suite's) in calls of 256
  (what ingest does), with one 2-thread session (the previous default) and with the pool of
  single-thread sessions, one per core (the default now);
* **concurrent queries**: 4 threads each embedding 25 distinct one-text queries (as 4 concurrent
  ``find()`` calls do), through one shared 2-thread session and through the pool.

The two set-ups alternate, twice each, in one process; the best round of each is reported.

With ``CAIRN_SCALE_EMBED_DOCS=N`` (e.g. 1200) it also ingests the first N scifact documents
through :class:`cairn.engine.ingest.Ingestor` into a fresh local store with each set-up, alternating,
twice: docs/s, the share of the wall time spent embedding, and CPU seconds per wall second.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cairn.ports.embeddings.local import LocalEmbedder, usable_cores

from .scale import passages

SUITE = "scale_embed"


def _ingest(emb: LocalEmbedder, texts: list[str]) -> float:
    t0 = time.perf_counter()
    for s in range(0, len(texts), 256):
        emb.embed(texts[s : s + 256])
    return len(texts) / (time.perf_counter() - t0)


def _queries(emb: LocalEmbedder, texts: list[str], threads: int = 4) -> float:
    chunks = [texts[k::threads] for k in range(threads)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as ex:
        list(ex.map(lambda chunk: [emb.embed([t]) for t in chunk], chunks))
    return len(texts) / (time.perf_counter() - t0)


class _Timed(LocalEmbedder):
    """The local embedder, adding up the wall time of its calls."""

    def __init__(self, **kw: int) -> None:
        super().__init__(**kw)
        self.seconds = 0.0

    def embed(self, texts, input_type="document"):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return super().embed(texts, input_type)
        finally:
            self.seconds += time.perf_counter() - t0


def _ingest_docs(data: Path, n: int) -> dict:
    import tempfile

    from cairn.engine.ingest import Document, Ingestor
    from cairn.ports.vectorstores.local import LocalVectorStore

    from .beir import load

    ds = load(data, "scifact")
    docs = [Document(path=(d["_id"],), text=d["text"] or d["title"], title=d["title"]) for d in ds.corpus][:n]
    rounds: dict[str, list[dict]] = {"shared": [], "pool": []}
    for _ in range(2):
        for name, kw in (("shared", {"threads": 2}), ("pool", {})):
            emb = _Timed(**kw)
            emb.warm()
            emb.seconds = 0.0
            with tempfile.TemporaryDirectory() as tmp:
                store = LocalVectorStore(Path(tmp), dimension=emb.dimension)
                c0, t0 = time.process_time(), time.perf_counter()
                Ingestor(store, emb, "bench").ingest(docs, "cairn://resources/scifact")
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            rounds[name].append({"docs_per_s": round(n / wall, 1), "embedding_share": round(emb.seconds / wall, 3),
                                 "cores_busy": round(cpu / wall, 2), "load": round(os.getloadavg()[0], 1)})
    best = {k: max(r["docs_per_s"] for r in v) for k, v in rounds.items()}
    return {"docs": n, "rounds": rounds, "pool_vs_shared": round(best["pool"] / best["shared"], 2)}


def run(data: Path, limit_queries: int | None = None) -> dict:
    texts = passages(data)
    docs, queries = texts[:512], [t[:80] for t in texts[1000:1100]]
    shared, pool = LocalEmbedder(threads=2), LocalEmbedder()
    shared.warm()
    pool.warm()
    out: dict = {"cores": usable_cores(), "load_before": round(os.getloadavg()[0], 1)}
    rounds: dict[str, list[float]] = {k: [] for k in ("ingest_shared", "ingest_pool", "queries_shared", "queries_pool")}
    for r in range(2):
        rounds["ingest_shared"].append(_ingest(shared, docs))
        rounds["ingest_pool"].append(_ingest(pool, docs))
        rounds["queries_shared"].append(_queries(shared, [f"{q} {r}" for q in queries]))  # distinct: no cache hit
        rounds["queries_pool"].append(_queries(pool, [f"{q} {r}" for q in queries]))
    best = {k: round(max(v), 1) for k, v in rounds.items()}
    out.update({f"{k}_texts_per_s": v for k, v in best.items()})
    out["ingest_pool_vs_shared"] = round(best["ingest_pool"] / best["ingest_shared"], 2)
    out["queries_pool_vs_shared"] = round(best["queries_pool"] / best["queries_shared"], 2)
    docs = int(os.environ.get("CAIRN_SCALE_EMBED_DOCS", "0"))
    if docs > 0:
        out["scifact_ingest"] = _ingest_docs(data, docs)
    out["load_after"] = round(os.getloadavg()[0], 1)
    return out
