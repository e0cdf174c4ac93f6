"""The bodies the application layer takes (a memory, documents) and the answers no other module
defines (the user's data, who am I)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cairn.core.requests import no_tenant
from cairn.engine.ingest.sources import PayloadDocument
from cairn.ports.sessions.base import Message, Session

MAX_DOCUMENTS_PER_REQUEST = 1000


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_tenant(cls, data: Any) -> Any:
        return no_tenant(data)


class MemoryPut(_Body):
    """``POST /v1/memories``: one memory of an end user, at ``cairn://user/{user}/memories/<category>/<key>``."""

    user: str | None = Field(default=None, description="the end user (default: the one your credentials are bound to)")
    text: str = Field(min_length=1, max_length=20_000, description="the fact, in a sentence or two about the user")
    category: str | None = Field(default=None, max_length=64,
                                 description="e.g. preferences, profile, entities, events, cases; default: profile "
                                             "(the answer's note says so)")
    key: str | None = Field(default=None, description="its name in the category; default: derived from the text")
    title: str | None = Field(default=None, description="a short title (default: the text's first line)")
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


class Me(BaseModel):
    """``GET /v1/me``: who the credentials are, and the operations they may call."""

    tenant: str
    user: str | None = None
    role: str
    can: list[str] = Field(description="the operations these credentials may call (on their own data, for a user key)")


class SessionList(BaseModel):
    """``GET /v1/users/{user}/sessions``: newest first, ``limit`` from ``offset``."""

    user: str
    sessions: list[Session]
    total: int | None = Field(default=None, description="the user's sessions in all")
    offset: int = 0
    next_offset: int | None = Field(default=None, description="pass as offset for the next page; null at the end")


class MemoryItemOut(BaseModel):
    uri: str
    category: str
    title: str
    text: str
    updated_at: float
    metadata: dict[str, Any] = Field(default_factory=dict)


class MemoryList(BaseModel):
    """``GET /v1/users/{user}/memories``: newest first, ``limit`` from ``offset``."""

    user: str
    memories: list[MemoryItemOut]
    total: int = Field(description="the user's memories in all (of the category, when one is named)")
    offset: int = 0
    next_offset: int | None = Field(default=None, description="pass as offset for the next page; null at the end")


DEFAULT_PAGE = 100  # items of a list per page when the request names no limit
MAX_PAGE = 1000


def next_offset(offset: int, shown: int, total: int) -> int | None:
    """Where the page after one of ``shown`` items from ``offset`` starts; None at the end."""
    end = offset + shown
    return end if shown and end < total else None


class Forgotten(BaseModel):
    uri: str
    removed: int


class SessionExport(BaseModel):
    session: Session
    messages: list[Message]
    prefetched: dict[str, Any] | None = None


class UserExport(BaseModel):
    """``GET /v1/users/{user}/export``: everything cairn holds about one end user."""

    tenant: str
    user: str
    memories: list[MemoryItemOut]
    skills: list[MemoryItemOut]
    sessions: list[SessionExport]


class UserErased(BaseModel):
    """``DELETE /v1/users/{user}``: what was removed."""

    user: str
    records: int = Field(description="memory and skill records removed from the index")
    sessions: int
    messages: int
