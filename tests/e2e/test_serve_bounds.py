"""Bounds before work, through `cairn serve`: a small request whose paths would build thousands of
folders (1,000 segments deep, or 100 documents 30 deep) is a 400 naming the document, the limit and
the value, and nothing is written."""

from __future__ import annotations

import httpx
import pytest

from cairn.api import ApiKeys
from cairn.api.server import running
from cairn.app.services import Services
from cairn.core.config import load_settings
from cairn.engine.ingest import LocalContentStore
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.e2e

KEY = "acme-key-0123456789abcdef"
ROOT = "cairn://resources/bounds"


@pytest.fixture(scope="module")
def served(tmp_path_factory, embedder):
    home = tmp_path_factory.mktemp("bounds")
    store = LocalVectorStore(home / "store", dimension=embedder.dimension)
    content = LocalContentStore(home / "content")
    services = Services(load_settings(env={"CAIRN_HOME": str(home)}), embedder=embedder, store=store, content=content)
    with running(services, ApiKeys({KEY: "acme"})) as url:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as http:
            yield http, store, content


def put(http, documents, root=ROOT):
    return http.put("/v1/documents", json={"root_uri": root, "documents": documents})


def nothing_written(http, store, content):
    assert store.count("acme", {}) == 0
    assert content.list("acme", "cairn://resources") == []  # no body, no folder
    assert http.get("/v1/tree", params={"uri": ROOT}).status_code == 404


def test_a_path_of_a_thousand_segments_is_a_400_before_any_work(served):
    http, store, content = served
    deep = "/".join(["a"] * 999 + ["x.md"])
    answer = put(http, [{"path": "ok.md", "text": "fine"}, {"path": deep, "text": "hello"}])
    assert answer.status_code == 400
    body = answer.json()
    assert body["error"] == "bad_request"
    assert "documents.1.path" in body["message"] and "has 1,000 segments" in body["message"]
    assert "at most 31 are allowed" in body["message"]
    nothing_written(http, store, content)


def test_the_depth_counts_the_root_too(served):
    http, store, content = served
    answer = put(http, [{"path": "/".join(["a"] * 29 + ["x.md"]), "text": "hello"}], root=f"{ROOT}/a/b")
    assert answer.status_code == 400
    message = answer.json()["message"]
    assert "documents.0.path" in message and "has 30 segments" in message
    assert f"at most 28 are allowed below {ROOT}/a/b (4 segments)" in message
    nothing_written(http, store, content)


def test_many_deep_paths_are_a_400_naming_the_folder_count(served):
    http, store, content = served
    docs = [{"path": "/".join([f"f{i}"] + ["a"] * 28 + ["x.md"]), "text": "hello"} for i in range(100)]
    answer = put(http, docs)
    assert answer.status_code == 400
    message = answer.json()["message"]
    assert "the paths make 2,900 folders below cairn://resources/bounds; at most 1,000 are allowed" in message
    nothing_written(http, store, content)


@pytest.mark.parametrize(("path", "says"), [
    ("a/" + "b" * 300 + ".md", "is 303 characters long; at most 255 are allowed"),
    ("/".join(["c" * 250] * 9), "is 2,258 characters long; at most 2,030 are allowed, as a URI holds at most 2,048"),
    ("/".join(["c" * 250] * 8), "makes a URI of 2,051 characters below cairn://resources/" + "r" * 25 + "; at most 2,048"),
])
def test_a_long_segment_or_uri_is_a_400(served, path, says):
    http, store, content = served
    answer = put(http, [{"path": path, "text": "hello"}], root="cairn://resources/" + "r" * 25)
    assert answer.status_code == 400 and says in answer.json()["message"], answer.text
    nothing_written(http, store, content)


@pytest.mark.parametrize("route", ["/v1/contents", "/v1/tree"])
def test_a_uri_past_the_depth_is_a_400_on_reading_routes(served, route):
    http, _, _ = served
    answer = http.get(route, params={"uri": ROOT + "/a" * 40})
    assert answer.status_code == 400
    assert "has 42 path segments; at most 32 are allowed" in answer.json()["message"]


def test_within_the_bounds_the_documents_are_written(served):
    http, store, content = served
    answer = put(http, [{"path": "/".join(["a"] * 29 + ["x.md"]), "text": "the deepest document allowed"}])
    assert answer.status_code == 200, answer.text
    assert answer.json()["documents"] == 1 and not answer.json()["rejected"]
    assert http.get("/v1/contents", params={"uri": f"{ROOT}/{'a/' * 29}x.md", "level": 2}).json()["text"] == \
        "the deepest document allowed"
    http.delete("/v1/documents", params={"uri": ROOT})
