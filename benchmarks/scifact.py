"""scifact: ingestion throughput, find() latency and nDCG@10 of quick mode (300 test queries)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from cairn import Cairn
from cairn.engine.ingest import Document, Ingestor
from cairn.ports.embeddings.local import LocalEmbedder
from cairn.ports.vectorstores.local import LocalVectorStore

from .beir import load
from .metrics import evaluate, percentiles

SUITE = "scifact"
ROOT = "cairn://resources/scifact"


def doc_id_of(uri: str) -> str:
    """cairn://resources/scifact/4983#1 -> 4983"""
    return uri.rsplit("/", 1)[1].split("#", 1)[0]


def run(data: Path, limit_queries: int | None = None) -> dict:
    ds = load(data, "scifact")
    embedder = LocalEmbedder()
    embedder.embed(["warm up"])
    docs = [Document(path=(d["_id"],), text=d["text"] or d["title"], title=d["title"]) for d in ds.corpus]
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalVectorStore(Path(tmp), dimension=embedder.dimension)
        t0 = time.perf_counter()
        report = Ingestor(store, embedder, "bench").ingest(
            docs, ROOT, progress=lambda s, d, t: print(f"\r  ingest: {d}/{t} records", end="", flush=True)
        )
        ingest_s = time.perf_counter() - t0
        print()
        svc = Cairn(store, embedder, "bench")
        queries = list(ds.queries.values())[:limit_queries]
        run_: dict[str, dict[str, float]] = {}
        lat: list[float] = []
        for q in queries:
            t = time.perf_counter()
            res = svc.find(q["text"], limit=30, context_type="resource")
            lat.append((time.perf_counter() - t) * 1000)
            ranked: dict[str, float] = {}
            for m in res.resources:
                if m.level == 2:
                    ranked.setdefault(doc_id_of(m.uri), m.score)
            run_[q["_id"]] = dict(list(ranked.items())[:10])
    qrels = {q["_id"]: ds.qrels[q["_id"]] for q in queries}
    return {
        "suite": "scifact",
        "documents": report.documents,
        "records": report.records,
        "ingest_seconds": round(ingest_s, 1),
        "ingest_docs_per_s": round(report.documents / ingest_s, 1),
        "queries": len(queries),
        "find_quick_latency": percentiles(lat),
        "quick": {k: round(v, 4) for k, v in evaluate(qrels, run_).items()},
    }
