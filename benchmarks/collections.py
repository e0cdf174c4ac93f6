"""The shared collections, ingested once as a user would and cached on disk.

Each collection is ingested through :class:`cairn.engine.ingest.Ingestor` into a LocalVectorStore
under ``benchmarks/results/cache/store-<name>-<hash>/``; the hash covers the corpus file and
:data:`LAYOUT_VERSION`, so a change to how documents are built re-ingests. Embeddings go
through :class:`CachedEmbedder`, so re-ingesting after a layout change costs little.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairn.engine.ingest import Document, Ingestor
from cairn.ports.embeddings.local import LocalEmbedder
from cairn.ports.vectorstores.local import LocalVectorStore

from .beir import BeirSet, load
from .cache import CACHE_DIR, CachedEmbedder
from .presets import DSTC11_TITLE_RULES, MTRAG_TITLE_RULES

LAYOUT_VERSION = "2"  # 2: chunks fit the embedder's token window (issue 38)
TENANT = "bench"


def _flat(meta: dict) -> dict:
    return {k: v for k, v in meta.items() if isinstance(v, str) and k in ("domain", "entity_name", "doc_type")}


def dstc11_documents(ds: BeirSet) -> list[Document]:
    """The natural tree (domain / entity / faq|review / review / sentence), metadata kept."""
    return [
        Document(path=tuple(d["metadata"]["path"]), text=d["text"], title=d.get("title") or "", metadata=_flat(d["metadata"]))
        for d in ds.corpus
    ]


def tree_documents(ds: BeirSet) -> list[Document]:
    """Folders from each document's ``metadata.path`` (a converted conversational set), its string
    metadata kept (folder titles can read it)."""
    return [
        Document(path=tuple(d["metadata"]["path"]), text=d["text"] or d.get("title") or "", title=d.get("title") or "",
                 metadata={k: v for k, v in d["metadata"].items() if isinstance(v, str)})
        for d in ds.corpus if (d["text"] or d.get("title") or "").strip()
    ]


def flat_documents(ds: BeirSet) -> list[Document]:
    """One file per document in one folder; a document with no text keeps its title."""
    return [Document(path=(d["_id"],), text=d["text"] or d.get("title") or "", title=d.get("title") or "") for d in ds.corpus
            if (d["text"] or d.get("title") or "").strip()]


@dataclass
class Collection:
    name: str  # the folder under --data
    root: str
    documents: Any
    ingest: dict = field(default_factory=dict)

    def corpus_id(self, uri: str) -> str:
        """cairn://resources/<root>/a/b#2 -> a/b (the BEIR corpus id)."""
        return uri[len(self.root) + 1 :].split("#", 1)[0]


COLLECTIONS = {
    "scifact": Collection("scifact", "cairn://resources/scifact", flat_documents),
    "cranfield": Collection("cranfield", "cairn://resources/cranfield", flat_documents),
    "dstc11": Collection("dstc11_track5", "cairn://resources/dstc11", dstc11_documents, {"title_rules": DSTC11_TITLE_RULES}),
    "mtrag": Collection("mtrag", "cairn://resources/mtrag", tree_documents, {"title_rules": MTRAG_TITLE_RULES}),
    "trec_cast": Collection("trec_cast", "cairn://resources/trec_cast", tree_documents),
}


def cached_store(key: str, data: Path, ds: BeirSet | None = None) -> tuple[LocalVectorStore, LocalEmbedder, BeirSet]:
    """The collection's ingested store (built on first use), the embedder and the data set."""
    col = COLLECTIONS[key]
    ds = ds or load(data, col.name)
    corpus = data / col.name / "corpus.jsonl"
    digest = hashlib.sha256(corpus.read_bytes() + LAYOUT_VERSION.encode()).hexdigest()[:12]
    folder = CACHE_DIR / f"store-{key}-{digest}"
    embedder = LocalEmbedder()
    if not (folder / "READY").exists():
        cached = CachedEmbedder(embedder)
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{key}-", dir=CACHE_DIR))
        store = LocalVectorStore(tmp, dimension=embedder.dimension)
        t0 = time.perf_counter()
        report = Ingestor(store, cached, TENANT, **col.ingest).ingest(col.documents(ds), col.root)
        cached.save()
        print(f"  {key}: ingested {report.documents} documents -> {report.records} records in {time.perf_counter() - t0:.0f} s", flush=True)
        store.close()
        (tmp / "READY").write_text(str(report.records))
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
    return LocalVectorStore(folder, dimension=embedder.dimension), embedder, ds


if __name__ == "__main__":
    import sys

    for name in sys.argv[1:] or list(COLLECTIONS):
        cached_store(name, Path("../shared/data"))
