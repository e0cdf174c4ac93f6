"""The OpenAPI document of the ``/v1`` route table (``GET /v1/openapi.json``; committed as
``docs/openapi.json`` by ``make openapi``).

Powertools generates the document from the route table; this module adds what the table does not
say, so that a client generated from the document works unedited:

- a short ``operationId`` per route (:data:`OPERATIONS`, keyed by method and path), instead of the
  framework's ``find_v1_find_post``;
- the status a route answers on success (201 where the server creates something);
- cairn's error envelope (:class:`~cairn.api.models.ErrorBody`) under every status a route can
  answer with: invalid requests answer 400, never 422; 422 is content that cannot be ingested;
- bearer authentication in ``components.securitySchemes``, required by every route but the public
  ones (:data:`~cairn.api.auth.PUBLIC_ROUTES`).

A route missing from :data:`OPERATIONS` keeps the framework's id and only the common errors;
``tests/unit/test_openapi.py`` fails until it is added.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from cairn.api.auth import PUBLIC_ROUTES
from cairn.api.models import ErrorBody
from cairn.core.distribution import __version__

TITLE = "cairn"
SECURITY_SCHEME = "bearer"
ERRORS: dict[int, str] = {
    400: "Bad request: every problem is listed in `details`, each with where it is.",
    401: "Missing or unknown credentials (`Authorization: Bearer <API key or token>`).",
    403: "The credentials may not do this (another end user's data, or a role that does not allow it).",
    404: "Not found: the session, URI or user named.",
    409: "Conflict: a concurrent write won the race; read again and retry.",
    413: "Too large: the request body, or the answer it would need; send less or ask for fewer results.",
    422: "Content that cannot be ingested as it is (the message says why).",
    429: "Too many requests: retry after `Retry-After` seconds.",
    500: "Internal error: the message carries the request id to report.",
    502: "A service cairn depends on refused or failed the request.",
    503: "Unavailable for now: retry after `Retry-After` seconds.",
}
# what any authenticated route may answer: bad input, credentials, throttling, backends
COMMON = (400, 401, 403, 429, 500, 502, 503)
PUBLIC_COMMON = (500,)


@dataclass(frozen=True)
class Operation:
    """What the document says of one route beyond what the route table says."""

    id: str
    description: str
    success: tuple[int, ...] = (200,)  # the statuses of a successful answer; the first is the usual one
    errors: tuple[int, ...] = ()  # beyond COMMON


_BODY = (413,)  # a request body past the server's bound
OPERATIONS: dict[tuple[str, str], Operation] = {
    ("post", "/v1/find"): Operation(
        "find", "The context for one query, without a session or planning (quick mode unless `mode`).",
        errors=(404, 413)),
    ("post", "/v1/search"): Operation(
        "search", "Plan (with `session_id`: the conversation's summary and last messages), retrieve "
        "hierarchically, rerank. A session belongs to a user: its memories are searched too.",
        errors=(404, 413)),
    ("post", "/v1/context"): Operation(
        "context", "The context an agent puts into its prompt: passages within a token budget.",
        errors=(404, 413)),
    ("post", "/v1/sessions"): Operation(
        "create_session", "Start a conversation, optionally of one end user.", success=(201,), errors=_BODY),
    ("get", "/v1/sessions/{session_id}"): Operation(
        "get_session", "A session's summary, recent messages and prefetched context.", errors=(404,)),
    ("delete", "/v1/sessions/{session_id}"): Operation(
        "delete_session", "Delete a session and its messages.", errors=(404,)),
    ("post", "/v1/sessions/{session_id}/messages"): Operation(
        "append_message", "Append one message. With an `Idempotency-Key` header a retried append lands once.",
        success=(201,), errors=(404, 409, 413)),
    ("post", "/v1/sessions/{session_id}/commit"): Operation(
        "commit_session", "Turn the session's messages since the last commit into memories of its user.",
        errors=(404, 409)),
    ("post", "/v1/memories"): Operation(
        "remember", "Write one memory of an end user: 201 when it is new, 200 when its key already "
        "existed and it was updated in place. Its siblings stay.", success=(201, 200), errors=(404, 409, 413)),
    ("delete", "/v1/memories"): Operation("forget_memory", "Forget one memory.", errors=(404,)),
    ("put", "/v1/documents"): Operation(
        "put_documents", "Upsert documents under `root_uri`; their siblings stay (`sync: true` makes the "
        "folder hold exactly these).", errors=(404, 409, 413)),
    ("delete", "/v1/documents"): Operation(
        "delete_documents", "Delete a document or a subtree, and update the summaries above it (a chunk "
        "alone cannot be deleted: 422).", errors=(404, 422)),
    ("get", "/v1/contents"): Operation(
        "read_contents", "Read a URI progressively: L0 abstract, L1 overview, L2 full body (paged with "
        "`offset`, `max_chars` and `next_offset`).", errors=(404, 413)),
    ("get", "/v1/tree"): Operation(
        "browse_tree", "The children of a folder with their titles and abstracts.", errors=(404, 413)),
    ("get", "/v1/stats"): Operation("get_stats", "This process's retrieval statistics for the caller's tenant."),
    ("get", "/v1/overview"): Operation("get_overview", "What the caller's tenant holds (documents, records, memories, "
                                       "sessions, index size) and its typed queries per minute."),
    ("get", "/v1/me"): Operation("get_me", "Who the credentials are: tenant, user, role and what they can do."),
    ("get", "/v1/users/{user}/sessions"): Operation("list_user_sessions", "The sessions of one end user.",
                                                     errors=(404,)),
    ("get", "/v1/users/{user}/memories"): Operation("list_user_memories", "The memories of one end user.",
                                                     errors=(404,)),
    ("get", "/v1/users/{user}/export"): Operation("export_user", "Everything cairn holds about one end user.",
                                                   errors=(404, 413)),
    ("delete", "/v1/users/{user}"): Operation("erase_user", "Erase one end user: counts of what was removed.",
                                               errors=(404,)),
    ("get", "/v1/health"): Operation("health", "Liveness: answers without credentials and without touching "
                                     "a backend."),
}


def operation_for(method: str, path: str) -> Operation | None:
    """The table's entry for one route of the document (``path`` as the document spells it)."""
    return OPERATIONS.get((method.lower(), path))


