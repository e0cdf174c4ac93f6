"""The memory service: ``remember`` one memory, ``commit`` a session's new messages.

A commit reads the messages after the session's ``committed_through`` mark, archives them as
episodes (always), extracts typed memories when an extractor (an LLM) is given, writes every
record, and only then moves the mark (:meth:`SessionStore.mark_committed`). Every id is derived
from the session, the seqs and the memory's key, so a commit that failed half way is finished by
running it again (the records already written are rewritten identically), and a commit with no
new message writes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from cairn.core.errors import RequestError
from cairn.engine.memory.archive import episodes, window_start
from cairn.engine.memory.extract import LLMExtractor
from cairn.engine.memory.models import (
    CommitResult,
    MemoryItem,
    MemoryKind,
    WriteReport,
    check_category,
    check_metadata,
    slugify,
    text_key,
)
from cairn.engine.memory.writer import MemoryWriter
from cairn.ports.content import ContentStore
from cairn.ports.embeddings import Embedder
from cairn.ports.sessions.base import MAX_CONTENT_CHARS, SessionStore, check_id
from cairn.ports.vectorstores import VectorStore

log = logging.getLogger("cairn.engine.memory")
DEFAULT_WINDOW = 1  # turns per episode; chosen by measurement (benchmarks/README.md)


class RememberResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    uri: str
    created: bool  # False: an existing memory was updated (or was already exactly so)
    changed: bool
    folders: tuple[str, ...] = ()
    note: str | None = None  # what cairn chose for the caller (a category left out)


class MemoryService:
    """One tenant's memories. Dependencies come in; nothing is looked up globally."""

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        tenant: str,
        *,
        sessions: SessionStore | None = None,
        content: ContentStore | None = None,
        llm: Any = None,
        extractor: LLMExtractor | None = None,
        window: int = DEFAULT_WINDOW,
        clock: Callable[[], float] = time.time,
        write_batch: int | None = None,
    ) -> None:
        if window < 1:
            raise RequestError(f"window={window}: an episode holds at least one turn")
        self.tenant = tenant
        self.sessions = sessions
        self.window = window
        options = {"write_batch": write_batch} if write_batch else {}
        self.writer = MemoryWriter(store, embedder, tenant, content=content, clock=clock, **options)
        self.extractor = extractor or (LLMExtractor(llm, store, embedder, tenant) if llm is not None else None)

    # ----------------------------------------------------------------- remember

    def remember(
        self,
        user: str,
        text: str,
        category: str,
        *,
        key: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        source: str | None = None,
    ) -> RememberResult:
        """Add or update one memory at ``cairn://user/{user}/memories/{category}/{key}``.

        ``key`` names the memory (give the same key to update it); without one it is derived from
        the text, so remembering the same text twice keeps one memory. ``source`` (free text: a
        URL, a message id, an agent's name) is kept in the metadata. Siblings are never touched.
        """
        check_id("user", user)
        check_category(category)
        if not isinstance(text, str) or not text.strip():
            raise RequestError("the memory text is empty; pass what should be remembered")
        if len(text) > MAX_CONTENT_CHARS // 4:
            raise RequestError(f"the memory has {len(text):,} characters; the limit is {MAX_CONTENT_CHARS // 4:,}")
        if key is not None and not slugify(key):
            raise RequestError(f"memory key {key!r} has no letter or digit; use e.g. 'favorite-food'")
        meta = check_metadata(metadata)
        if source is not None:
            meta["source"] = str(source)[:512]
        item = MemoryItem(
            user=user, category=category, key=slugify(key) if key else text_key(text), text=text.strip(),
            title=(title or "").strip()[:200], kind=MemoryKind.NOTE, metadata=meta,
        )
        existed = bool(self.writer.store.fetch(self.tenant, [self.writer.record_of(item, 0).id]))
        report = self.writer.write([item])
        return RememberResult(uri=item.uri, created=not existed, changed=report.unchanged == 0, folders=tuple(report.folders))

    def write(self, items: list[MemoryItem]) -> WriteReport:
        return self.writer.write(items)

    # ----------------------------------------------------------------- commit

    def commit(self, session_id: str) -> CommitResult:
        """Turn the session's messages since its last commit into memories (see the module doc)."""
        if self.sessions is None:
            raise RequestError("committing a session needs a session store")
        started = time.perf_counter()
        session = self.sessions.get(self.tenant, session_id, recent=0).session
        if not session.user:
            raise RequestError(
                f"session {session_id!r} belongs to no user, so its memories have nowhere to go; "
                "create the session with a user"
            )
        after = session.committed_through
        # re-read the window the last commit left half full, so its episode is completed in place
        start = window_start(after + 1, self.window) - 1
        # one message more before the window: the reply a first new user turn answers is its context
        messages = self.sessions.list_messages(self.tenant, session_id, after_seq=max(start - 1, 0))
        new = [m for m in messages if m.seq > after]
        missed = max(0, session.summarized_through - after)
        if missed:
            log.warning("messages were folded into the summary before a commit read them",
                        extra={"session_id": session_id, "missed": missed})
        result = CommitResult(session_id=session_id, user=session.user, committed_through=after, missed=missed)
        if not new:
            result.seconds = time.perf_counter() - started
            return result
        archived = episodes(session.user, session_id, messages, self.window, since=after + 1)
        typed: list[MemoryItem] = []
        if self.extractor is not None:
            ex = self.extractor.extract(session.user, session_id, new)
            typed = ex.items
            result.extractor, result.merged, result.skipped = ex.mode, ex.merged, ex.skipped
        report = self.writer.write(archived + typed)
        result.written = report.written
        result.episodes = [i.uri for i in archived]
        result.extracted = [i.uri for i in typed]
        result.messages = len(new)
        result.committed_through = self.sessions.mark_committed(self.tenant, session_id, new[-1].seq)
        result.stored = len(archived) + len(typed)
        result.summary = stored_summary(session.user, archived, typed, result.extractor)
        result.seconds = time.perf_counter() - started
        return result


def stored_summary(user: str, archived: list[MemoryItem], typed: list[MemoryItem], extractor: str) -> str:
    """What a commit stored, in one sentence a person reads."""
    # a reply is the context of the turn before it and the turn after it: count each reply once
    context = len({s for i in archived for s in i.metadata.get("context_seqs", [])})  # type: ignore[union-attr]
    said = (
        f"kept {len(archived)} thing{'s' if len(archived) != 1 else ''} {user} said as episodic memories"
        + (f" (with {context} assistant repl{'ies' if context != 1 else 'y'} as their context)" if context else "")
        if archived else f"nothing {user} said was new"
    )
    if extractor == "none":
        return f"{said}; no LLM is configured, so no typed memories were extracted"
    return f"{said}; {len(typed)} typed memor{'ies' if len(typed) != 1 else 'y'} created or updated ({extractor})"
