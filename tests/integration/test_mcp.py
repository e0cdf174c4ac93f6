"""`cairn mcp` driven by the official MCP SDK's own client: over stdio (the server a subprocess, as an
agent host starts it) and over streamable HTTP (a server on loopback, with and without API keys).
Every tool is listed and called against a real store; bad arguments and refused users come back as
tool errors (isError) with a clear message, and the server keeps answering."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="cairn mcp needs the optional extra 'mcp'")

from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from cairn import Cairn
from cairn.api import ApiKeys  # noqa: E402
from cairn.app.services import Services  # noqa: E402
from cairn.core.config import load_settings  # noqa: E402
from cairn.core.errors import ConfigError, MissingExtra  # noqa: E402
from cairn.engine.ingest import IngestPayload  # noqa: E402
from cairn.mcp import TOOL_OPERATIONS, build_server, running_http  # noqa: E402
from tests.fakes import HANDBOOK_DOCS  # noqa: E402

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
TOOLS = set(TOOL_OPERATIONS)
ROOT = "cairn://resources/handbook"
DOCS = HANDBOOK_DOCS
ACME_KEY = "acme-mcp-key-0123456789"
ANN_KEY = "ann-mcp-key-0123456789"
GLOBEX_KEY = "globex-mcp-key-0123456789"


def _ingest(services: Services, tenant: str) -> None:
    payload = IngestPayload.parse({"root_uri": ROOT, "documents": DOCS})
    report = Cairn(services, tenant).ingestor().ingest(payload.to_documents(), ROOT)
    assert report.documents == 3 and not report.rejected


@pytest.fixture(scope="module")
def home(tmp_path_factory, embedder) -> Path:
    """A CAIRN_HOME whose default tenant and tenant 'acme' hold the handbook."""
    home = tmp_path_factory.mktemp("mcp")
    services = Services(load_settings(env={"CAIRN_HOME": str(home)}), embedder=embedder)
    _ingest(services, "default")
    _ingest(services, "acme")
    return home


@pytest.fixture(scope="module")
def services(home, embedder) -> Services:
    return Services(load_settings(env={"CAIRN_HOME": str(home)}), embedder=embedder)


# ---------------------------------------------------------------------- helpers


def data(result: Any) -> dict[str, Any]:
    """A successful call's answer: compact text for the model, the structured answer beside it."""
    assert not result.is_error, result.content[0].text
    text = result.content[0].text
    assert text.strip() and not text.lstrip().startswith("{"), text  # lines a model reads, not a JSON dump
    for bucket in ("memories", "resources", "skills"):  # every match of a find/search is in the text
        for match in (result.structured_content or {}).get(bucket) or []:
            assert match["uri"] in text
    return result.structured_content


def error(result: Any) -> str:
    """A failed call's message (the client sees isError, not an exception)."""
    assert result.is_error, f"expected a tool error, got {result.structured_content}"
    return result.content[0].text


def over_http(url: str, key: str | None, body: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    import httpx2

    async def run() -> Any:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await body(session)

    return asyncio.run(run())


# ---------------------------------------------------------------------- stdio


def _cli_has_mcp() -> bool:
    from cairn.cli.main import build_parser

    return "mcp" in build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]


def _stdio(home: Path, command: list[str]) -> StdioServerParameters:
    env = {"CAIRN_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "CAIRN_LOG_LEVEL": "WARNING",
           "PYTHONPATH": os.pathsep.join([str(REPO / "lib"), os.environ.get("PYTHONPATH", "")])}
    return StdioServerParameters(command=sys.executable, args=command, env=env, cwd=str(home))


