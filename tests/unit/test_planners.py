"""The intent analyzer with fake LLM clients, prompt selection, and the no-LLM session planner."""

from __future__ import annotations

import threading
import time

import pytest

from cairn.core.errors import ConfigError, PlanningError
from cairn.core.models import ContextType
from cairn.engine.planning.intent import IntentAnalyzer
from cairn.engine.planning.prompts import PromptLibrary, parse_prompt
from cairn.engine.planning.session_planner import STOP_WORDS, SessionRewritePlanner, capitalised_phrases
from cairn.ports.llm.base import LLMClient
from cairn.ports.sessions.base import Message, Session, SessionView

pytestmark = pytest.mark.unit


class RecordingLLM(LLMClient):
    """Answers with a fixed text (or raises, or sleeps) and remembers every prompt."""

    provider = "fake"

    def __init__(self, answer: str = "", *, model: str = "big-model", delay_s: float = 0.0, error: Exception | None = None):
        super().__init__(model)
        self.answer, self.delay_s, self.error = answer, delay_s, error
        self.calls: list[dict] = []
        self.released = threading.Event()

    def _complete(self, messages, system, timeout_s, json):
        self.calls.append({"prompt": messages[0].content, "system": system, "timeout_s": timeout_s, "json": json})
        if self.delay_s:
            self.released.wait(self.delay_s)
        if self.error:
            raise self.error
        return self.answer


def view(*turns: tuple[str, str], summary: str = "") -> SessionView:
    now = time.time()
    msgs = [Message(seq=n, role=r, content=c, created_at=now) for n, (r, c) in enumerate(turns, 1)]
    s = Session(id="s1", tenant="acme", created_at=now, updated_at=now, expires_at=now + 60, summary=summary, last_seq=len(msgs))
    return SessionView(session=s, summary=summary, recent=msgs, message_count=len(msgs), unsummarized_count=len(msgs))


# --- intent analyzer ----------------------------------------------------------------


def test_analyzer_sends_summary_recent_messages_and_query():
    llm = RecordingLLM('{"reasoning": "r", "queries": [{"query": "Avalon parking", "context_type": "resource"}]}')
    turns = [("user", f"turn {n}") for n in range(7)]
    plan = IntentAnalyzer(llm).plan("do they have parking?", view(*turns, summary="S" * 40_000 + "END"))
    assert [q.query for q in plan.queries] == ["Avalon parking"] and plan.planner == "intent-llm"
    sent = llm.calls[0]["prompt"]
    assert "do they have parking?" in sent and "turn 6" in sent and "turn 2" in sent and "turn 1" not in sent
    # the summary's newest 30,000 characters (a summary grows at its end)
    assert "\n" + "S" * 29_997 + "END\n" in sent and "S" * 29_998 not in sent
    assert llm.calls[0]["json"] is True and "JSON" in llm.calls[0]["system"]


def test_timeout_falls_back_to_the_raw_query():
    llm = RecordingLLM('{"queries": []}', delay_s=5.0)
    started = time.perf_counter()
    plan = IntentAnalyzer(llm, timeout_s=0.2).plan("refund policy", context_type=ContextType.RESOURCE)
    elapsed = time.perf_counter() - started
    llm.released.set()
    assert elapsed < 2.0
    assert plan.fallback and plan.fallback_reason.startswith("timeout")
    assert [(q.query, q.context_type) for q in plan.queries] == [("refund policy", ContextType.RESOURCE)]


@pytest.mark.parametrize(
    "llm, kind",
    [
        (RecordingLLM("no JSON here"), "unparseable"),
        (RecordingLLM(error=PlanningError("bedrock: ThrottlingException", retryable=True)), "llm_error"),
        (RecordingLLM(error=RuntimeError("boom")), "llm_error"),
    ],
)
def test_garbage_or_error_falls_back(llm, kind):
    analyzer = IntentAnalyzer(llm)
    plan = analyzer.plan("where is the invoice?")
    assert plan.fallback and plan.fallback_reason.startswith(kind)
    assert [q.query for q in plan.queries] == ["where is the invoice?"] and plan.queries[0].context_type is None
    assert analyzer.fallbacks[kind] == 1


