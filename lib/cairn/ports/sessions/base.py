"""The session store: one interface, template methods, two backends (SQLite, DynamoDB).

A session holds an ordered sequence of messages (``seq`` allocated by the backend, so concurrent
appends never lose or duplicate a message and the stored messages are in ``seq`` order; SQLite's
seqs are 1, 2, 3, ... without gaps, DynamoDB's may skip a number, see its module), a compressed
summary of the older messages, and the latest prefetched context (a ``FindResult`` dict).

The public methods validate their input, call the backend's ``_`` method and map any vendor
exception once, through :meth:`SessionStore._map_error`, into a :class:`SessionError`.

Compression is optimistic: read the summary and the messages after ``summarized_through`` (in
one snapshot where the backend has them), summarise the oldest ones (slowly, maybe by an LLM)
without holding a lock, then commit the new summary with a conditional write on the
``summarized_through`` the read saw. The commit is handed the exact messages it folds and refuses
(:class:`SessionConflict`) unless the seqs up to the new ``summarized_through`` hold exactly those
messages and no other message can be stored there afterwards: SQLite checks it in the commit's
own transaction (an append stores its seq and its message in one transaction, so messages are
always a gap-free prefix), DynamoDB seals every empty seq of the folded range with a hole marker
(its appends are two writes, so a message with a lower seq can still be in flight). A message
that arrives meanwhile is therefore never folded and never hidden below the summary; two
compressions racing lose nothing either: the loser gets :class:`SessionConflict` and retries.

The summary itself is bounded (``MAX_SUMMARY_CHARS``): summarising is lossy by design, and the
extractive summarizer drops its oldest lines once the bound is reached.
"""

from __future__ import annotations

import re
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from cairn.core.errors import (
    CairnError,
    RequestError,
    SessionConflict,
    SessionError,
    SessionNotFound,
)
from cairn.core.text.prose import first_sentences

Role = Literal["user", "assistant", "system", "tool"]
ROLES: tuple[str, ...] = ("user", "assistant", "system", "tool")
MAX_CONTENT_CHARS = 32_000
MAX_SUMMARY_CHARS = 30_000
DEFAULT_TTL_S = 7 * 24 * 3600
MAX_TTL_S = 365 * 24 * 3600
MAX_LISTED_SESSIONS = 1000  # sessions one listing returns at most
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,127}$")


class Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int
    role: Role
    content: str
    created_at: float  # when it was said: the caller's time when given (a dated transcript), else the append's
    name: str | None = None  # who said it, when the caller names the speaker (``role`` says which side)


