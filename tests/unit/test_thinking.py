"""Hierarchical retrieval: each rule pinned on a small tree whose scores are known exactly."""

import math

import pytest

from cairn.core.models import Candidate, ContextRecord
from cairn.engine.retrieval.scoring import Convergence, add_to_pool, passes, propagate, top_uris
from cairn.engine.retrieval.thinking import ThinkingConfig, thinking_search
from cairn.ports.vectorstores.base import SearchMode, VectorQuery
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.unit
Q = [1.0, 0.0, 0.0, 0.0]
ROOT = "cairn://resources"


def vec(score: float) -> list[float]:
    """A unit vector whose cosine with Q is exactly ``score``."""
    return [score, math.sqrt(1 - score * score), 0.0, 0.0]


TREE = {  # uri -> (level, raw score)
    ("cairn://resources/a", 0): 0.9,
    ("cairn://resources/a", 1): 0.8,
    ("cairn://resources/a/x.md", 2): 0.3,
    ("cairn://resources/a/sub", 0): 0.5,
    ("cairn://resources/a/sub", 1): 0.4,
    ("cairn://resources/a/sub/deep.md", 2): 0.2,
    ("cairn://resources/b", 0): 0.2,
    ("cairn://resources/b", 1): 0.15,
    ("cairn://resources/b/y.md", 2): 0.6,
}


@pytest.fixture
def store(tmp_path):
    s = LocalVectorStore(None, dimension=4)
    s.upsert([ContextRecord.build(tenant="t", uri=u, level=lvl, vector=vec(sc)) for (u, lvl), sc in TREE.items()])
    return s


def search(store, **cfg):
    """Thinking search with the query Q; relevance feedback off unless asked (it moves the query,
    and these tests pin the scores Q gives)."""
    limit = cfg.pop("limit", 10)
    hand_on = cfg.pop("hand_on", None)
    cfg.setdefault("feedback_docs", 0)
    cfg.setdefault("topic_folders", False)  # these trees pin propagation; which folders propagate: test_*_folder_*
    return thinking_search(store, "t", Q, [ROOT], limit, None, ThinkingConfig(**cfg), hand_on)


def scores(cands):
    return {(c.record.uri, int(c.record.level)): round(c.score, 6) for c in cands}


def test_propagation_rule():
    assert propagate(0.4, 0.8, 0.5) == pytest.approx(0.6)
    assert propagate(0.4, 0.8, 1.0) == pytest.approx(0.4)
    assert propagate(0.4, 0.0, 0.3) == 0.4  # a parent of score 0 (a root) passes the child through
    assert propagate(math.nan, 0.8, 0.5) == 0.0


def test_threshold_is_strict():
    assert not passes(0.1, 0.1)
    assert passes(0.1000001, 0.1)
    assert not passes(math.inf, 0.1) and not passes(math.nan, -1.0)


def test_scores_propagate_down_the_tree(store):
    found, trace = search(store, alpha=0.5, threshold=0.0, global_limit=2)
    got = scores(found)
    # global search (limit 2) finds a (L0, 0.9) and a (L1, 0.8) only; everything else comes by expansion
    assert got[("cairn://resources/a/x.md", 2)] == pytest.approx(0.5 * 0.3 + 0.5 * 0.9)
    sub = 0.5 * 0.5 + 0.5 * 0.9
    assert got[("cairn://resources/a/sub", 0)] == pytest.approx(sub)
    assert got[("cairn://resources/a/sub/deep.md", 2)] == pytest.approx(0.5 * 0.2 + 0.5 * sub)
    # b is a child of the root (score 0): passed through unchanged
    assert got[("cairn://resources/b/y.md", 2)] == pytest.approx(0.5 * 0.6 + 0.5 * 0.2)
    assert got[("cairn://resources/b", 0)] == pytest.approx(0.2)
    assert trace.stats.vector_calls <= 1 + trace.stats.rounds


