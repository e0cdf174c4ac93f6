"""Runs the stages in-process in the workflow's order: the embedded default and the tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import stages
from .config import Settings, load_settings
from .embeddings import Embedder
from .ingest import IngestReport, Ingestor
from .ingest.service import Progress, _quiet
from .models import FindResult
from .requests import FindRequest, parse_request
from .vectorstores import VectorStore


class Cairn:
    """One tenant's view of cairn: ingest content, then find it."""

    def __init__(self, store: VectorStore, embedder: Embedder, tenant: str) -> None:
        self.store = store
        self.embedder = embedder
        self.tenant = tenant

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> "Cairn":
        from .factory import build_embedder, build_store

        settings = settings or load_settings()
        embedder = build_embedder(settings)
        return cls(build_store(settings, embedder.dimension), embedder, settings.tenant)

    def find(self, query: str | FindRequest, **options: Any) -> FindResult:
        """One query, no session, no planning: quick mode unless ``mode='thinking'``."""
        request = query if isinstance(query, FindRequest) else parse_request(FindRequest, {"query": query, **options})
        plan = stages.plan(request)
        outputs = [
            stages.retrieve(tq, request, tenant=self.tenant, store=self.store, embedder=self.embedder)
            for tq in plan.queries
        ]
        return stages.rerank(outputs, request)

    def ingest(self, path: str | Path, root_uri: str, progress: Progress = _quiet) -> IngestReport:
        return Ingestor(self.store, self.embedder, self.tenant).ingest_path(Path(path), root_uri, progress)