def test_stdio_server_lists_and_runs_every_tool_for_its_bound_user(home):
    """`python -m cairn.mcp --tenant acme --user ann` as an agent host starts it: every tool, real
    answers; another user's memories and bad arguments are tool errors, and it keeps serving."""
    params = _stdio(home, ["-m", "cairn.mcp", "--tenant", "acme", "--user", "ann"])

    async def run() -> None:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                init = await s.initialize()
                assert init.server_info.name == "cairn" and init.instructions
                listed = await s.list_tools()
                assert {t.name for t in listed.tools} == TOOLS
                assert all(t.description for t in listed.tools)

                found = data(await s.call_tool("find", {"query": "how long until my refund reaches the card?", "limit": 3}))
                assert found["resources"][0]["uri"] == f"{ROOT}/billing/refunds.md"
                body = data(await s.call_tool("read", {"uri": f"{ROOT}/billing/refunds.md", "level": 2}))
                assert "five business days" in body["text"] and body["next_offset"] is None
                listing = data(await s.call_tool("tree", {"uri": ROOT}))
                assert {c["uri"] for c in listing["children"]} == {f"{ROOT}/billing", f"{ROOT}/travel"}

                kept = data(await s.call_tool("remember", {"text": "Ann is vegetarian.", "category": "preferences",
                                                           "key": "diet"}))
                assert kept["uri"] == "cairn://user/ann/memories/preferences/diet" and kept["created"]
                first = data(await s.call_tool("add_message", {"content": "I moved to Lisbon last spring."}))
                sid = first["session_id"]
                assert first["session_created"] and first["message"]["seq"] == 1
                data(await s.call_tool("add_message", {"session_id": sid, "role": "assistant", "content": "Noted!"}))
                done = data(await s.call_tool("commit", {"session_id": sid}))
                assert done["user"] == "ann" and done["messages"] == 2 and done["episodes"]
                again = data(await s.call_tool("commit", {"session_id": sid}))
                assert again["messages"] == 0 and again["written"] == 0  # committing twice adds nothing
                hits = data(await s.call_tool("search", {"query": "where does she live now?", "session_id": sid}))
                memories = [m["uri"] for m in hits["memories"]]
                assert memories and all(u.startswith("cairn://user/ann/") for u in memories)

                assert "act for user 'ann' only" in error(await s.call_tool(
                    "remember", {"text": "Bob likes tea.", "category": "preferences", "user": "bob"}))
                assert "level" in error(await s.call_tool("read", {"uri": f"{ROOT}/billing/refunds.md", "level": 7}))
                assert "cairn://resources/nowhere" in error(await s.call_tool("tree", {"uri": "cairn://resources/nowhere"}))
                assert "Unknown tool" in error(await s.call_tool("delete_everything", {}))
                # still serving after the errors
                assert data(await s.call_tool("find", {"query": "invoices", "limit": 1}))["total"] >= 1

    asyncio.run(run())


@pytest.mark.skipif(not _cli_has_mcp(), reason="`cairn mcp` is not registered in cairn.cli.main yet (cairn.mcp.add_parser)")
def test_cairn_mcp_command_serves_over_stdio(home):
    async def run() -> None:
        async with stdio_client(_stdio(home, ["-m", "cairn.cli.main", "mcp"])) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                assert {t.name for t in (await s.list_tools()).tools} == TOOLS
                found = data(await s.call_tool("find", {"query": "invoices by email", "limit": 1}))
                assert found["resources"][0]["uri"] == f"{ROOT}/billing/invoices.md"

    asyncio.run(run())


# ---------------------------------------------------------------------- streamable HTTP


@pytest.fixture(scope="module")
def keyed(services):
    keys = ApiKeys({ACME_KEY: "acme", ANN_KEY: {"tenant": "acme", "user": "ann"}, GLOBEX_KEY: "globex"})
    with running_http(services, keys=keys) as url:
        yield url


def test_http_every_tool_through_a_tenant_key(keyed):
    async def body(s: ClientSession) -> None:
        assert {t.name for t in (await s.list_tools()).tools} == TOOLS
        found = data(await s.call_tool("find", {"query": "hotel costs per night", "limit": 2,
                                                "filter": {"metadata.team": "finance"}}))
        uris = [r["uri"] for r in found["resources"]]
        assert uris[0] == f"{ROOT}/travel/expenses.md"
        assert all(u.startswith(f"{ROOT}/travel/") for u in uris)  # the filter kept the finance team's only
        overview = data(await s.call_tool("read", {"uri": f"{ROOT}/billing", "level": 1}))
        assert "Refunds" in overview["text"] and "Invoices" in overview["text"]
        page = data(await s.call_tool("read", {"uri": f"{ROOT}/billing/refunds.md", "level": 2, "max_chars": 20}))
        assert len(page["text"]) == 20 and page["next_offset"] == 20
        deep = data(await s.call_tool("tree", {"uri": ROOT, "depth": 2}))
        billing = next(c for c in deep["children"] if c["uri"] == f"{ROOT}/billing")
        assert {c["uri"] for c in billing["children"]} == {f"{ROOT}/billing/refunds.md", f"{ROOT}/billing/invoices.md"}

        started = data(await s.call_tool("add_message", {"content": "I always fly with a window seat.", "user": "carl"}))
        sid = started["session_id"]
        done = data(await s.call_tool("commit", {"session_id": sid}))
        assert done["user"] == "carl" and done["messages"] == 1
        kept = data(await s.call_tool("remember", {"text": "Carl's team is finance.", "category": "profile", "user": "carl",
                                                   "metadata": {"source_app": "crm"}, "source": "crm:42"}))
        assert kept["uri"].startswith("cairn://user/carl/memories/profile/")
        hits = data(await s.call_tool("search", {"query": "which seat does he like?", "session_id": sid, "limit": 3}))
        assert hits["memories"] and all(m["uri"].startswith("cairn://user/carl/") for m in hits["memories"])
        assert hits["query_plan"] is not None

    over_http(keyed, ACME_KEY, body)


