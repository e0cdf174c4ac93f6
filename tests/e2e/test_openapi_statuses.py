"""Every status `cairn serve` answers is one docs/openapi.json declares for that route: each route
is driven to its successes and to the errors a client can cause (bad input, no or another user's
credentials, unknown session or URI, a body too large, a chunk deleted alone)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from cairn.api import ApiKeys
from cairn.api.server import running
from cairn.app.services import Services
from cairn.core.config import load_settings
from cairn.engine.ingest import LocalContentStore
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
DOC = json.loads((REPO / "docs" / "openapi.json").read_text())
KEY, ANN = "statuses-key-0123456789abcdef", "statuses-ann-0123456789abcdef"
ROOT = "cairn://resources/handbook"


@pytest.fixture(scope="module")
def http(tmp_path_factory, embedder):
    home = tmp_path_factory.mktemp("statuses")
    services = Services(load_settings(env={"CAIRN_HOME": str(home)}), embedder=embedder,
                        store=LocalVectorStore(home / "store", dimension=embedder.dimension),
                        content=LocalContentStore(home / "content"))
    with running(services, ApiKeys({KEY: "acme", ANN: {"tenant": "acme", "user": "ann"}})) as url:
        with httpx.Client(base_url=url, headers={"authorization": f"Bearer {KEY}"}, timeout=60) as client:
            yield client


def _template(method: str, path: str) -> str:
    """The document's path of a concrete request path (``/v1/sessions/abc`` -> ``/v1/sessions/{session_id}``)."""
    parts = path.split("/")
    for candidate, ops in DOC["paths"].items():
        pattern = candidate.split("/")
        if len(pattern) == len(parts) and method in ops and all(
                p == q or (p.startswith("{") and q) for p, q in zip(pattern, parts)):
            return candidate
    raise AssertionError(f"{method.upper()} {path} is not in docs/openapi.json")


def test_every_answered_status_is_declared(http):
    seen: list[tuple[str, str, int]] = []

    def call(method: str, path: str, expect: int, **kw) -> httpx.Response:
        response = http.request(method, path, **kw)
        assert response.status_code == expect, f"{method} {path}: {response.status_code} {response.text[:300]}"
        seen.append((method.lower(), _template(method.lower(), path), response.status_code))
        return response

    doc = {"path": "billing/refunds.md", "text": "# Refunds\n\n" + "Refunds reach the card in five days. " * 80}
    call("PUT", "/v1/documents", 200, json={"root_uri": ROOT, "documents": [doc], "chunk_chars": 400})
    call("PUT", "/v1/documents", 400, json={"root_uri": "not a uri", "documents": []})
    call("PUT", "/v1/documents", 413, content=b'{"root_uri": "' + b"x" * 12_000_000 + b'"}')
    call("POST", "/v1/find", 200, json={"query": "refund"})
    call("POST", "/v1/find", 400, json={"query": ""})
    call("POST", "/v1/find", 401, json={"query": "refund"}, headers={"authorization": "Bearer nope-nope-nope-nope"})
    session = call("POST", "/v1/sessions", 201, json={"user": "ann"}).json()["id"]
    call("POST", "/v1/sessions", 403, json={"user": "bob"}, headers={"authorization": f"Bearer {ANN}"})
    call("GET", f"/v1/sessions/{session}", 200)
    call("GET", "/v1/sessions/no-such-session", 404)
    call("POST", f"/v1/sessions/{session}/messages", 201, json={"role": "user", "content": "I paid last week."})
    call("POST", f"/v1/sessions/{session}/messages", 400, json={"role": "robot", "content": "hi"})
    call("POST", "/v1/search", 200, json={"query": "can I get my money back?", "session_id": session})
    call("POST", "/v1/search", 404, json={"query": "money back", "session_id": "no-such-session"})
    call("POST", "/v1/memories", 201, json={"user": "ann", "text": "Ann pays by card.", "category": "preferences",
                                            "key": "payment"})
    call("POST", "/v1/memories", 200, json={"user": "ann", "text": "Ann pays by PayPal.", "category": "preferences",
                                            "key": "payment"})
    call("POST", f"/v1/sessions/{session}/commit", 200)
    call("POST", "/v1/sessions/no-such-session/commit", 404)
    call("GET", "/v1/contents", 200, params={"uri": f"{ROOT}/billing/refunds.md", "level": 2})
    call("GET", "/v1/contents", 404, params={"uri": f"{ROOT}/nothing.md"})
    call("GET", "/v1/tree", 200, params={"uri": ROOT})
    call("GET", "/v1/stats", 200)
    call("DELETE", "/v1/documents", 422, params={"uri": f"{ROOT}/billing/refunds.md#2"})
    call("DELETE", "/v1/documents", 200, params={"uri": f"{ROOT}/billing/refunds.md"})
    call("DELETE", f"/v1/sessions/{session}", 200)
    call("GET", "/v1/health", 200)

    undeclared = sorted({(m, p, s) for m, p, s in seen if str(s) not in DOC["paths"][p][m]["responses"]})
    assert not undeclared, f"answered but not declared in docs/openapi.json: {undeclared}"
