"""Lambda: cairn's HTTP API behind an API Gateway HTTP API (payload format 2.0).

Routes::

    POST /find                       find() in process (one query, no planning)
    POST /search                     search(): the Express workflow (StartSyncExecution) when
                                     CAIRN_STATE_MACHINE_ARN is set, else in process
    POST /sessions                   create a session            {user?, ttl_s?}
    POST /sessions/{id}/messages     append a message            {role, content}
    GET  /sessions/{id}              the session view (?recent=N)
    GET  /stats                      this container's retrieval statistics for the caller's tenant

**Tenant.** Taken from the caller's credentials as API Gateway passes them in
``requestContext.authorizer``, in this order: a Lambda authorizer's context ``tenant``; a JWT
authorizer's claim (``CAIRN_TENANT_CLAIM``, default ``custom:tenant``); for IAM auth, the
caller's ``userArn`` or ``accountId`` looked up in ``CAIRN_IAM_TENANTS`` (a JSON object). No
tenant → 401. Headers are never read for the tenant (an authorizer may map one into its
context). A body that names a ``tenant`` is **rejected** with 400, so a client that believes it
can switch tenants learns at once that it cannot.

**Errors.** Every ``CairnError`` becomes ``{"error", "message", "retryable", ...}`` with its status
(400 bad request, 404 unknown session or route, 503 retry, 502 backend); anything unexpected is
logged and answered with a 500 that holds no stack trace.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from typing import Any, Literal

from cairn.errors import CairnError, RequestError
from cairn.observability.logging import get_logger
from cairn.requests import FindRequest, parse_request
from cairn.workflow import Runtime, WorkflowFailed, http_status
from pydantic import BaseModel, ConfigDict

log = get_logger("cairn.functions.api")
runtime = Runtime()  # clients are built on the first request that needs them, then reused


class Unauthorized(CairnError):
    code = "unauthorized"


class RouteNotFound(RequestError):
    code = "not_found"


class SearchRequest(FindRequest):
    """``POST /search``: a find request plus an optional session; thinking mode by default."""

    mode: Literal["quick", "thinking"] = "thinking"
    session_id: str | None = None
    rerank: bool = True

    def find_request(self) -> FindRequest:
        return FindRequest(**self.model_dump(exclude={"session_id", "rerank"}))


class CreateSessionBody(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    user: str | None = None
    ttl_s: int | None = None


class AppendBody(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str
    content: str


class Response(BaseModel):
    """An API Gateway (payload 2.0) response."""

    statusCode: int
    body: str
    headers: dict[str, str] = {"content-type": "application/json"}


# --------------------------------------------------------------------------- tenant and body


def tenant_of(event: dict[str, Any]) -> str:
    """The tenant of the caller's credentials (see the module doc); 401 when there is none."""
    auth = (event.get("requestContext") or {}).get("authorizer") or {}
    tenant = (auth.get("lambda") or {}).get("tenant")
    if not tenant and "jwt" in auth:
        claim = os.environ.get("CAIRN_TENANT_CLAIM", "custom:tenant")
        tenant = ((auth["jwt"] or {}).get("claims") or {}).get(claim)
    if not tenant and "iam" in auth:
        iam = auth["iam"] or {}
        mapping = json.loads(os.environ.get("CAIRN_IAM_TENANTS") or "{}")
        tenant = mapping.get(iam.get("userArn") or "") or mapping.get(iam.get("accountId") or "")
    if not tenant or not isinstance(tenant, str):
        raise Unauthorized("no tenant in the caller's credentials: call through an authorizer that sets one")
    return tenant


