"""Every answer carries the arithmetic of its scores: a user recomputes each result's score from
the arms, weights and rule beside it (API, Python client, CLI ``--explain``), with the local
reranker and hotness on, through a session search whose two typed queries are combined."""

from __future__ import annotations

import math
from typing import Any

import httpx
import pytest

from cairn.api import ApiKeys
from cairn.api.server import running
from cairn.app.services import Services
from cairn.client import CairnClient
from cairn.core.config import load_settings
from cairn.engine.ingest import LocalContentStore
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.e2e

KEY = "explain-key-0123456789abcdef"
ROOT = "cairn://resources/kb"
PAGES = {
    "billing/refunds.md": "# Refunds\n\nA refund goes back to the card you paid with. The money comes back within 5 to 10 "
                          "business days after we approve the refund.",
    "billing/double-charge.md": "# Charged twice\n\nIf your card was charged twice for one invoice, tell us the invoice "
                                "number: we cancel the duplicate charge and refund it.",
    "billing/invoices.md": "# Invoices\n\nInvoices are sent by email on the first day of each month as PDF files.",
    "support/hours.md": "# Support hours\n\nOur team answers tickets Monday to Friday, 8:00 to 18:00 CET.",
    "faq/cancel.md": "# Cancelling\n\nYou can cancel at any time; the plan runs until the end of the paid month.",
}


def recompute(rule: str, terms: list[dict[str, Any]]) -> float:
    """The rules as the API documents them, written here again: the test does not call cairn's."""
    weighted = [t["weight"] * t["score"] for t in terms]
    if rule == "weighted_sum":
        return sum(weighted)
    if rule == "noisy_or":
        return 1.0 - math.prod(1.0 - min(max(v, 0.0), 1.0) for v in weighted)
    return max(weighted) if rule == "max" else min(weighted)


def check(explanation: dict[str, Any], shown: float, path: str) -> int:
    """``shown`` is what ``explanation``'s rule makes of its terms, and so is every nested term's
    score; returns how many combinations were checked."""
    assert explanation["score"] == pytest.approx(shown, abs=1e-6), path
    assert recompute(explanation["rule"], explanation["terms"]) == pytest.approx(shown, abs=2e-6), path
    checked = 1
    for term in explanation["terms"]:
        if term.get("explanation"):
            checked += check(term["explanation"], term["score"], f"{path} > {term['label']}")
    return checked


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder):
    home = tmp_path_factory.mktemp("explain")
    env = {"CAIRN_HOME": str(home), "CAIRN_RERANKER": "local", "CAIRN_HOTNESS_WEIGHT": "0.2"}
    services = Services(load_settings(env=env), embedder=embedder,
                        store=LocalVectorStore(home / "store", dimension=embedder.dimension),
                        content=LocalContentStore(home / "content"))
    with running(services, ApiKeys({KEY: "acme"})) as url:
        with httpx.Client(base_url=url, headers={"authorization": f"Bearer {KEY}"}, timeout=120) as http:
            docs = [{"path": p, "text": t} for p, t in PAGES.items()]
            assert http.put("/v1/documents", json={"root_uri": ROOT, "documents": docs}).status_code == 200
            # a few reads make some pages "hot", so hotness has something to add
            for _ in range(3):
                http.get("/v1/contents", params={"uri": f"{ROOT}/billing/refunds.md", "level": 2}).raise_for_status()
        yield url


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server, headers={"authorization": f"Bearer {KEY}"}, timeout=120) as client:
        yield client


def follow_up(http: httpx.Client) -> str:
    session = http.post("/v1/sessions", json={}).json()["id"]
    for role, text in [("user", "I was charged twice this month, can I get a refund?"),
                       ("assistant", "Sorry about that! Send us the invoice number and we will refund it.")]:
        http.post(f"/v1/sessions/{session}/messages", json={"role": role, "content": text}).raise_for_status()
    return session


def test_a_session_search_result_score_is_recomputed_from_its_explanation(http):
    answer = http.post("/v1/search", json={"query": "how long does it take?", "session_id": follow_up(http),
                                           "include_provenance": True, "limit": 5}).json()
    assert len(answer["query_plan"]["queries"]) == 2  # the turn, and the turn with the one before it
    results = answer["memories"] + answer["resources"] + answer["skills"]
    assert results
    combined = 0
    for m in results:
        assert check(m["explanation"], m["score"], m["uri"]) >= 2  # the merge, and the rerank/hotness under it
        combined += m["explanation"]["rule"] == "noisy_or"
        for n, term in enumerate(m["explanation"]["terms"]):
            assert term["label"].startswith("typed query")
            # the arm's score is the score the "why" line of its typed query shows
            q = int(term["label"].split()[2]) - 1
            found = {p["uri"]: p["score"] for p in answer["provenance"][q]["matches"]}
            assert term["score"] in found.values(), (m["uri"], n)
    assert combined >= 1  # a page both typed queries found: 1 − Π(1 − w·s), above either arm alone
    refunds = next(m for m in results if m["uri"] == f"{ROOT}/billing/refunds.md")
    arms = refunds["explanation"]["terms"]
    assert refunds["score"] > max(t["weight"] * t["score"] for t in arms)


def test_rerank_and_hotness_arms_are_shown_with_their_weights(http):
    answer = http.post("/v1/find", json={"query": "when does my refund come back?", "rerank": True, "limit": 3}).json()
    top = answer["resources"][0]
    check(top["explanation"], top["score"], top["uri"])
    hotness = top["explanation"]["terms"][0]["explanation"]
    assert hotness["rule"] == "weighted_sum"
    assert [t["weight"] for t in hotness["terms"]] == pytest.approx([0.8, 0.2])  # CAIRN_HOTNESS_WEIGHT=0.2
    rerank = hotness["terms"][0]["explanation"]
    assert rerank["terms"][0]["label"].startswith("reranker") and rerank["terms"][0]["weight"] == 1.0
    assert rerank["terms"][1]["weight"] == 0.0  # the retrieval score it replaced, shown beside it


def test_the_python_client_carries_the_explanation(server):
    with CairnClient(server, KEY, retries=0) as client:
        result = client.find("refund to my card", limit=2)
    top = result.all()[0]
    assert top.explanation is not None
    check(top.explanation.model_dump(mode="json"), top.score, top.uri)
    assert top.explanation.formula().endswith(f"= {top.score:.3f}")


def test_a_hybrid_match_shows_its_dense_and_keyword_arms(http):
    answer = http.post("/v1/find", json={"query": "refund card", "hybrid": True, "rerank": False, "limit": 3}).json()
    top = answer["resources"][0]
    assert check(top["explanation"], top["score"], top["uri"]) >= 3  # merge > hotness > hybrid fusion
    hybrid = top["explanation"]["terms"][0]["explanation"]["terms"][0]["explanation"]
    assert hybrid["note"] == "hybrid fusion"
    dense, keyword = hybrid["terms"]
    assert dense["label"].startswith("dense") and keyword["label"].startswith("keyword")
    assert dense["weight"] + keyword["weight"] == pytest.approx(1.0) and 0 < keyword["score"] <= 1


def test_a_score_a_stage_moved_without_its_arithmetic_shows_no_stale_arms(http):
    # thinking mode's feedback and propagation move the search's scores: the arm stops at the retrieval score
    answer = http.post("/v1/search", json={"query": "refund card", "mode": "thinking", "hybrid": True, "limit": 3}).json()
    for m in answer["resources"]:
        check(m["explanation"], m["score"], m["uri"])  # whatever it shows adds up
