"""The ``/v1`` route table, defined once on Powertools' event handler.

The API Lambda resolves API Gateway events with it; ``cairn serve`` turns each HTTP request into
the same event and resolves it with the same table (:mod:`cairn.api.server`). Request bodies and
parameters are validated by Powertools against the pydantic models, and the OpenAPI document is
generated from this table (``GET /v1/openapi.json``; committed as ``docs/openapi.json``).

Every error is one JSON envelope (:class:`~cairn.api.models.ErrorBody`) with the request id and
the status of its family in :mod:`cairn.core.errors`; ``Retry-After`` on 429 and 503; never a stack
trace. Every authenticated request is counted against its tenant's rate limits and quotas first
(:mod:`cairn.ports.ratelimit`): past one, a 429 whose ``details`` name the limit. A response that would
pass Lambda's 6 MB limit is refused with a 413 that says how to page; L2 bodies and folder listings
are paged.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
import uuid
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Header, Query

from cairn.api.auth import PUBLIC_ROUTES, AuthorizerConfig, caller_of
from cairn.api.models import (
    Contents,
    ContextAnswer,
    ContextBody,
    Deleted,
    DocumentsPut,
    FindBody,
    Health,
    IngestSummary,
    MemoryPut,
    MessageAppend,
    SearchBody,
    SessionCreate,
    SessionDeleted,
    Tree,
)
from cairn.api.openapi import openapi_json
from cairn.app import Principal
from cairn.app.models import (
    DEFAULT_PAGE,
    MAX_PAGE,
    Forgotten,
    Me,
    MemoryList,
    SessionList,
    UserErased,
    UserExport,
)
from cairn.app.overview import TenantOverview
from cairn.app.services import Services
from cairn.core.distribution import __version__
from cairn.core.errors import (
    CairnError,
    PayloadTooLarge,
    RequestError,
    RouteNotFound,
    UnsupportedMediaType,
    UpstreamError,
)
from cairn.core.logging import get_logger, set_correlation_id
from cairn.core.models import FindResponse
from cairn.core.uri import MAX_URI_LENGTH
from cairn.engine.memory import CommitResult, RememberResult
from cairn.ports.observability.stats import StatsSnapshot
from cairn.ports.sessions.base import Message, Session, SessionView

log = get_logger(__name__)
MAX_RESPONSE_BYTES = 5_800_000  # under Lambda's 6 MB response limit, with room for the envelope
RETRY_AFTER_S = 1
class ThreadResolver(APIGatewayHttpResolver):
    """Powertools' HTTP API resolver with the event being answered kept per thread.

    Powertools keeps the current event on its base class (``BaseRouter.current_event``), shared by
    every resolver in the process: two requests answered at once on two threads would route, authorise
    and read each other's event (another path, another caller). Here each thread reads the event it is
    resolving. A resolver's ``context`` is still its own, so one thread uses one resolver at a time
    (``cairn serve`` keeps one per thread; a Lambda instance answers one event at a time)."""

    def __init__(self, **kwargs: Any) -> None:
        self._answering = threading.local()
        super().__init__(**kwargs)

    @property
    def current_event(self) -> Any:
        return getattr(self._answering, "event", None)

    @current_event.setter
    def current_event(self, value: Any) -> None:
        self._answering.event = value

    def resolve(self, event: Any, context: Any) -> dict[str, Any]:  # an API Gateway event (both doors pass its dict)
        self.current_event = self._to_proxy_event(event)
        try:
            return super().resolve(event, context)
        finally:
            self.current_event = None


def build_app(services: Services, authorizer: AuthorizerConfig | None = None) -> APIGatewayHttpResolver:
    """The ``/v1`` API over ``services``: one resolver, shared by the API Lambda and ``cairn serve``.

    Each route translates its request and calls one method of the application layer
    (:class:`~cairn.app.Application`) with the caller's principal; it decides nothing itself."""
    authorizer = authorizer or AuthorizerConfig()
    app = ThreadResolver(enable_validation=True)
    ops = services.application

    def caller() -> Principal:
        return caller_of(app.current_event.raw_event, authorizer)

    def request_id() -> str:
        context = app.current_event.raw_event.get("requestContext") or {}
        return str(context.get("requestId") or uuid.uuid4())

    def created(model: Any, status: int = 201) -> Response[dict[str, Any]]:
        return Response(status, "application/json", model.model_dump(mode="json"))

    def door(app: APIGatewayHttpResolver, next_middleware: Any) -> Any:
        """Every authenticated request counts against its tenant's rate limits (429 past one);
        every request is counted and timed under its operation (:mod:`cairn.ports.observability.operations`)."""
        started, status = time.perf_counter(), 500
        try:
            if app.current_event.path not in PUBLIC_ROUTES:
                ops.admit(caller())
            response = next_middleware(app)
            status = int(getattr(response, "status_code", 200))
            return response
        except CairnError as exc:
            status = exc.http_status
            raise
        finally:
            services.operations.record(operation(), status, (time.perf_counter() - started) * 1000)

    def operation() -> str:
        return getattr(app.context.get("_route"), "operation_id", None) or "unknown"

    app.use(middlewares=[door])

    # ------------------------------------------------------------------ retrieval

    @app.post("/v1/find", summary="Find: one query, no session, no planning", tags=["retrieval"],
              operation_id="find")
    def find(body: FindBody) -> FindResponse:
        request = body.request()
        result = ops.find(caller(), request, rerank=body.rerank, limit_given="limit" in body.model_fields_set)
        return _bounded(result.to_dict(include_provenance=body.include_provenance))

    @app.post("/v1/search", summary="Search: plan (with a session), retrieve hierarchically, rerank",
              tags=["retrieval"], operation_id="search")
    def search(body: SearchBody) -> FindResponse:
        answer = ops.search(caller(), body.request(), body.session_id, rerank=body.rerank,
                            limit_given="limit" in body.model_fields_set)
        return _bounded(_payload(answer, body.include_provenance))

    @app.post("/v1/context", summary="Context: a prompt-ready block of memories, skills and resources within a token budget",
              tags=["retrieval"], operation_id="context")
    def context(body: ContextBody) -> ContextAnswer:
        block = ops.context(caller(), body.request(), body.session_id, budget_tokens=body.budget_tokens,
                            rerank=body.rerank, limit_given="limit" in body.model_fields_set)
        return block

    # ------------------------------------------------------------------ sessions

    @app.post("/v1/sessions", summary="Create a session", tags=["sessions"], operation_id="create_session",
              responses={201: {"description": "the new session", "content": {"application/json": {"model": Session}}}})
    def create_session(body: SessionCreate) -> Response[dict[str, Any]]:
        return created(ops.create_session(caller(), body.user, body.ttl_s))

    @app.get("/v1/sessions/<session_id>", summary="A session: summary, recent messages, prefetched context",
             tags=["sessions"], operation_id="get_session")
    def get_session(session_id: str, recent: Annotated[int, Query(ge=0, le=1000)] = 5) -> SessionView:
        return ops.get_session(caller(), session_id, recent)

    @app.delete("/v1/sessions/<session_id>", summary="Delete a session and its messages", tags=["sessions"],
                operation_id="delete_session")
    def delete_session(session_id: str) -> SessionDeleted:
        return SessionDeleted(id=session_id, deleted=ops.delete_session(caller(), session_id))

    @app.post("/v1/sessions/<session_id>/messages", summary="Append a message (Idempotency-Key: a retry lands once)",
              tags=["sessions"], operation_id="append_message",
              responses={201: {"description": "the stored message", "content": {"application/json": {"model": Message}}}})
    def append_message(
        session_id: str,
        body: MessageAppend,
        idempotency_key: Annotated[str | None, Header(alias="idempotency-key", max_length=200)] = None,
    ) -> Response[dict[str, Any]]:
        message = ops.append_message(caller(), session_id, body.role, body.content, name=body.name,
                                     created_at=body.created_at, idempotency_key=idempotency_key)
        return created(message)

    @app.post("/v1/sessions/<session_id>/commit", summary="Turn the session's new messages into memories of its user",
              tags=["memory"], operation_id="commit")
    def commit_session(session_id: str) -> CommitResult:
        return ops.commit(caller(), session_id)

    @app.get("/v1/users/<user>/sessions", summary="A user's sessions", tags=["users"], operation_id="list_sessions")
    def list_sessions(
        user: str,
        offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    ) -> SessionList:
        return ops.sessions(caller(), user, offset=offset, limit=limit)

    # ------------------------------------------------------------------ memory

    @app.post("/v1/memories", summary="Add or update one memory of an end user (its siblings stay)", tags=["memory"],
              operation_id="remember",
              responses={201: {"description": "created", "content": {"application/json": {"model": RememberResult}}}})
    def remember(body: MemoryPut) -> Response[dict[str, Any]]:
        done = ops.remember(caller(), body)
        return created(done, 201 if done.created else 200)

    @app.delete("/v1/memories", summary="Forget one memory (or a category) of a user", tags=["memory"],
                operation_id="forget")
    def forget(uri: Annotated[str, Query(min_length=1, max_length=MAX_URI_LENGTH)]) -> Forgotten:
        return ops.forget(caller(), uri)

    @app.get("/v1/users/<user>/memories", summary="A user's memories, newest first", tags=["users"],
             operation_id="list_memories")
    def list_memories(
        user: str,
        category: Annotated[str | None, Query(max_length=64)] = None,
        offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    ) -> MemoryList:
        return ops.memories(caller(), user, category, offset=offset, limit=limit)

    # ------------------------------------------------------------------ a user's data

    @app.get("/v1/users/<user>/export", summary="Everything cairn holds about one user (sessions, memories, skills)",
             tags=["users"], operation_id="export_user")
    def export_user(user: str) -> UserExport:
        return ops.export_user(caller(), user)

    @app.delete("/v1/users/<user>", summary="Erase everything cairn holds about one user", tags=["users"],
                operation_id="erase_user")
    def erase_user(user: str) -> UserErased:
        return ops.erase_user(caller(), user)

    # ------------------------------------------------------------------ content

    @app.put("/v1/documents", summary="Upsert documents under a root URI (siblings stay unless sync)",
             tags=["content"], operation_id="put_documents")
    def put_documents(body: DocumentsPut) -> IngestSummary:
        return ops.put_documents(caller(), body)

    @app.delete("/v1/documents", summary="Delete a document or a subtree", tags=["content"],
                operation_id="delete_documents")
    def delete_documents(uri: Annotated[str, Query(min_length=1, max_length=MAX_URI_LENGTH)]) -> Deleted:
        return ops.delete_documents(caller(), uri)

    @app.get("/v1/contents", summary="Read a URI progressively: L0 abstract, L1 overview, L2 full body (paged)",
             tags=["content"], operation_id="read")
    def contents(
        uri: Annotated[str, Query(min_length=1, max_length=MAX_URI_LENGTH)],
        level: Annotated[int, Query(ge=0, le=2)] = 0,
        offset: Annotated[int, Query(ge=0, le=10**12)] = 0,
        max_chars: Annotated[int, Query(ge=1, le=1_000_000)] = 200_000,
    ) -> Contents:
        return ops.read(caller(), uri, level, offset, max_chars)

    @app.get("/v1/tree", summary="Browse: the children of a folder with their titles and abstracts",
             tags=["content"], operation_id="tree")
    def browse(
        uri: Annotated[str, Query(min_length=1, max_length=MAX_URI_LENGTH)],
        depth: Annotated[int, Query(ge=1, le=3)] = 1,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
    ) -> Tree:
        return ops.tree(caller(), uri, depth, limit, offset)

    # ------------------------------------------------------------------ service

    @app.get("/v1/stats", summary="This process's retrieval statistics for the caller's tenant", tags=["service"],
             operation_id="stats")
    def stats() -> StatsSnapshot:
        return StatsSnapshot.model_validate(ops.stats(caller()))

    @app.get("/v1/overview", summary="What the tenant holds (documents, records, memories, sessions, index size) "
             "and its queries over time", tags=["service"], operation_id="overview")
    def tenant_overview() -> TenantOverview:
        return ops.overview(caller())

    @app.get("/v1/me", summary="Who these credentials are: tenant, user, role, and what they may call",
             tags=["service"], operation_id="me")
    def me() -> Me:
        return ops.me(caller())

    @app.get("/v1/health", summary="Liveness: answers without credentials and without touching a backend", tags=["service"],
             operation_id="health")
    def health() -> Health:
        cfg = services.settings
        return Health(version=__version__, store=cfg.store.backend, embedder=cfg.embedder.provider)

    @app.get("/v1/openapi.json", summary="This API's OpenAPI document", tags=["service"], include_in_schema=False)
    def openapi() -> Response[str]:
        return Response(200, "application/json", openapi_json(app))

    # ------------------------------------------------------------------ errors

    def envelope(exc: CairnError, status: int) -> Response[str]:
        body = {**exc.to_dict(), "request_id": request_id()}
        after = getattr(exc, "retry_after_s", RETRY_AFTER_S)
        headers = {"Retry-After": str(after)} if status in (429, 503) else None
        return Response(status, "application/json", json.dumps(body, default=str), headers=headers)

    @app.exception_handler(CairnError)
    def cairn_error(exc: CairnError) -> Response[str]:
        status = exc.http_status
        if status >= 500:
            log.warning("request failed", error=exc.code, status=status, message=exc.message[:500], request_id=request_id())
        if isinstance(exc, UpstreamError) and status >= 500:  # a backend's words (hosts, ports) stay in the log
            what = "is unavailable; retry" if exc.retryable else "refused or failed the request"
            public = UpstreamError(f"a service cairn depends on ({exc.code}) {what} (request {request_id()})",
                                   retryable=exc.retryable)
            public.code = exc.code
            return envelope(public, status)
        return envelope(exc, status)

    @app.exception_handler(RequestValidationError)
    def invalid(exc: RequestValidationError) -> Response[str]:
        problems = [_problem(e) for e in exc.errors()]
        services.operations.record(operation(), 400, None)  # refused before the door middleware ran
        return envelope(RequestError("invalid request: " + "; ".join(problems), details=problems), 400)

    @app.exception_handler(UnicodeDecodeError)
    def not_text(exc: UnicodeDecodeError) -> Response[str]:
        return envelope(RequestError("the request body is not UTF-8 text; send JSON encoded as UTF-8"), 400)

    @app.exception_handler(RecursionError)
    def too_deep(exc: RecursionError) -> Response[str]:
        return envelope(RequestError("the request body is nested too deeply; flatten it"), 400)

    @app.not_found
    def not_found(exc: NotFoundError) -> Response[str]:
        event = app.current_event
        return envelope(RouteNotFound(f"no route {event.http_method} {event.path}; see GET /v1/openapi.json"), 404)

    @app.exception_handler(Exception)
    def unexpected(exc: Exception) -> Response[str]:
        rid = request_id()
        log.exception("unhandled error", request_id=rid, path=app.current_event.path)
        body = {"error": "internal_error", "type": "InternalError", "message": f"internal error (request {rid})",
                "retryable": False, "request_id": rid}
        return Response(500, "application/json", json.dumps(body))

    return app


