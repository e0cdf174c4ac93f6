"""The request and response bodies of the ``/v1`` API (one model per request, shared by the
API Lambda, ``cairn serve``, the OpenAPI document and :mod:`cairn.client`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..context import ContextBlock as ContextAnswer  # noqa: F401 - re-exported: the API answers the block as the library builds it
from ..ingest.sources import PayloadDocument
from ..requests import FindRequest, Mode, no_tenant

MAX_DOCUMENTS_PER_REQUEST = 1000


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_tenant(cls, data: Any) -> Any:
        return no_tenant(data)


class FindBody(FindRequest):
    """``POST /v1/find``: one query, no session, no planning; quick mode unless ``mode``."""
    rerank: bool = Field(default=False, description="rerank the candidates (the configured reranker)")

    def request(self) -> FindRequest:
        return FindRequest(**self.model_dump(exclude={"rerank"}, exclude_unset=True))


class SearchBody(FindRequest):
    """``POST /v1/search``: plans first (with the session when given); mode ``auto`` by default
    (thinking, or quick for a plan that carries the conversation in a second typed query)."""
    mode: Mode = "auto"
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


class MemoryPut(_Body):
    """``POST /v1/memories``: one memory of an end user, at ``cairn://user/{user}/memories/<category>/<key>``."""

    user: str | None = Field(default=None, description="the end user (default: the one your credentials are bound to)")
    text: str = Field(min_length=1, max_length=20_000)
    category: str = Field(description="e.g. preferences, profile, entities, events, cases")
    key: str | None = Field(default=None, description="its name in the category; default: derived from the text")
    title: str | None = None
    metadata: dict[str, Any] | None = None
    source: str | None = Field(default=None, description="where it comes from: a URL, a message id")


class DocumentsPut(_Body):
    """``PUT /v1/documents``: upsert documents under ``root_uri``; their siblings stay unless ``sync``."""

    root_uri: str
    documents: list[PayloadDocument] = Field(min_length=1, max_length=MAX_DOCUMENTS_PER_REQUEST)
    sync: bool = Field(default=False, description="make the folder hold exactly these documents (others are deleted)")
    chunk_chars: int | None = Field(default=None, description="characters per chunk at most (default 1500)")
    chunk_overlap: int | None = Field(default=None, description="characters carried into the next piece of a long section")


class IngestSummary(BaseModel):
    root_uri: str
    documents: int
    records: int
    written: int
    removed: int
    unchanged: int
    rejected: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    seconds: float


class Deleted(BaseModel):
    uri: str
    removed: int


class Contents(BaseModel):
    """``GET /v1/contents``: a URI read at one level; L2 bodies come in pages of ``max_chars``."""

    uri: str
    level: int
    kind: str
    title: str
    text: str
    source: str
    offset: int = 0
    next_offset: int | None = Field(default=None, description="pass as offset to read on; null at the end")
    total_chars: int


class TreeNode(BaseModel):
    uri: str
    kind: Literal["directory", "file"]
    title: str
    abstract: str
    context_type: str
    children: list[TreeNode] | None = None
    children_total: int | None = None


class Tree(BaseModel):
    uri: str
    children: list[TreeNode]
    total: int = Field(description="children of the folder; more than listed when the list was cut at limit")


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
