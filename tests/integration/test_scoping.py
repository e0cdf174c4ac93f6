"""A conversation's entity ranks the folder named after it first (evidence, never a wall); hybrid quick mode."""

import pytest

from cairn import Cairn
from cairn.engine.ingest import Document, Ingestor
from cairn.engine.ingest.titles import DirTitleRule
from cairn.engine.planning.scope import FolderResolver
from cairn.engine.planning.session_planner import SessionRewritePlanner
from cairn.engine.retrieval.scope import roots_for
from cairn.ports.sessions import open_session_store
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.integration
ROOT = "cairn://resources/hotels"


@pytest.fixture
def svc(tmp_path, embedder):
    store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
    docs = []
    for hid, name, parking in (("1", "HOBSONS HOUSE", "Free parking is available on site."),
                               ("2", "ACORN GUEST HOUSE", "There is no parking; use the city car park.")):
        meta = {"entity_name": name}
        docs += [
            Document(("hotel", hid, "faq", "parking.md"), parking, title="Is there parking?", metadata=meta),
            Document(("hotel", hid, "faq", "pets.md"), "Pets are welcome.", title="Can I bring my dog?", metadata=meta),
        ]
    rules = [DirTitleRule.parse("*/*={entity_name}"), DirTitleRule.parse("*/*/faq=FAQ of {entity_name}")]
    Ingestor(store, embedder, "t", title_rules=rules).ingest(docs, ROOT)
    resolver = FolderResolver(store, "t", embedder)
    planner = SessionRewritePlanner(resolver=resolver, roots=lambda ct: roots_for(ct, (), None))
    return Cairn(store, embedder, "t", planner=planner, sessions=open_session_store("sqlite", path=tmp_path / "s.db"))


def test_the_resolver_finds_the_outermost_folder_named_after_the_entity(svc):
    resolve = svc.planner.resolver
    assert resolve("Hobsons House", ["cairn://resources"]) == [f"{ROOT}/hotel/1"]  # not "FAQ of HOBSONS HOUSE"
    assert resolve("Acorn", ["cairn://resources"]) == [f"{ROOT}/hotel/2"]
    assert resolve("Grand Budapest", ["cairn://resources"]) == []
    assert resolve("Hobsons House", ["cairn://agent/skills"]) == []  # only under the given roots


def test_the_sessions_entity_ranks_its_folder_first_and_never_hides_the_rest(svc):
    s = svc.sessions.create("t")
    svc.sessions.append("t", s.id, "user", "I'd like to stay at Hobsons House next week.")
    svc.sessions.append("t", s.id, "assistant", "Sure, Hobsons House has rooms available.")
    res = svc.search("Is there parking there?", session_id=s.id, limit=10)
    tq = res.query_plan.queries[0]
    assert tq.boost_uris == (f"{ROOT}/hotel/1",) and not tq.target_uris and "boosted" in res.query_plan.reasoning
    assert tq.query == "Is there parking there?"  # the turn as it was said
    leaves = [m for m in res.all() if m.level == 2]
    assert leaves[0].uri == f"{ROOT}/hotel/1/faq/parking.md"
    assert any(m.uri.startswith(f"{ROOT}/hotel/2") for m in res.all())  # the rest still competes, ranked lower


def test_a_turn_about_a_boosted_folder_is_searched_with_its_own_words_not_the_previous_request(svc):
    s = svc.sessions.create("t")
    svc.sessions.append("t", s.id, "user", "I need a place with free parking, is Hobsons House any good?")
    svc.sessions.append("t", s.id, "assistant", "Hobsons House is a fine choice.")
    res = svc.search("Can I bring my dog?", session_id=s.id, limit=3)
    assert [q.query for q in res.query_plan.queries] == ["Can I bring my dog?"]  # the folder carries the conversation
    assert [m for m in res.all() if m.level == 2][0].uri == f"{ROOT}/hotel/1/faq/pets.md"  # not the parking page asked before
    unscoped = svc.sessions.create("t")  # nothing named: the follow-up is also searched with the question it follows
    svc.sessions.append("t", unscoped.id, "user", "Is there parking anywhere?")
    assert len(svc.search("and is it free?", session_id=unscoped.id, limit=3).query_plan.queries) == 2


