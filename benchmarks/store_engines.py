"""The embedded store against the engines a transactional store could have been built on.

    python -m benchmarks.run store_engines          # the engines that are importable; ~3 min at 100k
    CAIRN_BENCH_ENGINES_PATH=/tmp/altstores python -m benchmarks.run store_engines
        # (pip install --target /tmp/altstores sqlite-vec apsw lancedb: kept out of the project's venv)

For each engine, on one folder: build N records (384-d unit vectors, env CAIRN_BENCH_ENGINES_N,
default 100k) in writes of 10k; the cost of one small write (10 records) into it; exact k=10
query latency (p50 of 100, one BLAS thread); then W writer processes (default 8) that each add
50 records in 5 writes at once to a fresh store holding one record: records lost, writers that failed.
Engines: ``cairn`` (this store: numpy + segment log), ``sqlite-vec`` (``vec0`` through apsw,
WAL, busy timeout), ``lancedb`` (a table without an index, so search is exact).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

SUITE = "store_engines"
DIM = 384
_EXTRA = os.environ.get("CAIRN_BENCH_ENGINES_PATH")
if _EXTRA and _EXTRA not in sys.path:
    sys.path.append(_EXTRA)  # after the venv, so the project's numpy and pydantic win


# ----------------------------------------------------------------- engines: open, add, query, count


class Cairn:
    name = "cairn"

    def __init__(self, folder: Path) -> None:
        from cairn.ports.vectorstores.local import LocalVectorStore

        self.store = LocalVectorStore(folder, dimension=DIM)

    def add(self, ids: list[str], vecs: np.ndarray) -> None:
        from cairn.core.models import ContextRecord, ContextType, Level

        self.store.upsert([
            ContextRecord.model_construct(
                id=i, tenant="t", uri=f"cairn://resources/x/{i}", parent_uri="cairn://resources/x",
                ancestors=["cairn://resources", "cairn://resources/x"], depth=3, level=Level.DETAIL, context_type=ContextType.RESOURCE,
                owner=None, title="", abstract="", text="", tags=[], metadata={}, created_at=0.0, updated_at=0.0,
                active_count=0, content_hash="", vector=v.tolist())
            for i, v in zip(ids, vecs, strict=True)
        ])

    def query(self, q: np.ndarray) -> list[str]:
        from cairn.ports.vectorstores.base import VectorQuery

        return [h.record.id for h in self.store.query(VectorQuery(tenant="t", vector=q.tolist(), limit=10))]

    def count(self) -> int:
        return self.store.count("t")


class SqliteVec:
    name = "sqlite-vec"

    def __init__(self, folder: Path) -> None:
        import apsw
        import sqlite_vec

        folder.mkdir(parents=True, exist_ok=True)
        self.db = apsw.Connection(str(folder / "store.db"))
        self.db.enable_load_extension(True)
        self.db.load_extension(sqlite_vec.loadable_path())
        self.db.setbusytimeout(60_000)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS v USING vec0(id TEXT PRIMARY KEY, embedding float[{DIM}])")

    def add(self, ids: list[str], vecs: np.ndarray) -> None:
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO v(id, embedding) VALUES (?, ?)",
                                [(i, v.astype(np.float32).tobytes()) for i, v in zip(ids, vecs, strict=True)])

    def query(self, q: np.ndarray) -> list[str]:
        rows = self.db.execute("SELECT id FROM v WHERE embedding MATCH ? AND k = 10 ORDER BY distance",
                               (q.astype(np.float32).tobytes(),))
        return [r[0] for r in rows]

    def count(self) -> int:
        return int(next(iter(self.db.execute("SELECT count(*) FROM v")))[0])


class Lance:
    name = "lancedb"

    def __init__(self, folder: Path) -> None:
        import lancedb

        self.db = lancedb.connect(str(folder))
        self.table: Any = None

    def _table(self) -> Any:
        if self.table is None and "t" in self.db.table_names():
            self.table = self.db.open_table("t")
        return self.table

    def add(self, ids: list[str], vecs: np.ndarray) -> None:
        rows = [{"id": i, "vector": v.astype(np.float32).tolist()} for i, v in zip(ids, vecs, strict=True)]
        if self._table() is None:
            try:
                self.table = self.db.create_table("t", rows)
                return
            except (ValueError, OSError):  # another process created it first
                self.table = self.db.open_table("t")
        self.table.add(rows)

    def query(self, q: np.ndarray) -> list[str]:
        return [r["id"] for r in self._table().search(q.astype(np.float32)).metric("cosine").limit(10).to_list()]

    def count(self) -> int:
        t = self._table()
        return 0 if t is None else int(t.count_rows())


ENGINES = {"cairn": Cairn, "sqlite-vec": SqliteVec, "lancedb": Lance}


def _available() -> list[str]:
    out = ["cairn"]
    for name, mods in (("sqlite-vec", ("apsw", "sqlite_vec")), ("lancedb", ("lancedb",))):
        try:
            for m in mods:
                __import__(m)
            out.append(name)
        except ImportError:
            pass
    return out


# ----------------------------------------------------------------- measurements


def _vectors(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _writer(engine: str, folder: str, k: int, go: str) -> None:
    """One concurrent writer process: 5 writes of 10 records."""
    while not os.path.exists(go):
        time.sleep(0.005)
    store = ENGINES[engine](Path(folder))
    for w in range(5):
        store.add([f"w{k}-{w}-{j}" for j in range(10)], _vectors(10, 1000 * k + w))


def _concurrency(engine: str, writers: int, tmp: Path) -> dict[str, Any]:
    folder, go = tmp / f"{engine}-concurrent", tmp / f"{engine}-go"
    ENGINES[engine](folder).add(["seed"], _vectors(1, 7))  # the table exists before the writers start
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    code = "import sys; from benchmarks.store_engines import _writer; _writer(*sys.argv[1:3], int(sys.argv[3]), sys.argv[4])"
    procs = [subprocess.Popen([sys.executable, "-c", code, engine, str(folder), str(k), str(go)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parent.parent) for k in range(writers)]
    time.sleep(1.0)
    go.touch()
    failed = [p for p in procs if p.wait(timeout=600) != 0]
    errors = sorted({(p.stderr.read() if p.stderr else "").strip().splitlines()[-1:][0] for p in failed
                     if p.stderr}) if failed else []
    got = ENGINES[engine](folder).count()
    return {"writers": writers, "expected": writers * 50 + 1, "stored": got, "lost": writers * 50 + 1 - got,
            "writers_failed": len(failed), "errors": errors[:3]}


def _engine(engine: str, n: int, writers: int, tmp: Path) -> dict[str, Any]:
    from threadpoolctl import threadpool_limits

    out: dict[str, Any] = {}
    store = ENGINES[engine](tmp / engine)
    t = time.perf_counter()
    for s in range(0, n, 10_000):
        m = min(10_000, n - s)
        store.add([f"r{s + j}" for j in range(m)], _vectors(m, s))
    out["build_s"] = round(time.perf_counter() - t, 1)
    small = []
    for w in range(10):
        t = time.perf_counter()
        store.add([f"s{w}-{j}" for j in range(10)], _vectors(10, 10_000_000 + w))
        small.append(time.perf_counter() - t)
    out["small_write_ms"] = round(statistics.median(small) * 1000, 1)
    qs = _vectors(100, 99)
    with threadpool_limits(1):
        store.query(qs[0])
        lat = []
        for q in qs:
            t = time.perf_counter()
            store.query(q)
            lat.append(time.perf_counter() - t)
    out["query_p50_ms"] = round(statistics.median(lat) * 1000, 2)
    out["concurrent_writers"] = _concurrency(engine, writers, tmp)
    return out


def run(data: Path, queries: int | None) -> dict[str, Any]:
    n = int(os.environ.get("CAIRN_BENCH_ENGINES_N", "100000"))
    writers = int(os.environ.get("CAIRN_BENCH_ENGINES_WRITERS", "8"))
    result: dict[str, Any] = {"records": n}
    with tempfile.TemporaryDirectory(prefix="store-engines-") as tmp:
        for engine in _available():
            result[engine] = _engine(engine, n, writers, Path(tmp))
            print(json.dumps({engine: result[engine]}), flush=True)
    return result