def test_leaves_found_by_the_global_search_keep_their_score_and_need_no_directory(store):
    found, _ = search(store, alpha=0.5, threshold=0.0, max_rounds=0)
    got = scores(found)
    assert got[("cairn://resources/b/y.md", 2)] == pytest.approx(0.6)  # found although b scores 0.2
    assert got[("cairn://resources/a/sub/deep.md", 2)] == pytest.approx(0.2)


def test_children_at_or_under_the_threshold_are_neither_kept_nor_expanded(store):
    found, trace = search(store, alpha=1.0, threshold=0.45, global_limit=3)
    uris = {u for u, _ in scores(found)}
    assert "cairn://resources/a/sub/deep.md" not in uris and "cairn://resources/b" not in uris
    assert "cairn://resources/b" not in trace.searched_directories
    assert "cairn://resources/a/sub" in trace.searched_directories  # 0.5 > 0.45: expanded
    excluded = {e.uri for e in trace.events if e.kind == "exclude"}
    assert "cairn://resources/a/sub/deep.md" in excluded and trace.stats.candidates_excluded >= 1


def test_the_pool_keeps_the_best_score_per_uri_and_level():
    r = ContextRecord.build(tenant="t", uri="cairn://resources/a.md", level=2)
    pool: dict = {}
    assert add_to_pool(pool, Candidate(record=r, score=0.3))
    assert add_to_pool(pool, Candidate(record=r, score=0.5))
    assert not add_to_pool(pool, Candidate(record=r, score=0.4))
    assert [c.score for c in pool.values()] == [0.5]
    r0 = ContextRecord.build(tenant="t", uri="cairn://resources/d", level=0)
    r1 = ContextRecord.build(tenant="t", uri="cairn://resources/d", level=1)
    add_to_pool(pool, Candidate(record=r0, score=0.9))
    add_to_pool(pool, Candidate(record=r1, score=0.8))
    assert top_uris(pool, 2) == {"cairn://resources/d", "cairn://resources/a.md"}


def test_stop_rule_frontier_empty(store):
    _, trace = search(store, threshold=0.0)
    assert trace.stats.stop_reason == "frontier_empty"
    assert set(trace.searched_directories) == {ROOT, "cairn://resources/a", "cairn://resources/a/sub", "cairn://resources/b"}


def test_budget_max_rounds(store):
    _, trace = search(store, threshold=0.0, max_rounds=1, dirs_per_round=1)
    assert trace.stats.stop_reason == "max_rounds" and trace.stats.rounds == 1
    assert trace.searched_directories == ["cairn://resources/a"]  # best first


def test_budget_max_vector_calls(store):
    _, trace = search(store, threshold=0.0, max_vector_calls=2, dirs_per_round=1)
    assert trace.stats.stop_reason == "max_vector_calls" and trace.stats.vector_calls == 2


def test_budget_deadline(store):
    _, trace = search(store, threshold=0.0, deadline_ms=0.0)
    assert trace.stats.stop_reason == "deadline" and trace.stats.rounds == 0


def test_one_batched_call_per_round(store):
    before = store.metrics.calls["query_many"]
    _, trace = search(store, threshold=0.0, dirs_per_round=4)
    assert store.metrics.calls["query_many"] - before == trace.stats.rounds
    assert trace.stats.vector_calls == 1 + trace.stats.rounds


def test_convergence_rules():
    c = Convergence(patience=3)
    top = frozenset({"a"})
    assert [c.update(top, n) for n in (1, 2, 3)] == [None, None, None]
    assert c.update(top, 4) == "converged"  # top unchanged for 3 rounds
    c = Convergence(patience=3)
    assert [c.update(frozenset({str(n)}), 5) for n in range(4)] == [None, None, None, "pool_stable"]


def test_hand_on_two_limit_when_a_reranker_follows(store):
    found, _ = search(store, threshold=0.0, limit=2, hand_on=4)
    assert len(found) == 4
    found, _ = search(store, threshold=0.0, limit=2)
    assert len(found) == 2


