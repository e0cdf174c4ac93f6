"""The application layer: every operation cairn offers, once, for every door.

Each method takes a :class:`~cairn.app.principal.Principal` and a typed request, applies the
defaults, checks that the principal may touch every URI, user and session the request names
(:mod:`cairn.app.policy`) *before any work*, records usage, and calls the stages through the
tenant's :class:`~cairn.engine.pipeline.Pipeline`. The HTTP routes (the API Lambda and ``cairn serve``),
the MCP tools, the CLI, the workflow's front door and the in-process :class:`~cairn.Cairn`
are adapters over it that only translate their input; none of them decides anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cairn.app import policy, users
from cairn.app.models import (
    DEFAULT_PAGE,
    Forgotten,
    Me,
    MemoryList,
    SessionList,
    UserErased,
    UserExport,
    next_offset,
)
from cairn.app.principal import Principal, Role
from cairn.core import uri as uris
from cairn.core.errors import RequestError
from cairn.core.models import ContextType, FindResponse, FindResult
from cairn.core.requests import FindRequest
from cairn.engine.memory.models import TypedCategory
from cairn.ports.observability.usage import record_usage, retrieval_counts

if TYPE_CHECKING:
    from cairn.app.models import Deleted, DocumentsPut, IngestSummary, MemoryPut
    from cairn.app.overview import TenantOverview
    from cairn.app.parts import AppParts
    from cairn.engine.browse import Contents, Tree
    from cairn.engine.context import ContextBlock
    from cairn.engine.memory import CommitResult, RememberResult
    from cairn.engine.pipeline import Pipeline
    from cairn.ports.sessions.base import Message, Session, SessionStore, SessionView

FindAnswer = FindResult | FindResponse


# where a memory goes when the caller names no category: a fact about the user
DEFAULT_MEMORY_CATEGORY = TypedCategory.PROFILE.value


class Application:
    """cairn's operations over one composition root (:class:`~cairn.app.services.Services`)."""

    def __init__(self, services: AppParts, pipelines: Callable[[str], Pipeline] | None = None) -> None:
        self.services = services
        self._pipelines = pipelines or services.pipeline

    def pipeline(self, tenant: str) -> Pipeline:
        return self._pipelines(tenant)

    def admit(self, principal: Principal) -> None:
        """Count one request of the principal's tenant against its rate limits and quotas
        (:mod:`cairn.ports.ratelimit`); :class:`~cairn.core.errors.RateLimited` (429) when it is over one.
        Each door calls this once per request, before the operation."""
        self.services.limiter.admit(principal.tenant)

    @property
    def default_budget(self) -> int:
        """Tokens a context block holds at most when the request names no budget."""
        return self.services.settings.context_budget_tokens

    # ------------------------------------------------------------------ retrieval

    def retrieval_request(self, principal: Principal, request: FindRequest, *, search: bool,
                          limit_given: bool = True) -> FindRequest:
        """``request`` as the principal may run it: its user bound, its URIs and filter checked,
        the settings' defaults filled in. Every retrieval door calls this first."""
        user = self._user_for(principal, request.user, "search the memories of")
        for target in request.target_uris:
            policy.check_read(principal, _uri("target_uris", target))
        policy.check_filter(principal, request.filter)
        update: dict[str, Any] = {"user": user}
        if not limit_given:
            update["limit"] = self.services.settings.default_limit
        request = request.model_copy(update=update)
        return self.pipeline(principal.tenant).with_defaults(request, search=search)

    def find(self, principal: Principal, request: FindRequest, *, rerank: bool = False,
             limit_given: bool = True) -> FindResult:
        policy.check_role(principal, "find")
        request = self.retrieval_request(principal, request, search=False, limit_given=limit_given)
        result = self.pipeline(principal.tenant).find(request, rerank=rerank)
        record_usage(principal.tenant, "find", **retrieval_counts(result))
        return result

    def search(self, principal: Principal, request: FindRequest, session_id: str | None = None, *,
               rerank: bool = True, limit_given: bool = True) -> FindAnswer:
        """Plan with the session (if any), retrieve, rerank. Through the Step Functions workflow
        when the settings name one (the deployed API), else in process."""
        policy.check_role(principal, "search")
        request = self.retrieval_request(principal, request, search=True, limit_given=limit_given)
        if session_id is not None:
            self._own_session(principal, session_id)
        if self.services.settings.state_machine_arn:
            from cairn.app import workflow
            return FindResponse.model_validate(
                workflow.search(self.services, principal.tenant, request, session_id, rerank=rerank))
        result = self.pipeline(principal.tenant).search(request, session_id, rerank=rerank)
        record_usage(principal.tenant, "search", **retrieval_counts(result))
        return result

    def context(self, principal: Principal, request: FindRequest, session_id: str | None = None, *,
                budget_tokens: int | None = None, rerank: bool = True, limit_given: bool = True) -> ContextBlock:
        """A prompt-ready block: a search, then its passages numbered and cut to the token budget."""
        policy.check_role(principal, "context")
        from cairn.engine.context import build_context, token_counter

        answer = self.search(principal, request, session_id, rerank=rerank, limit_given=limit_given)
        pipeline = self.pipeline(principal.tenant)
        budget = budget_tokens or self.default_budget
        block = build_context(answer, budget, token_counter(pipeline.embedder))
        record_usage(principal.tenant, "context", tokens=block.tokens)
        return block

    # ------------------------------------------------------------------ content

    def read(self, principal: Principal, uri: str, level: int = 0, offset: int = 0,
             max_chars: int = 200_000) -> Contents:
        from cairn.engine.browse import read_page

        policy.check_role(principal, "read")
        policy.check_read(principal, _uri("uri", uri))
        page = read_page(self.pipeline(principal.tenant), uri, level, offset, max_chars)
        record_usage(principal.tenant, "read", level=level, chars=len(page.text))
        return page

    def tree(self, principal: Principal, uri: str, depth: int = 1, limit: int = 100, offset: int = 0) -> Tree:
        from cairn.engine.browse import tree

        policy.check_role(principal, "tree")
        policy.check_read(principal, _uri("uri", uri))
        return tree(self.pipeline(principal.tenant), uri, depth, limit, offset)

    def put_documents(self, principal: Principal, body: DocumentsPut) -> IngestSummary:
        from cairn.app.models import IngestSummary
        from cairn.engine.ingest import ChunkingConfig, IngestPayload

        policy.check_role(principal, "put_documents")
        policy.check_write(principal, _uri("root_uri", body.root_uri))
        payload = IngestPayload.parse({"root_uri": body.root_uri, "documents": body.documents})
        options: dict[str, Any] = {}
        if body.chunk_chars is not None or body.chunk_overlap is not None:
            default = ChunkingConfig()
            options["chunking"] = ChunkingConfig(
                body.chunk_chars or default.chunk_chars,
                default.overlap_chars if body.chunk_overlap is None else body.chunk_overlap,
            )
        ingestor = self.pipeline(principal.tenant).ingestor(**options)
        docs = payload.to_documents()
        report = ingestor.ingest(docs, payload.root_uri) if body.sync else ingestor.upsert(docs, payload.root_uri)
        record_usage(principal.tenant, "ingest", documents=report.documents, embedded_texts=report.embedded,
                     records_written=report.written, bytes_in=sum(len(d.text.encode()) for d in body.documents))
        return IngestSummary(
            root_uri=report.root_uri, documents=report.documents, records=report.records, written=report.written,
            removed=report.removed, unchanged=report.unchanged,
            rejected=[f"{r.source}: {r.reason}" for r in report.rejected],
            warnings=list(report.warnings), seconds=round(report.seconds, 3),
        )

    def delete_documents(self, principal: Principal, uri: str) -> Deleted:
        from cairn.app.models import Deleted

        policy.check_role(principal, "delete_documents")
        policy.check_write(principal, _uri("uri", uri))
        if uris.owner_of(uri) is not None and uris.parse(uri).segments[2:] == ():
            return Deleted(uri=uri, removed=self.erase_user(principal, uris.owner_of(uri) or "").records)
        report = self.pipeline(principal.tenant).ingestor().delete(uri)
        record_usage(principal.tenant, "delete", records_removed=report.removed)
        return Deleted(uri=uri, removed=report.removed)

    # ------------------------------------------------------------------ memory

    def remember(self, principal: Principal, body: MemoryPut) -> RememberResult:
        policy.check_role(principal, "remember")
        user = self._user_for(principal, body.user, "remember for")
        if user is None:
            raise RequestError("user: name the end user the memory is about")
        category = body.category or DEFAULT_MEMORY_CATEGORY
        done = self.pipeline(principal.tenant).remember(user, body.text, category, key=body.key, title=body.title,
                                                        metadata=body.metadata, source=body.source)
        record_usage(principal.tenant, "remember", embedded_texts=1)
        if not body.category:
            note = f"no category given: stored under {category!r} (name one with category, e.g. preferences)"
            done = done.model_copy(update={"note": note})
        return done

    def forget(self, principal: Principal, uri: str) -> Forgotten:
        """Delete one memory (or a category of them) of a user."""
        policy.check_role(principal, "forget")
        seg = uris.parse(_uri("uri", uri)).segments
        if not (seg[0] == "user" and len(seg) >= 4 and seg[2] == "memories"):
            raise RequestError(f"{uri!r} is not a memory; forget takes cairn://user/<user>/memories/<category>[/<key>]")
        policy.check_write(principal, uri)
        report = self.pipeline(principal.tenant).ingestor().delete(uri)
        if report.removed == 0:
            from cairn.core.errors import ContextNotFound

            raise ContextNotFound(f"no memory {uri!r}; list them with GET /v1/users/{seg[1]}/memories")
        record_usage(principal.tenant, "forget", records_removed=report.removed)
        return Forgotten(uri=uri, removed=report.removed)

    def memories(self, principal: Principal, user: str, category: str | None = None, *, offset: int = 0,
                 limit: int = DEFAULT_PAGE) -> MemoryList:
        policy.check_role(principal, "memories")
        policy.check_user(principal, user, "list the memories of")
        items = users.memories(self.pipeline(principal.tenant), user, category)
        page = items[offset:offset + limit]
        return MemoryList(user=user, memories=page, total=len(items), offset=offset,
                          next_offset=next_offset(offset, len(page), len(items)))

    # ------------------------------------------------------------------ sessions

    def create_session(self, principal: Principal, user: str | None = None, ttl_s: int | None = None) -> Session:
        policy.check_role(principal, "create_session")
        owner = self._user_for(principal, user, "start a session for")
        if owner is None:
            policy.check_user(principal, None, "start a session for")
        return self._sessions().create(principal.tenant, owner, ttl_s)

    def get_session(self, principal: Principal, session_id: str, recent: int = 5) -> SessionView:
        policy.check_role(principal, "get_session")
        view = self._sessions().get(principal.tenant, session_id, recent=recent)
        policy.check_user(principal, view.session.user, "read the sessions of")
        return view

    def delete_session(self, principal: Principal, session_id: str) -> bool:
        policy.check_role(principal, "delete_session")
        self._own_session(principal, session_id)
        return bool(self._sessions().delete(principal.tenant, session_id))

    def append_message(self, principal: Principal, session_id: str, role: str, content: str, *,
                       name: str | None = None, created_at: float | None = None,
                       idempotency_key: str | None = None) -> Message:
        policy.check_role(principal, "append_message")
        self._own_session(principal, session_id)
        message = self._sessions().append(principal.tenant, session_id, role, content, name=name,
                                          created_at=created_at, idempotency_key=idempotency_key)
        self.pipeline(principal.tenant).after_append(session_id)  # commit, then fold: sessions stay bounded
        return message

    def commit(self, principal: Principal, session_id: str) -> CommitResult:
        policy.check_role(principal, "commit")
        self._own_session(principal, session_id)
        done = self.pipeline(principal.tenant).commit(session_id)
        record_usage(principal.tenant, "commit", messages=done.messages, episodes=len(done.episodes),
                     typed_memories=len(done.extracted), records_written=done.written)
        return done

    def sessions(self, principal: Principal, user: str, *, offset: int = 0, limit: int = DEFAULT_PAGE) -> SessionList:
        policy.check_role(principal, "sessions")
        policy.check_user(principal, user, "list the sessions of")
        found = sorted(self._sessions().list_sessions(principal.tenant, user), key=lambda s: -s.updated_at)
        page = found[offset:offset + limit]
        return SessionList(user=user, sessions=page, total=len(found), offset=offset,
                           next_offset=next_offset(offset, len(page), len(found)))

    # ------------------------------------------------------------------ a user's data

    def export_user(self, principal: Principal, user: str) -> UserExport:
        policy.check_role(principal, "export_user")
        policy.check_user(principal, user, "export the data of")
        return users.export(self.pipeline(principal.tenant), user)

    def erase_user(self, principal: Principal, user: str) -> UserErased:
        policy.check_role(principal, "erase_user")
        policy.check_user(principal, user, "erase the data of")
        done = users.erase(self.pipeline(principal.tenant), user)
        record_usage(principal.tenant, "erase_user", records_removed=done.records, sessions_removed=done.sessions)
        return done

    # ------------------------------------------------------------------ service

    def stats(self, principal: Principal) -> dict[str, Any]:
        policy.check_role(principal, "stats")
        return self.services.tenant_stats(principal.tenant).snapshot().model_dump(mode="json")

    def overview(self, principal: Principal) -> TenantOverview:
        """The tenant's documents, records, memories, sessions, index size and queries over time."""
        from cairn.app.overview import overview

        policy.check_role(principal, "overview")
        sessions = self.services.sessions
        return overview(self.pipeline(principal.tenant), sessions, self.services.tenant_stats(principal.tenant))

    def me(self, principal: Principal) -> Me:
        can = [name for name in policy.OPERATIONS if _allowed(principal, name)]
        return Me(tenant=principal.tenant, user=principal.user, role=principal.role.value, can=can)

    # ------------------------------------------------------------------ helpers

    def _sessions(self) -> SessionStore:
        return self.services.session_store()

    def _own_session(self, principal: Principal, session_id: str) -> None:
        """The session exists in the principal's tenant and belongs to a user it may act for."""
        view = self._sessions().get(principal.tenant, session_id, recent=0)
        policy.check_user(principal, view.session.user, "use the sessions of")

    @staticmethod
    def _user_for(principal: Principal, asked: str | None, what: str) -> str | None:
        """The end user a request acts for: a user key's own (naming another is a 403), else the one asked."""
        if principal.role is Role.USER:
            if asked not in (None, principal.user):
                policy.check_user(principal, asked, what)
            return principal.user
        if asked is not None:
            policy.check_user(principal, asked, what)
        return asked


def _uri(field: str, value: str) -> str:
    """``value`` if it is a valid cairn URI, else a 400 that names the field it came in."""
    from cairn.core.errors import InvalidURIError

    try:
        return uris.validate(value)
    except InvalidURIError as exc:
        raise InvalidURIError(f"{field}: {exc.message}") from None


def _allowed(principal: Principal, operation: str) -> bool:
    try:
        policy.check_role(principal, operation)
    except Exception:
        return False
    kind = policy.OPERATIONS[operation].kind
    if kind == "write":
        return principal.role is not Role.READER
    return True


__all__ = ["Application", "ContextType", "FindAnswer"]
