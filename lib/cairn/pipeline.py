"""Runs the stages in-process in the workflow's order, and the in-process door over them.

* :class:`Pipeline` — one tenant's engine: plan, retrieve and rerank in the workflow's order,
  ingest, read, remember, commit. It takes typed requests and decides nothing about who may call;
  the application layer (:mod:`cairn.app`) calls it after authorizing.
* :class:`Cairn` — the in-process door: the same operations, names and keyword arguments as
  :class:`cairn.client.CairnClient` (swap one for the other), each an adapter over
  :class:`~cairn.app.Application` with the principal it was built with (default: the tenant's
  admin, since the host application that builds a ``Cairn`` holds the store itself).

Build one with ``Services.from_settings().cairn(tenant)``, ``Cairn.from_settings()``, or — for
tests and host applications that hold their own parts — ``Cairn(store, embedder, tenant, ...)``,
where a part not passed is simply absent (no reranker, no sessions, ...).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import stages
from .config import Settings, load_settings
from .errors import ConfigError, Forbidden, RequestError
from .ingest import Ingestor, IngestReport
from .ingest.service import Progress, _quiet
from .models import ContextType, FindResult
from .observability.stats import RetrievalStats
from .requests import FindRequest, parse_request
from .retrieval.thinking import ThinkingConfig
from .services import Services

if TYPE_CHECKING:
    from .api.models import Contents, Deleted, IngestSummary, Tree
    from .app import Principal
    from .app.application import FindAnswer
    from .app.models import Forgotten, Me, MemoryList, SessionList, UserErased, UserExport
    from .context import ContextBlock
    from .embeddings import Embedder
    from .ingest import ContentStore
    from .ingest.reader import ReadResult
    from .llm.base import LLMClient
    from .memory import CommitResult, RememberResult
    from .planning.base import Planner
    from .rerank.base import Reranker
    from .sessions.base import Message, Session, SessionStore, SessionView
    from .vectorstores import VectorStore

_PARTS = ("reranker", "planner", "sessions", "content", "llm", "recorder")


class Pipeline:
    """One tenant's engine: the stages in the workflow's order over the composition root's services."""

    def __init__(
        self,
        store: VectorStore | Services,
        embedder: Embedder | str | None = None,
        tenant: str | None = None,
        *,
        settings: Settings | None = None,
        thinking: ThinkingConfig | None = None,
        stats: RetrievalStats | None = None,
        **parts: Any,
    ) -> None:
        if isinstance(store, Services):
            services, tenant = store, embedder if isinstance(embedder, str) else tenant
        else:
            unknown = sorted(set(parts) - set(_PARTS))
            if unknown:
                raise TypeError(f"Cairn(): unknown part(s) {', '.join(unknown)}; allowed: {', '.join(_PARTS)}")
            given = {name: parts.get(name) for name in _PARTS}
            services = Services(settings or Settings(), store=store, embedder=embedder, **given)
        self.services = services
        self.tenant = tenant or services.settings.tenant
        cfg = services.settings
        self.thinking = thinking or ThinkingConfig(alpha=cfg.alpha, threshold=cfg.score_threshold)
        self.hotness_weight = cfg.hotness_weight
        self.stats = stats or services.tenant_stats(self.tenant)

    # the services, read through the composition root (built on first use)
    # the tenant's index, checked once per process to have been filled by the configured embedder
    @property
    def store(self) -> VectorStore:
        return self.services.checked_store(self.tenant)

    @property
    def embedder(self) -> Embedder:
        return self.services.embedder

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
        self.services.__dict__["reranker"] = value

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
        result = self._run(request, plan, rerank=rerank)
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

    def _run(self, request: FindRequest, plan: Any, rerank: bool) -> FindResult:
        request = stages.for_plan(request, plan)  # mode "auto" resolved for the whole plan
        reranker = self.reranker if rerank else None
        thinking = self.thinking
        language = self.services.languages.for_tenant(self.tenant)
        if request.score_threshold is not None:
            thinking = replace(thinking, threshold=request.score_threshold)
        outputs = [
            stages.retrieve(
                tq,
                request,
                tenant=self.tenant,
                store=self.store,
                embedder=self.embedder,
                thinking=thinking,
                rerank_follows=reranker is not None,
                language=language,
            )
            for tq in plan.queries
        ]
        result = stages.rerank(
            outputs, request, reranker=reranker, hotness_weight=self.hotness_weight, threshold=thinking.threshold,
            language=language,
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
            from .ingest.summarizer import LLMSummarizer

            options["summarizer"] = LLMSummarizer(self.llm)
        return Ingestor(self.store, self.embedder, self.tenant, content=self.content, **options)

    def ingest(self, path: str | Path, root_uri: str, progress: Progress = _quiet, **options: Any) -> IngestReport:
        """Ingest a folder (or a BEIR corpus with ``format="beir"``) under ``root_uri``; re-ingesting syncs."""
        fmt = options.pop("format", "folder")
        return self.ingestor(**options).ingest_path(Path(path), root_uri, progress, format=fmt)

    def read(self, uri: str, level: int = 0) -> ReadResult:
        """Progressive reading: L0 abstract, L1 overview, L2 full body."""
        from .ingest.reader import read

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


class Cairn:
    """The in-process door: cairn's operations for one tenant, as :class:`cairn.client.CairnClient`
    offers them over HTTP (same names, keyword arguments, results and errors).

    Every call goes through :class:`~cairn.app.Application` as ``principal`` (default: the
    tenant's admin). The engine's parts (``store``, ``embedder``, ``reranker``, ``planner``,
    ``thinking``, ``stats``, ``ingestor()``, ...) are those of :attr:`pipeline`."""

    def __init__(self, store: VectorStore | Services, embedder: Embedder | str | None = None, tenant: str | None = None, *,
                 principal: Principal | None = None, **options: Any) -> None:
        from .app import Application, Principal

        self.pipeline = Pipeline(store, embedder, tenant, **options)
        self.services = self.pipeline.services
        self.tenant = self.pipeline.tenant
        if principal is not None and principal.tenant != self.tenant:
            raise ConfigError(f"the principal's tenant {principal.tenant!r} is not this Cairn's {self.tenant!r}")
        self.principal = principal or Principal(self.tenant)
        mine = self.pipeline
        self.app = Application(self.services, lambda t: mine if t == mine.tenant else self.services.pipeline(t))

    @classmethod
    def from_settings(cls, settings: Settings | None = None, **overrides: Any) -> Cairn:
        """The embedded default (or whatever ``settings`` / ``CAIRN_*`` configure)."""
        services = Services(settings if settings is not None else load_settings(**overrides))
        return services.cairn()

    def as_user(self, user: str) -> Cairn:
        """This tenant's view for one end user: reads shared content and only ``user``'s own data."""
        from .app import Principal

        return Cairn(self.services, self.tenant, principal=Principal.of(self.tenant, user), thinking=self.pipeline.thinking,
                     stats=self.pipeline.stats)

    # the engine's parts (tests and host applications configure them here)
    def __getattr__(self, name: str) -> Any:
        if name in ("pipeline", "services"):
            raise AttributeError(name)
        return getattr(self.pipeline, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("reranker", "planner", "thinking", "hotness_weight", "stats"):
            setattr(self.pipeline, name, value)
        else:
            object.__setattr__(self, name, value)

    # ------------------------------------------------------------------ retrieval

    def find(self, query: str | FindRequest, **options: Any) -> FindResult:
        """One query, no session, no planning: quick mode unless ``mode='thinking'``."""
        rerank = options.pop("rerank", False)
        request, given = self._request(query, options, default_mode="quick")
        return self.app.find(self.principal, request, rerank=rerank, limit_given=given)

    def search(self, query: str | FindRequest, session_id: str | None = None, **options: Any) -> FindAnswer:
        """Plan with the session (if any), then retrieve (mode ``auto``: thinking, or quick for a plan
        that carries the conversation: :func:`cairn.stages.for_plan`) and rerank; the answer
        becomes the session's prefetched context."""
        rerank = options.pop("rerank", True)
        request, given = self._request(query, options, default_mode="auto")
        return self.app.search(self.principal, request, session_id, rerank=rerank, limit_given=given)

    def context(self, query: str | FindRequest, session_id: str | None = None, *, budget_tokens: int | None = None,
                **options: Any) -> ContextBlock:
        """A prompt-ready block for ``query`` (with the session, when given) within ``budget_tokens``."""
        rerank = options.pop("rerank", True)
        request, given = self._request(query, options, default_mode="auto")
        return self.app.context(self.principal, request, session_id, budget_tokens=budget_tokens, rerank=rerank,
                                limit_given=given)

    def _request(self, query: str | FindRequest, options: dict[str, Any], default_mode: str) -> tuple[FindRequest, bool]:
        if isinstance(query, FindRequest):
            if options:
                raise RequestError(f"pass options inside the FindRequest, not beside it: {', '.join(sorted(options))}")
            return query, True
        fields = dict(options)
        fields.setdefault("mode", default_mode)
        given = "limit" in fields
        fields.setdefault("limit", self.services.settings.default_limit)
        return parse_request(FindRequest, {"query": query, **fields}), given

    # ------------------------------------------------------------------ content

    def read(self, uri: str, level: int = 0) -> Contents:
        """Progressive reading: L0 abstract, L1 overview, L2 full body (the whole text)."""
        return self.app.read(self.principal, uri, level, 0, 10**12)

    def contents(self, uri: str, level: int = 0, *, offset: int = 0, max_chars: int | None = None) -> Contents:
        """One page of ``uri`` at ``level`` (``next_offset`` reads on)."""
        return self.app.read(self.principal, uri, level, offset, max_chars or 200_000)

    def tree(self, uri: str, depth: int = 1, limit: int = 100) -> Tree:
        return self.app.tree(self.principal, uri, depth, limit)

    def put_documents(self, root_uri: str, documents: Any, *, sync: bool = False, chunk_chars: int | None = None,
                      chunk_overlap: int | None = None) -> IngestSummary:
        """Upsert documents (dicts or payload documents) under ``root_uri``; siblings stay unless ``sync``."""
        from .api.models import DocumentsPut

        body = parse_request(DocumentsPut, {"root_uri": root_uri, "documents": list(documents), "sync": sync,
                                            "chunk_chars": chunk_chars, "chunk_overlap": chunk_overlap})
        return self.app.put_documents(self.principal, body)

    def delete_documents(self, uri: str) -> Deleted:
        return self.app.delete_documents(self.principal, uri)

    def ingestor(self, **options: Any) -> Ingestor:
        """A writer of the tenant's records (the host application's own bulk loads)."""
        from .app import policy

        policy.check_role(self.principal, "put_documents")
        if self.principal.role.value not in ("admin", "writer"):
            raise Forbidden(f"{self.principal.describe()} cannot ingest; use an admin or writer principal")
        return self.pipeline.ingestor(**options)

    def ingest(self, path: str | Path, root_uri: str, progress: Progress = _quiet, **options: Any) -> IngestReport:
        """Ingest a folder (or a BEIR corpus with ``format="beir"``) under ``root_uri``; re-ingesting syncs."""
        from .app import policy

        policy.check_write(self.principal, root_uri)
        return self.pipeline.ingest(path, root_uri, progress, **options)

    # ------------------------------------------------------------------ memory

    def remember(self, text: str, category: str, *, user: str | None = None, **fields: Any) -> RememberResult:
        """Add or update one memory of ``user`` (a user principal's own by default) without
        touching the others (fields: key, title, metadata, source)."""
        from .api.models import MemoryPut

        body = parse_request(MemoryPut, {"text": text, "category": category, "user": user, **fields})
        return self.app.remember(self.principal, body)

    def forget(self, uri: str) -> Forgotten:
        return self.app.forget(self.principal, uri)

    def list_memories(self, user: str | None = None, *, category: str | None = None) -> MemoryList:
        return self.app.memories(self.principal, self._user(user), category)

    # ------------------------------------------------------------------ sessions

    def create_session(self, user: str | None = None, ttl_s: int | None = None) -> Session:
        return self.app.create_session(self.principal, user, ttl_s)

    def get_session(self, session_id: str, recent: int = 5) -> SessionView:
        return self.app.get_session(self.principal, session_id, recent)

    def delete_session(self, session_id: str) -> bool:
        return self.app.delete_session(self.principal, session_id)

    def append_message(self, session_id: str, role: str, content: str, *, name: str | None = None,
                       created_at: float | None = None, idempotency_key: str | None = None) -> Message:
        return self.app.append_message(self.principal, session_id, role, content, name=name, created_at=created_at,
                                       idempotency_key=idempotency_key)

    def commit(self, session_id: str) -> CommitResult:
        """Turn the session's messages since its last commit into memories of its user."""
        return self.app.commit(self.principal, session_id)

    def list_sessions(self, user: str | None = None) -> SessionList:
        """The sessions of ``user`` (a user principal's own by default)."""
        return self.app.sessions(self.principal, self._user(user))

    def export_user(self, user: str | None = None) -> UserExport:
        return self.app.export_user(self.principal, self._user(user))

    def erase_user(self, user: str | None = None) -> UserErased:
        return self.app.erase_user(self.principal, self._user(user))

    # ------------------------------------------------------------------ service

    def statistics(self) -> dict[str, Any]:
        return self.app.stats(self.principal)

    def me(self) -> Me:
        return self.app.me(self.principal)

    def _user(self, user: str | None) -> str:
        chosen = user or self.principal.user
        if chosen is None:
            raise RequestError("user: name the end user")
        return chosen
