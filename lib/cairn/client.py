"""A Python client of cairn's ``/v1`` HTTP API (``cairn serve`` or a deployed stack), on httpx.

    from cairn.client import CairnClient

    with CairnClient("http://127.0.0.1:8080", api_key="...") as cairn:
        result = cairn.find("how do I request a refund?", limit=5)      # a FindResponse
        session = cairn.create_session(user="ann")
        cairn.append_message(session.id, "user", "We moved billing to Stripe.")
        print(cairn.search("how do refunds work there?", session_id=session.id).all())

:class:`AsyncCairnClient` has the same methods as coroutines. Answers are the library's own
models (:class:`~cairn.core.models.FindResponse`, :class:`~cairn.ports.sessions.base.Session`, ...). An
error answer raises the :mod:`cairn.core.errors` class of its family (``RequestError`` for 400,
``Unauthorized``, ``NotFound``, ...) with the server's message and request id. 429 and 503 are
retried with full-jitter backoff, honouring ``Retry-After``; so are connection failures, for
requests that are safe to repeat (every GET, and appends sent with an idempotency key).
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from cairn.api.models import Contents, ContextAnswer, Deleted, Health, IngestSummary, Tree
from cairn.app.models import DEFAULT_PAGE, Forgotten, Me, MemoryList, SessionList, UserErased, UserExport
from cairn.app.overview import TenantOverview
from cairn.core import errors
from cairn.core.models import FindResponse
from cairn.core.tls import verified_context
from cairn.engine.memory import CommitResult, RememberResult
from cairn.ports.sessions.base import Message, Session, SessionView

T = TypeVar("T", bound=BaseModel)
RETRY_STATUSES = frozenset({429, 502, 503, 504})
_BY_STATUS: dict[int, type[errors.CairnError]] = {
    400: errors.RequestError, 401: errors.Unauthorized, 403: errors.Forbidden, 404: errors.NotFound,
    409: errors.Conflict, 413: errors.PayloadTooLarge, 415: errors.UnsupportedMediaType, 422: errors.IngestError,
    429: errors.Throttled,
    502: errors.UpstreamError, 503: errors.Unavailable,
}


class ApiError(errors.CairnError):
    """An error answer without a family of its own (its ``status`` is the HTTP status)."""


def error_from(response: httpx.Response) -> errors.CairnError:
    """The :mod:`cairn.core.errors` exception an error answer stands for."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    message = str(body.get("message") or f"HTTP {response.status_code}: {response.text[:300]}")
    if body.get("request_id"):
        message += f" (request {body['request_id']})"
    cls = _BY_STATUS.get(response.status_code, ApiError)
    named = getattr(errors, str(body.get("type") or ""), None)  # the server's own class, when it is one of ours
    if isinstance(named, type) and issubclass(named, cls) and named is not errors.CairnError:
        cls = named
    exc = cls(message, retryable=bool(body.get("retryable", response.status_code in RETRY_STATUSES)),
              details=body.get("details"))
    exc.code = str(body.get("error") or exc.code)
    exc.status = response.status_code
    exc.request_id = body.get("request_id")  # type: ignore[attr-defined]
    return exc


class _Retry:
    """Attempts with full-jitter exponential backoff; ``Retry-After`` (seconds) wins when given."""

    def __init__(self, attempts: int, base_s: float, cap_s: float) -> None:
        self.attempts, self.base_s, self.cap_s = max(1, attempts), base_s, cap_s

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        after = response.headers.get("retry-after") if response is not None else None
        if after:
            try:
                return min(self.cap_s, max(0.0, float(after)))
            except ValueError:
                pass
        return random.uniform(0, min(self.cap_s, self.base_s * 2**attempt))


def _given(**params: Any) -> dict[str, Any]:
    """The parameters that were given (None: left to the server's default)."""
    return {k: v for k, v in params.items() if v is not None}


