"""`Cairn` (in process) and `CairnClient` (over HTTP) are one interface: the same scenario, written
once, runs through both and answers the same; the same error classes come back on both sides."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from cairn import Cairn
from cairn.api import ApiKeys
from cairn.api.server import running
from cairn.app.services import Services
from cairn.client import CairnClient
from cairn.core.config import load_settings
from cairn.core.errors import Forbidden, SessionNotFound
from cairn.engine.ingest import LocalContentStore
from cairn.ports.vectorstores.local import LocalVectorStore
from tests.fakes import HANDBOOK_DOCS

pytestmark = pytest.mark.e2e
INTERFACE = ("find", "search", "context", "read", "contents", "tree", "put_documents", "delete_documents", "remember",
             "forget", "list_memories", "create_session", "get_session", "delete_session", "append_message", "commit",
             "list_sessions", "export_user", "erase_user", "statistics", "me", "overview")
KEY, ANN = "one-admin-key-0123456789", "one-ann-key-0123456789ab"
ROOT = "cairn://resources/handbook"


def services(home, embedder) -> Services:
    return Services(load_settings(env={"CAIRN_HOME": str(home), "CAIRN_RECORD_USE": "false"}), embedder=embedder,
                    store=LocalVectorStore(home / "store", dimension=embedder.dimension),
                    content=LocalContentStore(home / "content"))


def scenario(api: Any, ann: Any) -> dict[str, Any]:
    """A day of one agent, written against the interface only."""
    out: dict[str, Any] = {}
    out["put"] = api.put_documents(ROOT, HANDBOOK_DOCS).documents
    out["find"] = [m.uri for m in api.find("how long until my refund reaches the card?", limit=3).all()]
    session = ann.create_session()
    ann.append_message(session.id, "user", "I was charged twice for my subscription.")
    out["search"] = [m.uri for m in ann.search("can I get my money back?", session.id, limit=3).resources]
    out["remember"] = ann.remember("Ann is vegetarian.", "preferences", key="diet").uri
    out["memories"] = [m.text for m in ann.list_memories().memories]
    out["commit"] = ann.commit(session.id).messages
    out["context_fits"] = (lambda b: b.tokens <= b.budget_tokens == 200 and bool(b.passages))(
        ann.context("refund for a double charge", session.id, budget_tokens=200))
    out["read"] = api.read(f"{ROOT}/billing/refunds.md", 2).title
    out["tree"] = sorted(n.uri for n in api.tree(ROOT).children)
    out["sessions"] = [s.id == session.id for s in ann.list_sessions().sessions]
    out["me"] = (ann.me().role, ann.me().user)
    out["overview"] = (lambda o: (o.documents, o.memories, o.users))(api.overview())
    with pytest.raises(SessionNotFound):
        ann.get_session("no-such-session")
    with pytest.raises(Forbidden):
        ann.list_memories("bob")
    out["forget"] = ann.forget(out["remember"]).removed >= 1
    out["export"] = len(ann.export_user().sessions)
    erased = ann.erase_user()
    out["erased"] = (erased.sessions, erased.user)
    out["deleted"] = api.delete_documents(f"{ROOT}/billing/refunds.md").removed >= 1
    return out


def test_the_same_scenario_answers_the_same_in_process_and_over_http(tmp_path, embedder):
    cairn = Cairn(services(tmp_path / "a", embedder), "acme")
    in_process = scenario(cairn, cairn.as_user("ann"))
    keys = ApiKeys({KEY: "acme", ANN: {"tenant": "acme", "user": "ann"}})
    with running(services(tmp_path / "b", embedder), keys) as url:
        with CairnClient(url, KEY, retries=0) as api, CairnClient(url, ANN, retries=0) as ann:
            over_http = scenario(api, ann)
    assert in_process == over_http
    assert over_http["find"][0] == f"{ROOT}/billing/refunds.md" and over_http["me"] == ("user", "ann")


def test_both_sides_take_the_same_arguments():
    for name in INTERFACE:
        local, remote = inspect.signature(getattr(Cairn, name)), inspect.signature(getattr(CairnClient, name))
        assert list(local.parameters) == list(remote.parameters), f"{name}: {local} vs {remote}"