class Session(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    tenant: str
    user: str | None = None
    created_at: float
    updated_at: float
    expires_at: float  # epoch seconds; the whole session (every item) expires together
    summary: str = ""
    summarized_through: int = 0  # the seq of the last message folded into the summary
    last_seq: int = 0  # the seq of the last message appended (the total ever appended)
    committed_through: int = 0  # the seq of the last message turned into memories (see ``mark_committed``)


class SessionView(BaseModel):
    """What planning reads: the summary, the last messages, the prefetched context, counts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session: Session
    summary: str
    recent: list[Message] = Field(default_factory=list)
    prefetched: dict[str, Any] | None = None
    message_count: int = 0  # appended over the session's life
    unsummarized_count: int = 0  # messages held after the summary
    uncommitted_count: int = 0  # messages not yet turned into memories


class Compression(BaseModel):
    """What one :meth:`SessionStore.compress` did."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    folded: int = 0
    summarized_through: int = 0
    summary_chars: int = 0
    attempts: int = 1


class Summarizer(Protocol):
    def summarize(self, previous: str, messages: Sequence[Message]) -> str: ...


# --- validation ----------------------------------------------------------------------


def check_id(kind: str, value: Any) -> str:
    if not isinstance(value, str) or not _ID.match(value):
        raise RequestError(
            f"{kind} {value!r} is not valid; use 1-128 characters from letters, digits and _ . @ : - "
            "(starting with a letter or digit)"
        )
    return value


def check_role(role: Any) -> Role:
    if role not in ROLES:
        raise RequestError(f"role {role!r} is not valid; allowed: {', '.join(ROLES)}")
    return role


def check_content(content: Any) -> str:
    if not isinstance(content, str):
        raise RequestError(f"message content must be a string, got {type(content).__name__}")
    if not content.strip():
        raise RequestError("message content is empty; pass the text of the message")
    if len(content) > MAX_CONTENT_CHARS:
        raise RequestError(
            f"message content has {len(content):,} characters; the limit is {MAX_CONTENT_CHARS:,} "
            "(split it, or store large tool output elsewhere and append a reference)"
        )
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:
        raise RequestError("message content holds an unpaired surrogate (a broken \\ud800-\\udfff escape); send valid Unicode text") from None
    return content


def check_name(name: Any) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip() or len(name) > 128:
        raise RequestError(f"speaker name {name!r} is not valid; use 1-128 characters, or leave it out")
    return name.strip()


def check_idempotency_key(key: Any) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not 1 <= len(key) <= 200 or not key.isprintable():
        raise RequestError("the idempotency key must be 1 to 200 printable characters (a UUID is a good one)")
    return key


def check_time(created_at: Any) -> float | None:
    if created_at is None:
        return None
    if isinstance(created_at, bool) or not isinstance(created_at, int | float) or not 0 <= created_at < 1e11:
        raise RequestError(f"created_at {created_at!r} is not valid; use epoch seconds (a number >= 0)")
    return float(created_at)


def check_ttl(ttl_s: Any) -> int:
    if not isinstance(ttl_s, int) or isinstance(ttl_s, bool) or not 60 <= ttl_s <= MAX_TTL_S:
        raise RequestError(f"ttl_s {ttl_s!r} is not valid; use whole seconds from 60 to {MAX_TTL_S}")
    return ttl_s


# --- the store -------------------------------------------------------------------------


class SessionStore(ABC):
    """Sessions of every tenant; the tenant is part of every key."""

    backend: str = "abstract"

    def __init__(
        self,
        *,
        default_ttl_s: int = DEFAULT_TTL_S,
        max_messages: int = 50,
        keep_last: int = 10,
        summarizer: Summarizer | None = None,
        hold_uncommitted: bool = False,
    ) -> None:
        self.default_ttl_s = check_ttl(default_ttl_s)
        if keep_last < 0 or max_messages < keep_last:
            raise RequestError(f"keep_last ({keep_last}) must be >= 0 and <= max_messages ({max_messages})")
        self.max_messages = max_messages
        self.keep_last = keep_last
        self.summarizer = summarizer
        # when memories are extracted from sessions, compression must not drop a message before it
        # was committed: it then folds only messages at or below ``committed_through``
        self.hold_uncommitted = hold_uncommitted

    # public template methods ---------------------------------------------------------

    def create(self, tenant: str, user: str | None = None, ttl_s: int | None = None) -> Session:
        check_id("tenant", tenant)
        if user is not None:
            check_id("user", user)
        ttl = check_ttl(self.default_ttl_s if ttl_s is None else ttl_s)
        now = time.time()
        session = Session(
            id=uuid.uuid4().hex, tenant=tenant, user=user, created_at=now, updated_at=now, expires_at=now + ttl
        )
        with self._errors("create", session.id):
            self._create(session)
        return session

    def append(
        self, tenant: str, session_id: str, role: str, content: str, *,
        name: str | None = None, created_at: float | None = None, idempotency_key: str | None = None,
    ) -> Message:
        """Store one message. ``name`` is the speaker; ``created_at`` (epoch seconds) is when it was
        said, for a transcript appended after the fact (default: now). With ``idempotency_key``, a
        retried append (same key, same session) lands once: the retry gets the stored message."""
        self._check(tenant, session_id)
        role_ = check_role(role)
        text = check_content(content)
        speaker = check_name(name)
        said = check_time(created_at)
        key = check_idempotency_key(idempotency_key)
        with self._errors("append", session_id):
            if key is None:
                return self._append(tenant, session_id, role_, text, time.time(), speaker, said)
            return self._append_once(tenant, session_id, role_, text, time.time(), speaker, said, key)

    def mark_committed(self, tenant: str, session_id: str, through: int) -> int:
        """Record that messages up to seq ``through`` were turned into memories. The mark only moves
        forward (a late or repeated commit never moves it back); returns the mark now stored."""
        self._check(tenant, session_id)
        if isinstance(through, bool) or not isinstance(through, int) or through < 0:
            raise RequestError(f"through={through!r} is not valid; use a message seq (0 or more)")
        with self._errors("mark_committed", session_id):
            session = self._load(tenant, session_id)
            if through > session.last_seq:
                raise RequestError(
                    f"session {session_id!r}: cannot commit through seq {through}; the last message is seq {session.last_seq}"
                )
            if through <= session.committed_through:
                return session.committed_through
            return self._mark_committed(session, through, time.time())

    def get(self, tenant: str, session_id: str, recent: int = 5) -> SessionView:
        self._check(tenant, session_id)
        if not 0 <= recent <= 1000:
            raise RequestError(f"recent={recent} is not valid; use 0 to 1000")
        with self._errors("get", session_id), self._snapshot():
            session = self._load(tenant, session_id)
            last = self._messages(tenant, session_id, session.summarized_through, newest=recent) if recent else []
            prefetched = self._get_prefetched(tenant, session_id)
        return SessionView(
            session=session,
            summary=session.summary,
            recent=last,
            prefetched=prefetched,
            message_count=session.last_seq,
            unsummarized_count=max(0, session.last_seq - session.summarized_through),
            uncommitted_count=max(0, session.last_seq - session.committed_through),
        )

    def list_messages(self, tenant: str, session_id: str, after_seq: int = 0, limit: int | None = None) -> list[Message]:
        """Messages held after the summary (and after ``after_seq``), oldest first."""
        self._check(tenant, session_id)
        with self._errors("list_messages", session_id), self._snapshot():
            session = self._load(tenant, session_id)
            out = self._messages(tenant, session_id, max(after_seq, session.summarized_through))
        return out[:limit] if limit is not None else out

    def set_prefetched(self, tenant: str, session_id: str, context: dict[str, Any], *, seq: int | None = None) -> bool:
        """Store the session's prefetched context. ``seq``: the message it answers; then it is
        written only over a context of an earlier message (or none): a redelivered or late prefetch
        never replaces a newer one. True when written."""
        self._check(tenant, session_id)
        if not isinstance(context, dict):
            raise RequestError(f"prefetched context must be a dict (FindResult.to_dict()), got {type(context).__name__}")
        with self._errors("set_prefetched", session_id):
            session = self._load(tenant, session_id)
            return self._set_prefetched(session, context, time.time(), seq)

    def prefetched_seq(self, tenant: str, session_id: str) -> int:
        """The message the stored prefetched context answers (0: none, or written without one)."""
        self._check(tenant, session_id)
        with self._errors("prefetched_seq", session_id):
            return self._prefetched_seq(tenant, session_id)

    def list_sessions(self, tenant: str, user: str, limit: int = MAX_LISTED_SESSIONS) -> list[Session]:
        """The unexpired sessions of ``user``, newest first (at most ``limit``)."""
        self._check(tenant, "list")
        check_id("user", user)
        with self._errors("list_sessions", "*"):
            found = self._list(tenant, user, limit)
        return sorted(found, key=lambda s: (-s.created_at, s.id))[:limit]

    def delete(self, tenant: str, session_id: str) -> bool:
        """Delete a session and every message; ``False`` when there was none."""
        self._check(tenant, session_id)
        with self._errors("delete", session_id):
            return self._delete(tenant, session_id)

    def compress(
        self,
        tenant: str,
        session_id: str,
        keep_last: int | None = None,
        summarizer: Summarizer | None = None,
        *,
        max_attempts: int = 5,
    ) -> Compression:
        """Fold every message but the last ``keep_last`` into the summary.

        Safe while appends continue (see the module docstring); retries on a lost race.
        """
        self._check(tenant, session_id)
        keep = self.keep_last if keep_last is None else keep_last
        if keep < 0:
            raise RequestError(f"keep_last={keep} is not valid; use 0 or more")
        summarizer = summarizer or self.summarizer or _default_summarizer()
        for attempt in range(1, max_attempts + 1):
            with self._errors("compress", session_id), self._snapshot():
                session = self._load(tenant, session_id)
                pending = self._messages(tenant, session_id, session.summarized_through)
            fold = pending[: max(0, len(pending) - keep)]
            if self.hold_uncommitted and session.user:  # never drop what memory extraction has not read yet
                fold = [m for m in fold if m.seq <= session.committed_through]
            if not fold:
                return Compression(summarized_through=session.summarized_through, attempts=attempt)
            summary = summarizer.summarize(session.summary, fold)[:MAX_SUMMARY_CHARS]
            try:
                with self._errors("compress", session_id):
                    self._commit_summary(session, summary, fold, time.time())
            except SessionConflict:
                if attempt == max_attempts:
                    raise
                time.sleep(0.01 * attempt)
                continue
            return Compression(
                folded=len(fold), summarized_through=fold[-1].seq, summary_chars=len(summary), attempts=attempt
            )
        raise SessionConflict(f"session {session_id!r}: compression lost the race {max_attempts} times; retry")

    def compress_if_needed(self, tenant: str, session_id: str) -> Compression | None:
        """Compress when more than ``max_messages`` are held after the summary."""
        view = self.get(tenant, session_id, recent=0)
        if view.unsummarized_count <= self.max_messages:
            return None
        return self.compress(tenant, session_id)

    # helpers ---------------------------------------------------------------------------

    @staticmethod
    def _check(tenant: str, session_id: str) -> None:
        check_id("tenant", tenant)
        check_id("session id", session_id)

    @staticmethod
    def not_found(session_id: str) -> SessionNotFound:
        return SessionNotFound(
            f"session {session_id!r} not found (it may have expired or been deleted); create one with `cairn session new`"
        )

    @contextmanager
    def _errors(self, op: str, session_id: str) -> Iterator[None]:
        try:
            yield
        except CairnError:
            raise
        except Exception as exc:
            raise self._map_error(exc, op, session_id) from exc

    def _map_error(self, exc: Exception, op: str, session_id: str) -> CairnError:
        return SessionError(f"session {session_id!r}: {op} failed on the {self.backend} store: {exc}")

    def _snapshot(self) -> AbstractContextManager[Any]:
        """Reads inside share one consistent snapshot where the backend offers it (SQLite)."""
        return nullcontext()

    # what a backend fills in ----------------------------------------------------------

    @abstractmethod
    def _create(self, session: Session) -> None: ...

    @abstractmethod
    def _append(
        self, tenant: str, session_id: str, role: Role, content: str, now: float,
        name: str | None = None, created_at: float | None = None,
    ) -> Message:
        """Allocate the next seq atomically and store the message (its time ``created_at`` when
        given, else ``now``); SessionNotFound if absent."""

    @abstractmethod
    @abstractmethod
    def _append_once(
        self, tenant: str, session_id: str, role: Role, content: str, now: float,
        name: str | None, created_at: float | None, key: str,
    ) -> Message:
        """Append unless ``key`` was used in this session; then return the message it stored."""

    def _mark_committed(self, session: Session, through: int, now: float) -> int:
        """Set ``committed_through = through`` unless it is already higher; return the stored value."""
        raise NotImplementedError(f"{type(self).__name__} does not record commits")

    @abstractmethod
    def _load(self, tenant: str, session_id: str) -> Session:
        """The session's meta; SessionNotFound when absent or expired."""

    @abstractmethod
    def _messages(self, tenant: str, session_id: str, after_seq: int, newest: int | None = None) -> list[Message]:
        """Messages with seq > after_seq, oldest first; only the ``newest`` N when given."""

    @abstractmethod
    def _get_prefetched(self, tenant: str, session_id: str) -> dict[str, Any] | None: ...

    @abstractmethod
    def _set_prefetched(self, session: Session, context: dict[str, Any], now: float, seq: int | None) -> bool: ...

    @abstractmethod
    def _prefetched_seq(self, tenant: str, session_id: str) -> int: ...

    @abstractmethod
    def _commit_summary(self, session: Session, summary: str, folded: Sequence[Message], now: float) -> None:
        """Store the summary and ``summarized_through = folded[-1].seq`` iff summarized_through is
        still ``session.summarized_through`` and the seqs in between hold exactly ``folded`` (no
        message stored meanwhile, none can be stored there later); else SessionConflict. Then drop
        the folded messages."""

    @abstractmethod
    def _delete(self, tenant: str, session_id: str) -> bool: ...

    @abstractmethod
    def _list(self, tenant: str, user: str, limit: int) -> list[Session]: ...


class ExtractiveSummarizer:
    """``previous`` plus one ``role: first sentences`` line per message, bounded."""

    def __init__(self, line_chars: int = 240, max_chars: int = MAX_SUMMARY_CHARS) -> None:
        self.line_chars = line_chars
        self.max_chars = max_chars

    def summarize(self, previous: str, messages: Sequence[Message]) -> str:
        lines = [line for line in previous.splitlines() if line.strip()]
        for m in messages:
            text = first_sentences(m.content, max_chars=self.line_chars, max_sentences=2) or m.content[: self.line_chars]
            lines.append(f"{m.role}: {text}")
        while lines and len("\n".join(lines)) > self.max_chars:
            lines.pop(0)  # the oldest go first
        return "\n".join(lines)


def _default_summarizer() -> Summarizer:
    return ExtractiveSummarizer()
