"""Bodies as clients really send them: `curl -d` (form-urlencoded), text/plain, no type at all,
multipart — through a real `cairn serve`. JSON is read whatever a lenient header says; anything
else is a 415 that names the header to send; nothing is a 5xx."""

from __future__ import annotations

import json

import httpx
import pytest

from cairn.api import ApiKeys
from cairn.api.server import running
from cairn.app.services import Services
from cairn.core.config import load_settings
from cairn.engine.ingest import LocalContentStore
from cairn.ports.vectorstores.local import LocalVectorStore
from cairn.core.tls import verified_context

pytestmark = pytest.mark.e2e
KEY = "types-key-0123456789abcdef"


@pytest.fixture(scope="module")
def url(tmp_path_factory, embedder):
    home = tmp_path_factory.mktemp("types")
    services = Services(load_settings(env={"CAIRN_HOME": str(home)}), embedder=embedder,
                        store=LocalVectorStore(home / "store", dimension=embedder.dimension),
                        content=LocalContentStore(home / "content"))
    with running(services, ApiKeys({KEY: "acme"})) as u:
        yield u


def post(url: str, content: bytes | str, content_type: str | None) -> httpx.Response:
    headers = {"authorization": f"Bearer {KEY}"}
    if content_type is not None:
        headers["content-type"] = content_type
    return httpx.post(f"{url}/v1/find", content=content, headers=headers, timeout=30, verify=verified_context())


@pytest.mark.parametrize("content_type", [None, "application/x-www-form-urlencoded", "text/plain",
                                          "text/plain; charset=utf-8", "application/json", "application/vnd.api+json"])
def test_a_json_body_is_read_whatever_a_lenient_header_says(url, content_type):
    r = post(url, json.dumps({"query": "refunds", "limit": 2}), content_type)
    assert r.status_code == 200, r.text
    assert r.json()["total"] == 0  # an empty tenant, answered


@pytest.mark.parametrize("content, content_type", [
    (b"--x\r\nContent-Disposition: form-data; name=\"query\"\r\n\r\nrefunds\r\n--x--\r\n", "multipart/form-data; boundary=x"),
    ("<find><query>refunds</query></find>", "application/xml"),
    ("query=refunds&limit=2", "application/x-www-form-urlencoded"),
    ("query=refunds", None),
])
def test_a_body_that_is_not_json_is_a_415_naming_the_header(url, content, content_type):
    r = post(url, content, content_type)
    assert r.status_code == 415, r.text
    err = r.json()
    assert "Content-Type: application/json" in err["message"] and err["error"] == "unsupported_media_type"


def test_broken_json_declared_as_json_is_a_400(url):
    r = post(url, "{\"query\": ", "application/json")
    assert r.status_code == 400 and "not valid JSON" in r.json()["message"]


def _body_routes() -> list[tuple[str, str]]:
    from cairn.api import openapi_document

    doc = json.loads(openapi_document())
    return [(m.upper(), p.replace("{session_id}", "s1").replace("{user}", "ann"))
            for p, ops in doc["paths"].items() for m, op in ops.items() if "requestBody" in op]


@pytest.mark.parametrize("method, path", _body_routes())
@pytest.mark.parametrize("content_type", ["multipart/form-data; boundary=x", "text/xml", "application/octet-stream",
                                          "text/plain", None, "application/x-www-form-urlencoded"])
def test_no_route_answers_a_5xx_to_any_content_type(url, method, path, content_type):
    headers = {"authorization": f"Bearer {KEY}"} | ({"content-type": content_type} if content_type else {})
    for content in (b"--x\r\n\r\n--x--", b"\xff\xfe", b"{}", b"a=b"):
        r = httpx.request(method, f"{url}{path}", content=content, headers=headers, timeout=30, verify=verified_context())
        assert r.status_code < 500, f"{content_type} {content!r}: {r.status_code} {r.text[:200]}"
