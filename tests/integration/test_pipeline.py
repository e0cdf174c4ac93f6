"""find() end to end on the embedded default, over a corpus the test builds."""

import pytest

from cairn import Cairn
from cairn.core.errors import RequestError
from cairn.engine.ingest import Document, Ingestor
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.integration


@pytest.fixture
def cairn(tmp_path, embedder, corpus):
    svc = Cairn(LocalVectorStore(tmp_path / "store", dimension=embedder.dimension), embedder, "acme")
    svc.ingest(corpus, "cairn://resources/handbook")
    ing = Ingestor(svc.store, embedder, "acme")
    ing.ingest([Document(("food.md",), "Ann is vegetarian and prefers tea over coffee.")], "cairn://user/ann/memories")
    ing.ingest([Document(("refund-skill.md",), "How to issue a refund: open the billing console and click Refund.")], "cairn://agent/skills")
    return svc


def test_the_best_match_is_the_right_document(cairn):
    res = cairn.find("how long do refunds take to reach my card?", limit=3)
    assert res.resources[0].uri == "cairn://resources/handbook/billing/refunds.md"
    assert res.resources[0].score > 0.3
    scores = [m.score for m in res.all()]
    assert scores == sorted(scores, reverse=True)


def test_results_are_bucketed_by_context_type(cairn):
    res = cairn.find("refund", limit=5)
    assert any(m.uri == "cairn://agent/skills/refund-skill.md" for m in res.skills)
    assert all(m.context_type.value == "resource" for m in res.resources)
    # memories of a user are only searched when the caller names the user
    assert res.memories == []
    mem = cairn.find("what does Ann like to drink?", user="ann", limit=2)
    assert mem.memories[0].uri == "cairn://user/ann/memories/food.md"


def test_type_and_target_restrict_the_search(cairn):
    res = cairn.find("refund", context_type="skill")
    assert res.resources == [] and res.skills
    res = cairn.find("approval for hotel costs", target_uris=("cairn://resources/handbook/travel",))
    assert res.resources and all(m.uri.startswith("cairn://resources/handbook/travel") for m in res.resources)


def test_directories_match_with_their_display_uri(cairn):
    res = cairn.find("billing and invoices folder", limit=5)
    dir_hits = [m for m in res.resources if m.level < 2]
    assert dir_hits, res.to_dict()
    assert all(m.uri.endswith((".abstract.md", ".overview.md")) for m in dir_hits)


def test_provenance_tells_how_each_match_was_found(cairn):
    d = cairn.find("travel expenses", include_provenance=True).to_dict(include_provenance=True)
    prov = d["provenance"][0]
    assert prov["trace"]["stats"]["vector_calls"] == 1
    assert prov["trace"]["stats"]["mode"] == "quick"
    assert {m["uri"] for m in prov["matches"]} == {m["uri"] for m in d["resources"] + d["skills"]}
    assert all(m["tier"] in ("L0", "L1", "L2") for m in prov["matches"])


def test_a_threshold_above_every_score_gives_an_empty_result(cairn):
    assert cairn.find("refund", score_threshold=0.99).total == 0


def test_tenants_do_not_see_each_other(cairn, embedder):
    other = Cairn(cairn.store, embedder, "beta")
    assert other.find("refund").total == 0


def test_bad_requests_are_clear(cairn):
    with pytest.raises(RequestError, match="the query is empty"):
        cairn.find("   ")
    with pytest.raises(RequestError, match="limit"):
        cairn.find("refund", limit=1000)


def test_filter_limits_count_what_the_caller_wrote(cairn):
    from cairn.core.errors import RequestError
    from cairn.core.filters import MAX_DEPTH

    def nested(depth: int) -> dict:
        node: dict = {"level": 2}
        for _ in range(depth - 1):
            node = {"$and": [node]}
        return node

    assert cairn.find("refund", filter=nested(MAX_DEPTH)).total >= 1  # at the limit: the scope does not spend it
    with pytest.raises(RequestError, match=f"deeper than the limit of {MAX_DEPTH}") as caught:
        cairn.find("refund", filter=nested(MAX_DEPTH + 1))
    assert "$and[1]" not in caught.value.message  # a path the caller wrote, not the scope's
