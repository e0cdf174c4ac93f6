"""`cairn serve` as an agent uses it: a real HTTP server on loopback, driven through cairn.client
and raw HTTP (httpx), with API keys; the same route table the API Lambda serves."""

from __future__ import annotations

import json

import httpx
import pytest

from cairn.api import ApiKeys
from cairn.api.server import check_bind, running
from cairn.app.services import Services
from cairn.client import CairnClient
from cairn.core.config import load_settings
from cairn.core.errors import ConfigError, Forbidden, NotFound, RequestError, Unauthorized
from cairn.engine.ingest import LocalContentStore
from cairn.ports.vectorstores.local import LocalVectorStore
from tests.fakes import HANDBOOK_DOCS

pytestmark = pytest.mark.e2e

ACME_KEY = "acme-key-0123456789abcdef"
ANN_KEY = "ann-key-0123456789abcdef"
GLOBEX_KEY = "globex-key-0123456789abcdef"
ROOT = "cairn://resources/handbook"
DOCS = HANDBOOK_DOCS


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder):
    home = tmp_path_factory.mktemp("serve")
    settings = load_settings(env={"CAIRN_HOME": str(home)})
    services = Services(settings, embedder=embedder, store=LocalVectorStore(home / "store", dimension=embedder.dimension),
                        content=LocalContentStore(home / "content"))
    keys = ApiKeys({ACME_KEY: "acme", ANN_KEY: {"tenant": "acme", "user": "ann"}, GLOBEX_KEY: "globex"})
    with running(services, keys) as url:
        yield url


@pytest.fixture(scope="module")
def acme(server):
    with CairnClient(server, ACME_KEY, retries=0) as client:
        summary = client.put_documents(ROOT, DOCS)
        assert summary.documents == 3 and not summary.rejected
        yield client


def test_find_answers_through_the_server(acme):
    result = acme.find("how long until my refund reaches the card?", limit=3)
    assert result.resources[0].uri == f"{ROOT}/billing/refunds.md"
    assert result.total == len(result.all()) >= 1


def test_upsert_keeps_siblings_and_sync_replaces_the_folder(server, acme):
    acme.put_documents(ROOT, [{"path": "billing/disputes.md", "text": "# Disputes\n\nA chargeback is answered in 7 days."}])
    children = {n.uri for n in acme.tree(f"{ROOT}/billing").children}
    assert children == {f"{ROOT}/billing/{f}" for f in ("refunds.md", "invoices.md", "disputes.md")}
    overview = acme.contents(f"{ROOT}/billing", level=1).text
    assert "Disputes" in overview and "Refunds" in overview  # the folder was re-summarised from every child
    acme.put_documents(f"{ROOT}/billing", [{"path": "refunds.md", "text": DOCS[0]["text"]}], sync=True)
    assert {n.uri for n in acme.tree(f"{ROOT}/billing").children} == {f"{ROOT}/billing/refunds.md"}
    acme.put_documents(ROOT, DOCS)  # back to the module's corpus


def test_progressive_reading_and_browsing(acme):
    l0 = acme.contents(ROOT, level=0)
    assert l0.level == 0 and l0.text
    body = acme.contents(f"{ROOT}/billing/refunds.md", level=2)
    assert "five business days" in body.text and body.next_offset is None
    page = acme.contents(f"{ROOT}/billing/refunds.md", level=2, max_chars=20)
    assert len(page.text) == 20 and page.next_offset == 20
    assert acme.read(f"{ROOT}/billing/refunds.md", level=2).text == body.text  # every page, joined
    tree = acme.tree(ROOT, depth=2)
    billing = next(n for n in tree.children if n.uri == f"{ROOT}/billing")
    assert billing.kind == "directory" and billing.children_total == 2
    assert {c.uri for c in billing.children} == {f"{ROOT}/billing/refunds.md", f"{ROOT}/billing/invoices.md"}