def test_http_user_key_acts_for_its_user_only(keyed):
    async def as_acme(s: ClientSession) -> str:
        return data(await s.call_tool("add_message", {"content": "Bob's order is late.", "user": "bob"}))["session_id"]

    bobs_session = over_http(keyed, ACME_KEY, as_acme)

    async def as_ann(s: ClientSession) -> None:
        assert "act for user 'ann' only" in error(await s.call_tool("commit", {"session_id": bobs_session}))
        assert "act for user 'ann' only" in error(await s.call_tool(
            "add_message", {"session_id": bobs_session, "content": "hi"}))
        assert "act for user 'ann' only" in error(await s.call_tool("search", {"query": "order", "user": "bob"}))
        kept = data(await s.call_tool("remember", {"text": "Ann prefers e-mail.", "category": "preferences"}))
        assert kept["uri"].startswith("cairn://user/ann/memories/preferences/")
        mine = data(await s.call_tool("add_message", {"content": "Hello"}))
        assert mine["session_created"]

    over_http(keyed, ANN_KEY, as_ann)


def test_http_tenants_are_separate(keyed):
    async def as_globex(s: ClientSession) -> None:
        found = data(await s.call_tool("find", {"query": "refund to the card"}))
        assert found["total"] == 0  # acme's handbook is not globex's
        assert "no folder" in error(await s.call_tool("tree", {"uri": ROOT}))

    over_http(keyed, GLOBEX_KEY, as_globex)


def test_http_bad_arguments_are_tool_errors_with_clear_messages(keyed):
    async def body(s: ClientSession) -> None:
        assert "filter" in error(await s.call_tool("find", {"query": "x", "filter": {"$regex": "a"}})).lower()
        assert "limit" in error(await s.call_tool("find", {"query": "x", "limit": 0}))
        assert "query" in error(await s.call_tool("find", {"query": ""})).lower()
        assert "cairn://" in error(await s.call_tool("read", {"uri": "http://example.com/x"}))
        assert "category" in error(await s.call_tool("remember", {"text": "x", "category": "../etc", "user": "ann"}))
        assert "name the end user" in error(await s.call_tool("remember", {"text": "x", "category": "notes"}))
        assert "session" in error(await s.call_tool("commit", {"session_id": "no-such-session"})).lower()
        assert data(await s.call_tool("find", {"query": "invoices"}))["total"] >= 1  # the server still answers

    over_http(keyed, ACME_KEY, body)


def test_http_without_a_known_key_is_401(keyed):
    import httpx2

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    headers = {"accept": "application/json, text/event-stream"}
    for auth in (None, "Bearer not-a-key-0123456789", "Basic abc"):
        sent = dict(headers, authorization=auth) if auth else headers
        resp = httpx2.post(keyed, json=init, headers=sent)
        assert resp.status_code == 401
        assert resp.headers["www-authenticate"].startswith("Bearer")
        assert "key" in resp.json()["message"].lower() or "bearer" in resp.json()["message"].lower()


def test_http_without_keys_serves_the_settings_tenant_on_loopback_only(services):
    with running_http(services, user="dana") as url:  # no keys: the default tenant, bound to dana
        async def body(s: ClientSession) -> None:
            assert data(await s.call_tool("find", {"query": "refund", "limit": 1}))["resources"]
            kept = data(await s.call_tool("remember", {"text": "Dana works nights.", "category": "profile"}))
            assert kept["uri"].startswith("cairn://user/dana/")

        over_http(url, None, body)
    with pytest.raises(ConfigError, match="without API keys"):
        with running_http(services, host="0.0.0.0"):
            pass


def test_missing_sdk_is_a_missing_extra(services, monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if the extra were not installed
    with pytest.raises(MissingExtra, match=r"cairn-context\[mcp\]"):
        build_server(services)


def test_http_a_tenant_over_its_limit_gets_a_tool_error_saying_when_to_retry(tmp_path, embedder):
    """The MCP door counts every tool call against its tenant's limits, as the HTTP API does."""
    limited = Services(load_settings(env={"CAIRN_HOME": str(tmp_path), "CAIRN_TENANT_RATE_LIMITS": '{"globex": "2/hour"}'}),
                       embedder=embedder)
    keys = ApiKeys({ACME_KEY: "acme", GLOBEX_KEY: "globex"})

    async def as_globex(s: ClientSession) -> None:
        for _ in range(2):
            assert data(await s.call_tool("find", {"query": "refund to the card"}))["total"] == 0
        refused = error(await s.call_tool("find", {"query": "refund to the card"}))
        assert "tenant 'globex' is over its rate limit of 2 requests per hour; retry in" in refused

    async def as_acme(s: ClientSession) -> None:
        for _ in range(4):
            data(await s.call_tool("find", {"query": "refund to the card"}))

    with running_http(limited, keys=keys) as url:
        over_http(url, GLOBEX_KEY, as_globex)
        over_http(url, ACME_KEY, as_acme)
