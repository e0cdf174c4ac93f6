"""Who may do what, through the doors as users call them: every route of the /v1 table (from the
OpenAPI document the table generates) and every MCP tool, × every role × whose data, against a
real ``cairn serve`` with one key per role.

The expected answers are the table of SECURITY.md, written here independently of the code's
policy: removing a rule from :mod:`cairn.app.policy` or :mod:`cairn.app.application` makes the
attack succeed and this test fail. A route or tool without an entry below fails the test too.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from cairn.api import ApiKeys, openapi_document
from cairn.api.server import running
from cairn.app.services import Services
from cairn.core.config import load_settings
from cairn.engine.ingest import LocalContentStore
from cairn.ports.vectorstores.local import LocalVectorStore
from cairn.core.tls import verified_context

pytestmark = pytest.mark.e2e

KEYS = {
    "admin": "admin-key-0123456789abcdef",
    "writer": "writer-key-0123456789abcdef",
    "reader": "reader-key-0123456789abcdef",
    "user": "ann-key-0123456789abcdef",  # bound to ann
}
GLOBEX = "globex-key-0123456789abcdef"
SHARED = "cairn://resources/handbook"
WHOSE = ("own", "other", "shared")  # ann's data, bob's data, the tenant's shared content
OWNER = {"own": "ann", "other": "bob"}

# The documented rule (SECURITY.md): which role may do each kind of operation on whose data.
READ = {"admin": {"own", "other", "shared"}, "writer": {"shared"}, "reader": {"shared"}, "user": {"own", "shared"}}
WRITE = {"admin": {"own", "other", "shared"}, "writer": {"shared"}, "reader": set(), "user": {"own"}}
USERS = {"admin": {"own", "other"}, "writer": set(), "reader": set(), "user": {"own"}}
KIND = {
    "find": READ, "search": READ, "context": READ, "read": READ, "tree": READ,
    "put_documents": WRITE, "delete_documents": WRITE,
    "remember": USERS, "forget": USERS, "list_memories": USERS, "create_session": USERS, "get_session": USERS,
    "delete_session": USERS, "append_message": USERS, "commit": USERS, "list_sessions": USERS,
    "export_user": USERS, "erase_user": USERS,
}
TENANT_WIDE = {"stats": {"admin", "writer", "reader"}, "overview": {"admin", "writer", "reader"},
               "me": {"admin", "writer", "reader", "user"}}
PUBLIC = {"health"}


class World:
    """The tenant's data, made again before each case that could change it."""

    def __init__(self, url: str, services: Services) -> None:
        self.url, self.services = url, services
        self.admin = httpx.Client(base_url=url, headers={"authorization": f"Bearer {KEYS['admin']}"}, timeout=60)

    def call(self, key: str, method: str, path: str, params: dict | None = None, body: Any = None) -> httpx.Response:
        return httpx.request(method, f"{self.url}{path}", params=params, json=body, timeout=60,
                             headers={"authorization": f"Bearer {key}"}, verify=verified_context())

    def ok(self, method: str, path: str, **kw: Any) -> Any:
        r = self.admin.request(method, path, **kw)
        assert r.status_code < 300, r.text
        return r.json()

    def seed(self) -> None:
        self.ok("PUT", "/v1/documents", json={"root_uri": SHARED, "documents": [
            {"path": "billing/refunds.md", "text": "# Refunds\n\nRefunds reach the card within five business days."}]})
        for user in ("ann", "bob"):
            self.ok("POST", "/v1/memories", json={"user": user, "category": "profile", "key": "diet",
                                                  "text": f"{user.title()} is vegetarian and drinks tea."})
            self.ok("PUT", "/v1/documents", json={"root_uri": f"cairn://user/{user}/skills", "documents": [
                {"path": "pack.md", "text": f"# Packing\n\n{user.title()} packs light for trips."}]})

    def session(self, user: str) -> str:
        sid = self.ok("POST", "/v1/sessions", json={"user": user})["id"]
        self.ok("POST", f"/v1/sessions/{sid}/messages", json={"role": "user", "content": "I love tea."})
        return str(sid)