class _Calls:
    """The API's requests, shared by the sync and async clients (each sends them its own way)."""

    @staticmethod
    def find(query: str, **options: Any) -> tuple[str, str, Any, type[BaseModel]]:
        return "POST", "/v1/find", {"query": query, **options}, FindResponse

    @staticmethod
    def search(query: str, session_id: str | None, **options: Any) -> tuple[str, str, Any, type[BaseModel]]:
        body = {"query": query, **options}
        if session_id is not None:
            body["session_id"] = session_id
        return "POST", "/v1/search", body, FindResponse


class CairnClient:
    """Synchronous client. ``base_url``: ``http://127.0.0.1:8080`` or your API's invoke URL."""

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout_s: float = 30.0, retries: int = 3,
                 backoff_s: float = 0.2, max_backoff_s: float = 8.0, transport: httpx.BaseTransport | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        auth = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout_s, transport=transport,
                                  headers={**auth, **(headers or {})}, verify=verified_context())
        self._retry = _Retry(retries + 1, backoff_s, max_backoff_s)

    def __enter__(self) -> CairnClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, path: str, *, json: Any = None, params: Mapping[str, Any] | None = None,
              headers: Mapping[str, str] | None = None, safe: bool = False) -> Any:
        for attempt in range(self._retry.attempts):
            last = attempt == self._retry.attempts - 1
            try:
                response = self._http.request(method, path, json=json, params=params, headers=headers)
            except httpx.TransportError as exc:
                if not safe or last:
                    raise errors.Unavailable(f"cannot reach cairn at {self._http.base_url}: {type(exc).__name__}") from None
                time.sleep(self._retry.delay(attempt, None))
                continue
            if response.status_code in RETRY_STATUSES and not last and (safe or response.status_code in (429, 503)):
                time.sleep(self._retry.delay(attempt, response))
                continue
            if response.status_code >= 400:
                raise error_from(response)
            return response.json()
        raise AssertionError("unreachable")

    def _model(self, cls: type[T], data: Any) -> T:
        return cls.model_validate(data)

    # ------------------------------------------------------------------ retrieval

    def find(self, query: str, **options: Any) -> FindResponse:
        """``POST /v1/find``; options as :class:`~cairn.core.requests.FindRequest` (limit, context_type, filter, ...)."""
        method, path, body, cls = _Calls.find(query, **options)
        return self._model(cls, self._send(method, path, json=body, safe=True))  # type: ignore[return-value]

    def search(self, query: str, session_id: str | None = None, **options: Any) -> FindResponse:
        """``POST /v1/search``: planned with the session when given; thinking mode and rerank by default."""
        method, path, body, cls = _Calls.search(query, session_id, **options)
        return self._model(cls, self._send(method, path, json=body, safe=True))  # type: ignore[return-value]

    def context(self, query: str, session_id: str | None = None, *, budget_tokens: int | None = None,
                **options: Any) -> ContextAnswer:
        """``POST /v1/context``: a prompt-ready block within ``budget_tokens``."""
        method, path, body, _ = _Calls.search(query, session_id, **options, **_given(budget_tokens=budget_tokens))
        return ContextAnswer.model_validate(self._send(method, "/v1/context", json=body, safe=True))

    # ------------------------------------------------------------------ sessions

    def create_session(self, user: str | None = None, ttl_s: int | None = None) -> Session:
        return Session.model_validate(self._send("POST", "/v1/sessions", json=_given(user=user, ttl_s=ttl_s)))

    def get_session(self, session_id: str, recent: int = 5) -> SessionView:
        return SessionView.model_validate(self._send("GET", f"/v1/sessions/{session_id}", params={"recent": recent}, safe=True))

    def delete_session(self, session_id: str) -> bool:
        return bool(self._send("DELETE", f"/v1/sessions/{session_id}", safe=True).get("deleted"))

    def append_message(self, session_id: str, role: str, content: str, *, name: str | None = None,
                       created_at: float | None = None, idempotency_key: str | None = None) -> Message:
        """Append a message. An idempotency key (one is made when not given) makes a retried append land once."""
        key = idempotency_key or str(uuid.uuid4())
        body = _given(role=role, content=content, name=name, created_at=created_at)
        data = self._send("POST", f"/v1/sessions/{session_id}/messages", json=body,
                          headers={"idempotency-key": key}, safe=True)
        return Message.model_validate(data)

    # ------------------------------------------------------------------ memory

    def remember(self, text: str, category: str | None = None, *, user: str | None = None, **fields: Any) -> RememberResult:
        """``POST /v1/memories``: add or update one memory (key, title, metadata, source in ``fields``);
        without ``category`` it is stored under "profile" and the answer's ``note`` says so."""
        body = _given(user=user, text=text, category=category, **fields)
        return RememberResult.model_validate(self._send("POST", "/v1/memories", json=body, safe=True))

    def commit(self, session_id: str) -> CommitResult:
        """``POST /v1/sessions/{id}/commit``: the session's new messages become memories (twice adds nothing)."""
        return CommitResult.model_validate(self._send("POST", f"/v1/sessions/{session_id}/commit", safe=True))

    def forget(self, uri: str) -> Forgotten:
        """``DELETE /v1/memories?uri=``: one memory (or a category) of a user."""
        return Forgotten.model_validate(self._send("DELETE", "/v1/memories", params={"uri": uri}, safe=True))

    def list_memories(self, user: str | None = None, *, category: str | None = None, offset: int = 0,
                      limit: int = DEFAULT_PAGE) -> MemoryList:
        return MemoryList.model_validate(self._send("GET", f"/v1/users/{self._user(user)}/memories",
                                                    params=_given(category=category, offset=offset, limit=limit), safe=True))

    def list_sessions(self, user: str | None = None, *, offset: int = 0, limit: int = DEFAULT_PAGE) -> SessionList:
        return SessionList.model_validate(self._send("GET", f"/v1/users/{self._user(user)}/sessions",
                                                     params={"offset": offset, "limit": limit}, safe=True))

    def export_user(self, user: str | None = None) -> UserExport:
        return UserExport.model_validate(self._send("GET", f"/v1/users/{self._user(user)}/export", safe=True))

    def erase_user(self, user: str | None = None) -> UserErased:
        return UserErased.model_validate(self._send("DELETE", f"/v1/users/{self._user(user)}", safe=True))

    def _user(self, user: str | None) -> str:
        """The user named, else the one these credentials are bound to (asked once: GET /v1/me)."""
        if user:
            return user
        if getattr(self, "_me", None) is None:
            self._me = self.me()
        if self._me.user is None:
            raise errors.RequestError("user: name the end user (these credentials are not bound to one)")
        return self._me.user

    # ------------------------------------------------------------------ content

    def put_documents(self, root_uri: str, documents: Sequence[Mapping[str, Any]], *, sync: bool = False,
                      chunk_chars: int | None = None, chunk_overlap: int | None = None) -> IngestSummary:
        """``PUT /v1/documents``: each document ``{"path", "text", "title"?, "metadata"?}``."""
        body = {"root_uri": root_uri, "documents": list(documents), "sync": sync,
                **_given(chunk_chars=chunk_chars, chunk_overlap=chunk_overlap)}
        return IngestSummary.model_validate(self._send("PUT", "/v1/documents", json=body, safe=True))

    def delete_documents(self, uri: str) -> Deleted:
        return Deleted.model_validate(self._send("DELETE", "/v1/documents", params={"uri": uri}, safe=True))

    def contents(self, uri: str, level: int = 0, *, offset: int = 0, max_chars: int | None = None) -> Contents:
        params = _given(uri=uri, level=level, offset=offset, max_chars=max_chars)
        return Contents.model_validate(self._send("GET", "/v1/contents", params=params, safe=True))

    def read(self, uri: str, level: int = 0) -> Contents:
        """``uri`` at ``level`` with its whole text (every page of an L2 body), as ``Cairn.read``."""
        page = first = self.contents(uri, level)
        parts = [page.text]
        while page.next_offset is not None:
            page = self.contents(uri, level, offset=page.next_offset)
            parts.append(page.text)
        return first.model_copy(update={"text": "".join(parts), "next_offset": None})

    def tree(self, uri: str, depth: int = 1, limit: int = 100, offset: int = 0) -> Tree:
        params = {"uri": uri, "depth": depth, "limit": limit, "offset": offset}
        return Tree.model_validate(self._send("GET", "/v1/tree", params=params, safe=True))

    # ------------------------------------------------------------------ service

    def stats(self) -> dict[str, Any]:
        return self._send("GET", "/v1/stats", safe=True)

    def statistics(self) -> dict[str, Any]:
        """``GET /v1/stats`` (as ``Cairn.statistics``)."""
        return self.stats()

    def me(self) -> Me:
        return Me.model_validate(self._send("GET", "/v1/me", safe=True))

    def overview(self) -> TenantOverview:
        """``GET /v1/overview``: what the tenant holds and its typed queries per minute."""
        return TenantOverview.model_validate(self._send("GET", "/v1/overview", safe=True))

    def health(self) -> Health:
        return Health.model_validate(self._send("GET", "/v1/health", safe=True))


