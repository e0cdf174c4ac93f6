"""cairn in LlamaIndex, against the real llama-index-core from PyPI: the retriever answers handbook
questions inside a RetrieverQueryEngine with llama-index-core's MockLLM (which answers with the
prompt it was sent), brings a remembered fact into that prompt, and a chat engine keeps its memory
in a cairn session — through `cairn serve` and in process, with no network but the loopback (the
tokenizer's and NLTK's data come from llama-index-core's own wheel)."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.chat_engine import ContextChatEngine
from llama_index.core.llms import ChatMessage, MockLLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import QueryBundle

from cairn.client import AsyncCairnClient, CairnClient
from cairn.core.errors import RequestError, SessionNotFound
from cairn.integrations.llamaindex import CairnChatStore, CairnRetriever
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

# pytest-socket: a connection to anything but this machine's server fails the test (no download)
pytestmark = [pytest.mark.integration, pytest.mark.allow_hosts(["127.0.0.1"])]


@pytest.fixture(scope="module")
def tenant(tmp_path_factory, embedder):
    with handbook_tenant(tmp_path_factory.mktemp("llamaindex"), embedder) as tenant:
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


def test_handbook_questions_through_a_query_engine(door):
    """5 handbook questions through RetrieverQueryEngine: the page that answers is the first source
    node for at least 4, and the prompt the LLM was sent holds that node's text."""
    engine = RetrieverQueryEngine.from_args(CairnRetriever(door, limit=3), llm=MockLLM())
    first_pages = []
    for question, _ in QUESTIONS:
        response = engine.query(question)
        first = response.source_nodes[0]
        assert first.node.get_content() in str(response) and question in str(response)  # MockLLM echoes its prompt
        first_pages.append(page_of(first.node.node_id))
    expected = [page for _, page in QUESTIONS]
    assert sum(got == want for got, want in zip(first_pages, expected)) >= 4, list(zip(first_pages, expected))


def test_a_remembered_fact_reaches_the_llms_prompt_through_the_session(ann):
    session = ann.create_session(user="ann")
    ann.append_message(session.id, "user", "I'd like to return the tent I bought last week.")
    engine = RetrieverQueryEngine.from_args(CairnRetriever(ann, session_id=session.id, limit=3), llm=MockLLM())
    prompt = str(engine.query(ANN_QUESTION))
    assert ANN_FACT in prompt and "Refunds go back to the card or wallet that paid" in prompt


def test_nodes_carry_what_the_match_is_and_how_it_was_found(door):
    (first, *_) = CairnRetriever(door, limit=2).retrieve("who approves a refund of a Stripe payment?")
    node, meta = first.node, first.node.metadata
    assert node.node_id == meta["uri"] and page_of(meta["uri"]) == "billing/payment-providers.md"
    assert first.score == meta["score"] and 0 < first.score <= 1
    assert meta["level"] == 2 and meta["context_type"] == "resource" and meta["title"] == "Payment providers"
    assert meta["citation"]["heading_path"][0] == "Payment providers"
    assert meta["explanation"]["query"] == "who approves a refund of a Stripe payment?"
    assert meta["explanation"]["tier"] == "L2"
    in_prompt = node.get_content(metadata_mode="llm")  # what the LLM reads: the title and the uri, not the trace
    assert "title: Payment providers" in in_prompt and meta["uri"] in in_prompt and "explanation" not in in_prompt


def test_the_options_scope_what_comes_back(door):
    people = CairnRetriever(door, target_uris=(f"{ROOT}/people",), limit=5).retrieve("how many days off do I get?")
    assert people and all(n.node.node_id.startswith(f"{ROOT}/people") for n in people)
    pdf = CairnRetriever(door, filter={"metadata.source.format": "pdf"}).retrieve("what do I do when I lose my laptop?")
    assert {page_of(n.node.node_id) for n in pdf} == {"security/access-and-incidents.pdf"}
    assert len(CairnRetriever(door, limit=1).retrieve("refunds")) == 1