def target(whose: str) -> dict[str, str]:
    """The URIs a case names for ``whose`` data."""
    if whose == "shared":
        return {"folder": SHARED, "doc": f"{SHARED}/billing/refunds.md", "root": SHARED}
    user = OWNER[whose]
    return {"folder": f"cairn://user/{user}/memories", "doc": f"cairn://user/{user}/memories/profile/diet",
            "root": f"cairn://user/{user}/skills"}


def request_for(route: str, whose: str, world: World) -> tuple[str, str, dict | None, Any]:
    """The HTTP request of ``route`` on ``whose`` data (session routes use a fresh session)."""
    t, user = target(whose), OWNER.get(whose, "ann")
    q = "what does the user drink?"
    table: dict[str, Callable[[], tuple[str, str, dict | None, Any]]] = {
        "find": lambda: ("POST", "/v1/find", None, {"query": q, "target_uris": [t["folder"]]}),
        "search": lambda: ("POST", "/v1/search", None, {"query": q, "target_uris": [t["folder"]]}),
        "context": lambda: ("POST", "/v1/context", None, {"query": q, "target_uris": [t["folder"]]}),
        "read": lambda: ("GET", "/v1/contents", {"uri": t["doc"], "level": 2}, None),
        "tree": lambda: ("GET", "/v1/tree", {"uri": t["folder"]}, None),
        "put_documents": lambda: ("PUT", "/v1/documents", None,
                                  {"root_uri": t["root"], "documents": [{"path": "new.md", "text": "All refunds are instant."}]}),
        "delete_documents": lambda: ("DELETE", "/v1/documents", {"uri": t["doc"]}, None),
        "remember": lambda: ("POST", "/v1/memories", None, {"user": user, "category": "notes", "text": "Injected."}),
        "forget": lambda: ("DELETE", "/v1/memories", {"uri": f"cairn://user/{user}/memories/profile/diet"}, None),
        "list_memories": lambda: ("GET", f"/v1/users/{user}/memories", None, None),
        "create_session": lambda: ("POST", "/v1/sessions", None, {"user": user}),
        "get_session": lambda: ("GET", f"/v1/sessions/{world.session(user)}", None, None),
        "delete_session": lambda: ("DELETE", f"/v1/sessions/{world.session(user)}", None, None),
        "append_message": lambda: ("POST", f"/v1/sessions/{world.session(user)}/messages", None,
                                   {"role": "user", "content": "hi"}),
        "commit": lambda: ("POST", f"/v1/sessions/{world.session(user)}/commit", None, None),
        "list_sessions": lambda: ("GET", f"/v1/users/{user}/sessions", None, None),
        "export_user": lambda: ("GET", f"/v1/users/{user}/export", None, None),
        "erase_user": lambda: ("DELETE", f"/v1/users/{user}", None, None),
    }
    return table[route]()


# every route of the table, by method and path, and the name of its rule above
ROUTES = {
    ("POST", "/v1/find"): "find", ("POST", "/v1/search"): "search", ("POST", "/v1/context"): "context",
    ("GET", "/v1/contents"): "read", ("GET", "/v1/tree"): "tree",
    ("PUT", "/v1/documents"): "put_documents", ("DELETE", "/v1/documents"): "delete_documents",
    ("POST", "/v1/memories"): "remember", ("DELETE", "/v1/memories"): "forget",
    ("GET", "/v1/users/{user}/memories"): "list_memories", ("POST", "/v1/sessions"): "create_session",
    ("GET", "/v1/sessions/{session_id}"): "get_session", ("DELETE", "/v1/sessions/{session_id}"): "delete_session",
    ("POST", "/v1/sessions/{session_id}/messages"): "append_message",
    ("POST", "/v1/sessions/{session_id}/commit"): "commit", ("GET", "/v1/users/{user}/sessions"): "list_sessions",
    ("GET", "/v1/users/{user}/export"): "export_user", ("DELETE", "/v1/users/{user}"): "erase_user",
    ("GET", "/v1/stats"): "stats", ("GET", "/v1/overview"): "overview", ("GET", "/v1/me"): "me", ("GET", "/v1/health"): "health",
}


def routes() -> dict[str, tuple[str, str]]:
    """rule name -> (method, path) of every route in the table (the generated OpenAPI document);
    a route this test does not know fails ``test_every_route_has_a_rule``."""
    doc = json.loads(openapi_document())
    found = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    return {ROUTES.get(key, f"unknown {key[0]} {key[1]}"): key for key in found}


