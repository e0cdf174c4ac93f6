"""scale: the embedded store at 10k, 100k and 1M records (``CAIRN_SCALE_SIZES``, comma-separated).

Records carry real text for the keyword side (passages of ~40 words cut from the shared
collections' documents: scifact, cranfield, dstc11, cycled) and precomputed 384-d vectors (a
Gaussian mixture of 2,000 centres, as ../shared/tools/perf_store.py: embedding a million texts
is not what is measured). The queries are real questions (scifact's) with vectors drawn from the
same mixture. For each size, in one process on one BLAS thread:

* the upsert rate (batches of 10k) and the disk bytes per record;
* p50 / p99 of dense, keyword, hybrid (limit 10) and scoped (one folder of 100, dense) queries;
* the first hybrid query after a 10-record write, against the hybrid p50 before it;
* a fresh process: open + first hybrid query (seconds from process start, imports included, and
  the store's own share), and its peak RSS;
* ``cairn find`` as a whole process (imports, the model, the store, the evidence gate).

Plots: benchmarks/plots/scale-latency.png and scale-open.png (:func:`plot`).
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    """p50 and p99 (nearest rank) of latencies in ms."""
    s = sorted(samples_ms)
    pick = lambda q: round(s[min(len(s) - 1, int(q * len(s)))], 2) if s else 0.0  # noqa: E731
    return {"p50_ms": pick(0.50), "p99_ms": pick(0.99)}

SUITE = "scale"
D, NDIR, BATCH, NQ = 384, 100, 10_000, 100
TENANT = "default"
ROOT = "cairn://resources/scale"
_COLLECTIONS = ("scifact", "cranfield", "dstc11_track5")


def passages(data: Path, words: int = 40) -> list[str]:
    """Real text: every shared collection's documents cut into passages of ``words`` words."""
    out: list[str] = []
    for name in _COLLECTIONS:
        path = data / name / "corpus.jsonl"
        if not path.exists():
            continue
        for line in path.open(encoding="utf-8"):
            doc = json.loads(line)
            toks = f"{doc.get('title') or ''} {doc.get('text') or ''}".split()
            out += [" ".join(toks[i : i + words]) for i in range(0, len(toks), words) if len(toks[i : i + words]) >= 8]
    if not out:
        raise SystemExit(f"no corpus.jsonl under {data} ({', '.join(_COLLECTIONS)})")
    return out