def test_no_roots_searches_nothing(store):
    found, trace = thinking_search(store, "t", Q, [], 5)
    assert found == [] and trace.stats.vector_calls == 0 and trace.stats.stop_reason == "no_roots"


def test_subtree_scope_reaches_deep_leaves_in_one_expansion(store):
    found, trace = search(store, alpha=0.5, threshold=0.0, scope="subtree", dirs_per_round=1, max_rounds=2)
    got = scores(found)
    # round 1 expands a (0.9): deep.md, two levels down, is reached by that one call
    assert trace.searched_directories[0] == "cairn://resources/a"
    assert got[("cairn://resources/a/sub/deep.md", 2)] == pytest.approx(0.5 * 0.2 + 0.5 * 0.9)
    # a/sub lies inside the searched subtree: kept as a candidate, never expanded again
    assert ("cairn://resources/a/sub", 0) in got
    assert "cairn://resources/a/sub" not in trace.searched_directories


def test_ancestor_scores_apply_to_leaves_found_by_the_global_search(store):
    # without ancestor scores, b/y.md (raw 0.6) keeps its raw score from the global search;
    # with them it is scored against its directory b (0.2) like every other leaf
    found, trace = search(store, alpha=0.5, threshold=0.0, max_rounds=0, ancestor_scores=True)
    got = scores(found)
    assert got[("cairn://resources/b/y.md", 2)] == pytest.approx(0.5 * 0.6 + 0.5 * 0.2)
    assert got[("cairn://resources/a/x.md", 2)] == pytest.approx(0.5 * 0.3 + 0.5 * 0.9)
    sub = 0.5 * 0.5 + 0.5 * 0.9  # a/sub is scored below a
    assert got[("cairn://resources/a/sub/deep.md", 2)] == pytest.approx(0.5 * 0.2 + 0.5 * sub)
    assert trace.stats.fetch_calls == 1 and trace.stats.vector_calls == 1


def test_relevance_feedback_moves_the_query_toward_its_best_leaves_and_searches_again(store):
    cfg = ThinkingConfig(feedback_docs=1, feedback_weight=1.0, max_rounds=0)
    found, trace = thinking_search(store, "t", Q, [ROOT], 10, None, cfg, hybrid_text="unmatched words")
    feedback = [e for e in trace.events if e.kind == "feedback"]
    assert len(feedback) == 1 and "cairn://resources/b/y.md" in feedback[0].detail  # the best leaf (0.6)
    assert [e.kind for e in trace.events[:3]] == ["global_search", "feedback", "global_search"]
    assert trace.stats.vector_calls == 2 and trace.stats.fetch_calls == 1
    # the query moved toward y.md: it scores above what Q gave it (0.7 · 0.6, no keyword match) and
    # the first pool was replaced
    leaves = [c for c in found if c.record.level == 2]
    assert leaves[0].record.uri == "cairn://resources/b/y.md" and leaves[0].score > 0.7 * 0.6 + 0.01


def test_two_near_best_leaves_move_the_query(tmp_path):
    store = _tree(tmp_path, {(f"{ROOT}/a/x.md", 2): 0.6, (f"{ROOT}/b/y.md", 2): 0.58, (f"{ROOT}/b/z.md", 2): 0.2})
    cfg = ThinkingConfig(feedback_docs=3, max_rounds=0)
    found, trace = thinking_search(store, "t", Q, [ROOT], 10, None, cfg, hybrid_text="unmatched words")
    feedback = [e.detail for e in trace.events if e.kind == "feedback"]
    assert len(feedback) == 1 and "x.md" in feedback[0] and "y.md" in feedback[0] and "z.md" not in feedback[0]
    assert trace.stats.vector_calls == 2


