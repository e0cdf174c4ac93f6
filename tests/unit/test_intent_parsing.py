"""Parsing rules of the intent analysis answer, each one a row."""

import pytest

from cairn.core.models import ContextType
from cairn.engine.planning.parsing import PlanParseError, parse_plan

pytestmark = pytest.mark.unit


def plan(text, **kw):
    return parse_plan(text, planner="intent-llm", **kw)


def test_valid_json():
    p = plan('{"reasoning": "parking at the Avalon", "queries": [{"query": "Avalon parking", '
             '"context_type": "resource", "intent": "parking policy", "priority": 1}, '
             '{"query": "user car", "context_type": "memory", "intent": "car", "priority": 2}]}')
    assert p.reasoning == "parking at the Avalon" and p.planner == "intent-llm" and not p.fallback
    assert [(q.query, q.context_type, q.priority, q.intent) for q in p.queries] == [
        ("Avalon parking", ContextType.RESOURCE, 1, "parking policy"),
        ("user car", ContextType.MEMORY, 2, "car"),
    ]


def test_fenced_json_and_json_after_prose():
    fenced = 'Here is the plan:\n```json\n{"reasoning": "r", "queries": [{"query": "q", "context_type": "skill"}]}\n```'
    assert plan(fenced).queries[0].context_type is ContextType.SKILL
    prose = 'Sure! {"reasoning": "r", "queries": [{"query": "q"}]} Hope this helps.'
    assert plan(prose).queries[0].query == "q"


def test_bare_array_is_the_query_list():
    p = plan('[{"query": "refund policy", "context_type": "resource"}, "issue a refund"]')
    assert p.reasoning == "" and [q.query for q in p.queries] == ["refund policy", "issue a refund"]


def test_unknown_context_type_becomes_resource():
    p = plan('{"queries": [{"query": "a", "context_type": "documents"}, {"query": "b", "context_type": null}, '
             '{"query": "c", "context_type": "MEMORY"}]}')
    assert [q.context_type for q in p.queries] == [ContextType.RESOURCE, ContextType.RESOURCE, ContextType.MEMORY]


def test_missing_or_bad_priority():
    p = plan('{"queries": [{"query": "a"}, {"query": "b", "priority": "2"}, {"query": "c", "priority": 9}, '
             '{"query": "d", "priority": "high"}]}')
    assert [q.priority for q in p.queries] == [3, 2, 5, 3]


def test_non_string_reasoning_is_stringified():
    assert plan('{"reasoning": {"step": 1}, "queries": []}').reasoning == '{"step": 1}'
    assert plan('{"reasoning": 42, "queries": []}').reasoning == "42"
    assert plan('{"reasoning": null, "queries": []}').reasoning == ""


def test_zero_queries_is_an_empty_plan():
    p = plan('{"reasoning": "just a greeting", "queries": []}')
    assert p.queries == () and not p.fallback


def test_more_than_five_keeps_the_first_five_by_priority():
    items = ", ".join(f'{{"query": "q{n}", "priority": {p}}}' for n, p in enumerate([5, 1, 3, 2, 4, 1, 3]))
    p = plan(f'{{"queries": [{items}]}}')
    assert [q.query for q in p.queries] == ["q1", "q5", "q3", "q2", "q6"]


def test_restriction_to_one_context_type_and_target_uris():
    p = plan('{"queries": [{"query": "a", "context_type": "skill"}]}', context_type=ContextType.MEMORY,
             target_uris=("cairn://user/ann/memories",))
    assert p.queries[0].context_type is ContextType.MEMORY
    assert p.queries[0].target_uris == ("cairn://user/ann/memories",)


@pytest.mark.parametrize(
    "garbage",
    ["", "I think you should search for parking.", '{"reasoning": "no list"}', '{"queries": "parking"}',
     '[{"text": "no query field"}]', "42", '{"queries": [{"query": "  "}]}'],
)
def test_garbage_is_an_error_the_analyzer_falls_back_on(garbage):
    with pytest.raises(PlanParseError):
        plan(garbage)
