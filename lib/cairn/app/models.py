"""The answers of the application layer that no other module defines (the user's data, who am I)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ..sessions.base import Message, Session


class Me(BaseModel):
    """``GET /v1/me``: who the credentials are, and the operations they may call."""

    tenant: str
    user: str | None = None
    role: str
    can: list[str] = Field(description="the operations these credentials may call (on their own data, for a user key)")


class SessionList(BaseModel):
    user: str
    sessions: list[Session]


class MemoryItemOut(BaseModel):
    uri: str
    category: str
    title: str
    text: str
    updated_at: float
    metadata: dict[str, Any] = Field(default_factory=dict)


class MemoryList(BaseModel):
    user: str
    memories: list[MemoryItemOut]
    total: int


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