@pytest.fixture(scope="module")
def world(tmp_path_factory, embedder):
    home = tmp_path_factory.mktemp("authz")
    services = Services(load_settings(env={"CAIRN_HOME": str(home), "CAIRN_RECORD_USE": "false"}), embedder=embedder,
                        store=LocalVectorStore(home / "store", dimension=embedder.dimension),
                        content=LocalContentStore(home / "content"))
    keys = ApiKeys({KEYS["admin"]: "acme", KEYS["writer"]: {"tenant": "acme", "role": "writer"},
                    KEYS["reader"]: {"tenant": "acme", "role": "reader"},
                    KEYS["user"]: {"tenant": "acme", "user": "ann"}, GLOBEX: "globex"})
    with running(services, keys) as url:
        w = World(url, services)
        w.seed()
        yield w


def test_every_route_has_a_rule():
    known = set(KIND) | set(TENANT_WIDE) | PUBLIC
    assert set(routes()) == known, f"routes without a rule in this test (and SECURITY.md): {set(routes()) ^ known}"


@pytest.mark.parametrize("route", sorted(KIND))
def test_each_role_on_each_owners_data_gets_the_documented_answer(world, route):
    allowed = KIND[route]
    wrong = []
    for role, key in KEYS.items():
        for whose in WHOSE:
            if allowed is USERS and whose == "shared":
                continue  # a user's data: there is no shared variant
            world.seed()
            method, path, params, body = request_for(route, whose, world)
            r = world.call(key, method, path, params, body)
            expect = whose in allowed[role]
            if (r.status_code < 300) != expect or (not expect and r.status_code != 403):
                wrong.append(f"{role} on {whose}: {method} {path} -> {r.status_code} {r.text[:160]}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("route", sorted(TENANT_WIDE))
def test_tenant_wide_routes(world, route):
    method, path = routes()[route]
    for role, key in KEYS.items():
        r = world.call(key, method, path)
        assert (r.status_code == 200) == (role in TENANT_WIDE[route]), f"{role}: {r.status_code} {r.text[:200]}"
        if r.status_code != 200:
            assert r.status_code == 403


def test_refused_writes_lose_nothing(world):
    world.seed()
    for route in ("delete_documents", "erase_user", "forget", "put_documents"):
        method, path, params, body = request_for(route, "other", world)
        assert world.call(KEYS["user"], method, path, params, body).status_code == 403
    shared = request_for("delete_documents", "shared", world)
    assert world.call(KEYS["reader"], *shared).status_code == 403
    assert world.call(KEYS["user"], *shared).status_code == 403
    bob = world.ok("GET", "/v1/users/bob/memories")["memories"]
    assert "Bob is vegetarian and drinks tea." in [m["text"] for m in bob]  # (admin cases may have added more)
    assert "five business days" in world.ok("GET", "/v1/contents", params={"uri": f"{SHARED}/billing/refunds.md", "level": 2})["text"]


def test_a_user_keys_default_search_reads_its_own_memories_and_no_others(world):
    world.seed()
    r = world.call(KEYS["user"], "POST", "/v1/find", body={"query": "who is vegetarian and drinks tea?"})
    found = [m["uri"] for m in r.json()["memories"]]
    assert found and all(u.startswith("cairn://user/ann/") for u in found)
    for everyone in ("cairn://user", "cairn://user/bob"):
        r = world.call(KEYS["user"], "POST", "/v1/find", body={"query": "tea", "target_uris": [everyone]})
        assert r.status_code == 403, r.text
    r = world.call(KEYS["user"], "POST", "/v1/find", body={"query": "tea", "filter": {"owner": "bob"}})
    assert r.status_code == 403 and "bob" in r.json()["message"]


def test_another_tenants_sessions_are_not_found(world):
    sid = world.session("ann")
    for key in (GLOBEX,):
        for method, path in (("GET", f"/v1/sessions/{sid}"), ("POST", f"/v1/sessions/{sid}/commit"),
                             ("DELETE", f"/v1/sessions/{sid}")):
            assert world.call(key, method, path).status_code == 404
    r = world.call(GLOBEX, "POST", "/v1/find", body={"query": "refunds reach the card", "target_uris": [SHARED]})
    assert r.status_code == 200 and r.json()["total"] == 0  # acme's handbook is not globex's


def test_erasing_a_user_leaves_nothing_any_route_returns(world):
    world.seed()
    sid = world.session("ann")
    done = world.call(KEYS["user"], "DELETE", "/v1/users/ann").json()
    assert done["records"] > 0 and done["sessions"] >= 1 and done["messages"] >= 1
    assert world.call(KEYS["admin"], "GET", f"/v1/sessions/{sid}").status_code == 404
    assert world.ok("GET", "/v1/users/ann/memories")["memories"] == []
    assert world.ok("GET", "/v1/users/ann/sessions")["sessions"] == []
    export = world.ok("GET", "/v1/users/ann/export")
    assert export["memories"] == export["skills"] == export["sessions"] == []
    found = world.ok("POST", "/v1/find", json={"query": "Ann is vegetarian and drinks tea", "user": "ann"})
    assert not [m for m in found["memories"] + found["skills"] if "/ann/" in m["uri"]]
    assert world.call(KEYS["admin"], "GET", "/v1/tree", params={"uri": "cairn://user/ann/memories"}).status_code == 404
    assert world.ok("GET", "/v1/users/bob/memories")["memories"]  # bob untouched


def tool_args(tool: str, whose: str, world: World) -> dict[str, Any]:
    t, user = target(whose), OWNER.get(whose, "ann")
    q = "what does the user drink?"
    return {
        "find": lambda: {"query": q, "target_uris": [t["folder"]]},
        "search": lambda: {"query": q, "target_uris": [t["folder"]]},
        "context": lambda: {"query": q, "target_uris": [t["folder"]]},
        "read": lambda: {"uri": t["doc"], "level": 2},
        "tree": lambda: {"uri": t["folder"]},
        "remember": lambda: {"text": "Injected.", "category": "notes", "user": user},
        "forget": lambda: {"uri": f"cairn://user/{user}/memories/profile/diet"},
        "memories": lambda: {"user": user},
        "add_message": lambda: {"content": "hi", "session_id": world.session(user)},
        "commit": lambda: {"session_id": world.session(user)},
    }[tool]()


@pytest.mark.parametrize("tool", ["find", "read", "tree", "remember", "forget", "memories", "add_message", "commit"])
def test_each_mcp_tool_answers_each_role_as_its_route_does(world, tool):
    pytest.importorskip("mcp")
    from mcp.server.mcpserver.exceptions import ToolError

    from cairn.mcp import TOOL_OPERATIONS, build_server

    route = {"memories": "list_memories"}.get(TOOL_OPERATIONS[tool], TOOL_OPERATIONS[tool])
    allowed, wrong = KIND[route], []
    servers = {role: build_server(world.services, tenant="acme", user="ann" if role == "user" else None, role=role)
               for role in KEYS}
    for role, server in servers.items():
        for whose in WHOSE:
            if allowed is USERS and whose == "shared":
                continue
            world.seed()
            try:
                result = asyncio.run(server.call_tool(tool, tool_args(tool, whose, world)))
                outcome = "error: " + result.content[0].text if result.is_error else "ok"
            except ToolError as exc:
                outcome = f"error: {exc}"
            if (outcome == "ok") != (whose in allowed[role]) or (outcome != "ok" and "may not" not in outcome
                                                                  and "cannot" not in outcome):
                wrong.append(f"{role} on {whose}: {tool} -> {outcome[:160]}")
    assert not wrong, "\n".join(wrong)


def test_every_mcp_tool_has_a_rule_and_a_user_bound_server_refuses_others_data(world):
    pytest.importorskip("mcp")
    from cairn.app import OPERATIONS
    from cairn.mcp import TOOL_OPERATIONS, build_server

    services = Services(load_settings(env={"CAIRN_HOME": "/nonexistent-never-used"}))
    server = build_server(services, tenant="acme", user="ann")
    listed = {t.name for t in asyncio.run(server.list_tools())}
    assert listed == set(TOOL_OPERATIONS) and set(TOOL_OPERATIONS.values()) <= set(OPERATIONS)
    annotations = {t.name: t.annotations for t in asyncio.run(server.list_tools())}
    for name in ("find", "search", "context", "read", "tree", "memories"):
        assert annotations[name].read_only_hint is True, name
    assert annotations["forget"].destructive_hint is True and annotations["forget"].read_only_hint is False
