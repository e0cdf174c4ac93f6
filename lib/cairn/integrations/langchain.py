"""cairn in LangChain: a retriever, and a chat message history kept in a cairn session.

``pip install 'cairn-context[langchain]'`` (langchain-core), then::

    from cairn import CairnClient
    from cairn.integrations.langchain import CairnRetriever
    retriever = CairnRetriever(cairn=CairnClient("http://127.0.0.1:8080", api_key=KEY), limit=5)

:class:`CairnRetriever` is a LangChain ``BaseRetriever`` (``invoke``/``ainvoke``, a step of any
runnable chain) over either door — the in-process :class:`~cairn.inprocess.Cairn` or a
:class:`~cairn.client.CairnClient` — and natively async over an
:class:`~cairn.client.AsyncCairnClient` given as ``async_cairn``. Each ``Document`` is one match
(its ``id`` the match's URI) whose ``metadata`` says what it is and how it was found (uri, title,
level, score, context_type, tags, citation, explanation). With ``session_id`` it runs cairn's
``search`` with the conversation (the session user's memories come back beside the handbook's
pages); without, ``find``.

:class:`CairnChatMessageHistory` is a LangChain ``BaseChatMessageHistory`` over a cairn session
(``RunnableWithMessageHistory`` takes it): messages are appended to the session, ``commit()``
turns them into memories of the session's user, ``memories()`` reads those, and ``retriever()``
searches with the conversation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from pydantic import ConfigDict, Field, model_validator

from cairn.core.errors import MissingExtra
from cairn.engine.memory import CommitResult
from cairn.integrations import conversation, retrieval
from cairn.integrations.conversation import SUMMARY_PREFIX, Converses, Turn
from cairn.integrations.retrieval import Passage, RetrievalOptions
from cairn.ports.sessions.base import Message

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.documents import Document
    from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, SystemMessage
    from langchain_core.retrievers import BaseRetriever
except ImportError as missing:  # the extra is not installed: say which one
    if (missing.name or "").partition(".")[0] != "langchain_core":
        raise
    raise MissingExtra("cairn.integrations.langchain", "langchain", "langchain_core") from None

__all__ = ["CairnChatMessageHistory", "CairnRetriever"]


class CairnRetriever(BaseRetriever):
    """cairn's ``find`` (or ``search`` with ``session_id``) as a LangChain retriever.

    ``cairn``: a :class:`~cairn.inprocess.Cairn` or :class:`~cairn.client.CairnClient`;
    ``async_cairn`` (optional): an :class:`~cairn.client.AsyncCairnClient` for ``ainvoke``
    (without it, ``ainvoke`` runs ``cairn`` in a worker thread). Any option can be given for one
    call too: ``retriever.invoke("refunds", limit=3)``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    cairn: Any
    async_cairn: Any = None
    limit: int | None = None
    context_type: str | None = None  # memory, resource or skill
    target_uris: list[str] = Field(default_factory=list)
    filter: dict[str, Any] | None = None
    session_id: str | None = None
    explain: bool = True

    @model_validator(mode="after")
    def _usable(self) -> CairnRetriever:
        retrieval.check_cairn(self.cairn)
        if self.async_cairn is not None:
            retrieval.check_cairn(self.async_cairn, asynchronous=True)
        self.options()
        return self

    def options(self, **overrides: Any) -> RetrievalOptions:
        """What one call asks cairn for: these fields, with the call's overrides."""
        given = RetrievalOptions.of(limit=self.limit, context_type=self.context_type, target_uris=self.target_uris,
                                    filter=self.filter, session_id=self.session_id, explain=self.explain)
        return given.overridden(overrides)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **overrides: Any) -> list[Document]:
        return [document(p) for p in retrieval.retrieve(self.cairn, query, self.options(**overrides))]

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **overrides: Any) -> list[Document]:
        options = self.options(**overrides)
        if self.async_cairn is not None:
            found = await retrieval.aretrieve(self.async_cairn, query, options)
        else:
            found = await asyncio.to_thread(retrieval.retrieve, self.cairn, query, options)
        return [document(p) for p in found]


def document(passage: Passage) -> Document:
    """One match as a LangChain ``Document`` (its ``id`` is the match's URI)."""
    return Document(page_content=passage.text, metadata=passage.metadata, id=passage.uri)


class CairnChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat message history kept in a cairn session.

    ``CairnChatMessageHistory(cairn, session_id)`` continues a session;
    ``CairnChatMessageHistory(cairn, user="ann")`` starts one for the end user ann (its id is
    :attr:`session_id`). ``messages`` is the session as cairn holds it: once it has folded older
    messages, their summary comes first as a system message. ``clear()`` deletes the session and
    starts an empty one for the same user (:attr:`session_id` changes)."""

    def __init__(self, cairn: Converses, session_id: str | None = None, *, user: str | None = None,
                 ttl_s: int | None = None) -> None:
        self.cairn = cairn
        self.session_id = conversation.open_session(cairn, session_id, user, ttl_s)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        transcript = conversation.read(self.cairn, self.session_id)
        summary: list[BaseMessage] = [SystemMessage(SUMMARY_PREFIX + transcript.summary)] if transcript.summary else []
        return summary + [message_of(m) for m in transcript.messages]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        turns = [turn for turn in map(turn_of, messages) if turn is not None]
        conversation.append(self.cairn, self.session_id, turns)

    def clear(self) -> None:
        self.session_id = conversation.restart(self.cairn, self.session_id)

    def commit(self) -> CommitResult:
        """Turn the messages added since the last commit into memories of the session's user."""
        return conversation.commit(self.cairn, self.session_id)

    def memories(self, category: str | None = None) -> list[str]:
        """What cairn remembers about the session's user, newest first."""
        return conversation.memories(self.cairn, self.session_id, category)

    def retriever(self, **options: Any) -> CairnRetriever:
        """A :class:`CairnRetriever` that searches with this conversation (and its user's memories)."""
        return CairnRetriever(cairn=self.cairn, session_id=self.session_id, **options)


def turn_of(message: BaseMessage) -> Turn | None:
    """A LangChain message as the turn a cairn session keeps (``None``: one it does not keep, see
    :func:`cairn.integrations.conversation.turn`)."""
    role = message.role if isinstance(message, ChatMessage) else message.type.removesuffix("MessageChunk").lower()
    return conversation.turn(role, str(message.text), message.name)


def message_of(message: Message) -> BaseMessage:
    """A cairn message as LangChain's message of its side (a session written in process may also hold
    system and tool messages: they come back as system messages)."""
    if message.role == "user":
        return HumanMessage(message.content, name=message.name)
    if message.role == "assistant":
        return AIMessage(message.content, name=message.name)
    return SystemMessage(message.content, name=message.name)