def test_search_with_a_session_and_an_idempotent_append(acme):
    session = acme.create_session(user="ann")
    first = acme.append_message(session.id, "user", "I paid for the annual plan last week.", idempotency_key="m-1")
    again = acme.append_message(session.id, "user", "I paid for the annual plan last week.", idempotency_key="m-1")
    assert again.seq == first.seq
    result = acme.search("can I get my money back?", session_id=session.id, limit=3)
    assert result.query_plan is not None and result.resources
    view = acme.get_session(session.id)
    assert view.message_count == 1 and view.prefetched is not None
    assert acme.delete_session(session.id) is True
    with pytest.raises(NotFound):
        acme.get_session(session.id)


def test_tenants_are_separated_and_a_bound_key_acts_for_its_user_only(server, acme):
    with CairnClient(server, GLOBEX_KEY, retries=0) as globex:
        assert globex.find("refund").total == 0
    with CairnClient(server, ANN_KEY, retries=0) as ann:
        assert ann.create_session().user == "ann"  # bound: the session is ann's
        with pytest.raises(Forbidden, match="act for user 'ann' only"):
            ann.create_session(user="bob")
        with pytest.raises(Forbidden):
            ann.find("refund", user="bob")


def test_missing_and_wrong_keys_are_401(server):
    with CairnClient(server, retries=0) as anonymous:
        assert anonymous.health().status == "ok"  # health needs no key
        with pytest.raises(Unauthorized, match="missing credentials"):
            anonymous.find("refund")
    with CairnClient(server, "not-a-key-of-this-server", retries=0) as wrong, pytest.raises(Unauthorized, match="unknown API key"):
        wrong.find("refund")
    r = httpx.post(f"{server}/v1/find", json={"query": "refund"}, headers={"authorization": "Basic abc"})
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "says"),
    [
        ("POST", "/v1/find", {"query": ""}, 400, "query: the query is empty"),
        ("POST", "/v1/find", {"query": "x", "limit": 1000, "colour": 1}, 400, "colour: unknown field"),
        ("POST", "/v1/find", {"query": "x", "tenant": "globex"}, 400, "tenant comes from your credentials"),
        ("POST", "/v1/find", {"query": "x", "filter": {"level": {"$near": 1}}}, 400, "$near"),
        ("POST", "/v1/find", "not json", 400, "not valid JSON"),
        ("POST", "/v1/search", {"query": "x", "session_id": "nosuchsession"}, 404, "nosuchsession"),
        ("GET", "/v1/contents?uri=cairn://resources/handbook/nope.md&level=2", None, 404, "nothing is stored"),
        ("GET", "/v1/contents?uri=cairn://resources/handbook&level=7", None, 400, "level"),
        ("GET", "/v1/tree?uri=not-a-uri", None, 400, "cairn://"),
        ("PUT", "/v1/documents", {"root_uri": "cairn://elsewhere/x", "documents": [{"path": "a.md", "text": "t"}]}, 400, "root_uri"),
        ("DELETE", "/v1/nothing", None, 404, "no route DELETE /v1/nothing"),
    ],
)
def test_bad_input_gets_a_clear_4xx_envelope(server, acme, method, path, body, status, says):
    content = body if isinstance(body, str) else (json.dumps(body) if body is not None else None)
    r = httpx.request(method, f"{server}{path}", content=content,
                      headers={"authorization": f"Bearer {ACME_KEY}", "content-type": "application/json"})
    assert r.status_code == status, r.text
    err = r.json()
    assert says in err["message"] and err["request_id"] and err["retryable"] is False
    assert "Traceback" not in r.text and "File \"" not in r.text


def test_the_client_raises_the_error_family_of_the_answer(acme):
    with pytest.raises(RequestError, match="limit"):
        acme.find("refund", limit=0)


def test_the_openapi_document_is_served(server):
    doc = httpx.get(f"{server}/v1/openapi.json").json()
    assert doc["openapi"].startswith("3.") and "/v1/find" in doc["paths"]


def test_without_keys_only_loopback():
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", ApiKeys({ACME_KEY: "acme"}))
    with pytest.raises(ConfigError, match="without API keys"):
        check_bind("0.0.0.0", None)