def declared_statuses(doc: dict[str, Any], method: str, path: str) -> set[int]:
    """The statuses the document declares for one route."""
    return {int(code) for code in doc["paths"][path][method.lower()]["responses"] if code.isdigit()}


def _success(op: dict[str, Any], statuses: tuple[int, ...], description: str, schemas: dict[str, Any]) -> None:
    """The table's success statuses; a status the route table declares with its own schema keeps it."""
    answers = op.setdefault("responses", {})
    declared = {code: answers[code] for code in list(answers) if code.startswith("2")}
    template = next((a for a in declared.values() if "content" in a), None) or declared.get("200") or {}
    for code in declared:
        if int(code) not in statuses:
            del answers[code]  # Powertools' 200 for a route that answers 201
    template = {**template, "description": description}
    schema = template.get("content", {}).get("application/json", {}).get("schema")
    if len(statuses) > 1 and schema is not None and "$ref" not in schema:
        # one inline schema under two statuses would be two models of one name in a generated client
        name = "".join(part.title() for part in op["operationId"].split("_")) + "Answer"
        schemas[name] = {**schema, "title": name}
        template["content"] = {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}
    for status in statuses:
        own = declared.get(str(status))
        answers[str(status)] = json.loads(json.dumps(own if own and "content" in own else template))
        answers[str(status)]["description"] = description


def _errors(op: dict[str, Any], statuses: tuple[int, ...]) -> None:
    envelope = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    answers = op.setdefault("responses", {})
    answers.pop("422", None)  # Powertools' validation error: cairn answers 400 with its envelope
    for status in sorted(set(statuses)):
        answers[str(status)] = {"description": ERRORS[status], "content": envelope}


def _postprocess(doc: dict[str, Any]) -> dict[str, Any]:
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(name, None)
    schemas["ErrorBody"] = ErrorBody.model_json_schema()
    components["securitySchemes"] = {SECURITY_SCHEME: {
        "type": "http", "scheme": "bearer",
        "description": "An API key (`cairn serve --api-keys`) or your identity provider's token (API Gateway).",
    }}
    for path, operations in doc.get("paths", {}).items():
        public = path in PUBLIC_ROUTES
        for method, op in operations.items():
            entry = operation_for(method, path)
            if entry is not None:
                op["operationId"] = entry.id
                op["description"] = entry.description
                _success(op, entry.success, op.get("summary") or entry.description, schemas)
            _errors(op, (PUBLIC_COMMON if public else COMMON) + (entry.errors if entry else ()))
            op["security"] = [] if public else [{SECURITY_SCHEME: []}]
    return doc


def openapi_json(app: APIGatewayHttpResolver) -> str:
    """The OpenAPI document of the route table (stable key order: committed as docs/openapi.json)."""
    doc = json.loads(app.get_openapi_json_schema(
        title=TITLE,
        version=__version__,
        summary="Context retrieval for AI agents: memories, resources and skills, ranked and explained.",
        description="Authenticate with 'Authorization: Bearer <API key>' (cairn serve) or your API Gateway authorizer.",
    ))
    return json.dumps(_postprocess(doc), indent=2, sort_keys=True) + "\n"
