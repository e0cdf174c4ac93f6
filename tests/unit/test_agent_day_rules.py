"""Issue 19's small rules: the language test of the evidence gate, the boost merge, per-type cuts,
memories competing on relevance."""

from __future__ import annotations

from cairn.models import Candidate, ContextRecord, ThinkingTrace
from cairn.retrieval import evidence
from cairn.retrieval.boost import merge_boosted
from cairn.retrieval.evidence import random_strings, reads_as_language
from cairn.retrieval.memories import relevant


def test_real_questions_read_as_language_and_random_letters_do_not(embedder):
    tok = embedder.tokenizer()
    for q in ("is there somewhere to leave the car", "can i bring my dog", "What about backups, where are those kept?"):
        assert reads_as_language(q, tok), q
    for q in ("qzxkvb abqeiwz", "refnds", "plorf"):
        assert not reads_as_language(q, tok), q
    assert sum(reads_as_language(s, tok) for s in random_strings(1000, seed=3)) == 0
    assert not reads_as_language("can i bring my dog", None)  # no tokenizer: no evidence of this kind


def test_a_language_analyser_can_replace_the_test():
    try:
        evidence.set_language_check(lambda text, tok: text == "我可以带狗吗")
        assert reads_as_language("我可以带狗吗", None) and not reads_as_language("can i bring my dog", None)
    finally:
        evidence.set_language_check(None)


def _c(uri: str, score: float) -> Candidate:
    return Candidate(record=ContextRecord.build(tenant="t", uri=uri, level=2), score=score)


def test_good_matches_of_the_boosted_folder_rank_first_and_the_rest_stays_below():
    trace = ThinkingTrace()
    everywhere = [_c("cairn://resources/h/sea/pets.md", 0.9), _c("cairn://resources/h/hill/pets.md", 0.55),
                  _c("cairn://resources/h/sea/parking.md", 0.3)]
    inside = [_c("cairn://resources/h/hill/pets.md", 0.6), _c("cairn://resources/h/hill/food.md", 0.2)]
    out = merge_boosted(everywhere, inside, ("cairn://resources/h/hill",), 0.8, 10, trace)
    assert [c.uri for c in out][:2] == ["cairn://resources/h/hill/pets.md", "cairn://resources/h/sea/pets.md"]
    assert [c.score for c in out] == sorted((c.score for c in out), reverse=True)  # scores agree with the order
    assert len(out) == 4 and "rank first" in trace.events[-1].detail


def test_a_boosted_folder_with_nothing_good_leaves_the_whole_tenants_order():
    trace = ThinkingTrace()
    everywhere = [_c("cairn://resources/faq/paypal.md", 0.8), _c("cairn://resources/eng/on-call.md", 0.15)]
    out = merge_boosted(everywhere, [_c("cairn://resources/eng/on-call.md", 0.2)], ("cairn://resources/eng",), 1.0, 10, trace)
    assert [c.uri for c in out] == ["cairn://resources/faq/paypal.md", "cairn://resources/eng/on-call.md"]
    assert trace.events[-1].kind == "fallback" and "whole tenant" in trace.events[-1].detail


def test_a_memory_is_kept_only_when_as_relevant_as_the_other_matches():
    others = [_c("cairn://resources/billing/refunds.md", 0.9)]
    mems = [_c("cairn://user/ann/memories/profile/plan", 0.85), _c("cairn://user/ann/memories/preferences/hobby", 0.3)]
    assert [m.uri for m in relevant(mems, others, threshold=0.1)] == ["cairn://user/ann/memories/profile/plan"]
    assert len(relevant(mems, [], threshold=0.1)) == 2  # nothing else found: every memory over the threshold
