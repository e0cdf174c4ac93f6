"""Sessions: messages, a compressed summary and prefetched context, in SQLite or DynamoDB."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cairn.core.errors import ConfigError
from cairn.ports.sessions.base import (
    Compression,
    Message,
    Session,
    SessionStore,
    SessionView,
    Summarizer,
)

__all__ = [
    "Compression",
    "Message",
    "Session",
    "SessionStore",
    "SessionView",
    "Summarizer",
    "open_session_store",
]


def open_session_store(
    backend: str,
    *,
    path: str | Path | None = None,
    table: str | None = None,
    region: str | None = None,
    endpoint_url: str | None = None,
    client: Any = None,
    **options: Any,
) -> SessionStore:
    """Build a session store; ``options`` go to :class:`SessionStore` (default_ttl_s,
    max_messages, keep_last, summarizer). Adding a backend is one branch here."""
    if backend == "sqlite":
        from cairn.ports.sessions.sqlite import SQLiteSessionStore

        if path is None:
            raise ConfigError("the sqlite session store needs a path (e.g. <home>/sessions.db)")
        return SQLiteSessionStore(path, **options)
    if backend == "dynamodb":
        from cairn.ports.sessions.dynamodb import DynamoDBSessionStore

        return DynamoDBSessionStore(table or "", client=client, region=region, endpoint_url=endpoint_url, **options)
    raise ConfigError(f"unknown session backend {backend!r}; available: sqlite, dynamodb")