def test_when_the_boosted_folder_has_nothing_good_the_answer_comes_from_the_whole_tenant(svc):
    s = svc.sessions.create("t")
    svc.sessions.append("t", s.id, "user", "I'd like to stay at Hobsons House next week.")
    meta = {"entity_name": "ACORN GUEST HOUSE"}
    svc.ingestor().upsert([Document(("hotel", "2", "faq", "breakfast.md"), "Breakfast is served from 7 to 10 with vegan options.",
                                    title="When is breakfast?", metadata=meta)], ROOT)
    res = svc.search("what time is breakfast served?", session_id=s.id, limit=3, include_provenance=True)
    assert res.query_plan.queries[0].boost_uris == (f"{ROOT}/hotel/1",)
    assert [m for m in res.all() if m.level == 2][0].uri == f"{ROOT}/hotel/2/faq/breakfast.md"
    events = [e.detail for e in res.query_results[0].trace.events]
    assert any("answered from the whole tenant" in d for d in events)


def test_search_fuses_keywords_except_when_the_planner_boosts_a_folder(svc):
    s = svc.sessions.create("t")
    svc.sessions.append("t", s.id, "user", "I'd like to stay at Hobsons House next week.")
    boosted = svc.search("Is there parking there?", session_id=s.id, include_provenance=True)
    assert boosted.query_plan.queries[0].boost_uris  # the planner boosted the hotel's folder
    searches = [e.detail for e in boosted.query_results[0].trace.events if e.kind == "global_search"]
    # the whole tenant and the folder, both dense: the folder's matches are compared on one scale
    assert any("mode=dense" in d and "'cairn://resources'" in d for d in searches)
    assert any("mode=dense" in d and "hotel/1" in d for d in searches)
    wide = svc.search("Is there parking?", include_provenance=True)  # no session: nothing boosted
    assert "mode=hybrid" in wide.query_results[0].trace.events[0].detail
    asked = svc.search("Is there parking there?", session_id=s.id, hybrid=True, include_provenance=True)
    assert all("mode=hybrid" in e.detail for e in asked.query_results[0].trace.events if e.kind == "global_search")


def test_an_unknown_entity_boosts_nothing(svc):
    s = svc.sessions.create("t")
    svc.sessions.append("t", s.id, "user", "What about the Grand Budapest Hotel?")
    res = svc.search("Is there parking?", session_id=s.id, limit=4)
    # "hotel" is a folder of the tree (it holds every hotel): no single hotel is chosen
    assert not {f"{ROOT}/hotel/1", f"{ROOT}/hotel/2"} & set(res.query_plan.queries[0].boost_uris)
    assert {m.uri.split("/")[5] for m in res.all() if m.level == 2} == {"1", "2"}


def test_hybrid_quick_mode_fuses_dense_and_keyword_scores(svc):
    res = svc.find("dog pets welcome", hybrid=True, limit=2, include_provenance=True)
    assert res.resources and all(0 < m.score <= 1.0 for m in res.resources)
    assert res.resources[0].uri.endswith("pets.md")
    assert "mode=hybrid" in res.query_results[0].trace.events[0].detail
    assert set(res.query_results[0].tiers.values()) == {"hybrid"}


def test_a_lower_case_misspelt_conversation_boosts_its_folder(svc):
    s = svc.sessions.create("t")
    svc.sessions.append("t", s.id, "user", "hi, i want to stay at hobson house next week")
    svc.sessions.append("t", s.id, "assistant", "sure, that is booked")
    res = svc.search("is there parking", session_id=s.id, limit=3)
    assert res.query_plan.queries[0].boost_uris == (f"{ROOT}/hotel/1",)
    assert "confidence" in res.query_plan.reasoning


@pytest.mark.parametrize("mode", ["quick", "thinking"])
@pytest.mark.parametrize("hybrid", [False, True])
def test_gibberish_finds_nothing_in_any_mode(svc, mode, hybrid):
    assert svc.find("qwzx plorf vrum", mode=mode, hybrid=hybrid).all() == []
    assert svc.search("qwzx plorf vrum", mode=mode, hybrid=hybrid).all() == []