def test_zero_queries_gives_an_empty_plan():
    plan = IntentAnalyzer(RecordingLLM('{"reasoning": "a greeting", "queries": []}')).plan("thanks, bye!")
    assert plan.queries == () and not plan.fallback and plan.reasoning == "a greeting"


def test_restricted_type_is_asked_for_and_enforced():
    llm = RecordingLLM('[{"query": "q", "context_type": "skill"}]')
    plan = IntentAnalyzer(llm).plan("q", context_type=ContextType.MEMORY)
    assert "Allowed context types: memory" in llm.calls[0]["prompt"]
    assert plan.queries[0].context_type is ContextType.MEMORY


# --- prompts ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model, prompt_id",
    [
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", "intent_analysis.v1"),
        ("gpt-4o", "intent_analysis.v1"),
        ("gpt-4o-mini", "intent_analysis.v1.small"),
        ("anthropic.claude-3-haiku-20240307-v1:0", "intent_analysis.v1.small"),
        ("ollama/llama3.1:8b", "intent_analysis.v1.small"),
    ],
)
def test_prompt_selection_per_model(model, prompt_id):
    assert IntentAnalyzer(RecordingLLM(model=model)).prompt.id == prompt_id


def test_the_small_prompt_is_what_a_small_model_receives():
    llm = RecordingLLM("[]", model="gpt-4o-mini")
    IntentAnalyzer(llm).plan("do they allow pets?")
    assert "Example:" in llm.calls[0]["system"] and llm.calls[0]["prompt"].rstrip().endswith("Output:")


def test_higher_versions_win_and_versions_can_be_pinned(tmp_path):
    base = "---\nname: intent_analysis\nversion: {v}\nvariables: [query, summary, recent_messages, context_types]\n---\n# user\nv{v} {{{{query}}}} {{{{summary}}}} {{{{recent_messages}}}} {{{{context_types}}}}\n"
    for v in (1, 2):
        (tmp_path / f"intent_analysis.v{v}.md").write_text(base.format(v=v))
    lib = PromptLibrary.from_folder(tmp_path)
    assert lib.select("intent_analysis", "any").id == "intent_analysis.v2"
    assert lib.select("intent_analysis", "any", version=1).id == "intent_analysis.v1"
    with pytest.raises(ConfigError, match="no prompt 'nope'"):
        lib.select("nope")


def test_prompt_files_declare_exactly_the_variables_they_use():
    text = "---\nname: p\nversion: 1\nvariables: [query, unused]\n---\n# user\n{{query}} {{other}}\n"
    with pytest.raises(ConfigError, match=r"undeclared variables \['other'\].*unused variables \['unused'\]"):
        parse_prompt(text, "p.v1.md")
    with pytest.raises(ConfigError, match="name it"):
        parse_prompt(text, "p.md")
    ok = parse_prompt("---\nname: p\nversion: 1\nvariables: [query]\n---\n# user\nQ: {{query}}\n", "p.v1.md")
    assert ok.render(query="x") == "Q: x"
    with pytest.raises(PlanningError, match=r"missing variables \['query'\]"):
        ok.render()


# --- the no-LLM session planner -------------------------------------------------------