def test_one_clear_winner_moves_the_query_less_than_leaves_that_agree(tmp_path):
    # a question with two answers on different pages: the winner (0.6), the other answer (0.45) and a
    # page close to the winner that matches the question less (0.35). At full weight the lone winner's
    # feedback ranked its neighbour over the second answer; at a third (1 of 3 leaves) it does not
    winner, answer, neighbour = [0.6, 0.8, 0.0, 0.0], [0.45, 0.0, math.sqrt(1 - 0.45**2), 0.0], \
        [0.35, 0.4, 0.0, math.sqrt(1 - 0.35**2 - 0.4**2)]
    s = LocalVectorStore(None, dimension=4)
    s.upsert([ContextRecord.build(tenant="t", uri=f"{ROOT}/{n}.md", level=2, vector=v)
              for n, v in (("winner", winner), ("answer", answer), ("neighbour", neighbour))])
    found = {}
    for docs in (1, 3):  # one leaf of one asked for: full weight; one leaf of three: a third
        cfg = ThinkingConfig(feedback_docs=docs, max_rounds=0)
        cands, trace = thinking_search(s, "t", Q, [ROOT], 10, None, cfg, hybrid_text="unmatched words")
        assert [e.kind for e in trace.events[:3]] == ["global_search", "feedback", "global_search"]
        found[docs] = [c.record.uri.rsplit("/", 1)[-1] for c in cands]
    assert found[1] == ["winner.md", "neighbour.md", "answer.md"]
    assert found[3] == ["winner.md", "answer.md", "neighbour.md"]


def test_a_folder_search_scores_its_pages_as_the_global_search_did(tmp_path):
    # b/y.md is the best keyword match inside b, not anywhere: searched inside b it keeps the share
    # of the keyword bonus the global search gave it, instead of the full bonus of b's own best
    s = LocalVectorStore(None, dimension=4)
    s.upsert([
        ContextRecord.build(tenant="t", uri=f"{ROOT}/a/x.md", level=2, vector=vec(0.3), text="refund refund refund policy"),
        ContextRecord.build(tenant="t", uri=f"{ROOT}/b", level=0, vector=vec(0.5), abstract="billing"),
        ContextRecord.build(tenant="t", uri=f"{ROOT}/b/y.md", level=2, vector=vec(0.2), text="a refund and many other words here"),
        ContextRecord.build(tenant="t", uri=f"{ROOT}/b/w.md", level=2, vector=vec(0.25), text="invoices are monthly"),
    ])
    cfg = ThinkingConfig(feedback_docs=0, topic_folders=False, alpha=1.0, threshold=0.0)
    found, trace = thinking_search(s, "t", Q, [ROOT], 10, None, cfg, hybrid_text="refund")
    assert any(e.kind == "expand" and e.uri == f"{ROOT}/b" for e in trace.events)
    got = {c.record.uri: c.score for c in found}
    whole = {h.record.uri: h.score for h in s.query(VectorQuery(tenant="t", vector=Q, text="refund", mode=SearchMode.HYBRID))}
    assert got[f"{ROOT}/b/y.md"] == pytest.approx(whole[f"{ROOT}/b/y.md"])
    assert whole[f"{ROOT}/b/y.md"] < whole[f"{ROOT}/a/x.md"]
    assert got[f"{ROOT}/b/y.md"] < 0.7 * 0.2 + 0.3 - 0.01  # not the full bonus of b's best keyword match


def test_dense_only_searches_get_no_feedback(store):
    found, trace = search(store, feedback_docs=3)
    assert not [e for e in trace.events if e.kind == "feedback"] and trace.stats.fetch_calls == 0


def test_no_feedback_when_nothing_clears_the_threshold(store):
    cfg = ThinkingConfig(feedback_docs=3, threshold=0.95)
    found, trace = thinking_search(store, "t", Q, [ROOT], 10, None, cfg, hybrid_text="unmatched words")
    assert found == [] and not [e for e in trace.events if e.kind == "feedback"]
    assert trace.stats.fetch_calls == 0


