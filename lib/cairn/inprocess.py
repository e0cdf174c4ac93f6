"""The in-process door: :class:`Cairn`, cairn's operations for one tenant inside the host's process.

The same operations, names and keyword arguments as :class:`cairn.client.CairnClient` (swap one
for the other), each an adapter over :class:`~cairn.app.Application` with the principal it was
built with (default: the tenant's admin, since the host application that builds a ``Cairn``
holds the store itself).

Build one with ``Cairn.from_settings()``, ``Cairn(Services.from_settings(), tenant)``, or — for
tests and host applications that hold their own parts — ``Cairn(store, embedder, tenant, ...)``,
where a part not passed is simply absent (no reranker, no sessions, ...)::

    from cairn import Cairn
    cairn = Cairn.from_settings()
    cairn.find("how do refunds work?")
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.app import Application, Principal, policy
from cairn.app.models import DEFAULT_PAGE, DocumentsPut, MemoryPut
from cairn.app.services import Services
from cairn.core.config import Settings, load_settings
from cairn.core.errors import ConfigError, Forbidden, RequestError
from cairn.core.models import FindResult
from cairn.core.requests import FindRequest, parse_request
from cairn.engine.ingest import Ingestor, IngestReport
from cairn.engine.ingest.service import Progress, _quiet
from cairn.engine.pipeline import Pipeline

if TYPE_CHECKING:
    from cairn.app.application import FindAnswer
    from cairn.app.models import Deleted, Forgotten, IngestSummary, Me, MemoryList, SessionList, UserErased, UserExport
    from cairn.app.overview import TenantOverview
    from cairn.engine.browse import Contents, Tree
    from cairn.engine.context import ContextBlock
    from cairn.engine.memory import CommitResult, RememberResult
    from cairn.engine.retrieval.thinking import ThinkingConfig
    from cairn.ports.embeddings import Embedder
    from cairn.ports.observability.stats import RetrievalStats
    from cairn.ports.sessions.base import Message, Session, SessionView
    from cairn.ports.vectorstores import VectorStore

_PARTS = ("reranker", "planner", "sessions", "content", "llm", "recorder")


def _services(store: VectorStore | Services, embedder: Embedder | str | None, tenant: str | None,
              settings: Settings | None, parts: dict[str, Any]) -> tuple[Services, str | None]:
    """The composition root a ``Cairn`` runs on: the one given, or one over the parts given."""
    if isinstance(store, Services):
        return store, embedder if isinstance(embedder, str) else tenant
    unknown = sorted(set(parts) - set(_PARTS))
    if unknown:
        raise TypeError(f"Cairn(): unknown part(s) {', '.join(unknown)}; allowed: {', '.join(_PARTS)}")
    given = {name: parts.get(name) for name in _PARTS}
    return Services(settings or Settings(), store=store, embedder=embedder, **given), tenant


class Cairn:
    """The in-process door: cairn's operations for one tenant, as :class:`cairn.client.CairnClient`
    offers them over HTTP (same names, keyword arguments, results and errors).

    Every call goes through :class:`~cairn.app.Application` as ``principal`` (default: the
    tenant's admin). The engine's parts (``store``, ``embedder``, ``reranker``, ``planner``,
    ``thinking``, ``stats``, ``ingestor()``, ...) are those of :attr:`pipeline`."""

    def __init__(self, store: VectorStore | Services, embedder: Embedder | str | None = None, tenant: str | None = None, *,
                 principal: Principal | None = None, settings: Settings | None = None,
                 thinking: ThinkingConfig | None = None, stats: RetrievalStats | None = None, **parts: Any) -> None:
        services, tenant = _services(store, embedder, tenant, settings, parts)
        self.pipeline = Pipeline(services, tenant, thinking=thinking, stats=stats)
        self.services = services
        self.tenant = self.pipeline.tenant
        if principal is not None and principal.tenant != self.tenant:
            raise ConfigError(f"the principal's tenant {principal.tenant!r} is not this Cairn's {self.tenant!r}")
        self.principal = principal or Principal(self.tenant)
        mine = self.pipeline
        self.app = Application(services, lambda t: mine if t == mine.tenant else services.pipeline(t))

    @classmethod
    def from_settings(cls, settings: Settings | None = None, **overrides: Any) -> Cairn:
        """The embedded default (or whatever ``settings`` / ``CAIRN_*`` configure)."""
        services = Services(settings if settings is not None else load_settings(**overrides))
        return cls(services, services.settings.tenant)

    def as_user(self, user: str) -> Cairn:
        """This tenant's view for one end user: reads shared content and only ``user``'s own data."""
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
        that carries the conversation: :func:`cairn.engine.stages.for_plan`) and rerank; the answer
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

    def tree(self, uri: str, depth: int = 1, limit: int = 100, offset: int = 0) -> Tree:
        """The children of the folder ``uri`` (a file: its chunks), ``limit`` from ``offset``."""
        return self.app.tree(self.principal, uri, depth, limit, offset)

    def put_documents(self, root_uri: str, documents: Any, *, sync: bool = False, chunk_chars: int | None = None,
                      chunk_overlap: int | None = None) -> IngestSummary:
        """Upsert documents (dicts or payload documents) under ``root_uri``; siblings stay unless ``sync``."""
        body = parse_request(DocumentsPut, {"root_uri": root_uri, "documents": list(documents), "sync": sync,
                                            "chunk_chars": chunk_chars, "chunk_overlap": chunk_overlap})
        return self.app.put_documents(self.principal, body)

    def delete_documents(self, uri: str) -> Deleted:
        return self.app.delete_documents(self.principal, uri)

    def ingestor(self, **options: Any) -> Ingestor:
        """A writer of the tenant's records (the host application's own bulk loads)."""
        policy.check_role(self.principal, "put_documents")
        if self.principal.role.value not in ("admin", "writer"):
            raise Forbidden(f"{self.principal.describe()} cannot ingest; use an admin or writer principal")
        return self.pipeline.ingestor(**options)

    def ingest(self, path: str | Path, root_uri: str, progress: Progress = _quiet, **options: Any) -> IngestReport:
        """Ingest a folder (or a BEIR corpus with ``format="beir"``) under ``root_uri``; re-ingesting syncs."""
        policy.check_write(self.principal, root_uri)
        return self.pipeline.ingest(path, root_uri, progress, **options)

    # ------------------------------------------------------------------ memory

    def remember(self, text: str, category: str | None = None, *, user: str | None = None, **fields: Any) -> RememberResult:
        """Add or update one memory of ``user`` (a user principal's own by default) without
        touching the others (fields: key, title, metadata, source); without ``category`` it goes
        under "profile" and the result's ``note`` says so."""
        body = parse_request(MemoryPut, {"text": text, "category": category, "user": user, **fields})
        return self.app.remember(self.principal, body)

    def forget(self, uri: str) -> Forgotten:
        return self.app.forget(self.principal, uri)

    def list_memories(self, user: str | None = None, *, category: str | None = None, offset: int = 0,
                      limit: int = DEFAULT_PAGE) -> MemoryList:
        return self.app.memories(self.principal, self._user(user), category, offset=offset, limit=limit)

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

    def list_sessions(self, user: str | None = None, *, offset: int = 0, limit: int = DEFAULT_PAGE) -> SessionList:
        """The sessions of ``user`` (a user principal's own by default), newest first, ``limit`` from ``offset``."""
        return self.app.sessions(self.principal, self._user(user), offset=offset, limit=limit)

    def export_user(self, user: str | None = None) -> UserExport:
        return self.app.export_user(self.principal, self._user(user))

    def erase_user(self, user: str | None = None) -> UserErased:
        return self.app.erase_user(self.principal, self._user(user))

    # ------------------------------------------------------------------ service

    def statistics(self) -> dict[str, Any]:
        return self.app.stats(self.principal)

    def me(self) -> Me:
        return self.app.me(self.principal)

    def overview(self) -> TenantOverview:
        """What the tenant holds (documents, records, memories, sessions, index size) and its queries per minute."""
        return self.app.overview(self.principal)

    def _user(self, user: str | None) -> str:
        chosen = user or self.principal.user
        if chosen is None:
            raise RequestError("user: name the end user")
        return chosen