def test_aquery_with_the_async_client_answers_as_query(tenant):
    question = "who approves a refund of a Stripe payment?"

    async def asked() -> tuple[list[str], list[str]]:
        async with AsyncCairnClient(tenant.url, ADMIN_KEY, retries=0) as async_client:
            with CairnClient(tenant.url, ADMIN_KEY, retries=0) as client:
                natively = await RetrieverQueryEngine.from_args(
                    CairnRetriever(client, async_cairn=async_client, limit=3), llm=MockLLM()).aquery(question)
                threaded = await CairnRetriever(client, limit=3).aretrieve(QueryBundle(question))
                return [n.node.node_id for n in natively.source_nodes], [n.node.node_id for n in threaded]

    natively, threaded = asyncio.run(asked())
    assert natively == threaded and page_of(natively[0]) == "billing/payment-providers.md"


def test_a_chat_engine_keeps_its_memory_in_a_cairn_session(ann):
    """ContextChatEngine with a ChatMemoryBuffer over the cairn chat store and a retriever that
    searches with the same session: both turns land in the session, the fact reaches the prompt,
    and commit turns the turns into ann's memories."""
    store = CairnChatStore(cairn=ann, user="ann")
    key = store.start()
    memory = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key=key, token_limit=3000)
    engine = ContextChatEngine.from_defaults(CairnRetriever(ann, session_id=key, limit=3), memory=memory, llm=MockLLM())
    first = engine.chat("I'd like to return the tent I bought last week.")
    second = engine.chat(ANN_QUESTION)
    assert ANN_FACT in str(second) and "I'd like to return the tent" in str(second)  # the first turn came from cairn
    held = ann.get_session(key, recent=10).recent
    assert [(m.role, m.content) for m in held] == [("user", "I'd like to return the tent I bought last week."),
                                                    ("assistant", str(first)), ("user", ANN_QUESTION),
                                                    ("assistant", str(second))]
    assert key in store.get_keys()
    assert store.commit(key).messages == 4
    assert any("I'd like to return the tent" in m for m in store.memories(key))


def test_the_chat_store_is_append_only_and_says_so(ann):
    store = CairnChatStore(cairn=ann, user="ann")
    key = store.start()
    store.add_message(key, ChatMessage(role="system", content="You help Northwind's customers."))  # not kept
    store.add_message(key, ChatMessage(role="user", content="Where is my order?"))
    store.set_messages(key, [ChatMessage(role="user", content="Where is my order?"),
                             ChatMessage(role="assistant", content="It is on its way.")])  # appends the second
    assert [(m.role.value, m.content) for m in store.get_messages(key)] == [
        ("user", "Where is my order?"), ("assistant", "It is on its way.")]
    with pytest.raises(RequestError, match=r"holds 2 messages that the 1 given do not start with; .*append-only"):
        store.set_messages(key, [ChatMessage(role="user", content="Something else")])
    with pytest.raises(RequestError, match=r"append-only: message 0 of .* cannot be deleted alone"):
        store.delete_message(key, 0)
    with pytest.raises(RequestError, match=r"append-only: the last message"):
        store.delete_last_message(key)
    assert [m.content for m in store.delete_messages(key) or []] == ["Where is my order?", "It is on its way."]
    with pytest.raises(SessionNotFound):
        store.get_messages(key)
    with pytest.raises(RequestError, match=r"get_keys lists the sessions of one user: build the store with user="):
        CairnChatStore(cairn=ann).get_keys()


def test_bad_options_are_refused_with_what_is_allowed(tenant):
    with CairnClient(tenant.url, ADMIN_KEY, retries=0) as client:
        with pytest.raises(RequestError, match=r"limit: .*less than or equal to 100"):
            CairnRetriever(client, limit=1000)
        with pytest.raises(RequestError, match=r"context_type: Input should be 'memory', 'resource' or 'skill'"):
            CairnRetriever(client, context_type="pages")
        with pytest.raises(RequestError, match=r"session_id .* is not valid"):
            CairnRetriever(client, session_id="no spaces allowed")
        with pytest.raises(RequestError, match=r"async_cairn takes an AsyncCairnClient"):
            CairnRetriever(client, async_cairn=client)
