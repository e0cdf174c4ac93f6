"""The embedded store's persistence: what a write, an open and a freshness check cost.

    python -m benchmarks.run store_durability                        # 100k records, about 1 min
    CAIRN_BENCH_STORE_N=1000000 python -m benchmarks.run store_durability   # 1M, several minutes, ~6 GB RAM

Builds N records (384-d random unit vectors, 100 folders) in a fresh folder through upserts of
10k, then measures: a small write (10 records) into the full partition, next to what the
previous two-file format paid for every write (the whole partition re-encoded and rewritten);
opening the folder in a new store object and answering a first query (unscoped, then scoped);
the per-call freshness check (a stat of the manifest); a reader catching up with another
writer's small write; and query latency next to the bare numpy product.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from cairn.ports.vectorstores.base import VectorQuery
from cairn.ports.vectorstores.local import LocalVectorStore

from .stores import DIM, ROOT, synthetic

SUITE = "store_durability"
TENANT = "bench"


def _ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def _old_full_rewrite(store: LocalVectorStore, folder: Path) -> float:
    """What the two-file format did on every write: every record re-encoded, both files rewritten."""
    part = store._part(TENANT)
    assert part is not None
    t = time.perf_counter()
    with open(folder / "records.jsonl.tmp", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(doc, ensure_ascii=False) + "\n" for doc in part.docs)
    np.save(folder / "vectors.tmp.npy", part.matrix)
    return time.perf_counter() - t


def run(data: Path, queries: int | None) -> dict[str, Any]:
    n = int(os.environ.get("CAIRN_BENCH_STORE_N", "100000"))
    nq = queries or 200
    out: dict[str, Any] = {"records": n}
    with tempfile.TemporaryDirectory(prefix="store-durability-") as tmp:
        home = Path(tmp) / "store"
        store = LocalVectorStore(home, dimension=DIM)
        t = time.perf_counter()
        vecs_all = []
        for start in range(0, n, 10_000):
            recs, vecs = synthetic(min(10_000, n - start), DIM, seed=start, tenant=TENANT)
            for k, r in enumerate(recs):
                r.id = f"r{start + k}"
            store.upsert(recs)
            vecs_all.append(vecs)
        out["build_s"] = round(time.perf_counter() - t, 1)
        matrix = np.concatenate(vecs_all)
        tdir = home / "tenants" / TENANT
        out["segments_after_build"] = len(json.loads((tdir / "MANIFEST").read_text())["segments"])

        small = []
        for i in range(20):
            recs, _ = synthetic(10, DIM, seed=10_000_000 + i, tenant=TENANT)
            for k, r in enumerate(recs):
                r.id = f"small{i}-{k}"
            t = time.perf_counter()
            store.upsert(recs)
            small.append(time.perf_counter() - t)
        out["small_write_10_records_ms"] = _ms(small)
        out["previous_format_rewrite_per_write_ms"] = _ms([_old_full_rewrite(store, Path(tmp)) for _ in range(3)])

        rng = np.random.default_rng(1)
        qv = rng.standard_normal((nq, DIM)).astype(np.float32)
        qv /= np.linalg.norm(qv, axis=1, keepdims=True)
        scope = {"ancestors": {"$in": [f"{ROOT}/d7"]}, "level": {"$in": [0, 1, 2]}}

        t = time.perf_counter()
        cold = LocalVectorStore(home, dimension=DIM)
        cold.query(VectorQuery(tenant=TENANT, vector=qv[0].tolist(), limit=10))
        out["open_and_first_query_s"] = round(time.perf_counter() - t, 2)
        t = time.perf_counter()
        cold2 = LocalVectorStore(home, dimension=DIM)
        cold2.query(VectorQuery(tenant=TENANT, vector=qv[0].tolist(), limit=10, filter=scope))
        out["open_and_first_scoped_query_s"] = round(time.perf_counter() - t, 2)

        checks = []
        for _ in range(1000):
            t = time.perf_counter()
            cold._part(TENANT)
            checks.append(time.perf_counter() - t)
        out["freshness_check_us"] = round(statistics.median(checks) * 1e6, 1)

        catch_up = []
        for i in range(5):
            recs, _ = synthetic(10, DIM, seed=20_000_000 + i, tenant=TENANT)
            for k, r in enumerate(recs):
                r.id = f"other{i}-{k}"
            store.upsert(recs)  # another writer
            t = time.perf_counter()
            cold.query(VectorQuery(tenant=TENANT, vector=qv[i].tolist(), limit=10))
            catch_up.append(time.perf_counter() - t)
        out["reader_catch_up_after_a_small_write_ms"] = _ms(catch_up)

        with threadpool_limits(1):
            floor, unscoped, scoped = [], [], []
            for q in qv:
                t = time.perf_counter()
                s = matrix @ q
                top = np.argpartition(-s, 10)[:10]
                top[np.argsort(-s[top])]
                floor.append(time.perf_counter() - t)
                t = time.perf_counter()
                cold.query(VectorQuery(tenant=TENANT, vector=q.tolist(), limit=10))
                unscoped.append(time.perf_counter() - t)
                t = time.perf_counter()
                cold.query(VectorQuery(tenant=TENANT, vector=q.tolist(), limit=10, filter=scope))
                scoped.append(time.perf_counter() - t)
        out["numpy_floor_p50_ms"] = _ms(floor)
        out["query_p50_ms"] = _ms(unscoped)
        out["scoped_query_p50_ms"] = _ms(scoped)
        out["disk_mb"] = round(sum(p.stat().st_size for p in tdir.iterdir()) / 1e6, 1)
    return out