def body_of(event: dict[str, Any]) -> dict[str, Any]:
    raw = event.get("body")
    if raw in (None, ""):
        return {}
    if event.get("isBase64Encoded"):
        raw = base64.b64decode(raw).decode("utf-8", errors="replace")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise RequestError(f"the request body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(data, dict):
        raise RequestError(f"the request body must be a JSON object, got {type(data).__name__}")
    if "tenant" in data:
        raise RequestError("'tenant' is not accepted in the body: the tenant comes from your credentials; remove it")
    return data


# --------------------------------------------------------------------------- routes


def find(tenant: str, event: dict[str, Any], _: dict[str, str]) -> tuple[int, Any]:
    request: FindRequest = parse_request(FindRequest, body_of(event))
    svc = runtime.cairn(tenant)
    result = svc.find(request)
    svc.stats.emit_emf()
    return 200, result.to_dict(include_provenance=request.include_provenance)


def search(tenant: str, event: dict[str, Any], _: dict[str, str]) -> tuple[int, Any]:
    body: SearchRequest = parse_request(SearchRequest, body_of(event))
    return 200, runtime.search(tenant, body.find_request(), body.session_id, rerank=body.rerank)


def create_session(tenant: str, event: dict[str, Any], _: dict[str, str]) -> tuple[int, Any]:
    body: CreateSessionBody = parse_request(CreateSessionBody, body_of(event))
    return 201, runtime.sessions.create(tenant, body.user, body.ttl_s).model_dump(mode="json")


def append_message(tenant: str, event: dict[str, Any], params: dict[str, str]) -> tuple[int, Any]:
    body: AppendBody = parse_request(AppendBody, body_of(event))
    return 201, runtime.sessions.append(tenant, params["id"], body.role, body.content).model_dump(mode="json")


def get_session(tenant: str, event: dict[str, Any], params: dict[str, str]) -> tuple[int, Any]:
    recent = (event.get("queryStringParameters") or {}).get("recent", "5")
    if not str(recent).isdigit():
        raise RequestError(f"recent={recent!r} is not valid; use a whole number from 0 to 1000")
    return 200, runtime.sessions.get(tenant, params["id"], recent=int(recent)).model_dump(mode="json")


def get_stats(tenant: str, event: dict[str, Any], _: dict[str, str]) -> tuple[int, Any]:
    return 200, runtime.tenant_stats(tenant).snapshot().model_dump(mode="json")


Route = Callable[[str, dict[str, Any], dict[str, str]], tuple[int, Any]]
ROUTES: dict[str, Route] = {
    "POST /find": find,
    "POST /search": search,
    "POST /sessions": create_session,
    "POST /sessions/{id}/messages": append_message,
    "GET /sessions/{id}": get_session,
    "GET /stats": get_stats,
}


def _match(method: str, path: str) -> tuple[Route, dict[str, str]] | None:
    """Match a path against the route templates (when the event has no routeKey)."""
    parts = [p for p in path.split("/") if p]
    for key, route in ROUTES.items():
        verb, template = key.split(" ", 1)
        tparts = [p for p in template.split("/") if p]
        if verb != method or len(tparts) != len(parts):
            continue
        params = {t[1:-1]: p for t, p in zip(tparts, parts, strict=True) if t.startswith("{")}
        if all(t.startswith("{") or t == p for t, p in zip(tparts, parts, strict=True)):
            return route, params
    return None


def route_of(event: dict[str, Any]) -> tuple[Route, dict[str, str]]:
    key = event.get("routeKey")
    if key in ROUTES:
        return ROUTES[key], dict(event.get("pathParameters") or {})
    http = (event.get("requestContext") or {}).get("http") or {}
    method, path = http.get("method", ""), event.get("rawPath") or http.get("path") or ""
    found = _match(method, path)
    if found is None:
        raise RouteNotFound(f"no route {method} {path}; routes: {', '.join(ROUTES)}")
    return found


def _respond(status: int, payload: Any) -> dict[str, Any]:
    return Response(statusCode=status, body=json.dumps(payload, default=str)).model_dump()


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    try:
        route, params = route_of(event)
        tenant = tenant_of(event)
        status, payload = route(tenant, event, params)
        return _respond(status, payload)
    except Unauthorized as exc:
        return _respond(401, exc.to_dict())
    except RouteNotFound as exc:
        return _respond(404, exc.to_dict())
    except WorkflowFailed as exc:
        return _respond(exc.status, exc.to_dict())
    except CairnError as exc:
        return _respond(http_status(exc), exc.to_dict())
    except Exception:
        request_id = getattr(context, "aws_request_id", None)
        log.exception("unhandled error", request_id=request_id, route=event.get("routeKey"))
        return _respond(500, {"error": "internal_error", "message": f"internal error (request {request_id})", "retryable": False})