def test_appends_fold_old_messages_into_the_summary(acme):
    session = acme.create_session()
    for n in range(60):
        acme.append_message(session.id, "user", f"message number {n} about the refund of order {1000 + n}")
    view = acme.get_session(session.id, recent=100)
    assert view.message_count == 60 and view.summary  # compressed on append, as on AWS
    assert len(view.recent) < 60 and view.recent[-1].content.startswith("message number 59")


def memory_uris(result) -> list[str]:
    return [m.uri for m in result.memories]


def test_a_session_of_ann_finds_anns_memories_and_never_bobs(server, acme):
    ann_tea = acme.remember("Ann is vegetarian and drinks green tea every morning.", "preferences", user="ann", key="drinks")
    acme.remember("Bob drinks black coffee and eats steak.", "preferences", user="bob", key="drinks")
    acme.remember("Ann's dog is a beagle called Pixel.", "profile", user="ann", key="dog")
    assert ann_tea.uri == "cairn://user/ann/memories/preferences/drinks" and ann_tea.created
    session = acme.create_session(user="ann")
    acme.append_message(session.id, "user", "What should I drink tomorrow morning?")
    result = acme.search("what does she like to drink?", session_id=session.id, limit=5)
    assert "cairn://user/ann/memories/preferences/drinks" in memory_uris(result)
    assert not [u for u in memory_uris(result) if "/user/bob/" in u]
    prefetched = acme.get_session(session.id).prefetched  # what the agent finds ready next turn
    assert prefetched is not None and not [m for m in prefetched["memories"] if "/user/bob/" in m["uri"]]
    with pytest.raises(Forbidden, match="belongs to user 'ann'"):
        acme.search("coffee", session_id=session.id, user="bob")
    # remembering again updates in place: the sibling stays
    again = acme.remember("Ann is vegetarian and drinks jasmine tea every morning.", "preferences", user="ann", key="drinks")
    assert not again.created and again.changed
    assert acme.contents("cairn://user/ann/memories/profile/dog", level=2).text.startswith("Ann's dog")


def test_a_key_bound_to_ann_remembers_for_ann_only(server, acme):
    with CairnClient(server, ANN_KEY, retries=0) as ann:
        assert ann.remember("Ann prefers window seats.", "preferences", key="seats").uri.startswith("cairn://user/ann/")
        with pytest.raises(Forbidden):
            ann.remember("Bob prefers aisle seats.", "preferences", user="bob")
        bobs = acme.create_session(user="bob")
        with pytest.raises(Forbidden):
            ann.commit(bobs.id)


def test_committing_a_session_keeps_what_the_user_said_once(server, acme):
    session = acme.create_session(user="carol")
    acme.append_message(session.id, "user", "My sister Dana is getting married in Lisbon in June.", name="Carol")
    acme.append_message(session.id, "assistant", "Congratulations to Dana! Do you need travel ideas?")
    first = acme.commit(session.id)
    # the user's turn is the memory; the assistant's reply is only its context
    assert first.messages == 2 and len(first.episodes) == 1 and first.stored == 1 and first.committed_through == 2
    again = acme.commit(session.id)
    assert again.messages == 0 and again.episodes == []  # committing twice adds nothing
    later = acme.create_session(user="carol")
    found = acme.search("where is the wedding?", session_id=later.id, context_type="memory", limit=5)
    assert any(u.startswith(f"cairn://user/carol/memories/episodes/{session.id}") for u in memory_uris(found))
    with pytest.raises(RequestError, match="belongs to no user"):
        acme.commit(acme.create_session().id)


def test_a_memory_without_a_category_is_kept_under_profile_and_the_answer_says_so(server, acme):
    raw = httpx.post(f"{server}/v1/memories", headers={"authorization": f"Bearer {ACME_KEY}"},
                     json={"user": "dan", "text": "Dan is allergic to peanuts."}, timeout=60)
    assert raw.status_code == 201, raw.text
    assert raw.json()["uri"].startswith("cairn://user/dan/memories/profile/")
    assert "no category given: stored under 'profile'" in raw.json()["note"]
    named = acme.remember("Dan prefers answers in bullet points.", "preferences", user="dan")
    assert named.note is None and "/memories/preferences/" in named.uri
    by_client = acme.remember("Dan lives in Porto.", user="dan")
    assert "/memories/profile/" in by_client.uri and by_client.note
    listed = acme.list_memories("dan", category="profile")
    assert {m.text for m in listed.memories} == {"Dan is allergic to peanuts.", "Dan lives in Porto."}


