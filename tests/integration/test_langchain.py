"""cairn in LangChain, against the real langchain-core and langchain-tests from PyPI: the retriever
passes LangChain's standard retriever tests, answers handbook questions inside a runnable chain
(retriever | prompt | fake chat model), brings a remembered fact into the prompt the model
receives, and keeps a conversation in a cairn session — through `cairn serve` and in process."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, ChatMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnablePassthrough
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_tests.integration_tests import RetrieversIntegrationTests

from cairn.client import AsyncCairnClient, CairnClient
from cairn.core.errors import RequestError
from cairn.integrations.langchain import CairnChatMessageHistory, CairnRetriever
from tests.handbook_tenant import (
    DOORS,
    ADMIN_KEY,
    ANN_FACT,
    ANN_QUESTION,
    QUESTIONS,
    ROOT,
    handbook_tenant,
    page_of,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tenant(tmp_path_factory, embedder):
    with handbook_tenant(tmp_path_factory.mktemp("langchain"), embedder) as tenant:
        yield tenant


@pytest.fixture(params=DOORS)
def door(request, tenant):
    """The tenant's admin through one door: `cairn serve` with CairnClient, or Cairn in process."""
    with tenant.door(request.param) as d:
        yield d


@pytest.fixture(params=DOORS)
def ann(request, tenant):
    """The end user ann through one door (a key bound to her; in process, her view)."""
    with tenant.door(request.param, user="ann") as d:
        yield d


