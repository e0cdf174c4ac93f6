"""A tool-calling agent over cairn, as docs/integrations/tools.md builds it: the handbook served by
`cairn serve` (and `cairn mcp` over HTTP, with the same API key), a model that calls cairn's tools
and answers from what they return. The model is scripted (no network): it calls the tool a real
model would and answers with what the tool answered, so the answer holds only what crossed the loop.

Three loops: a plain one over the function tools (no SDK), and the OpenAI Agents SDK's (its own
scripted model, ``agents.testing.ScriptedModel``) once over cairn's MCP server and once over the
function tools (awaited on the async client)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cairn import Cairn, CairnClient
from cairn.client import AsyncCairnClient
from cairn.api import ApiKeys
from cairn.api.server import running
from cairn.app.services import Services
from cairn.core.config import load_settings
from cairn.integrations.tools import CairnTools
from cairn.mcp import running_http

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
ROOT = "cairn://resources/handbook"
KEY = "tools-key-0123456789abcdef"
QUESTIONS = [  # five handbook questions, and the page that answers each
    ("How many days of paid annual leave do employees get?", "people/leave.md"),
    ("When must a support agent escalate a ticket to a lead?", "support/escalation.md"),
    ("Who approves the refund of a payment made through Stripe?", "billing/payment-providers.md"),
    ("A business customer needs another VAT number on an invoice: what happens?", "billing/invoices.md"),
    ("How many days a week may office staff work from home?", "people/remote-work.html"),
]
Message = dict[str, Any]


@pytest.fixture(scope="module")
def services(tmp_path_factory, embedder) -> Services:
    home = tmp_path_factory.mktemp("tool-calling")
    services = Services(load_settings(env={"CAIRN_HOME": str(home)}), embedder=embedder)
    Cairn(services, "acme").ingest(REPO / "examples" / "handbook", ROOT)
    return services


@pytest.fixture(scope="module")
def url(services):
    with running(services, ApiKeys({KEY: "acme"})) as url:
        yield url


@pytest.fixture(scope="module")
def client(url):
    with CairnClient(url, KEY) as client:
        yield client


# ---------------------------------------------------------------------- the plain loop


def tool_loop(ask_model: Callable[[list[Message], list[dict]], Message], tools: CairnTools, question: str) -> list[Message]:
    """The loop of docs/integrations/tools.md: ask, run each tool call, answer the tool's result, until
    the model replies without a call. Messages in the Chat Completions shape."""
    messages: list[Message] = [{"role": "user", "content": question}]
    for _ in range(5):
        reply = ask_model(messages, tools.definitions())
        messages.append(reply)
        if not reply.get("tool_calls"):
            return messages
        for call in reply["tool_calls"]:
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": tools.run(call["function"]["name"], call["function"]["arguments"])})
    raise AssertionError(f"the model kept calling tools: {messages}")


def scripted(*calls: tuple[str, dict[str, Any] | str]) -> Callable[[list[Message], list[dict]], Message]:
    """A model that makes ``calls`` one turn each (checking it was given the tool), then answers with
    the last tool message it read."""
    turns = list(calls)

    def ask_model(messages: list[Message], tools: list[dict]) -> Message:
        if not turns:
            return {"role": "assistant", "content": messages[-1]["content"]}
        name, arguments = turns.pop(0)
        assert name in [t["function"]["name"] for t in tools], f"{name} was not offered"
        arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
        call = {"id": f"call-{len(messages)}", "type": "function", "function": {"name": name, "arguments": arguments}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    return ask_model


def test_the_loop_answers_handbook_questions_from_cairn_serve(client):
    tools = CairnTools(client)
    firsts = []
    for question, page in QUESTIONS:
        messages = tool_loop(scripted(("find", {"query": question, "limit": 3})), tools, question)
        answer = json.loads(messages[-1]["content"])
        firsts.append((answer["results"][0]["uri"].split("#")[0], f"{ROOT}/{page}"))  # a page, or one of its chunks
    hits = sum(got == want for got, want in firsts)
    assert hits >= 4, f"the expected page came first in {hits} of 5: {firsts}"


def test_a_fact_the_model_remembers_reaches_it_in_the_next_conversations_context(client):
    first = client.create_session(user="ann")
    said = "Any refund of mine goes to my Revolut card ending 4242, please."
    client.append_message(first.id, "user", said)
    tool_loop(scripted(("remember", {"text": "Ann wants her refunds paid to her Revolut card ending 4242.",
                                     "category": "preferences", "key": "refund-card"})),
              CairnTools(client, user="ann", session_id=first.id), said)

    later = client.create_session(user="ann")
    asked = "How long until my refund arrives?"
    client.append_message(later.id, "user", asked)
    read = tool_loop(scripted(("context", {"query": asked, "budget_tokens": 600})),
                     CairnTools(client, user="ann", session_id=later.id), asked)
    block = json.loads(read[-1]["content"])
    assert "Revolut card ending 4242" in block["text"] and "five business days" in block["text"], block["text"]
    assert any(s["uri"].startswith("cairn://user/ann/memories/preferences/") for s in block["sources"]), block["sources"]


def test_a_bad_call_comes_back_to_the_model_which_corrects_it(client):
    messages = tool_loop(scripted(("find", '{"query": "leave", "limit": 0}'), ("find", '{"query": "annual leave", "limit": 1}')),
                         CairnTools(client), "annual leave")
    error = json.loads(messages[2]["content"])
    assert error["tool"] == "find" and "limit: Input should be greater than or equal to 1" in error["error"], error
    assert json.loads(messages[-1]["content"])["results"][0]["uri"] == f"{ROOT}/people/leave.md"


# ---------------------------------------------------------------------- the OpenAI Agents SDK


def reading_model(name: str, arguments: dict[str, Any]) -> Any:
    """The SDK's scripted model: a call of ``name``, then an answer that quotes the tool's output."""
    testing = pytest.importorskip("agents.testing")

    def answer(call: Any) -> list[Any]:
        output = next(item["output"] for item in call.input if item.get("type") == "function_call_output")
        text = output if isinstance(output, str) else " ".join(part["text"] for part in output)
        return [testing.assistant_message(f"From the handbook: {text}")]

    return testing.ScriptedModel([[testing.function_call(name, arguments, call_id="call-1")],
                                  testing.ModelStep.respond(answer)])


def test_an_agents_sdk_agent_answers_through_cairns_mcp_server(services):
    mcp = pytest.importorskip("agents.mcp")
    model = reading_model("context", {"query": "How long does a refund take to reach the card?"})

    async def run() -> str:
        from agents import Agent, RunConfig, Runner

        with running_http(services, keys=ApiKeys({KEY: "acme"})) as url:
            async with mcp.MCPServerStreamableHttp(params={"url": url, "headers": {"Authorization": f"Bearer {KEY}"}},
                                                   client_session_timeout_seconds=30) as cairn:
                agent = Agent(name="support", instructions="Answer from cairn's context.", mcp_servers=[cairn], model=model)
                done = await Runner.run(agent, "How long does a refund take?", run_config=RunConfig(tracing_disabled=True))
                return str(done.final_output)

    answer = asyncio.run(run())
    assert "five business days" in answer and f"{ROOT}/billing/refunds.md" in answer, answer
    offered = [t.name for t in model.first_call.tools]
    assert {"find", "search", "context", "remember"} <= set(offered), offered


def test_an_agents_sdk_agent_starts_cairn_mcp_over_stdio_acting_for_one_user(services):
    """The host-started form the page names: `cairn --tenant acme mcp --user ann` over stdio."""
    mcp = pytest.importorskip("agents.mcp")
    from agents import Agent, RunConfig, Runner

    model = reading_model("memories", {"user": "bob"})
    params = {"command": sys.executable, "args": ["-m", "cairn.cli.main", "--tenant", "acme", "mcp", "--user", "ann"],
              "env": {**os.environ, "CAIRN_HOME": str(services.settings.home), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}}

    async def run() -> str:
        async with mcp.MCPServerStdio(params=params, client_session_timeout_seconds=120) as cairn:
            agent = Agent(name="support", instructions="Answer from cairn.", mcp_servers=[cairn], model=model)
            done = await Runner.run(agent, "What do you know about Bob?", run_config=RunConfig(tracing_disabled=True))
            return str(done.final_output)

    answer = asyncio.run(run())
    assert "ann" in answer and "bob" in answer and "only" in answer, answer  # refused: the server acts for ann alone


def test_an_agents_sdk_agent_uses_the_function_tools_over_the_async_client(url):
    """As docs/integrations/tools.md, with AsyncCairnClient and ``arun`` instead of a thread."""
    sdk = pytest.importorskip("agents")

    def function_tool(tools: CairnTools, definition: dict[str, Any]) -> Any:
        name = definition["function"]["name"]
        return sdk.FunctionTool(name=name, description=definition["function"]["description"],
                                params_json_schema=definition["function"]["parameters"], strict_json_schema=False,
                                on_invoke_tool=lambda ctx, arguments: tools.arun(name, arguments))

    async def run() -> tuple[str, str]:
        async with AsyncCairnClient(url, KEY) as cairn:
            tools = CairnTools(cairn)
            agent = sdk.Agent(name="support", instructions="Answer from cairn's context.",
                              tools=[function_tool(tools, d) for d in tools.definitions()],
                              model=reading_model("find", {"query": "Who approves a Stripe refund?", "limit": 1}))
            done = await sdk.Runner.run(agent, "Who approves a Stripe refund?",
                                        run_config=sdk.RunConfig(tracing_disabled=True))
            return str(done.final_output), await tools.arun("context", '{"query": "refunds", "budget_tokens": 10}')

    answer, refused = asyncio.run(run())
    assert f"{ROOT}/billing/payment-providers.md" in answer and "support lead" in answer, answer
    assert "budget_tokens: Input should be greater than or equal to 50" in json.loads(refused)["error"], refused