def resolve(app: APIGatewayHttpResolver, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Answer one API Gateway event (both doors call this). The body is checked first, so that
    a body that is not base64 when it says so, not UTF-8, not JSON, nested too deeply, with a
    number of thousands of digits, with NaN/Infinity or a lone surrogate is a 400, not a 500."""
    rid = str((event.get("requestContext") or {}).get("requestId") or uuid.uuid4())
    set_correlation_id(rid)  # on every log line of this request, and carried into the workflow's tasks
    try:
        event = as_json_event(event)
    except UnsupportedMediaType as exc:
        return {"statusCode": 415, "headers": {"Content-Type": "application/json"},
                "body": json.dumps({**exc.to_dict(), "request_id": rid})}
    problem = body_problem(event)
    if problem is not None:
        body = {**RequestError(problem).to_dict(), "request_id": rid}
        return {"statusCode": 400, "headers": {"Content-Type": "application/json"}, "body": json.dumps(body)}
    return app.resolve(event, context)


_JSON_TYPES = ("application/json",)
_LENIENT_TYPES = ("", "application/x-www-form-urlencoded", "text/plain")  # what `curl -d` and plain clients send


def as_json_event(event: dict[str, Any]) -> dict[str, Any]:
    """The event with a body the route table reads as JSON. ``curl -d`` sends JSON as
    ``application/x-www-form-urlencoded``, plain clients as ``text/plain`` or with no type: a body
    that is JSON is read as JSON whatever such a header says. Any other type (multipart form data,
    XML, ...) is a 415 that names the header to send."""
    if event.get("body") in (None, ""):
        return event
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    declared = headers.get("content-type", "").split(";")[0].strip().lower()
    if declared in _JSON_TYPES:
        return event
    if declared not in _LENIENT_TYPES and not declared.endswith("+json"):
        raise UnsupportedMediaType(
            f"the request body is {declared!r}; this API reads JSON: send 'Content-Type: application/json' "
            "with a JSON body")
    if body_problem(event) is not None:
        raise UnsupportedMediaType(
            f"the request body is not JSON (Content-Type {declared or 'missing'!r}); send a JSON body with "
            "'Content-Type: application/json' (curl: -H 'Content-Type: application/json' -d '{...}')")
    return {**event, "headers": {**headers, "content-type": "application/json"}}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows; send a finite number")


def body_problem(event: dict[str, Any]) -> str | None:
    """What is wrong with an event's body, or None when it is JSON a route can read (or absent)."""
    raw = event.get("body")
    if raw in (None, ""):
        return None
    if event.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            return "the request body is marked base64 but is not valid base64"
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            return "the request body is not UTF-8 text; send JSON encoded as UTF-8"
    try:
        data = json.loads(raw, parse_constant=_no_constant)
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except RecursionError:
        return "the request body is nested too deeply; flatten it"
    except UnicodeEncodeError:
        return "the request body holds an unpaired surrogate (a broken \\ud800-\\udfff escape); send valid Unicode text"
    except ValueError as exc:
        return f"the request body is not valid JSON: {exc}"
    return None


def _problem(error: dict[str, Any]) -> str:
    loc = [str(p) for p in error.get("loc", ()) if p not in ("body",)]
    where = ".".join(loc) or "body"
    msg = str(error.get("msg") or error.get("type") or "invalid").removeprefix("Value error, ")
    if error.get("type") == "extra_forbidden":
        msg = "unknown field"
    if error.get("type") == "json_invalid":
        where, msg = "body", "not valid JSON"
    return f"{where}: {msg}"


def _payload(answer: Any, include_provenance: bool) -> dict[str, Any]:
    """A find/search answer as the API's JSON (in process: a FindResult; through the workflow: its output)."""
    if isinstance(answer, FindResponse):
        return answer.model_dump(mode="json", exclude_none=True)
    return dict(answer.to_dict(include_provenance=include_provenance))


def _bounded(payload: dict[str, Any]) -> FindResponse:
    size = len(json.dumps(payload, default=str))
    if size > MAX_RESPONSE_BYTES:
        raise PayloadTooLarge(
            f"the answer would be {size:,} bytes, over the {MAX_RESPONSE_BYTES:,}-byte limit of one response; "
            "ask for fewer results (limit) or without include_provenance"
        )
    return FindResponse.model_validate(payload)