def questions(data: Path, n: int) -> list[str]:
    path = data / "scifact" / "queries.jsonl"
    qs = [json.loads(line)["text"] for line in path.open(encoding="utf-8")] if path.exists() else []
    return (qs or ["how do statins lower cholesterol", "refund to the card", "boundary layer flow"])[:n] * (n // max(len(qs), 1) + 1)


class Mixture:
    def __init__(self, seed: int = 7) -> None:
        self.rng = np.random.default_rng(seed)
        self.centers = self.rng.standard_normal((2000, D)).astype(np.float32)

    def draw(self, n: int) -> np.ndarray:
        v = self.centers[self.rng.integers(0, len(self.centers), n)] + 0.6 * self.rng.standard_normal((n, D)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def records(texts: list[str], mix: Mixture, start: int, n: int) -> list:
    from cairn.core.models import ContextRecord, Level, record_id

    vecs = mix.draw(n)
    out = []
    for j in range(n):
        i = start + j
        folder = f"{ROOT}/d{i % NDIR}"
        text = texts[i % len(texts)]
        out.append(ContextRecord(
            id=record_id(TENANT, f"{folder}/doc{i}.md", Level.DETAIL), tenant=TENANT, uri=f"{folder}/doc{i}.md", parent_uri=folder,
            ancestors=["cairn://resources", ROOT, folder], depth=3, level=2, context_type="resource",
            title=" ".join(text.split()[:6]), abstract=text, text=text, vector=vecs[j].tolist()))
    return out


def _timed(fn, items) -> dict:
    lat = []
    for item in items:
        t0 = time.perf_counter()
        fn(item)
        lat.append((time.perf_counter() - t0) * 1000)
    return percentiles(lat)


def _disk_bytes(home: Path) -> int:
    return sum(p.stat().st_size for p in home.rglob("*") if p.is_file())


_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from threadpoolctl import threadpool_limits
from cairn.ports.vectorstores import SearchMode, VectorQuery
from cairn.ports.vectorstores.local import LocalVectorStore
t1 = time.perf_counter()
q = json.loads(sys.argv[2])
with threadpool_limits(1):
    store = LocalVectorStore(sys.argv[1], dimension=384)
    store.query(VectorQuery(tenant="default", vector=q["vector"], text=q["text"], mode=SearchMode.HYBRID, limit=10))
t2 = time.perf_counter()
print(json.dumps({"open_first_hybrid_s": round(t2 - t0, 3), "store_share_s": round(t2 - t1, 3),
                  "rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""


def measure(n: int, texts: list[str], qs: list[str], workdir: Path) -> dict:
    from cairn.ports.vectorstores import SearchMode, VectorQuery
    from cairn.ports.vectorstores.local import LocalVectorStore

    home = workdir / f"home-{n}"
    store = LocalVectorStore(home / "store", dimension=D)
    mix = Mixture()
    t0 = time.perf_counter()
    for s in range(0, n, BATCH):
        store.upsert(records(texts, mix, s, min(BATCH, n - s)))
    build_s = time.perf_counter() - t0
    qv = Mixture(seed=11).draw(NQ)
    asks = list(zip(qv.tolist(), qs[:NQ], strict=True))

    def q(mode, vec, text, filt=None):
        return store.query(VectorQuery(tenant=TENANT, vector=vec, text=text, mode=mode, limit=10, filter=filt))

    with threadpool_limits(1):
        q(SearchMode.HYBRID, *asks[0])
        out = {
            "records": n, "upserts_per_s": round(n / build_s), "disk_bytes_per_record": round(_disk_bytes(home) / n),
            "dense": _timed(lambda a: q(SearchMode.DENSE, a[0], None), asks),
            "keyword": _timed(lambda a: q(SearchMode.KEYWORD, None, a[1]), asks),
            "hybrid": _timed(lambda a: q(SearchMode.HYBRID, *a), asks),
            "scoped": _timed(lambda a: q(SearchMode.DENSE, a[0], None, {"parent_uri": f"{ROOT}/d7"}), asks),
        }
        after = []
        for k in range(3):
            store.upsert(records(texts, mix, n + 10 * k, 10))
            t = time.perf_counter()
            q(SearchMode.HYBRID, *asks[k])
            after.append(round((time.perf_counter() - t) * 1000, 1))
    out["first_hybrid_after_10_record_write_ms"] = after
    out["after_write_ratio_to_hybrid_p50"] = round(max(after) / out["hybrid"]["p50_ms"], 2)
    store.close()
    child = subprocess.run([sys.executable, "-c", _CHILD, str(home / "store"), json.dumps({"vector": asks[1][0], "text": asks[1][1]})],
                           capture_output=True, text=True, check=True)
    out["fresh_process"] = json.loads(child.stdout.strip().splitlines()[-1])
    out["cairn_find_process_s"] = _cairn_find(home, qs[2])
    shutil.rmtree(home, ignore_errors=True)
    return out


def _cairn_find(home: Path, question: str) -> float:
    """``cairn find`` as a user runs it: a fresh process, the model, the store, the answer."""
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cairn.cli.main", "--home", str(home), "find", question], capture_output=True,
                   text=True, check=True, env=env, timeout=600)
    return round(time.perf_counter() - t0, 2)


def run(data: Path, limit_queries: int | None = None) -> dict:
    sizes = [int(s) for s in re.split(r"[,\s]+", os.environ.get("CAIRN_SCALE_SIZES", "10000,100000,1000000")) if s]
    texts, qs = passages(data), questions(data, NQ)
    result: dict = {"passages": len(texts), "load_before": round(os.getloadavg()[0], 1), "sizes": []}
    with tempfile.TemporaryDirectory(prefix="cairn-scale-") as tmp:
        for n in sizes:
            result["sizes"].append(measure(n, texts, qs, Path(tmp)))
            print(json.dumps(result["sizes"][-1]), flush=True)
    result["load_after"] = round(os.getloadavg()[0], 1)
    result["peak_rss_mb_bench"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


def plot(result: dict, out_dir: Path) -> list[Path]:
    from .plots import curves

    sizes = result["sizes"]
    note = f"load average {result.get('load_before')} -> {result.get('load_after')} (2 cores, shared)"
    lat = {f"{m} p50": [(s["records"], s[m]["p50_ms"]) for s in sizes] for m in ("dense", "keyword", "hybrid", "scoped")}
    lat["hybrid after a 10-record write"] = [(s["records"], max(s["first_hybrid_after_10_record_write_ms"])) for s in sizes]
    opened = {
        "open + first hybrid (process)": [(s["records"], s["fresh_process"]["open_first_hybrid_s"]) for s in sizes],
        "store's share": [(s["records"], s["fresh_process"]["store_share_s"]) for s in sizes],
        "cairn find (process)": [(s["records"], s["cairn_find_process_s"]) for s in sizes],
    }
    return [
        curves(lat, out_dir / "scale-latency.png", title="Embedded store: query latency by size", xlabel="records",
               ylabel="ms", logx=True, logy=True, note=note),
        curves(opened, out_dir / "scale-open.png", title="Fresh process: open and first answer", xlabel="records",
               ylabel="seconds", logx=True, note=note),
    ]