class AsyncCairnClient:
    """The asynchronous twin of :class:`CairnClient` (same methods, as coroutines)."""

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout_s: float = 30.0, retries: int = 3,
                 backoff_s: float = 0.2, max_backoff_s: float = 8.0, transport: httpx.AsyncBaseTransport | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        auth = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=timeout_s, transport=transport,
                                       headers={**auth, **(headers or {})}, verify=verified_context())
        self._retry = _Retry(retries + 1, backoff_s, max_backoff_s)

    async def __aenter__(self) -> AsyncCairnClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, method: str, path: str, *, json: Any = None, params: Mapping[str, Any] | None = None,
                    headers: Mapping[str, str] | None = None, safe: bool = False) -> Any:
        for attempt in range(self._retry.attempts):
            last = attempt == self._retry.attempts - 1
            try:
                response = await self._http.request(method, path, json=json, params=params, headers=headers)
            except httpx.TransportError as exc:
                if not safe or last:
                    raise errors.Unavailable(f"cannot reach cairn at {self._http.base_url}: {type(exc).__name__}") from None
                await asyncio.sleep(self._retry.delay(attempt, None))
                continue
            if response.status_code in RETRY_STATUSES and not last and (safe or response.status_code in (429, 503)):
                await asyncio.sleep(self._retry.delay(attempt, response))
                continue
            if response.status_code >= 400:
                raise error_from(response)
            return response.json()
        raise AssertionError("unreachable")

    async def find(self, query: str, **options: Any) -> FindResponse:
        method, path, body, cls = _Calls.find(query, **options)
        return cls.model_validate(await self._send(method, path, json=body, safe=True))  # type: ignore[return-value]

    async def search(self, query: str, session_id: str | None = None, **options: Any) -> FindResponse:
        method, path, body, cls = _Calls.search(query, session_id, **options)
        return cls.model_validate(await self._send(method, path, json=body, safe=True))  # type: ignore[return-value]

    async def create_session(self, user: str | None = None, ttl_s: int | None = None) -> Session:
        return Session.model_validate(await self._send("POST", "/v1/sessions", json=_given(user=user, ttl_s=ttl_s)))

    async def get_session(self, session_id: str, recent: int = 5) -> SessionView:
        data = await self._send("GET", f"/v1/sessions/{session_id}", params={"recent": recent}, safe=True)
        return SessionView.model_validate(data)

    async def delete_session(self, session_id: str) -> bool:
        return bool((await self._send("DELETE", f"/v1/sessions/{session_id}", safe=True)).get("deleted"))

    async def append_message(self, session_id: str, role: str, content: str, *, name: str | None = None,
                             created_at: float | None = None, idempotency_key: str | None = None) -> Message:
        key = idempotency_key or str(uuid.uuid4())
        body = _given(role=role, content=content, name=name, created_at=created_at)
        data = await self._send("POST", f"/v1/sessions/{session_id}/messages", json=body,
                                headers={"idempotency-key": key}, safe=True)
        return Message.model_validate(data)

    async def remember(self, text: str, category: str | None = None, *, user: str | None = None, **fields: Any) -> RememberResult:
        body = _given(user=user, text=text, category=category, **fields)
        return RememberResult.model_validate(await self._send("POST", "/v1/memories", json=body, safe=True))

    async def commit(self, session_id: str) -> CommitResult:
        return CommitResult.model_validate(await self._send("POST", f"/v1/sessions/{session_id}/commit", safe=True))

    async def put_documents(self, root_uri: str, documents: Sequence[Mapping[str, Any]], *, sync: bool = False) -> IngestSummary:
        body = {"root_uri": root_uri, "documents": list(documents), "sync": sync}
        return IngestSummary.model_validate(await self._send("PUT", "/v1/documents", json=body, safe=True))

    async def delete_documents(self, uri: str) -> Deleted:
        return Deleted.model_validate(await self._send("DELETE", "/v1/documents", params={"uri": uri}, safe=True))

    async def contents(self, uri: str, level: int = 0, *, offset: int = 0, max_chars: int | None = None) -> Contents:
        params = _given(uri=uri, level=level, offset=offset, max_chars=max_chars)
        return Contents.model_validate(await self._send("GET", "/v1/contents", params=params, safe=True))

    async def tree(self, uri: str, depth: int = 1, limit: int = 100, offset: int = 0) -> Tree:
        params = {"uri": uri, "depth": depth, "limit": limit, "offset": offset}
        return Tree.model_validate(await self._send("GET", "/v1/tree", params=params, safe=True))

    async def context(self, query: str, session_id: str | None = None, *, budget_tokens: int | None = None,
                      **options: Any) -> ContextAnswer:
        method, _, body, _ = _Calls.search(query, session_id, **options, **_given(budget_tokens=budget_tokens))
        return ContextAnswer.model_validate(await self._send(method, "/v1/context", json=body, safe=True))

    async def forget(self, uri: str) -> Forgotten:
        return Forgotten.model_validate(await self._send("DELETE", "/v1/memories", params={"uri": uri}, safe=True))

    async def list_memories(self, user: str, *, category: str | None = None, offset: int = 0,
                            limit: int = DEFAULT_PAGE) -> MemoryList:
        return MemoryList.model_validate(await self._send("GET", f"/v1/users/{user}/memories",
                                                          params=_given(category=category, offset=offset, limit=limit),
                                                          safe=True))

    async def list_sessions(self, user: str, *, offset: int = 0, limit: int = DEFAULT_PAGE) -> SessionList:
        return SessionList.model_validate(await self._send("GET", f"/v1/users/{user}/sessions",
                                                           params={"offset": offset, "limit": limit}, safe=True))

    async def export_user(self, user: str) -> UserExport:
        return UserExport.model_validate(await self._send("GET", f"/v1/users/{user}/export", safe=True))

    async def erase_user(self, user: str) -> UserErased:
        return UserErased.model_validate(await self._send("DELETE", f"/v1/users/{user}", safe=True))

    async def me(self) -> Me:
        return Me.model_validate(await self._send("GET", "/v1/me", safe=True))

    async def overview(self) -> TenantOverview:
        return TenantOverview.model_validate(await self._send("GET", "/v1/overview", safe=True))

    async def stats(self) -> dict[str, Any]:
        return await self._send("GET", "/v1/stats", safe=True)

    async def health(self) -> Health:
        return Health.model_validate(await self._send("GET", "/v1/health", safe=True))