def test_feedback_is_on_by_default():
    assert ThinkingConfig().feedback_docs > 0 and ThinkingConfig().feedback_weight > 0


def _tree(tmp_path, tree):
    s = LocalVectorStore(None, dimension=4)
    s.upsert([ContextRecord.build(tenant="t", uri=u, level=lvl, vector=vec(sc)) for (u, lvl), sc in tree.items()])
    return s


def _folders(first: str, second: str, second_children: tuple[str, ...]) -> dict:
    """Two sibling folders: ``first`` matches the query best and holds a weak page; ``second``
    holds a better page (0.35) among ``second_children``."""
    tree = {(f"{ROOT}/{first}", 0): 0.9, (f"{ROOT}/{first}/parking.md", 2): 0.3, (f"{ROOT}/{first}/pets.md", 2): 0.2}
    if second:
        tree[(f"{ROOT}/{second}", 0)] = 0.4
        tree.update({(f"{ROOT}/{second}/{c}", 2): 0.35 if i == 0 else 0.1 for i, c in enumerate(second_children)})
    return tree


def test_a_folder_of_a_kind_lifts_its_children(tmp_path):
    """Every hotel folder holds parking.md and pets.md: the folder says which hotel, so it propagates."""
    store = _tree(tmp_path, _folders("hotel-one", "hotel-two", ("parking.md", "pets.md")))
    found, trace = search(store, alpha=0.5, threshold=0.0, topic_folders=True)
    got = scores(found)
    assert got[(f"{ROOT}/hotel-one/parking.md", 2)] == pytest.approx(0.5 * 0.3 + 0.5 * 0.9)
    assert [c.record.uri for c in found if c.record.level == 2][0] == f"{ROOT}/hotel-one/parking.md"
    assert not any("topic folder" in e.detail for e in trace.events)


def test_a_topic_folders_children_keep_their_own_scores(tmp_path):
    """billing/ beside support/, no file names in common: a better page elsewhere is not outranked."""
    store = _tree(tmp_path, _folders("billing", "support", ("hours.md", "status.md")))
    found, trace = search(store, alpha=0.5, threshold=0.0, topic_folders=True)
    got = scores(found)
    assert got[(f"{ROOT}/billing/parking.md", 2)] == pytest.approx(0.3)
    leaves = [c.record.uri for c in found if c.record.level == 2]
    assert leaves[0] == f"{ROOT}/support/hours.md"  # 0.35, above the matching folder's 0.3 page
    assert any(e.uri == f"{ROOT}/billing" and "topic folder" in e.detail for e in trace.events if e.kind == "expand")
    lifted, _ = search(store, alpha=0.5, threshold=0.0, topic_folders=False)
    assert scores(lifted)[(f"{ROOT}/billing/parking.md", 2)] == pytest.approx(0.6)  # what the rule changes


def test_a_folder_without_a_sibling_in_sight_propagates_as_configured(tmp_path):
    store = _tree(tmp_path, _folders("billing", "", ()))
    found, trace = search(store, alpha=0.5, threshold=0.0, topic_folders=True)
    assert scores(found)[(f"{ROOT}/billing/parking.md", 2)] == pytest.approx(0.6)
    assert trace.stats.fetch_calls == 0  # nothing to compare: no lookup


def test_chunked_files_count_as_children_of_a_kind(tmp_path):
    tree = _folders("hotel-one", "hotel-two", ())
    tree.update({(f"{ROOT}/hotel-two/parking.md#0", 2): 0.35, (f"{ROOT}/hotel-two/parking.md#1", 2): 0.1,
                 (f"{ROOT}/hotel-two/pets.md", 2): 0.1})
    found, _ = search(_tree(tmp_path, tree), alpha=0.5, threshold=0.0, topic_folders=True)
    assert scores(found)[(f"{ROOT}/hotel-one/parking.md", 2)] == pytest.approx(0.6)
