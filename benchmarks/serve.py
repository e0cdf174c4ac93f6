"""serve: POST /v1/find through `cairn serve` (uvicorn, loopback) against the same find() in process.

The scifact corpus is ingested once (documents embedded through the benchmark's embedding cache,
so a rerun skips the model for texts it saw); then each scifact test query is asked in process
and through the server with cairn.client, with 1 and with 8 concurrent clients; then one client
asks them again, paced, while another ingests a bulk of new documents through the same server
process (a search must not wait for the ingest). Each phase starts with an empty query cache.
Also: seconds from `cairn serve` start (a fresh process: imports, model, store) to its first answer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cairn import Cairn
from cairn.api.server import running
from cairn.app.services import Services
from cairn.client import CairnClient
from cairn.core.config import Settings
from cairn.engine.ingest import Document
from cairn.ports.embeddings.local import LocalEmbedder

from .beir import load
from .cache import CachedEmbedder
from .metrics import percentiles

SUITE = "serve"
ROOT = "cairn://resources/scifact"
LIMIT = 10
BULK_DOCS = 300  # the ingest the searches run beside: scifact abstracts, rewritten, under another root
PACE_S = 0.1  # the searching client's pause between questions during the ingest


def run(data: Path, limit_queries: int | None = None) -> dict:
    ds = load(data, "scifact")
    queries = [q["text"] for q in list(ds.queries.values())[: limit_queries or 300]]
    docs = [Document(path=(d["_id"],), text=d["text"] or d["title"], title=d["title"]) for d in ds.corpus]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        model = LocalEmbedder()
        vectors = CachedEmbedder(model)
        vectors.name = model.name  # the model's own vectors: the index answers the real model's queries below
        Cairn(Services(Settings(home=home), embedder=vectors, reranker=None), "default").ingestor().ingest(docs, ROOT)
        vectors.save()

        def fresh() -> Services:
            """Services over the home with an embedder of its own: its query cache starts empty, so
            no phase answers from the vectors of the questions an earlier phase asked."""
            return Services(Settings(home=home), embedder=LocalEmbedder(), reranker=None)

        cairn = Cairn(fresh(), "default")
        cairn.find("warm up")
        in_process = _timed(lambda q: cairn.find(q, limit=LIMIT), queries, 1)
        with running(fresh()) as url, CairnClient(url) as client:
            client.find("warm up")
            one = _timed(lambda q: client.find(q, limit=LIMIT), queries, 1)
        with running(fresh()) as url:
            clients = [CairnClient(url) for _ in range(8)]
            try:
                clients[0].find("warm up")
                eight = _timed(lambda q, n=iter(range(10**9)): clients[next(n) % 8].find(q, limit=LIMIT), queries, 8)
            finally:
                for c in clients:
                    c.close()
        # new text (the sentences in reverse order), so the server embeds every page of the bulk
        bulk = [{"path": f"{d.path[0]}.txt", "text": " ".join(reversed(d.text.split(". "))), "title": d.title}
                for d in docs[-BULK_DOCS:]]
        with running(fresh()) as url:
            during = _during_ingest(url, queries, bulk)
        first = _first_answer(home)
    p50 = in_process["p50_ms"]
    return {
        "queries": len(queries),
        "documents": len(docs),
        "in_process_find": in_process,
        "serve_1_client": {**one, "p50_ratio_to_in_process": round(one["p50_ms"] / p50, 2)},
        "serve_8_clients": {**eight, "p50_ratio_to_in_process": round(eight["p50_ms"] / p50, 2)},
        "serve_1_client_during_bulk_ingest": during,
        "serve_start_to_first_answer_s": first,
        "machine": f"{os.cpu_count()} cores",
    }


def _timed(ask, queries: list[str], workers: int) -> dict:
    latencies: list[float] = []

    def one(q: str) -> None:
        t0 = time.perf_counter()
        ask(q)
        latencies.append((time.perf_counter() - t0) * 1000)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, queries))
    wall = time.perf_counter() - started
    pct = percentiles(latencies)
    return {**pct, "queries_per_s": round(len(queries) / wall, 1)}


def _during_ingest(url: str, queries: list[str], bulk: list[dict]) -> dict:
    """One client's /v1/find latencies while another client's PUT /v1/documents of ``bulk`` runs
    in the same server process. The client asks every ``PACE_S`` (an agent's turns), each
    question once, until the ingest ends."""
    done = threading.Event()
    ingest: dict = {}

    def put() -> None:
        t0 = time.perf_counter()
        with CairnClient(url, retries=0, timeout_s=3600) as writer:
            ingest["documents"] = writer.put_documents("cairn://resources/scifact-copy", bulk).documents
        ingest["seconds"] = round(time.perf_counter() - t0, 1)
        done.set()

    thread = threading.Thread(target=put)
    latencies: list[float] = []
    with CairnClient(url, retries=0) as client:
        client.find("warm up")
        thread.start()
        for q in queries:
            if done.wait(PACE_S):
                break
            t0 = time.perf_counter()
            client.find(q, limit=LIMIT)
            latencies.append((time.perf_counter() - t0) * 1000)
    thread.join()
    return {**percentiles(latencies), "max_ms": round(max(latencies, default=0.0), 1), "searches": len(latencies),
            "ingest_documents": ingest["documents"], "ingest_s": ingest["seconds"]}


def _first_answer(home: Path) -> float:
    """`cairn serve` in a fresh process: seconds from the command to its first /v1/find answer."""
    port = "18765"
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "cairn.cli.main", "--home", str(home), "serve", "--port", port],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with CairnClient(f"http://127.0.0.1:{port}", retries=0, timeout_s=5) as client:
            while True:
                try:
                    client.find("how do statins work?")
                    return round(time.perf_counter() - t0, 2)
                except Exception:
                    if proc.poll() is not None or time.perf_counter() - t0 > 120:
                        raise
                    time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
