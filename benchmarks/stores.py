"""Vector stores: round trips of a query_many of 4 per backend, local query latency at 10k and
100k records (random unit vectors, 384 dims, embedding excluded, with and without the usual scope
filter), and the import time of each backend module (a fresh interpreter per measurement).

    python -m benchmarks.run stores

Needs no data set; Pinecone and OpenSearch run against the wire-protocol emulators in tests/.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from cairn.core.models import ContextRecord, ContextType, Level
from cairn.ports.vectorstores.base import SearchMode, VectorQuery, VectorStore
from cairn.ports.vectorstores.local import LocalVectorStore

from .metrics import percentiles

SUITE = "stores"
DIM = 384
DIRS = 100  # records spread over cairn://resources/corpus/d0 .. d99
ROOT = "cairn://resources/corpus"
IMPORTS = {
    "local": "from cairn.ports.vectorstores.local import LocalVectorStore as S; S(None, dimension=384)",
    "pinecone": "from cairn.ports.vectorstores.pinecone import PineconeVectorStore as S; "
                "S(dimension=384, index_host='http://127.0.0.1:9', api_key='k')",
    "opensearch": "from cairn.ports.vectorstores.opensearch import OpenSearchVectorStore as S; "
                  "S(dimension=384, url='http://127.0.0.1:9')",
}


def synthetic(n: int, dim: int, seed: int = 0, tenant: str = "bench") -> tuple[list[ContextRecord], np.ndarray]:
    """``n`` leaf records under ``DIRS`` directories, with random unit vectors."""
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    recs = []
    for i in range(n):
        d = f"{ROOT}/d{i % DIRS}"
        recs.append(ContextRecord.model_construct(
            id=f"r{i}", tenant=tenant, uri=f"{d}/f{i}.md", parent_uri=d, ancestors=["cairn://resources", ROOT, d],
            depth=4, level=Level.DETAIL, context_type=ContextType.RESOURCE, owner=None, title=f"doc {i}",
            abstract="", text="", tags=[], metadata={}, created_at=0.0, updated_at=0.0, active_count=0,
            content_hash="", vector=vecs[i].tolist(),
        ))
    return recs, vecs


def _latency(store: VectorStore, requests: list[VectorQuery]) -> dict[str, float]:
    store.query(requests[0])  # build the lazy indexes once, as a warm container would
    samples = []
    for req in requests:
        t = time.perf_counter()
        store.query(req)
        samples.append((time.perf_counter() - t) * 1000)
    return percentiles(samples)


def local_latency(n: int, queries: int) -> dict[str, Any]:
    recs, _ = synthetic(n, DIM)
    store = LocalVectorStore(None, dimension=DIM)
    store.upsert(recs)
    qv = np.random.default_rng(1).standard_normal((queries, DIM)).astype(np.float32).tolist()
    scopes = {
        "no_filter": lambda i: None,
        "scope_root": lambda i: {"ancestors": {"$in": [ROOT]}},  # everything: the worst case of the scope filter
        "scope_dir": lambda i: {"ancestors": {"$in": [f"{ROOT}/d{i % DIRS}"]}, "level": {"$in": [0, 1, 2]}},
        "children_of": lambda i: {"parent_uri": f"{ROOT}/d{i % DIRS}"},
    }
    out: dict[str, Any] = {"records": n}
    for name, flt in scopes.items():
        out[name] = _latency(store, [VectorQuery(tenant="bench", vector=v, limit=10, filter=flt(i))
                                     for i, v in enumerate(qv)])
    batch = [VectorQuery(tenant="bench", vector=v, limit=20, filter={"parent_uri": f"{ROOT}/d{i}"})
             for i, v in enumerate(qv[:4])]
    samples = []
    for _ in range(max(5, queries // 10)):
        t = time.perf_counter()
        store.query_many(batch)
        samples.append((time.perf_counter() - t) * 1000)
    out["query_many_4_children_of"] = percentiles(samples)
    return out


def local_keyword_latency(n: int, queries: int) -> dict[str, Any]:
    recs, _ = synthetic(n, DIM)
    words = ["refund", "invoice", "travel", "hotel", "card", "policy", "flight", "expense"]
    rng = np.random.default_rng(2)
    recs = [r.model_copy(update={"text": " ".join(rng.choice(words, 12))}) for r in recs]
    store = LocalVectorStore(None, dimension=DIM)
    store.upsert(recs)
    t = time.perf_counter()
    store.query(VectorQuery(tenant="bench", text="refund", mode=SearchMode.KEYWORD))
    build_s = time.perf_counter() - t
    qv = np.random.default_rng(1).standard_normal((queries, DIM)).astype(np.float32).tolist()
    kw = [VectorQuery(tenant="bench", text=f"{words[i % 8]} {words[(i + 3) % 8]}", mode=SearchMode.KEYWORD)
          for i in range(queries)]
    hy = [VectorQuery(tenant="bench", vector=v, text=words[i % 8], mode=SearchMode.HYBRID) for i, v in enumerate(qv)]
    return {"records": n, "bm25_index_build_s": round(build_s, 2), "keyword": _latency(store, kw),
            "hybrid": _latency(store, hy)}


def round_trips() -> dict[str, Any]:
    """HTTP requests one ``query_many`` of 4 costs on each backend (local: in-process, 0)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.emulators.opensearch_emulator import (
        make_opensearch_store,
        start_opensearch_emulator,
    )
    from tests.emulators.pinecone_emulator import (
        make_pinecone_store,
        start_pinecone_emulator,
    )

    dim = 8
    recs, vecs = synthetic(40, dim)
    batch = [VectorQuery(tenant="bench", vector=v.tolist(), limit=5) for v in vecs[:4]]
    out: dict[str, Any] = {"local": {"requests": 0, "note": "in-process: one matrix product"}}
    pc = start_pinecone_emulator(dim)
    os_ = start_opensearch_emulator()
    try:
        for name, emu, store, counter in (
            ("pinecone", pc, make_pinecone_store(pc, dim), lambda e: len(e.requests)),
            ("opensearch", os_, make_opensearch_store(os_, dim), lambda e: len(e.log)),
        ):
            store.upsert(recs)
            store.query_many(batch)  # warm the client
            before = counter(emu)
            t = time.perf_counter()
            results = store.query_many(batch)
            ms = (time.perf_counter() - t) * 1000
            out[name] = {"requests": counter(emu) - before, "emulator_latency_ms": round(ms, 1),
                         "hits": [len(r) for r in results]}
            store.close()
    finally:
        pc.stop()
        os_.stop()
    return out


def import_times(repeats: int = 3) -> dict[str, Any]:
    """Median wall time of importing each backend module and building its store, in a fresh interpreter."""
    out = {}
    for name, code in IMPORTS.items():
        timed = f"import time; t = time.perf_counter(); {code}; print((time.perf_counter() - t) * 1000)"
        runs = [float(subprocess.run([sys.executable, "-c", timed], capture_output=True, text=True, check=True)
                      .stdout.strip()) for _ in range(repeats)]
        out[name] = {"import_and_build_ms": round(statistics.median(runs), 1)}
    return out


def run(data: Path, queries: int | None) -> dict:
    n_queries = queries or 200
    return {
        "suite": SUITE,
        "queries_per_measure": n_queries,
        "round_trips_query_many_4": round_trips(),
        "import_time": import_times(),
        "local_10k": local_latency(10_000, n_queries),
        "local_100k": local_latency(100_000, n_queries),
        "local_keyword_10k": local_keyword_latency(10_000, n_queries),
    }