class PromptsSeen(BaseCallbackHandler):
    """What the chat model was sent, one text per call (LangChain's own callback)."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def on_chat_model_start(self, serialized: Any, messages: list[list[Any]], **kwargs: Any) -> None:
        self.prompts.append("\n".join(str(m.text) for m in messages[0]))


def passages_in_prompt(docs: list[Document]) -> str:
    return "\n\n".join(f"[{d.metadata['uri']}] {d.page_content}" for d in docs)


def answer_chain(retriever: CairnRetriever, model: FakeListChatModel):
    prompt = ChatPromptTemplate.from_messages([
        ("system", "Answer from these passages, citing their URIs:\n\n{context}"), ("human", "{question}")])
    return {"context": retriever | passages_in_prompt, "question": RunnablePassthrough()} | prompt | model | StrOutputParser()


def test_handbook_questions_through_a_runnable_chain(door):
    """5 handbook questions through retriever | prompt | model: the page that answers is the first
    passage the model reads for at least 4 of them."""
    model, seen = FakeListChatModel(responses=["(the model's answer)"]), PromptsSeen()
    chain = answer_chain(CairnRetriever(cairn=door, limit=3), model)
    first_pages = []
    for question, _ in QUESTIONS:
        assert chain.invoke(question, config={"callbacks": [seen]}) == "(the model's answer)"
        first_uri = re.search(r"\[(cairn://[^\]]+)\]", seen.prompts[-1])
        assert first_uri and question in seen.prompts[-1], seen.prompts[-1]
        first_pages.append(page_of(first_uri.group(1)))
    expected = [page for _, page in QUESTIONS]
    assert sum(got == want for got, want in zip(first_pages, expected)) >= 4, list(zip(first_pages, expected))


def test_a_remembered_fact_reaches_the_prompt_through_the_session(ann):
    """ann's history is a cairn session; its retriever searches with it, and what cairn remembers
    about ann (POST /v1/memories) is in the prompt the model receives, beside the handbook."""
    history = CairnChatMessageHistory(ann, user="ann")
    history.add_user_message("I'd like to return the tent I bought last week.")
    model, seen = FakeListChatModel(responses=["ok"]), PromptsSeen()
    answer_chain(history.retriever(limit=3), model).invoke(ANN_QUESTION, config={"callbacks": [seen]})
    assert ANN_FACT in seen.prompts[0]
    assert f"{ROOT}/billing/refunds.md" in seen.prompts[0]
    fresh = CairnChatMessageHistory(ann, user="ann")  # a session with no message yet reads ann's memories too
    assert ANN_FACT in [d.page_content for d in fresh.retriever(limit=3).invoke(ANN_QUESTION)]


def test_documents_carry_what_the_match_is_and_how_it_was_found(door):
    (doc, *_) = CairnRetriever(cairn=door, limit=2).invoke("who approves a refund of a Stripe payment?")
    meta = doc.metadata
    assert doc.id == meta["uri"] and meta["uri"].startswith(f"{ROOT}/billing/payment-providers.md")
    assert meta["level"] == 2 and meta["context_type"] == "resource" and 0 < meta["score"] <= 1
    assert meta["title"] == "Payment providers" and "Stripe" in doc.page_content
    assert meta["citation"]["heading_path"][0] == "Payment providers"
    explained = meta["explanation"]
    assert explained["query"] == "who approves a refund of a Stripe payment?"
    assert explained["tier"] == "L2" and explained["reason"] and explained["mode"] == "quick"
    quiet = CairnRetriever(cairn=door, limit=2, explain=False).invoke("who approves a refund of a Stripe payment?")
    assert quiet[0].metadata["explanation"] is None and quiet[0].id == doc.id


def test_the_options_scope_what_comes_back(door):
    people = CairnRetriever(cairn=door, target_uris=[f"{ROOT}/people"], limit=5).invoke("how many days off do I get?")
    assert people and all(d.metadata["uri"].startswith(f"{ROOT}/people") for d in people)
    pdfs = CairnRetriever(cairn=door, limit=5, filter={"metadata.source.format": "pdf"})
    assert {page_of(d.metadata["uri"]) for d in pdfs.invoke("what do I do when I lose my laptop?")} == {
        "security/access-and-incidents.pdf"}
    assert len(CairnRetriever(cairn=door).invoke("refunds", limit=1)) == 1  # an option for one call


def test_a_session_and_a_context_type_bring_only_the_users_memories(ann):
    session = ann.create_session(user="ann")
    memories = CairnRetriever(cairn=ann, session_id=session.id, context_type="memory").invoke(ANN_QUESTION)
    assert memories[0].page_content == ANN_FACT  # then the folder of ann's profile memories, which holds it
    assert {d.metadata["context_type"] for d in memories} == {"memory"}
    assert all(d.metadata["uri"].startswith("cairn://user/ann/memories/") for d in memories)
    assert memories[0].metadata["explanation"]["planner"] == "session-rewrite"


def test_ainvoke_with_the_async_client_answers_as_invoke(tenant):
    async def both() -> tuple[list[str], list[str]]:
        async with AsyncCairnClient(tenant.url, ADMIN_KEY, retries=0) as async_client:
            with CairnClient(tenant.url, ADMIN_KEY, retries=0) as client:
                retriever = CairnRetriever(cairn=client, async_cairn=async_client, limit=3)
                natively = await retriever.ainvoke("who approves a refund of a Stripe payment?")
                threaded = await CairnRetriever(cairn=client, limit=3).ainvoke("who approves a refund of a Stripe payment?")
                return [d.id for d in natively], [d.id for d in threaded]

    natively, threaded = asyncio.run(both())
    assert natively == threaded and page_of(natively[0]) == "billing/payment-providers.md"


def test_bad_options_are_refused_with_what_is_allowed(tenant):
    with CairnClient(tenant.url, ADMIN_KEY, retries=0) as client:
        with pytest.raises(RequestError, match=r"limit: .*greater than or equal to 1"):
            CairnRetriever(cairn=client, limit=0)
        with pytest.raises(RequestError, match=r"context_type: Input should be 'memory', 'resource' or 'skill'"):
            CairnRetriever(cairn=client, context_type="pages")
        with pytest.raises(RequestError, match=r"target_uris"):
            CairnRetriever(cairn=client, target_uris=["/handbook/people"])
        with pytest.raises(RequestError, match=r"unknown retrieval option\(s\) k; allowed: limit, "):
            CairnRetriever(cairn=client).invoke("refunds", k=3)
        with pytest.raises(RequestError, match=r"AsyncCairnClient goes in async_cairn"):
            CairnRetriever(cairn=AsyncCairnClient(tenant.url, ADMIN_KEY))
        with pytest.raises(RequestError, match=r"str is not a cairn; pass cairn.Cairn or cairn.CairnClient"):
            CairnRetriever(cairn=tenant.url)


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")  # still in langchain-core 1.x
def test_a_runnable_with_message_history_keeps_the_conversation_in_cairn(ann):
    """LangChain's RunnableWithMessageHistory over the cairn history: both turns land in the
    session, the next call reads them back, and commit turns them into ann's memories."""
    histories: dict[str, CairnChatMessageHistory] = {}

    def history_of(session_id: str) -> CairnChatMessageHistory:
        return histories.setdefault(session_id, CairnChatMessageHistory(ann, session_id))

    session_id = ann.create_session(user="ann").id
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
    model, seen = FakeListChatModel(responses=["Send it back within 30 days.", "Yes, to the same card."]), PromptsSeen()
    chat = RunnableWithMessageHistory(prompt | model, history_of, input_messages_key="question",
                                      history_messages_key="history")
    config: Any = {"configurable": {"session_id": session_id}, "callbacks": [seen]}
    chat.invoke({"question": "My new boots leak. Can I return them?"}, config=config)
    chat.invoke({"question": "Will the money go back to my card?"}, config=config)
    assert "My new boots leak" in seen.prompts[1] and "Send it back within 30 days." in seen.prompts[1]
    held = ann.get_session(session_id, recent=10).recent
    assert [(m.role, m.content) for m in held] == [
        ("user", "My new boots leak. Can I return them?"), ("assistant", "Send it back within 30 days."),
        ("user", "Will the money go back to my card?"), ("assistant", "Yes, to the same card.")]
    history = histories[session_id]
    assert history.commit().messages == 4 and history.commit().messages == 0  # twice adds nothing
    assert any("My new boots leak" in memory for memory in history.memories())