def test_long_lists_come_in_pages_to_the_last_item(server, acme):
    notes = f"{ROOT}/paged-notes"
    acme.put_documents(notes, [{"path": f"note-{n:02d}.md", "text": f"# Note {n}\n\nWhat was said in meeting {n}."}
                               for n in range(7)])
    seen, offset, pages = [], 0, 0
    while offset is not None:
        page = acme.tree(notes, limit=3, offset=offset)
        assert page.total == 7 and page.offset == offset
        seen += [n.uri for n in page.children]
        offset, pages = page.next_offset, pages + 1
    assert pages == 3 and seen == [f"{notes}/note-{n:02d}.md" for n in range(7)]  # every note once, in order
    for n in range(5):
        acme.remember(f"Paula likes colour number {n}.", "preferences", user="paula", key=f"colour-{n}")
        acme.create_session(user="paula")
    first = acme.list_memories("paula", limit=2)
    rest = acme.list_memories("paula", offset=first.next_offset, limit=10)
    assert first.total == 5 and first.next_offset == 2 and rest.next_offset is None
    assert len({m.uri for m in first.memories + rest.memories}) == 5
    sessions = acme.list_sessions("paula", limit=4)
    assert sessions.total == 5 and len(sessions.sessions) == 4 and sessions.next_offset == 4
    assert len(acme.list_sessions("paula", offset=4).sessions) == 1
    with httpx.Client(base_url=server, headers={"authorization": f"Bearer {ACME_KEY}"}) as http:
        bad = http.get("/v1/users/paula/memories", params={"limit": 0})
    assert bad.status_code == 400 and "limit" in bad.json()["message"]


def test_a_files_chunks_come_in_one_request_with_citations_and_count_as_no_query(server, acme):
    guide = "# Travel guide\n\n" + "\n\n".join(
        f"## Part {n}\n\n" + " ".join(f"Sentence {k} about part {n} of the trip." for k in range(30)) for n in range(6))
    acme.put_documents(f"{ROOT}/travel", [{"path": "guide.md", "text": guide}])
    queries = acme.stats()["total"]["queries"]
    chunks = acme.tree(f"{ROOT}/travel/guide.md", limit=1000)
    assert chunks.total == len(chunks.children) > 5 and chunks.next_offset is None
    assert [c.uri for c in chunks.children] == [f"{ROOT}/travel/guide.md#{n}" for n in range(chunks.total)]
    assert all(c.kind == "chunk" and c.text and c.citation and "start" in c.citation for c in chunks.children)
    assert any(c.citation and "Part 3" in c.citation.get("heading_path", []) for c in chunks.children)
    assert acme.stats()["total"]["queries"] == queries  # browsing is not searching
    second = acme.tree(f"{ROOT}/travel/guide.md", limit=2, offset=2)
    assert [c.uri for c in second.children] == [c.uri for c in chunks.children[2:4]]


def test_the_overview_counts_what_the_tenant_holds_and_its_queries_per_minute(server, acme):
    acme.find("refund to my card")
    acme.remember("Dana reads the newsletter on Mondays.", "preferences", user="dana", key="news")
    with httpx.Client(base_url=server, headers={"authorization": f"Bearer {ACME_KEY}"}) as http:
        o = http.get("/v1/overview").json()
    docs = {n.uri for n in acme.tree(f"{ROOT}/billing").children}
    assert o["documents"] >= len(docs) and o["records"] == sum(o["records_by_level"].values()) and o["exact"]
    assert o["memories"] >= 1 and o["users"] >= 1 and o["store_bytes"] > 0
    assert sum(b["queries"] for b in o["queries_over_time"]) == o["queries"] >= 1
