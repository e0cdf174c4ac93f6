"""What the frameworks' chat histories share: a cairn session read as turns, appended to, and
committed into its user's memories.

A session keeps its latest messages and folds older ones into a summary (docs/sessions.md), so a
session read back is :class:`Transcript`: that summary, then the messages after it.
The history classes of :mod:`cairn.integrations.langchain` and :mod:`cairn.integrations.llamaindex`
translate their frameworks' messages into :class:`Turn` and back; no framework is imported here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from cairn.app.models import MemoryList
from cairn.core.errors import RequestError
from cairn.core.logging import get_logger
from cairn.engine.memory import CommitResult
from cairn.ports.sessions.base import Message, Session, SessionView

log = get_logger(__name__)
MAX_RECENT = 1000  # the most messages one read returns (GET /v1/sessions/{id}?recent=)
SUMMARY_PREFIX = "Summary of the earlier conversation: "
Speaker = Literal["user", "assistant"]  # what a session holds: the conversation between a user and the agent
# the frameworks' names of the two sides
SPEAKERS: dict[str, Speaker] = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant",
                                "chatbot": "assistant", "model": "assistant"}
# messages that are not the conversation itself: the agent's instructions and its tools' results
LEFT_OUT = frozenset({"system", "developer", "tool", "function"})


class Converses(Protocol):
    """The session methods a history calls: :class:`~cairn.inprocess.Cairn` and :class:`~cairn.client.CairnClient` have them."""

    def create_session(self, user: str | None = None, ttl_s: int | None = None) -> Session: ...

    def get_session(self, session_id: str, recent: int = 5) -> SessionView: ...

    def delete_session(self, session_id: str) -> bool: ...

    def append_message(self, session_id: str, role: str, content: str, *, name: str | None = None,
                       created_at: float | None = None, idempotency_key: str | None = None) -> Message: ...

    def commit(self, session_id: str) -> CommitResult: ...

    def list_memories(self, user: str | None = None, *, category: str | None = None) -> MemoryList: ...


@dataclass(frozen=True)
class Turn:
    """One message to append: which side said it, what, and the speaker's name."""

    role: Speaker
    content: str
    name: str | None = None


@dataclass(frozen=True)
class Transcript:
    """A session as cairn holds it: the summary of the messages it folded, then the messages after it."""

    session: Session
    summary: str
    messages: list[Message]


def turn(role: str, text: str, name: str | None = None) -> Turn | None:
    """A framework's message as the turn a session keeps, or ``None`` for one it does not keep (logged):
    a system or tool message (the agent's instructions and its tools' output stay in the prompt, not in
    the conversation), or one without text (an assistant message that only calls tools)."""
    if role in LEFT_OUT or not text.strip():
        log.warning("message not kept in the cairn session", role=role,
                    why="not part of the conversation" if role in LEFT_OUT else "no text")
        return None
    if role not in SPEAKERS:
        raise RequestError(f"message role {role!r} is not one cairn knows; allowed: "
                           f"{', '.join([*SPEAKERS, *sorted(LEFT_OUT)])} (the last {len(LEFT_OUT)} are not kept)")
    return Turn(SPEAKERS[role], text, name)


def open_session(cairn: Converses, session_id: str | None, user: str | None, ttl_s: int | None = None) -> str:
    """The session to use: ``session_id`` when given, else a new one of ``user``."""
    if session_id is not None:
        if user is not None or ttl_s is not None:
            raise RequestError("pass either session_id (an existing session) or user and ttl_s (a new one), not both")
        return session_id
    return cairn.create_session(user=user, ttl_s=ttl_s).id


def read(cairn: Converses, session_id: str) -> Transcript:
    """Everything the session holds, oldest first."""
    view = cairn.get_session(session_id, recent=MAX_RECENT)
    return Transcript(view.session, view.summary, list(view.recent))


def append(cairn: Converses, session_id: str, turns: Iterable[Turn]) -> list[Message]:
    """Append ``turns`` in order (each append carries an idempotency key, so a retry lands once)."""
    return [cairn.append_message(session_id, turn.role, turn.content, name=turn.name) for turn in turns]


def restart(cairn: Converses, session_id: str) -> str:
    """Delete the session and start an empty one for the same user; the new session's id."""
    user = cairn.get_session(session_id, recent=0).session.user
    cairn.delete_session(session_id)
    return cairn.create_session(user=user).id


def memories(cairn: Converses, session_id: str, category: str | None = None) -> list[str]:
    """What cairn remembers about the session's user (newest first)."""
    user = cairn.get_session(session_id, recent=0).session.user
    if user is None:
        raise RequestError(f"session {session_id!r} belongs to no user, so it has no memories; "
                           "start the history with user=...")
    return [memory.text for memory in cairn.list_memories(user, category=category).memories]


def commit(cairn: Converses, session_id: str) -> CommitResult:
    """Turn the session's messages since its last commit into memories of its user."""
    return cairn.commit(session_id)