def test_the_history_keeps_the_conversation_and_clear_starts_afresh(ann):
    """The user's and the agent's messages are kept; the agent's instructions, its tool calls and
    their results stay out of the session (what the session's memories are made of)."""
    history = CairnChatMessageHistory(ann, user="ann")
    history.add_messages([SystemMessage("You help Northwind's customers."), HumanMessage("Where is my order?"),
                          AIMessage("", tool_calls=[{"name": "track", "args": {"order": "A17"}, "id": "c1"}]),
                          ToolMessage("in transit", tool_call_id="c1"), AIMessageChunk(content="It is on its way."),
                          ChatMessage(role="user", content="Thanks!")])
    got = history.messages
    assert [(type(m).__name__, m.text) for m in got] == [
        ("HumanMessage", "Where is my order?"), ("AIMessage", "It is on its way."), ("HumanMessage", "Thanks!")]
    with pytest.raises(RequestError, match=r"message role 'critic' is not one cairn knows; allowed: user, human, "):
        history.add_message(ChatMessage(role="critic", content="Too short."))
    before = history.session_id
    history.clear()
    assert history.session_id != before and history.messages == []
    assert ann.get_session(history.session_id).session.user == "ann"


def test_a_long_conversation_reads_back_as_its_summary_then_its_latest_messages(ann):
    """cairn folds a session's older messages into a summary (this test runs last: its turns become
    episodes of ann's memories); the history reads it back as a system message first."""
    history = CairnChatMessageHistory(ann, user="ann")
    history.add_messages([m for i in range(30) for m in (HumanMessage(f"Question {i} about my order."),
                                                          AIMessage(f"Answer {i}."))])
    got = history.messages
    assert isinstance(got[0], SystemMessage) and str(got[0].text).startswith("Summary of the earlier conversation: ")
    assert "Question 0 about my order." in str(got[0].text)
    assert str(got[-1].text) == "Answer 29." and 1 < len(got) < 60


# its ainvoke test is a coroutine (pytest-asyncio, strict mode); the suite's sync tests take the mark too
@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore:The test <Function .* is marked with '@pytest.mark.asyncio' but it is not an async")
class TestCairnRetrieverStandard(RetrieversIntegrationTests):
    """LangChain's standard retriever tests (langchain-tests), on the retriever over `cairn serve`."""

    @pytest.fixture(autouse=True)
    def _cairn(self, tenant):
        with CairnClient(tenant.url, ADMIN_KEY, retries=0) as client:
            self.cairn = client
            yield

    @property
    def retriever_constructor(self) -> type[CairnRetriever]:
        return CairnRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"cairn": self.cairn}

    @property
    def retriever_query_example(self) -> str:
        return "how do refunds work?"

    @property
    def num_results_arg_name(self) -> str:
        return "limit"


class TestCairnRetrieverStandardInProcess(TestCairnRetrieverStandard):
    """The same standard tests on the retriever over the in-process Cairn."""

    @pytest.fixture(autouse=True)
    def _cairn(self, tenant):
        self.cairn = tenant.in_process()
        yield
