"""put_bounds: what one small `PUT /v1/documents` costs through `cairn serve` — requests past the
path bounds (refused before any work) and the largest ones the bounds still let through.

Each case is one request on a fresh home (the local embedder, the embedded store); the figures are
its seconds, the growth of this process's peak RSS while it ran (the server runs in a thread of
this process), its status and the records it wrote.
"""

from __future__ import annotations

import json
import resource
import tempfile
import time
from pathlib import Path

import httpx

from cairn.api import ApiKeys
from cairn.api.server import running
from cairn.app.services import Services
from cairn.core.config import load_settings
from cairn.ports.embeddings.local import LocalEmbedder

SUITE = "put_bounds"
KEY = "bench-key-0123456789abcdef"
ROOT = "cairn://resources/bounds"


def _chain(first: str, depth: int) -> str:
    return "/".join([first, *["a"] * (depth - 2), "x.md"])


CASES = {
    # refused: the 1,000-segment path of issue 20 (12-16 s, ~700 MB and a 502 before the bounds)
    "deep_1000_segments": [{"path": "/".join(["a"] * 999 + ["x.md"]), "text": "hello"}],
    # refused: 100 documents 30 deep, within the depth but 2,900 folders (100 x 31 deep took 173 s
    # and wrote 6,102 records before the bounds, load ~14)
    "wide_100x30": [{"path": _chain(f"f{i}", 30), "text": "hello"} for i in range(100)],
    # allowed: the deepest path (30 segments below cairn://resources/bounds)
    "deepest_allowed": [{"path": _chain("f", 30), "text": "hello"}],
    # allowed: as many folders as one request may make (1,000: 250 documents, 4 folders each)
    "most_folders_allowed": [{"path": f"f{i}/a/b/c/x.md", "text": "hello"} for i in range(250)],
}


def _one(embedder: LocalEmbedder, documents: list[dict]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        services = Services(load_settings(env={"CAIRN_HOME": tmp}), embedder=embedder, reranker=None)
        with running(services, ApiKeys({KEY: "acme"})) as url:
            body = {"root_uri": ROOT, "documents": documents}
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            started = time.perf_counter()
            answer = httpx.put(f"{url}/v1/documents", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=3600)
            seconds = time.perf_counter() - started
            grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        out = answer.json()
        return {"request_bytes": len(json.dumps(body)), "status": answer.status_code, "seconds": round(seconds, 2),
                "peak_rss_growth_mb": round(grown / 1024, 1), "records_written": out.get("written", 0),
                "message": out.get("message", "")[:160]}


def run(data: Path, limit_queries: int | None = None) -> dict:
    embedder = LocalEmbedder()
    embedder.embed(["warm up"])
    return {name: _one(embedder, docs) for name, docs in CASES.items()}
