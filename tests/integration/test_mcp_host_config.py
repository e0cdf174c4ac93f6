"""The MCP host configurations in docs/api.md, launched as a host does: the stdio one from another
working directory with the absolute command path, the HTTP one with its key header."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from cairn import Cairn
from cairn.api import ApiKeys  # noqa: E402
from cairn.app.services import Services  # noqa: E402
from cairn.core.config import load_settings  # noqa: E402
from cairn.engine.ingest import IngestPayload  # noqa: E402
from cairn.mcp import TOOL_OPERATIONS, running_http  # noqa: E402

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
KEY = "host-config-key-0123456789"


def configs() -> list[dict]:
    text = (REPO / "docs" / "api.md").read_text()
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)\n```", text, re.S)]
    return [b["mcpServers"]["cairn"] for b in blocks if "mcpServers" in b]


@pytest.fixture(scope="module")
def home(tmp_path_factory, embedder) -> Path:
    home = tmp_path_factory.mktemp("host")
    services = Services(load_settings(env={"CAIRN_HOME": str(home), "CAIRN_TENANT": "acme"}), embedder=embedder)
    payload = IngestPayload.parse({"root_uri": "cairn://resources/handbook", "documents": [
        {"path": "refunds.md", "text": "# Refunds\n\nRefunds reach the card within five business days."}]})
    Cairn(services, "acme").put_documents(payload.root_uri, [d.model_dump() for d in payload.documents])
    return home


def test_the_stdio_config_runs_from_another_working_directory(home, tmp_path):
    stdio = next(c for c in configs() if "command" in c)
    assert Path(stdio["command"]).is_absolute() and Path(stdio["env"]["CAIRN_HOME"]).is_absolute()
    # the documented command is `<venv>/bin/cairn`; here the same entry point is this interpreter's
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "cairn.cli.main", *stdio["args"]], cwd=str(tmp_path),
        env={**stdio["env"], "CAIRN_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
             "PYTHONPATH": os.pathsep.join([str(REPO / "lib"), os.environ.get("PYTHONPATH", "")])})

    async def run() -> None:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                assert {t.name for t in (await s.list_tools()).tools} == set(TOOL_OPERATIONS)
                found = await s.call_tool("find", {"query": "how long do refunds take?"})
                assert not found.is_error and "refunds.md" in found.content[0].text

    asyncio.run(run())


def test_the_http_config_connects_with_its_key(home, embedder):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http_config = next(c for c in configs() if c.get("type") == "http")
    services = Services(load_settings(env={"CAIRN_HOME": str(home)}), embedder=embedder)
    with running_http(services, keys=ApiKeys({KEY: "acme"})) as url:
        headers = {k: v.replace("<key>", KEY) for k, v in http_config["headers"].items()}
        assert http_config["url"].endswith("/mcp") and url.endswith("/mcp")

        async def run() -> None:
            async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
                async with streamable_http_client(url, http_client=http) as (read, write):
                    async with ClientSession(read, write) as s:
                        await s.initialize()
                        found = await s.call_tool("find", {"query": "refund card"})
                        assert not found.is_error and found.structured_content["resources"]

        asyncio.run(run())
