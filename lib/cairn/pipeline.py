"""Runs the stages in-process in the workflow's order: the embedded default and the tests.

``find()``: one query, no session, no planning, quick mode by default.
``search()``: a query and optionally a session; it plans first, thinking mode by default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import stages
from .config import Settings, load_settings
from .embeddings import Embedder
from .ingest import ContentStore, IngestReport, Ingestor
from .ingest.service import Progress, _quiet
from .models import FindResult
from .observability.stats import RetrievalStats
from .planning.base import Planner
from .requests import FindRequest, parse_request
from .rerank.base import Reranker
from .retrieval.thinking import ThinkingConfig
from .sessions.base import SessionStore
from .vectorstores import VectorStore


class Cairn:
    """One tenant's view of cairn: ingest content, then find or search it."""

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        tenant: str,
        *,
        thinking: ThinkingConfig | None = None,
        reranker: Reranker | None = None,
        planner: Planner | None = None,
        sessions: SessionStore | None = None,
        content: ContentStore | None = None,
        hotness_weight: float = 0.0,
        stats: RetrievalStats | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.tenant = tenant
        self.thinking = thinking or ThinkingConfig()
        self.reranker = reranker
        self.planner = planner
        self.sessions = sessions
        self.content = content
        self.hotness_weight = hotness_weight
        self.stats = stats or RetrievalStats()

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> "Cairn":
        from . import factory

        settings = settings or load_settings()
        embedder = factory.build_embedder(settings)
        llm = factory.build_llm_client(settings)
        store = factory.build_store(settings, embedder.dimension)
        return cls(
            store,
            embedder,
            settings.tenant,
            thinking=ThinkingConfig(alpha=settings.alpha, threshold=settings.score_threshold),
            reranker=factory.build_reranker_from(settings, embedder),
            planner=factory.build_planner(settings, llm, store, embedder),
            sessions=factory.build_session_store(settings),
            content=factory.build_content_store(settings),
            hotness_weight=settings.hotness_weight,
        )

    def find(self, query: str | FindRequest, **options: Any) -> FindResult:
        """One query, no session, no planning: quick mode unless ``mode='thinking'``."""
        request = self._request(query, options, default_mode="quick")
        return self._run(request, stages.plan(request), rerank=options.get("rerank", False))

    def search(self, query: str | FindRequest, session_id: str | None = None, **options: Any) -> FindResult:
        """Plan with the session (if any), then retrieve in thinking mode and rerank."""
        request = self._request(query, options, default_mode="thinking")
        view = None
        if session_id is not None:
            if self.sessions is None:
                from .errors import ConfigError

                raise ConfigError("search() with a session needs a session store")
            view = self.sessions.get(self.tenant, session_id)
        plan = stages.plan(request, self.planner, view)
        if not plan.queries:  # "no retrieval needed": return at once
            return FindResult(query_plan=plan)
        result = self._run(request, plan, rerank=options.get("rerank", True))
        result.query_plan = plan
        if session_id is not None and self.sessions is not None:
            self.sessions.set_prefetched(self.tenant, session_id, result.to_dict())
        return result

    def _request(self, query: str | FindRequest, options: dict[str, Any], default_mode: str) -> FindRequest:
        if isinstance(query, FindRequest):
            return query
        fields = {k: v for k, v in options.items() if k != "rerank"}
        fields.setdefault("mode", default_mode)
        return parse_request(FindRequest, {"query": query, **fields})

    def _run(self, request: FindRequest, plan: Any, rerank: bool) -> FindResult:
        reranker = self.reranker if rerank else None
        outputs = [
            stages.retrieve(
                tq,
                request,
                tenant=self.tenant,
                store=self.store,
                embedder=self.embedder,
                thinking=self.thinking,
                rerank_follows=reranker is not None,
            )
            for tq in plan.queries
        ]
        result = stages.rerank(outputs, request, reranker=reranker, hotness_weight=self.hotness_weight)
        for qr in result.query_results:
            self.stats.record_result(qr)
        return result

    def ingestor(self, **options: Any) -> Ingestor:
        """An ingestor writing to this tenant's store and content store."""
        return Ingestor(self.store, self.embedder, self.tenant, content=self.content, **options)

    def ingest(self, path: str | Path, root_uri: str, progress: Progress = _quiet, **options: Any) -> IngestReport:
        """Ingest a folder (or a BEIR corpus with ``format="beir"``) under ``root_uri``; re-ingesting syncs."""
        fmt = options.pop("format", "folder")
        return self.ingestor(**options).ingest_path(Path(path), root_uri, progress, format=fmt)

    def read(self, uri: str, level: int = 0) -> Any:
        """Progressive reading: L0 abstract, L1 overview, L2 full body."""
        from .ingest.reader import read

        return read(self.store, self.content, self.tenant, uri, level)
