import math

import pytest

from cairn.core.models import (
    Candidate,
    ContextRecord,
    ContextType,
    FindResult,
    Level,
    MatchedContext,
    QueryPlan,
    QueryResult,
    ThinkingTrace,
    TypedQuery,
    record_id,
)

pytestmark = pytest.mark.unit


def test_record_derives_tree_fields_from_its_uri():
    r = ContextRecord.build(tenant="t1", uri="cairn://user/ann/memories/prefs/food.md", level=2, text="likes tea")
    assert r.parent_uri == "cairn://user/ann/memories/prefs"
    assert r.ancestors[-1] == "cairn://user/ann/memories/prefs"
    assert r.depth == 5 and r.level is Level.DETAIL
    assert r.context_type is ContextType.MEMORY and r.owner == "ann"
    assert r.id == record_id("t1", r.uri, 2)


def test_record_ids_are_stable_and_distinct_per_tenant_and_level():
    u = "cairn://resources/a"
    assert record_id("t", u, 0) == record_id("t", u, 0)
    assert len({record_id("t", u, 0), record_id("t", u, 1), record_id("u", u, 0)}) == 3


def test_record_rejects_unknown_fields_and_bounds_text():
    with pytest.raises(Exception, match="extra"):
        ContextRecord.build(tenant="t", uri="cairn://resources/a", level=0, colour="red")
    r = ContextRecord.build(tenant="t", uri="cairn://resources/a", level=2, text="x" * 50_000, abstract="y" * 9000)
    assert len(r.text) == 8000 and len(r.abstract) == 2000


def _match(uri, score, ctype=ContextType.RESOURCE, level=Level.DETAIL):
    return MatchedContext(context_type=ctype, uri=uri, level=level, score=score, abstract="a", tags=("x",))


def test_find_result_to_dict_shape():
    res = FindResult(
        resources=[_match("cairn://resources/a.md", 0.9)],
        memories=[_match("cairn://user/u/memories/m", 0.5, ContextType.MEMORY)],
    )
    d = res.to_dict()
    assert set(d) == {"memories", "resources", "skills", "total"}
    assert d["total"] == 2
    assert d["resources"][0] == {
        "context_type": "resource",
        "uri": "cairn://resources/a.md",
        "level": 2,
        "score": 0.9,
        "abstract": "a",
        "tags": ["x"],
        "title": "",
        "citation": None,
        "text": "",
        "explanation": None,  # made by hand: no stage combined its score
    }
    assert d["skills"] == []


def test_find_result_with_plan_and_provenance():
    tq = TypedQuery(query="q", context_type=ContextType.RESOURCE)
    trace = ThinkingTrace()
    trace.add("global_search", detail="roots")
    trace.add("expand", round=1, uri="cairn://resources/docs", score=0.4)
    m = _match("cairn://resources/docs/.abstract.md", 0.7, level=Level.ABSTRACT)
    res = FindResult(
        resources=[m],
        query_plan=QueryPlan(queries=(tq,), planner="raw"),
        query_results=[QueryResult(query=tq, matches=[m], tiers={m.uri: "vector"}, trace=trace)],
    )
    plain = res.to_dict()
    assert "provenance" not in plain and plain["query_plan"]["planner"] == "raw"
    prov = res.to_dict(include_provenance=True)["provenance"][0]
    assert prov["searched_directories"] == ["cairn://resources/docs"]
    assert prov["matches"] == [{"uri": m.uri, "tier": "L0", "score": 0.7, "reason": "vector"}]
    assert prov["trace"]["stats"]["mode"] == "quick"
    assert [e["kind"] for e in prov["trace"]["events"]] == ["global_search", "expand"]


def test_non_finite_scores_become_zero_in_matches():
    assert _match("cairn://resources/a", math.nan).score == 0.0
    assert _match("cairn://resources/a", math.inf).score == 0.0


def test_typed_query_priority_bounds():
    with pytest.raises(Exception):
        TypedQuery(query="q", priority=9)


def test_candidate_is_frozen():
    r = ContextRecord.build(tenant="t", uri="cairn://resources/a", level=0)
    c = Candidate(record=r, score=0.3)
    with pytest.raises(Exception):
        c.score = 1.0  # type: ignore[misc]
