"""One tenant's engine: the stages in the workflow's order, in process.

:class:`Pipeline` plans, retrieves and reranks in the workflow's order, ingests, reads,
remembers and commits. It takes typed requests and decides nothing about who may call: the
application layer (:mod:`cairn.app`) calls it after authorizing. It runs on :class:`Parts`, the
services the composition root (:class:`cairn.app.services.Services`) provides; the engine never
builds a service and never imports the layers above it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cairn.core.errors import Forbidden
from cairn.core.models import ContextType, FindResult
from cairn.core.requests import FindRequest
from cairn.engine import stages
from cairn.engine.ingest import Ingestor, IngestReport
from cairn.engine.ingest.service import Progress, _quiet
from cairn.engine.retrieval.thinking import ThinkingConfig

if TYPE_CHECKING:
    from cairn.core.config import Settings
    from cairn.core.text.languages import LanguagePolicy
    from cairn.engine.ingest.reader import ReadResult
    from cairn.engine.memory import CommitResult, MemoryService, RememberResult, UseRecorder
    from cairn.engine.planning.base import Planner
    from cairn.ports.content import ContentStore
    from cairn.ports.embeddings import Embedder
    from cairn.ports.llm.base import LLMClient
    from cairn.ports.observability.stats import RetrievalStats
    from cairn.ports.rerank.base import Reranker
    from cairn.ports.sessions.base import SessionStore, SessionView
    from cairn.ports.usecounts import UseCounts
    from cairn.ports.vectorstores import VectorStore


class Parts(Protocol):
    """What the engine runs on, each built on first use by the composition root
    (:class:`cairn.app.services.Services` provides them all)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def embedder(self) -> Embedder: ...
    @property
    def sessions(self) -> SessionStore | None: ...
    @property
    def content(self) -> ContentStore | None: ...
    @property
    def llm(self) -> LLMClient | None: ...
    @property
    def reranker(self) -> Reranker | None: ...
    @property
    def recorder(self) -> UseRecorder | None: ...
    @property
    def use_counts(self) -> UseCounts | None: ...
    @property
    def languages(self) -> LanguagePolicy: ...

    def checked_store(self, tenant: str) -> VectorStore: ...
    def embedder_for(self, tenant: str) -> Embedder: ...
    def planner(self, tenant: str) -> Planner | None: ...
    def set_planner(self, tenant: str, planner: Planner | None) -> None: ...
    def set_reranker(self, reranker: Reranker | None) -> None: ...
    def tenant_stats(self, tenant: str) -> RetrievalStats: ...
    def session_store(self, what: str = "this operation") -> SessionStore: ...
    def memory(self, tenant: str) -> MemoryService: ...


