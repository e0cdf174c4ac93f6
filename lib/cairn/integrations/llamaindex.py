"""cairn in LlamaIndex: a retriever of ``NodeWithScore``s, and a chat store kept in cairn sessions.

``pip install 'cairn-context[llamaindex]'`` (llama-index-core), then::

    from cairn import CairnClient
    from cairn.integrations.llamaindex import CairnRetriever
    retriever = CairnRetriever(CairnClient("http://127.0.0.1:8080", api_key=KEY), limit=5)

:class:`CairnRetriever` is a LlamaIndex ``BaseRetriever`` (``retrieve``/``aretrieve``, the
retriever of a ``RetrieverQueryEngine`` or a chat engine) over the in-process
:class:`~cairn.inprocess.Cairn` or a :class:`~cairn.client.CairnClient` (natively async over an
:class:`~cairn.client.AsyncCairnClient` given as ``async_cairn``). Each node is one match: its id
the match's URI, its score cairn's, its metadata what it is and how it was found (uri, title,
level, score, context_type, tags, citation, explanation); only title, uri and context_type go
into the LLM's prompt. With ``session_id`` it runs cairn's ``search`` with the conversation (the
session user's memories included); without, ``find``.

:class:`CairnChatStore` is a LlamaIndex ``BaseChatStore`` (``ChatMemoryBuffer`` takes it) whose
keys are cairn session ids: ``store.start(user="ann")`` opens one. cairn sessions are append-only,
so a message cannot be deleted one by one (the whole session can).

llama-index-core counts tokens with tiktoken and ships the data of its default encoding in its own
wheel (``llama_index/core/_static``); it uses it unless ``TIKTOKEN_CACHE_DIR`` points elsewhere, so
a query engine or a chat engine over this retriever runs without a network (tests/integration/
test_llamaindex.py runs them with every connection but the loopback refused).
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import ConfigDict, Field

from cairn.core.errors import MissingExtra, RequestError
from cairn.engine.memory import CommitResult
from cairn.integrations import conversation, retrieval
from cairn.integrations.conversation import SUMMARY_PREFIX, Turn
from cairn.integrations.retrieval import Passage, RetrievalOptions
from cairn.ports.sessions.base import Message

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.llms import ChatMessage, MessageRole
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.core.storage.chat_store.base import BaseChatStore
except ImportError as missing:  # the extra is not installed: say which one
    if (missing.name or "").partition(".")[0] != "llama_index":
        raise
    raise MissingExtra("cairn.integrations.llamaindex", "llamaindex", "llama_index.core") from None

__all__ = ["CairnChatStore", "CairnRetriever"]
IN_PROMPT = ("title", "uri", "context_type")  # the metadata the LLM reads beside a node's text


class CairnRetriever(BaseRetriever):
    """cairn's ``find`` (or ``search`` with ``session_id``) as a LlamaIndex retriever."""

    def __init__(self, cairn: retrieval.Retrieves, *, async_cairn: retrieval.RetrievesAsync | None = None,
                 limit: int | None = None, context_type: str | None = None, target_uris: tuple[str, ...] = (),
                 filter: dict[str, Any] | None = None, session_id: str | None = None, explain: bool = True,
                 callback_manager: CallbackManager | None = None, verbose: bool = False) -> None:
        retrieval.check_cairn(cairn)
        if async_cairn is not None:
            retrieval.check_cairn(async_cairn, asynchronous=True)
        self.cairn, self.async_cairn = cairn, async_cairn
        self.options = RetrievalOptions.of(limit=limit, context_type=context_type, target_uris=tuple(target_uris),
                                           filter=filter, session_id=session_id, explain=explain)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [node(p) for p in retrieval.retrieve(self.cairn, query_bundle.query_str, self.options)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = query_bundle.query_str
        if self.async_cairn is None:  # the sync door in a worker thread, so the event loop goes on
            found = await asyncio.to_thread(retrieval.retrieve, self.cairn, query, self.options)
        else:
            found = await retrieval.aretrieve(self.async_cairn, query, self.options)
        return [node(p) for p in found]


def node(passage: Passage) -> NodeWithScore:
    """One match as a LlamaIndex node with its score (the node's id is the match's URI)."""
    hidden = [key for key in passage.metadata if key not in IN_PROMPT]
    text = TextNode(id_=passage.uri, text=passage.text, metadata=passage.metadata,
                    excluded_llm_metadata_keys=hidden, excluded_embed_metadata_keys=hidden)
    return NodeWithScore(node=text, score=passage.score)


class CairnChatStore(BaseChatStore):
    """A LlamaIndex chat store whose keys are cairn session ids.

    ``CairnChatStore(cairn=..., user="ann")``; ``key = store.start()`` opens a session of ann
    (``get_keys()`` lists hers). ``get_messages`` is the session as cairn holds it: once it has
    folded older messages, their summary comes first as a system message. ``commit(key)`` turns the
    new messages into memories of the session's user; ``memories(key)`` reads them."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    cairn: Any = Field(exclude=True)  # a Cairn or CairnClient (not serialised with the store)
    user: str | None = None

    @classmethod
    def class_name(cls) -> str:
        return "CairnChatStore"

    def start(self, user: str | None = None, ttl_s: int | None = None) -> str:
        """A new session of ``user`` (default: the store's); its id is the key to use."""
        return conversation.open_session(self.cairn, None, user or self.user, ttl_s)

    def get_messages(self, key: str) -> list[ChatMessage]:
        transcript = conversation.read(self.cairn, key)
        summary = [ChatMessage(role=MessageRole.SYSTEM, content=SUMMARY_PREFIX + transcript.summary)]
        return (summary if transcript.summary else []) + [message_of(m) for m in transcript.messages]

    def add_message(self, key: str, message: ChatMessage) -> None:
        conversation.append(self.cairn, key, [t for t in [turn_of(message)] if t is not None])

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Append what ``messages`` adds after the messages the session holds (sessions are append-only)."""
        held = [(m.role, m.content) for m in conversation.read(self.cairn, key).messages]
        turns = [t for t in (turn_of(m) for m in messages if not _is_summary(m)) if t is not None]
        if [(t.role, t.content) for t in turns[:len(held)]] != held:
            raise RequestError(f"session {key!r} holds {len(held)} messages that the {len(turns)} given do not start "
                               "with; a cairn session is append-only: add messages, or delete_messages(key) and "
                               "start a new session")
        conversation.append(self.cairn, key, turns[len(held):])

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        """Delete the session (every message, its summary); what it held."""
        held = self.get_messages(key)
        return held if self.cairn.delete_session(key) else None

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        raise RequestError(f"a cairn session is append-only: message {idx} of {key!r} cannot be deleted alone; "
                           "delete_messages(key) deletes the whole session")

    def delete_last_message(self, key: str) -> ChatMessage | None:
        raise RequestError(f"a cairn session is append-only: the last message of {key!r} cannot be deleted alone; "
                           "delete_messages(key) deletes the whole session")

    def get_keys(self) -> list[str]:
        """The sessions of the store's user."""
        if self.user is None:
            raise RequestError("get_keys lists the sessions of one user: build the store with user=...")
        return [s.id for s in self.cairn.list_sessions(self.user).sessions]

    def commit(self, key: str) -> CommitResult:
        """Turn the session's messages since its last commit into memories of its user."""
        return conversation.commit(self.cairn, key)

    def memories(self, key: str, category: str | None = None) -> list[str]:
        """What cairn remembers about the session's user, newest first."""
        return conversation.memories(self.cairn, key, category)


def _is_summary(message: ChatMessage) -> bool:
    return message.role == MessageRole.SYSTEM and (message.content or "").startswith(SUMMARY_PREFIX)


def turn_of(message: ChatMessage) -> Turn | None:
    """A LlamaIndex chat message as the turn a cairn session keeps (``None``: one it does not keep, see
    :func:`cairn.integrations.conversation.turn`)."""
    name = message.additional_kwargs.get("name")
    return conversation.turn(MessageRole(message.role).value, message.content or "",
                             name if isinstance(name, str) else None)


def message_of(message: Message) -> ChatMessage:
    """A cairn message as a LlamaIndex chat message."""
    extra = {"name": message.name} if message.name else {}
    return ChatMessage(role=MessageRole(message.role), content=message.content, additional_kwargs=extra)
