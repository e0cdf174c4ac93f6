"""cairn's function tools (cairn.integrations.tools): the schemas a model is given are the API's
request schemas, the dispatcher validates a call as the schema says, and every bad call comes back
to the model as an error naming the field, never as an exception."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from cairn import Cairn
from cairn.app.services import Services
from cairn.core.config import load_settings
from cairn.integrations.tools import BOUND, TOOL_NAMES, TOOLS, CairnTools, function_tools, run_tool_call

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
OPENAPI = json.loads((REPO / "docs" / "openapi.json").read_text())
ROOT = "cairn://resources/handbook"


def _resolved(node: Any) -> Any:
    """An OpenAPI schema with its references followed and its titles left out (what a model needs)."""
    if isinstance(node, list):
        return [_resolved(n) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _resolved(OPENAPI["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]])
    return {k: ({f: _resolved(s) for f, s in v.items()} if k == "properties" else _resolved(v))
            for k, v in node.items() if k != "title"}


def _request_schema(route: str) -> tuple[str, dict[str, Any]]:
    method, path = route.split()
    ref = OPENAPI["paths"][path][method.lower()]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    name = ref.rsplit("/", 1)[-1]
    return name, OPENAPI["components"]["schemas"][name]


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_each_tool_takes_what_its_route_takes_as_the_openapi_document_says(name):
    tool = TOOLS[name]
    body_name, body = _request_schema(tool.route)
    assert body_name == tool.body.__name__, f"{name} is generated from {tool.body.__name__}, {tool.route} takes {body_name}"
    parameters = next(d["function"]["parameters"] for d in function_tools() if d["function"]["name"] == name)
    for field, schema in parameters["properties"].items():
        assert schema == _resolved(body["properties"][field]), f"{name}.{field} differs from {tool.route}'s"
    assert set(parameters["required"]) == set(body.get("required", [])), "a required field is left out or added"
    left_out = set(body["properties"]) - set(parameters["properties"])
    assert not left_out & {"query", "text"}, left_out
    assert "user" in left_out and not set(parameters["properties"]) & set(BOUND), "whose data is the application's choice"


def test_the_definitions_are_openai_function_tools_with_valid_schemas():
    definitions = function_tools()
    assert [d["function"]["name"] for d in definitions] == ["find", "search", "context", "remember"]
    for d in definitions:
        assert d["type"] == "function" and set(d["function"]) == {"name", "description", "parameters"}
        assert len(d["function"]["description"]) > 40
        Draft202012Validator.check_schema(d["function"]["parameters"])
        assert "$ref" not in json.dumps(d), "references are inlined: not every provider follows them"
        assert all(p.get("description") for p in d["function"]["parameters"]["properties"].values()), d
    assert [d["function"]["name"] for d in CairnTools(None, names=["context"]).definitions()] == ["context"]  # type: ignore[arg-type]


def test_the_openai_sdk_takes_the_definitions_as_its_function_tool_type():
    chat = pytest.importorskip("openai.types.chat")
    from pydantic import TypeAdapter

    tool_param = TypeAdapter(chat.ChatCompletionFunctionToolParam)
    for definition in function_tools():
        tool_param.validate_python(definition, strict=True)


CALLS = [  # (tool, arguments the model wrote, the schema accepts them, what the answer says)
    ("find", '{"query": "refund"}', True, None),
    ("find", {"query": "refund", "limit": 3, "context_type": "resource", "mode": "thinking"}, True, None),
    ("find", '{"query": "refund", "limit": 0}', False, "limit: Input should be greater than or equal to 1"),
    ("find", '{"query": "refund", "limit": 101}', False, "limit: Input should be less than or equal to 100"),
    ("find", '{"query": "refund", "context_type": "document"}', False, "context_type: Input should be 'memory', 'resource' or 'skill'"),
    ("find", '{"query": "refund", "mode": "deep"}', False, "mode: Input should be 'quick', 'thinking' or 'auto'"),
    ("find", '{"query": 42}', False, "query: Input should be a valid string"),
    ("find", '{"limit": 3}', False, "query: Field required"),
    ("find", '{"query": "refund", "target_uris": ["https://example.com"]}', True, "target_uris: invalid URI 'https://example.com': must start with 'cairn://'"),
    ("find", '{"query": "refund", "filter": {"metadata.year": {"$near": 3}}}', True, "filter:"),
    ("find", '{"query": "refund", "user": "bob"}', False, "unknown argument 'user'; find takes: query, limit,"),
    ("search", '{"query": "refund", "session_id": "s-1"}', False, "unknown argument 'session_id'"),
    ("context", '{"query": "refund", "budget_tokens": 10}', False, "budget_tokens: Input should be greater than or equal to 50"),
    ("remember", '{"text": ""}', False, "text: String should have at least 1 character"),
    ("remember", '{"text": "Ann pays by PayPal.", "category": "preferences", "tenant": "globex"}', False,
     "unknown argument 'tenant'; remember takes: text, category, key, title, source"),
]


@pytest.mark.parametrize(("name", "arguments", "schema_accepts", "says"), CALLS)
def test_a_call_is_judged_as_its_schema_says_and_a_bad_one_is_an_error_naming_the_field(tools, name, arguments, schema_accepts,
                                                                                        says):
    parameters = TOOLS[name]
    schema = next(d["function"]["parameters"] for d in function_tools([parameters.name]))
    given = json.loads(arguments) if isinstance(arguments, str) else arguments
    assert Draft202012Validator(schema).is_valid(given) is schema_accepts
    answer = json.loads(tools.run(name, arguments))
    if says is None:
        assert "error" not in answer, answer
    else:
        assert says in answer["error"] and answer["tool"] == name and answer["retryable"] is False, answer


@pytest.mark.parametrize(("name", "arguments", "says"), [
    ("find", '{"query": "refund"', "the arguments are not valid JSON"),
    ("find", '["refund"]', 'the arguments must be a JSON object, e.g. {"query": "..."}; got list'),
    ("remember", "", "text: Field required"),
    ("forget", '{"uri": "cairn://user/ann/memories"}', "there is no tool 'forget'; call one of: find, search, context, remember"),
])
def test_what_is_not_a_call_of_a_tool_is_answered_as_an_error(tools, name, arguments, says):
    assert says in json.loads(tools.run(name, arguments))["error"]


@pytest.fixture(scope="module")
def cairn(tmp_path_factory, embedder) -> Cairn:
    home = tmp_path_factory.mktemp("tools")
    cairn = Cairn(Services(load_settings(env={"CAIRN_HOME": str(home)}), embedder=embedder), "acme")
    cairn.put_documents(ROOT, [
        {"path": "billing/refunds.md", "text": "# Refunds\n\nRefunds reach the card within five business days."},
        {"path": "people/leave.md", "text": "# Leave\n\nEveryone has 28 days of paid annual leave a year."}])
    return cairn


@pytest.fixture(scope="module")
def tools(cairn) -> CairnTools:
    return CairnTools(cairn, user="ann")


def test_find_answers_the_matches_best_first_with_their_text(cairn):
    answer = json.loads(run_tool_call(cairn, "find", '{"query": "how long until a refund reaches my card?", "limit": 2}'))
    first = answer["results"][0]
    assert first["uri"] == f"{ROOT}/billing/refunds.md" and "five business days" in first["text"], answer
    assert first["type"] == "resource" and 0 < first["score"] <= 1


def test_the_bound_user_and_session_are_used_and_the_model_cannot_name_others(cairn):
    session = cairn.create_session("ann")
    cairn.append_message(session.id, "user", "I live in Lisbon and pay with PayPal.")
    tools = CairnTools(cairn, user="ann", session_id=session.id)
    written = json.loads(tools.run("remember", '{"text": "Ann pays with PayPal.", "category": "preferences", "key": "payment"}'))
    assert written["uri"].startswith("cairn://user/ann/memories/preferences/") and written["created"] is True, written
    found = json.loads(tools.run("search", '{"query": "which payment method does she use?", "context_type": "memory"}'))
    assert any("PayPal" in r["text"] for r in found["results"]), found
    block = json.loads(tools.run("context", '{"query": "how do I pay?", "budget_tokens": 300}'))
    assert "PayPal" in block["text"] and block["tokens"] <= 300 and block["sources"], block
    others = json.loads(CairnTools(cairn, user="bob").run("find", '{"query": "payment method PayPal", "context_type": "memory"}'))
    assert not any(r["uri"].startswith("cairn://user/ann/") for r in others["results"]), others


def test_remember_without_a_category_says_where_it_went(cairn):
    answer = json.loads(CairnTools(cairn, user="ann").run("remember", {"text": "Ann's company is called Northwind."}))
    assert "/memories/profile/" in answer["uri"] and "profile" in answer["note"], answer


def test_a_refusal_from_cairn_is_an_error_the_model_reads(cairn):
    reader = cairn.as_user("ann")
    answer = json.loads(CairnTools(reader, user="bob").run("remember", '{"text": "Bob likes tea."}'))
    assert answer["tool"] == "remember" and "ann" in answer["error"] and answer["retryable"] is False, answer
