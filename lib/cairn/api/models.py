"""The request and response bodies of the ``/v1`` API (one model per request, shared by the
API Lambda, ``cairn serve``, the OpenAPI document and :mod:`cairn.client`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from cairn.app.models import (  # noqa: F401 - the bodies the application takes, re-exported as the API's
    MAX_DOCUMENTS_PER_REQUEST,
    Deleted,
    DocumentsPut,
    IngestSummary,
    MemoryPut,
    _Body,
)
from cairn.core.requests import MODE_HELP, FindRequest, Mode
from cairn.engine.browse import Contents, Tree, TreeNode  # noqa: F401 - re-exported
from cairn.engine.context import ContextBlock as ContextAnswer  # noqa: F401 - re-exported: the API answers the block as the library builds it


class FindBody(FindRequest):
    """``POST /v1/find``: one query, no session, no planning; quick mode unless ``mode``."""
    rerank: bool = Field(default=False, description="rerank the candidates (the configured reranker)")

    def request(self) -> FindRequest:
        return FindRequest(**self.model_dump(exclude={"rerank"}, exclude_unset=True))


class SearchBody(FindRequest):
    """``POST /v1/search``: plans first (with the session when given); mode ``auto`` by default
    (thinking, or quick for a plan that carries the conversation in a second typed query)."""
    mode: Mode = Field(default="auto", description=MODE_HELP)
    session_id: str | None = Field(default=None, description="plan with this session's summary and recent messages")
    rerank: bool = True

    def request(self) -> FindRequest:
        return FindRequest(**self.model_dump(exclude={"session_id", "rerank"}, exclude_unset=True) | {"mode": self.mode})


class ContextBody(SearchBody):
    """``POST /v1/context``: a search (with the session when given) assembled into one prompt-ready
    block of at most ``budget_tokens`` tokens."""
    budget_tokens: int | None = Field(default=None, ge=50, le=200_000,
                                      description="the block's size at most, in tokens (default: the server's, 1500)")

    def request(self) -> FindRequest:
        return FindRequest(**self.model_dump(exclude={"session_id", "rerank", "budget_tokens"}, exclude_unset=True)
                           | {"mode": self.mode})


class SessionDeleted(BaseModel):
    id: str
    deleted: bool


class SessionCreate(_Body):
    user: str | None = Field(default=None, description="the end user the conversation belongs to")
    ttl_s: int | None = Field(default=None, description="seconds until the session expires")


class MessageAppend(_Body):
    role: Literal["user", "assistant"]
    content: str
    name: str | None = Field(default=None, description="who said it (the speaker's name)")
    created_at: float | None = Field(default=None, description="when it was said (epoch seconds); default now")


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    version: str
    store: str
    embedder: str


class ErrorBody(BaseModel):
    """Every error: one envelope, with the request id to quote when reporting it."""

    error: str = Field(description="a stable code: bad_request, invalid_filter, not_found, unauthorized, ...")
    type: str
    message: str
    retryable: bool
    request_id: str | None = None
    details: Any = None
