"""A follow-up searched with the turn before it: both searches flat (quick), their matches combined."""

import pytest

from cairn import Cairn
from cairn.engine.ingest import Document, Ingestor
from cairn.engine.planning.scope import FolderResolver
from cairn.engine.planning.session_planner import CARRIED_WEIGHT, SessionRewritePlanner
from cairn.engine.retrieval.scope import roots_for
from cairn.engine.stages import combined
from cairn.ports.sessions import open_session_store
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.integration
ROOT = "cairn://resources/kb"
PAGES = {
    ("billing", "refunds.md"): ("Refunds", "A refund goes back to the card you paid with. The money comes back within "
                                "5 to 10 business days after we approve the refund."),
    ("billing", "double-charge.md"): ("Charged twice", "If your card was charged twice for one invoice, tell us the "
                                      "invoice number: we cancel the duplicate charge and refund it."),
    ("billing", "invoices.md"): ("Invoices", "Invoices are sent by email on the first day of each month as PDF files."),
    ("billing", "vat.md"): ("VAT", "Prices are shown without VAT; VAT is added for customers in the EU."),
    ("support", "hours.md"): ("Support hours", "Our team answers tickets Monday to Friday, 8:00 to 18:00 CET."),
    ("support", "status-page.md"): ("Status page", "Outages and maintenance are posted on status.example.com; "
                                    "subscribe there to get an email when an incident starts."),
    ("data", "backups.md"): ("Backups", "Backups are taken every night and kept for 30 days in the same region."),
    ("faq", "cancel.md"): ("Cancelling", "You can cancel at any time; the plan runs until the end of the paid month."),
}


@pytest.fixture
def svc(tmp_path, embedder):
    store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
    docs = [Document(path, text, title=title) for path, (title, text) in PAGES.items()]
    Ingestor(store, embedder, "t").ingest(docs, ROOT)
    planner = SessionRewritePlanner(resolver=FolderResolver(store, "t", embedder), roots=lambda ct: roots_for(ct, (), None))
    return Cairn(store, embedder, "t", planner=planner, sessions=open_session_store("sqlite", path=tmp_path / "s.db"))


def _follow_up(svc):
    s = svc.sessions.create("t")
    svc.sessions.append("t", s.id, "user", "I was charged twice this month, can I get a refund?")
    svc.sessions.append("t", s.id, "assistant", "Sorry about that! Send us the invoice number and we will refund it.")
    return s


def test_a_follow_up_is_searched_flat_with_the_turn_before_and_both_searches_count(svc):
    s = _follow_up(svc)
    res = svc.search("how long does it take?", session_id=s.id, limit=5)
    assert len(res.query_plan.queries) == 2 and res.query_plan.queries[1].weight == CARRIED_WEIGHT
    assert [qr.trace.stats.mode for qr in res.query_results] == ["quick", "quick"]  # search()'s mode "auto"
    own, carried = ({m.uri: m.score for m in qr.matches} for qr in res.query_results)
    refunds = next(m for m in res.resources if m.uri == f"{ROOT}/billing/refunds.md")
    assert refunds.uri in own and refunds.uri in carried  # the turn finds it, and so does the turn with the one before
    assert refunds.score == pytest.approx(combined([own[refunds.uri], CARRIED_WEIGHT * carried[refunds.uri]]), abs=1e-4)
    assert refunds.score > max(own[refunds.uri], CARRIED_WEIGHT * carried[refunds.uri])
    pages = [m.uri for m in res.resources if m.level == 2]
    assert pages[:2] == [f"{ROOT}/billing/double-charge.md", refunds.uri]  # what was asked before, then what it asks now
    assert all(0 < m.score <= 1 for m in res.all())


def test_a_first_turn_is_searched_as_find_searches_it_and_an_explicit_mode_is_kept(svc):
    first = svc.search("How long does a refund take?", session_id=svc.sessions.create("t").id, limit=5)
    assert len(first.query_plan.queries) == 1
    assert first.query_results[0].trace.stats.mode == "quick"  # a conversation's first turn: no conversation to use
    found = svc.find("How long does a refund take?", limit=5)
    assert [(m.uri, m.score) for m in first.all()] == [(m.uri, m.score) for m in found.all()]
    alone = svc.search("How long does a refund take?", limit=5)  # no session: search()'s thinking mode
    assert alone.query_results[0].trace.stats.mode == "thinking"
    assert alone.resources[0].uri == first.resources[0].uri == f"{ROOT}/billing/refunds.md"
    s = _follow_up(svc)
    asked = svc.search("How long does it take for the money to come back?", session_id=s.id, limit=5, mode="thinking")
    assert [qr.trace.stats.mode for qr in asked.query_results] == ["thinking", "thinking"]
    assert svc.find("How long does a refund take?").query_results[0].trace.stats.mode == "quick"


def test_combined_scores_reward_agreement_and_stay_in_range():
    assert combined([0.6]) == pytest.approx(0.6)
    assert combined([0.6, 0.5]) == pytest.approx(0.8)  # 1 - 0.4 * 0.5
    assert combined([0.6, 0.5]) > combined([0.7])  # found by both outranks a little better found by one
    assert combined([1.4, -0.2]) == 1.0 and combined([-0.3]) == 0.0  # clipped to 0..1


def _gate_checks(svc, monkeypatch):
    """The evidence gate's keyword searches (limit 1, keyword mode) the store is asked."""
    from cairn.ports.vectorstores import SearchMode

    asked: list[str] = []
    query = svc.store.query

    def counting(request):
        if request.mode is SearchMode.KEYWORD and request.limit == 1:
            asked.append(request.text)
        return query(request)

    monkeypatch.setattr(svc.store, "query", counting)
    return asked


def test_the_turn_with_the_one_before_shows_the_turns_words_and_is_not_gated_again(svc, monkeypatch):
    s = _follow_up(svc)
    before = svc.search("how long does the refund take?", session_id=s.id, limit=5)
    asked = _gate_checks(svc, monkeypatch)
    res = svc.search("how long does the refund take?", session_id=s.id, limit=5)
    assert len(res.query_plan.queries) == 2  # the turn, and the turn with the one before it
    assert asked == ["how long does the refund take?"]  # one gate check: the carried text holds the turn's words
    assert [(m.uri, m.score) for m in res.all()] == [(m.uri, m.score) for m in before.all()]


def test_a_turn_without_evidence_of_its_own_leaves_the_carried_search_to_its_own_gate(svc, monkeypatch):
    s = _follow_up(svc)
    asked = _gate_checks(svc, monkeypatch)
    res = svc.search("qxzv?", session_id=s.id, limit=5)  # no word of the content, too short to be told from noise
    assert len(asked) == 2  # the carried search was asked on its own words
    own, carried = res.query_results
    assert own.matches == [] and own.trace.stats.stop_reason == "no_evidence"
    assert carried.matches  # the question it follows has words of the content


def test_the_turn_and_the_turn_with_the_one_before_are_embedded_in_one_model_call(svc, embedder):
    s = _follow_up(svc)
    turn = "and how long until the duplicate refund reaches my account, roughly?"  # no earlier test embedded it
    calls, texts = embedder.calls, embedder.texts_embedded
    res = svc.search(turn, session_id=s.id, limit=5)
    assert [q.query for q in res.query_plan.queries] == [turn, f"I was charged twice this month, can I get a refund? {turn}"]
    assert (embedder.calls - calls, embedder.texts_embedded - texts) == (1, 2)  # one call for both texts
