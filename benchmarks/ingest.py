"""Ingestion throughput (records/s, docs/s) on scifact and dstc11, and the time to re-ingest after
one document changes (and after nothing changed), with the embedded default (MiniLM int8 ONNX,
local store, local content store).

    python -m benchmarks.run ingest --data ../shared/data
    python -m benchmarks.run ingest --queries 50     # smoke run: the first 50 x 20 documents of each
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from pathlib import Path

from cairn.engine.ingest import (
    Document,
    Ingestor,
    LocalContentStore,
    read_beir,
    split_items,
)
from cairn.ports.embeddings.local import LocalEmbedder
from cairn.ports.vectorstores.local import LocalVectorStore

from .beir import load
from .presets import DSTC11_TITLE_RULES

SUITE = "ingest"


class CountingEmbedder(LocalEmbedder):
    """The local embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def _embed(self, texts):  # type: ignore[no-untyped-def]
        self.count += len(texts)
        return super()._embed(texts)


def _scifact_docs(data: Path) -> list[Document]:
    ds = load(data, "scifact")
    return [Document(path=(d["_id"],), text=d["text"] or d["title"], title=d["title"]) for d in ds.corpus]


def _dstc11_docs(data: Path) -> list[Document]:
    root = data / "dstc11_track5"
    if not root.is_dir():
        raise SystemExit(f"data set 'dstc11_track5' not found under {data}; pass --data PATH")
    docs, rejected = split_items(read_beir(root))
    assert not rejected, rejected[:3]
    return docs


def _one(name: str, docs: list[Document], root: str, rules: tuple = ()) -> dict:
    embedder = CountingEmbedder()
    embedder.embed(["warm up"])
    embedder.count = 0
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalVectorStore(Path(tmp) / "store", dimension=embedder.dimension)
        ing = Ingestor(store, embedder, "bench", content=LocalContentStore(Path(tmp) / "content"), title_rules=rules)
        t0, c0 = time.perf_counter(), time.process_time()
        first = ing.ingest(docs, root, progress=lambda s, d, t: print(f"\r  {name}: {d}/{t} records", end="", flush=True))
        full_s = time.perf_counter() - t0
        cpu_s = time.process_time() - c0
        print()
        t0 = time.perf_counter()
        same = ing.ingest(docs, root)
        same_s = time.perf_counter() - t0
        changed = list(docs)
        k = len(changed) // 2
        changed[k] = dataclasses.replace(changed[k], text=changed[k].text + " (Edited.)")
        t0 = time.perf_counter()
        before = embedder.count
        edit = ing.ingest(changed, root)
        edit_s = time.perf_counter() - t0
    return {
        "documents": first.documents,
        "records": first.records,
        "ingest_seconds": round(full_s, 1),
        "records_per_s": round(first.records / full_s, 1),
        "docs_per_s": round(first.documents / full_s, 1),
        "cpu_seconds": round(cpu_s, 1),  # all threads; wall time depends on what else runs
        "embedded_texts": first.embedded,
        "reingest_unchanged_seconds": round(same_s, 2),
        "reingest_unchanged_embedded": same.embedded,
        "reingest_one_changed_seconds": round(edit_s, 2),
        "reingest_one_changed_embedded": embedder.count - before,
        "reingest_one_changed_written": edit.written,
    }


def run(data: Path, queries: int | None = None) -> dict:
    limit = None if queries is None else queries * 20
    out: dict = {"suite": SUITE, "load_average_at_start": round(os.getloadavg()[0], 1)}
    out["scifact"] = _one("scifact", _scifact_docs(data)[:limit], "cairn://resources/scifact")
    out["dstc11"] = _one("dstc11", _dstc11_docs(data)[:limit], "cairn://resources/dstc11", DSTC11_TITLE_RULES)
    return out