class Pipeline:
    """One tenant's engine: the stages in the workflow's order over the composition root's parts."""

    def __init__(self, services: Parts, tenant: str | None = None, *, thinking: ThinkingConfig | None = None,
                 stats: RetrievalStats | None = None) -> None:
        self.services = services
        self.tenant = tenant or services.settings.tenant
        cfg = services.settings
        self.thinking = thinking or ThinkingConfig(alpha=cfg.alpha, threshold=cfg.score_threshold)
        self.hotness_weight = cfg.hotness_weight
        self.stats = stats or services.tenant_stats(self.tenant)

    # the services, read through the composition root (built on first use)
    # the tenant's index, checked on first use (and after a reindex replaced it) to hold the embedder's vectors
    @property
    def store(self) -> VectorStore:
        return self.services.checked_store(self.tenant)

    @property
    def embedder(self) -> Embedder:
        """The embedder of this tenant's index (a reindex that switched it while this process ran
        is followed: :meth:`cairn.app.services.Services.check_index`)."""
        return self.services.embedder_for(self.tenant)

    @property
    def sessions(self) -> SessionStore | None:
        return self.services.sessions

    @property
    def content(self) -> ContentStore | None:
        return self.services.content

    @property
    def llm(self) -> LLMClient | None:
        return self.services.llm

    @property
    def reranker(self) -> Reranker | None:
        return self.services.reranker

    @reranker.setter
    def reranker(self, value: Reranker | None) -> None:
        self.services.set_reranker(value)

    @property
    def planner(self) -> Planner | None:
        return self.services.planner(self.tenant)

    @planner.setter
    def planner(self, value: Planner | None) -> None:
        self.services.set_planner(self.tenant, value)

    # ------------------------------------------------------------------ retrieval

    def find(self, request: FindRequest, *, rerank: bool = False) -> FindResult:
        """One query, no session, no planning (the request's mode; quick by default)."""
        return self._used(self._run(request, stages.plan(request), rerank=rerank))

    def search(self, request: FindRequest, session_id: str | None = None, *, rerank: bool = True) -> FindResult:
        """Plan with the session (if any), then retrieve and rerank.

        With a session, the plan reads its summary and recent messages, and the result becomes
        the session's prefetched context."""
        view = self.session_view(session_id)
        request = self.for_session_user(request, view)
        plan = stages.plan(request, self.planner, view)
        if not plan.queries:  # "no retrieval needed": return at once
            return FindResult(query_plan=plan)
        result = self._run(request, plan, rerank=rerank, session=view)
        result.query_plan = plan
        if session_id is not None:
            self.session_store().set_prefetched(self.tenant, session_id, result.to_dict())
        return self._used(result)

    @staticmethod
    def for_session_user(request: FindRequest, view: Any) -> FindRequest:
        """A session belongs to its user: the search reads that user's memories, and no other's."""
        owner = view.session.user if view is not None else None
        if owner is None:
            return request
        if request.user not in (None, owner):
            raise Forbidden(f"session {view.session.id!r} belongs to user {owner!r}; it cannot search user {request.user!r}'s memories")
        return request if request.user == owner else request.model_copy(update={"user": owner})

    def _used(self, result: FindResult) -> FindResult:
        """Count what was returned (hotness); the store is written later, off the request path."""
        recorder = self.services.recorder
        if recorder is not None and result.total:
            recorder.record_result(self.tenant, result)
        return result

    def with_defaults(self, request: FindRequest, *, search: bool) -> FindRequest:
        """``request`` with what it leaves to the settings filled in: hybrid (``find_hybrid`` /
        ``search_hybrid``, each chosen by measurement; ``"auto"`` leaves it to each typed query)."""
        if request.hybrid is not None:
            return request
        cfg = self.services.settings
        if request.context_type is ContextType.MEMORY:
            return request.model_copy(update={"hybrid": cfg.memory_hybrid})
        chosen = cfg.search_hybrid if search else cfg.find_hybrid
        if chosen == "auto":
            return request  # hybrid=None: decided per typed query (stages.retrieve)
        return request.model_copy(update={"hybrid": chosen})

    def session_view(self, session_id: str | None) -> SessionView | None:
        """The session a search plans with (None without one); a clear error without a store."""
        if session_id is None:
            return None
        return self.session_store("search() with a session").get(self.tenant, session_id)

    def session_store(self, what: str = "this operation") -> SessionStore:
        """The session store, or a clear error when these services were built without one."""
        return self.services.session_store(what)

    def _run(self, request: FindRequest, plan: Any, rerank: bool, session: SessionView | None = None) -> FindResult:
        request = stages.for_plan(request, plan, session)  # mode "auto" resolved for the whole plan
        reranker = self.reranker if rerank else None
        thinking = self.thinking
        language = self.services.languages.for_tenant(self.tenant)
        if request.score_threshold is not None:
            thinking = replace(thinking, threshold=request.score_threshold)
        texts = list(dict.fromkeys(tq.query for tq in plan.queries))
        # one model call (one round trip) for the plan's queries, each search handed its vector
        vectors = dict(zip(texts, self.embedder.embed(texts).tolist(), strict=True)) if len(texts) > 1 else {}
        outputs: list[stages.RetrieveOutput] = []
        for tq in plan.queries:
            outputs.append(stages.retrieve(
                tq, request, tenant=self.tenant, store=self.store, embedder=self.embedder, thinking=thinking,
                rerank_follows=reranker is not None, language=language, searched=outputs, vector=vectors.get(tq.query),
            ))
        result = stages.rerank(
            outputs, request, reranker=reranker, hotness_weight=self.hotness_weight, threshold=thinking.threshold,
            language=language, counts=self.services.use_counts if self.hotness_weight > 0 else None,
        )
        for qr in result.query_results:
            self.stats.record_result(qr)
        return result

    # ------------------------------------------------------------------ content

    def ingestor(self, **options: Any) -> Ingestor:
        """An ingestor writing to this tenant's store and content store; folder summaries are
        written by the LLM when one is configured (at most ``max_calls`` per ingestor), else
        extractively."""
        if "summarizer" not in options and self.llm is not None:
            from cairn.engine.ingest.summarizer import LLMSummarizer

            options["summarizer"] = LLMSummarizer(self.llm)
        return Ingestor(self.store, self.embedder, self.tenant, content=self.content, **options)

    def ingest(self, path: str | Path, root_uri: str, progress: Progress = _quiet, **options: Any) -> IngestReport:
        """Ingest a folder (or a BEIR corpus with ``format="beir"``) under ``root_uri``; re-ingesting syncs."""
        fmt = options.pop("format", "folder")
        return self.ingestor(**options).ingest_path(Path(path), root_uri, progress, format=fmt)

    def read(self, uri: str, level: int = 0) -> ReadResult:
        """Progressive reading: L0 abstract, L1 overview, L2 full body."""
        from cairn.engine.ingest.reader import read

        found = read(self.store, self.content, self.tenant, uri, level)
        if level == 2 and self.services.recorder is not None:
            self.services.recorder.record_read(self.tenant, found.uri, 2)
        return found

    # ------------------------------------------------------------------ memory

    def after_append(self, session_id: str) -> CommitResult | None:
        """Keep a session bounded after an append: when more messages are held than the store keeps
        before compressing, the new ones become memories first (for a session with a user), then
        the oldest are folded into the summary. Returns the commit, if one ran."""
        sessions = self.session_store("appending to a session")
        view = sessions.get(self.tenant, session_id, recent=0)
        committed = None
        if view.unsummarized_count > sessions.max_messages and view.session.user and view.uncommitted_count:
            committed = self.commit(session_id)
        sessions.compress_if_needed(self.tenant, session_id)
        return committed

    def remember(self, user: str, text: str, category: str, **options: Any) -> RememberResult:
        """Add or update one memory of ``user`` under ``cairn://user/{user}/memories/<category>/...``
        without touching the others (options: key, title, metadata, source)."""
        return self.services.memory(self.tenant).remember(user, text, category, **options)

    def commit(self, session_id: str) -> CommitResult:
        """Turn the session's messages since its last commit into memories of its user (archived
        turns without an LLM; typed, merged memories with one). Committing twice adds nothing."""
        return self.services.memory(self.tenant).commit(session_id)