def test_capitalised_phrases():
    assert capitalised_phrases("What about the Acorn Guest House? It is cheap.") == ["Acorn Guest House"]
    assert capitalised_phrases("There are two. The Gonville Hotel and The Lensfield.") == ["Gonville Hotel", "Lensfield"]
    assert capitalised_phrases("Okay, I recommend the Avalon on Monday.") == ["Avalon"]
    assert capitalised_phrases("Yes, that works. Thank you!") == []
    assert capitalised_phrases("Reference number is : BVU67RNQ. It is a great Indian restaurant.") == ["Indian"]
    # a tenant's own stop words (its domain's common words) are never names
    assert capitalised_phrases("Reference number is : BVU67RNQ. It is a great Indian restaurant.", STOP_WORDS | {"indian"}) == []
    assert capitalised_phrases("It is at Grafton Hotel 619 Newmarket Road.") == ["Grafton Hotel", "Newmarket Road"]


def test_pronoun_follow_up_gets_the_entity_of_the_conversation():
    session = view(
        ("user", "I need a guesthouse in the north with free wifi."),
        ("assistant", "I recommend the Avalon. Would you like to book it?"),
    )
    plan = SessionRewritePlanner().plan("Is the room quite large there?", session)
    assert plan.planner == "session-rewrite"
    # the turn as it was said, and the turn with what the conversation says it is about
    assert [(q.query, q.context_type) for q in plan.queries] == [
        ("Is the room quite large there?", None),
        ("I need a guesthouse in the north with free wifi. Is the room quite large there? (Avalon)", None),
    ]
    assert plan.queries[1].weight < 1 and "Avalon" in plan.reasoning


def test_a_short_follow_up_is_searched_with_the_question_it_follows():
    session = view(("user", "How long do refunds take?"), ("assistant", "5 to 10 business days."))
    plan = SessionRewritePlanner().plan("and for yearly plans?", session)
    assert [q.query for q in plan.queries] == ["and for yearly plans?", "How long do refunds take? and for yearly plans?"]
    assert "previous user turn" in plan.reasoning


def test_the_most_recent_entity_wins_and_names_in_the_query_are_skipped():
    session = view(
        ("user", 'Tell me about "Pizza Hut Fen Ditton".'),
        ("assistant", "Pizza Hut Fen Ditton is cheap. The Acorn Guest House is nearby."),
    )
    carried = SessionRewritePlanner().plan("Do they deliver?", session).queries[1].query
    assert carried == 'Tell me about "Pizza Hut Fen Ditton". Do they deliver? (Acorn Guest House)'  # a name said is not added twice
    alone = view(("assistant", "Pizza Hut Fen Ditton is cheap. The Acorn Guest House is nearby."))
    assert SessionRewritePlanner().plan("Do they deliver?", alone).queries[0].query == "Do they deliver? (Acorn Guest House, Pizza Hut Fen Ditton)"
    one = SessionRewritePlanner(max_names=1).plan("Is the Acorn Guest House good, and do they deliver?", alone)
    assert one.queries[0].query.endswith("(Pizza Hut Fen Ditton)")


def test_a_query_that_names_its_entity_is_left_alone():
    session = view(("assistant", "The Avalon is a guesthouse."))
    plan = SessionRewritePlanner().plan("How quiet is the Acorn Guest House?", session)
    assert plan.queries[0].query == "How quiet is the Acorn Guest House?"


def test_vocabulary_catches_lower_case_names_and_the_type_restriction_is_kept():
    session = view(("user", "any indian food?"), ("assistant", "maharajah tandoori is an expensive indian restaurant."))
    plain = SessionRewritePlanner().plan("is the decor modern?", session)
    assert plain.queries[0].query == "is the decor modern?"
    plan = SessionRewritePlanner(["Maharajah Tandoori Restaurant", "Maharajah Tandoori"]).plan(
        "is the decor modern?", session, context_type=ContextType.RESOURCE
    )
    assert plan.queries[1].query == "any indian food? is the decor modern? (Maharajah Tandoori)"
    assert {q.context_type for q in plan.queries} == {ContextType.RESOURCE}


def test_no_session_is_the_raw_query():
    plan = SessionRewritePlanner().plan("refund policy")
    assert plan.queries[0].query == "refund policy" and not plan.fallback
