"""The ingestor: builds the tree, embeds only what changed, upserts in batches."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..embeddings import Embedder
from ..errors import IngestError
from ..vectorstores import VectorStore
from .sources import Document, Rejected, read_folder
from .tree import PendingRecord, build_tree

Progress = Callable[[str, int, int], None]  # (stage, done, total)
UPSERT_BATCH = 256


@dataclass
class IngestReport:
    root_uri: str
    documents: int = 0
    records: int = 0
    embedded: int = 0
    unchanged: int = 0
    rejected: list[Rejected] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def docs_per_second(self) -> float:
        return self.documents / self.seconds if self.seconds else 0.0


def _quiet(stage: str, done: int, total: int) -> None:
    return None


class Ingestor:
    def __init__(self, store: VectorStore, embedder: Embedder, tenant: str, batch_size: int = UPSERT_BATCH) -> None:
        self.store = store
        self.embedder = embedder
        self.tenant = tenant
        self.batch_size = batch_size

    def ingest_path(self, path: Path, root_uri: str, progress: Progress = _quiet) -> IngestReport:
        if not path.exists():
            raise IngestError(f"path {str(path)!r} does not exist")
        docs: list[Document] = []
        rejected: list[Rejected] = []
        for item in read_folder(path):
            (docs if isinstance(item, Document) else rejected).append(item)  # type: ignore[arg-type]
        report = self.ingest(docs, root_uri, progress)
        report.rejected = rejected + report.rejected
        return report

    def ingest(self, documents: Sequence[Document], root_uri: str, progress: Progress = _quiet) -> IngestReport:
        """Place ``documents`` under ``root_uri``; re-ingesting unchanged content writes nothing."""
        started = time.perf_counter()
        pending = build_tree(self.tenant, root_uri, documents)
        changed = self._changed(pending)
        report = IngestReport(root_uri, documents=len(documents), records=len(pending))
        report.unchanged = len(pending) - len(changed)
        for start in range(0, len(changed), self.batch_size):
            batch = changed[start : start + self.batch_size]
            vectors = self.embedder.embed([p.embed_text for p in batch])
            self.store.upsert([p.record.model_copy(update={"vector": v.tolist()}) for p, v in zip(batch, vectors)])
            report.embedded += len(batch)
            progress("embed", report.embedded, len(changed))
        report.seconds = time.perf_counter() - started
        return report

    def _changed(self, pending: Iterable[PendingRecord]) -> list[PendingRecord]:
        pending = list(pending)
        existing: dict[str, str] = {}
        ids = [p.record.id for p in pending]
        for start in range(0, len(ids), 1000):
            for rec in self.store.fetch(self.tenant, ids[start : start + 1000]):
                existing[rec.id] = rec.content_hash
        return [p for p in pending if existing.get(p.record.id) != p.record.content_hash]
