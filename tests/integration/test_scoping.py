"""A conversation's entity scopes the search to the folder named after it; hybrid quick mode."""

import pytest

from cairn.ingest import Document, Ingestor
from cairn.ingest.titles import DirTitleRule
from cairn.pipeline import Cairn
from cairn.planning.scope import FolderResolver
from cairn.planning.session_planner import SessionRewritePlanner
from cairn.retrieval.scope import roots_for
from cairn.sessions import open_session_store
from cairn.vectorstores.local import LocalVectorStore

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


def test_the_sessions_entity_scopes_the_search(svc):
    s = svc.sessions.create("t")
    svc.sessions.append("t", s.id, "user", "I'd like to stay at Hobsons House next week.")
    svc.sessions.append("t", s.id, "assistant", "Sure, Hobsons House has rooms available.")
    res = svc.search("Is there parking there?", session_id=s.id, limit=3)
    tq = res.query_plan.queries[0]
    assert tq.target_uris == (f"{ROOT}/hotel/1",) and "scoped to" in res.query_plan.reasoning
    assert tq.query == "Is there parking there?"  # scoped: the name is not added to the text
    leaves = [m for m in res.all() if m.level == 2]
    assert leaves[0].uri == f"{ROOT}/hotel/1/faq/parking.md"
    assert all(m.uri.startswith(f"{ROOT}/hotel/1") for m in res.all())


def test_search_fuses_keywords_except_inside_the_folder_the_planner_narrowed_to(svc):
    s = svc.sessions.create("t")
    svc.sessions.append("t", s.id, "user", "I'd like to stay at Hobsons House next week.")
    narrowed = svc.search("Is there parking there?", session_id=s.id, include_provenance=True)
    assert narrowed.query_plan.queries[0].target_uris  # the planner narrowed it to the hotel's folder
    assert "mode=dense" in narrowed.query_results[0].trace.events[0].detail
    assert not [e for e in narrowed.query_results[0].trace.events if e.kind == "feedback"]
    wide = svc.search("Is there parking?", include_provenance=True)  # no session: nothing narrowed
    assert "mode=hybrid" in wide.query_results[0].trace.events[0].detail
    asked = svc.search("Is there parking there?", session_id=s.id, hybrid=True, include_provenance=True)
    assert "mode=hybrid" in asked.query_results[0].trace.events[0].detail  # the caller's choice wins


def test_an_unknown_entity_leaves_the_search_unscoped(svc):
    s = svc.sessions.create("t")
    svc.sessions.append("t", s.id, "user", "What about the Grand Budapest Hotel?")
    res = svc.search("Is there parking?", session_id=s.id, limit=4)
    # "hotel" is a folder of the tree (it holds every hotel): no single hotel is chosen
    assert not {f"{ROOT}/hotel/1", f"{ROOT}/hotel/2"} & set(res.query_plan.queries[0].target_uris)
    assert {m.uri.split("/")[5] for m in res.all() if m.level == 2} == {"1", "2"}


def test_hybrid_quick_mode_fuses_dense_and_keyword_scores(svc):
    res = svc.find("dog pets welcome", hybrid=True, limit=2, include_provenance=True)
    assert res.resources and all(0 < m.score <= 1.0 for m in res.resources)
    assert res.resources[0].uri.endswith("pets.md")
    assert "mode=hybrid" in res.query_results[0].trace.events[0].detail
    assert set(res.query_results[0].tiers.values()) == {"hybrid"}


def test_a_lower_case_misspelt_conversation_scopes_to_its_folder(svc):
    s = svc.sessions.create("t")
    svc.sessions.append("t", s.id, "user", "hi, i want to stay at hobson house next week")
    svc.sessions.append("t", s.id, "assistant", "sure, that is booked")
    res = svc.search("is there parking", session_id=s.id, limit=3)
    assert res.query_plan.queries[0].target_uris == (f"{ROOT}/hotel/1",)
    assert "confidence" in res.query_plan.reasoning


@pytest.mark.parametrize("mode", ["quick", "thinking"])
@pytest.mark.parametrize("hybrid", [False, True])
def test_gibberish_finds_nothing_in_any_mode(svc, mode, hybrid):
    assert svc.find("qwzx plorf vrum", mode=mode, hybrid=hybrid).all() == []
    assert svc.search("qwzx plorf vrum", mode=mode, hybrid=hybrid).all() == []
