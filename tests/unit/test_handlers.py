"""The Lambda handlers with their sample events (events/), over a temp local store and SQLite sessions.

Each handler module is loaded from its file (every function's module is ``app``, as Lambda sees
it) and given :class:`~cairn.app.services.Services` whose parts the test builds; nothing reaches a network.
"""

from __future__ import annotations

import copy
import importlib.util
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from cairn import Cairn
from cairn.api import AuthorizerConfig, build_app
from cairn.app.services import Services
from cairn.app.workflow import (
    RETRIEVE_OUTPUT_BUDGET,
    RETRYABLE_ERROR,
    TASK_ERROR,
    CairnRetryableError,
    CairnTaskError,
    PlanOutput,
    RerankInput,
    RetrieveOutput,
    RetrieveTask,
    WorkflowInput,
    compact,
    execution_error,
    hydrate,
    state_size,
)
from cairn.core.config import load_settings
from cairn.core.errors import SessionNotFound
from cairn.core.models import FindResult, QueryPlan
from cairn.engine.ingest import Document, Ingestor, LocalContentStore
from cairn.ports.sessions import open_session_store
from cairn.ports.vectorstores.local import LocalVectorStore
from tests.fakes import UnavailableStore
from tests.stack import as_deployed, deployable

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
EVENTS = REPO / "events"
ASL = REPO / "infra" / "statemachine" / "retrieval.asl.json"
REFUNDS = "cairn://resources/handbook/billing/refunds.md"


def load_handler(name: str) -> Any:
    path = REPO / "functions" / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"cairn_function_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import would: pydantic resolves the module's annotations there
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return as_deployed(module, name)


def event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


def body(response: dict[str, Any]) -> dict[str, Any]:
    return json.loads(response["body"])


class EmptyPlanner:
    """A planner that decides no retrieval is needed (chit-chat); remembers what it was asked."""

    name = "empty"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def plan(self, query, session=None, *, context_type=None, target_uris=()):
        self.asked.append(query)
        return QueryPlan(reasoning="small talk: nothing to retrieve", queries=(), planner=self.name)


class RecordingSFN:
    """Stands in for boto3's Step Functions client (moto does not implement StartSyncExecution)."""

    def __init__(self, response: dict[str, Any]) -> None:
        self.response = response
        self.calls: list[dict[str, Any]] = []

    def start_sync_execution(self, **kw: Any) -> dict[str, Any]:
        self.calls.append(kw)
        return self.response


class FakeS3:
    """Stands in for boto3's S3 client: get_object of uploaded payloads."""

    def __init__(self, objects: dict[tuple[str, str], bytes]) -> None:
        self.objects = objects

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:  # noqa: N803 - boto3's names
        data = self.objects[(Bucket, Key)]
        return {"Body": io.BytesIO(data), "ContentLength": len(data)}




class BrokenEmbedder:
    """The index's own embedder (same identity), failing on every call."""

    dimension = 384
    name = "local-minilm"
    languages = frozenset({"en"})

    def embed_one(self, text: str) -> Any:
        raise RuntimeError("secret internal detail")


HANDBOOK = [
    Document(("billing", "refunds.md"), "# Refunds\n\nCustomers can request a refund within 30 days of purchase. "
             "Refunds are paid back to the original card within five business days.\n"),
    Document(("billing", "invoices.md"), "# Invoices\n\nInvoices are emailed on the first day of each month. "
             "You can download past invoices as PDF from the billing page.\n"),
    Document(("travel", "expenses.md"), "# Travel expenses\n\nEmployees book flights through the travel portal. "
             "Hotel costs above 200 euros per night need a manager's approval.\n"),
    Document(("README.md",), "# Company handbook\n\nPolicies for billing, refunds and travel.\n"),
]


@pytest.fixture(scope="module")
def handbook_store(tmp_path_factory, embedder):
    """acme's handbook, ingested once for the module (tests that write use a store of their own)."""
    store = LocalVectorStore(tmp_path_factory.mktemp("store"), dimension=embedder.dimension)
    Ingestor(store, embedder, "acme").ingest(HANDBOOK, "cairn://resources/handbook")
    return store


SFN_ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:cairn"


@pytest.fixture
def world(tmp_path, embedder, handbook_store):
    """The handbook store, fresh SQLite sessions and services built over them."""
    store = handbook_store
    sessions = open_session_store("sqlite", path=tmp_path / "sessions.db")
    settings = load_settings(env={"CAIRN_HOME": str(tmp_path)})

    def services(state_machine_arn: str | None = None, *, function: str = "api", **kw: Any) -> Services:
        """What the deployed ``function`` has (a store only with a store layer, ...), and ``kw``."""
        opts = dict(store=store, embedder=embedder, sessions=sessions, content=LocalContentStore(tmp_path / "content"))
        opts = {k: v for k, v in opts.items() if k in deployable(function)}
        opts.update(kw)
        return Services(settings.model_copy(update={"state_machine_arn": state_machine_arn}), **opts)

    return {"store": store, "sessions": sessions, "services": services, "settings": settings}


def serve_with(api: Any, services: Services) -> None:
    """Point the api module at ``services`` (as a new Lambda container would be)."""
    api.services = services
    api.app = build_app(services, AuthorizerConfig.from_env())


def at(ev: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    """The event of a request to ``method path``."""
    ev["rawPath"] = ev["requestContext"]["http"]["path"] = path
    ev["requestContext"]["http"]["method"] = method
    return ev


@pytest.fixture
def api(world):
    mod = load_handler("api")
    serve_with(mod, world["services"]())
    return mod


# --------------------------------------------------------------------------- api: find


def test_find_returns_the_right_document(api):
    resp = api.handler(event("api/find.json"))
    assert resp["statusCode"] == 200, resp
    out = body(resp)
    assert out["resources"][0]["uri"] == REFUNDS
    FindResult.model_validate(out)


def test_a_bad_body_is_a_400_that_lists_every_problem(api):
    resp = api.handler(event("api/find_bad_body.json"))
    assert resp["statusCode"] == 400
    err = body(resp)
    assert err["error"] == "bad_request" and err["retryable"] is False and err["request_id"] == "req-0001"
    assert "query: the query is empty" in err["message"]
    assert "limit" in err["message"] and "colour: unknown field" in err["message"]
    assert len(err["details"]) == 3 and "Traceback" not in resp["body"]


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]", '"refund"'])
def test_a_body_that_is_not_a_json_object_is_a_400(api, raw):
    ev = event("api/find.json")
    ev["body"] = raw
    resp = api.handler(ev)
    assert resp["statusCode"] == 400
    assert re.search(r"not valid JSON|valid dictionary", body(resp)["message"]), body(resp)


def test_a_body_naming_a_tenant_is_rejected(api):
    resp = api.handler(event("api/find_with_tenant.json"))
    assert resp["statusCode"] == 400
    assert "tenant comes from your credentials" in body(resp)["message"]


def test_the_tenant_comes_from_the_credentials_only(api):
    ev = event("api/find.json")
    ev["requestContext"]["authorizer"] = {"lambda": {"tenant": "globex"}}
    ev["headers"]["x-cairn-tenant"] = "acme"  # a header is never trusted
    resp = api.handler(ev)
    assert resp["statusCode"] == 200
    assert body(resp)["total"] == 0  # globex sees none of acme's handbook

    del ev["requestContext"]["authorizer"]
    resp = api.handler(ev)
    assert resp["statusCode"] == 401 and body(resp)["error"] == "unauthorized"


def test_iam_callers_are_mapped_to_a_tenant(api, world, monkeypatch):
    ev = event("api/find.json")
    ev["requestContext"]["authorizer"] = {"iam": {"accountId": "210987654321", "userArn": "arn:aws:iam::210987654321:user/agent"}}
    assert api.handler(ev)["statusCode"] == 401
    monkeypatch.setenv("CAIRN_IAM_TENANTS", json.dumps({"210987654321": "acme"}))
    serve_with(api, world["services"]())
    resp = api.handler(ev)
    assert resp["statusCode"] == 200 and body(resp)["resources"][0]["uri"] == REFUNDS


def test_an_unknown_route_is_a_404(api):
    resp = api.handler(at(event("api/find.json"), "POST", "/find"))
    assert resp["statusCode"] == 404 and body(resp)["error"] == "route_not_found"
    assert "no route POST /find" in body(resp)["message"]


def test_a_missing_document_is_a_404_of_the_not_found_family(api):
    ev = at(event("api/stats.json"), "GET", "/v1/contents")
    ev["queryStringParameters"] = {"uri": "cairn://resources/handbook/nothing.md", "level": "2"}
    resp = api.handler(ev)
    assert resp["statusCode"] == 404 and body(resp)["error"] == "context_not_found"


def test_an_unexpected_failure_is_a_500_without_internals(api, world):
    serve_with(api, world["services"](embedder=BrokenEmbedder()))
    resp = api.handler(event("api/find.json"))
    assert resp["statusCode"] == 500
    assert body(resp)["error"] == "internal_error"
    assert "secret internal detail" not in resp["body"] and "Traceback" not in resp["body"]


def test_stats_count_the_tenants_finds(api):
    api.handler(event("api/find.json"))
    resp = api.handler(event("api/stats.json"))
    assert resp["statusCode"] == 200
    assert body(resp)["total"]["queries"] == 1
    other = event("api/stats.json")
    other["requestContext"]["authorizer"] = {"lambda": {"tenant": "globex"}}
    assert body(api.handler(other))["total"]["queries"] == 0


# --------------------------------------------------------------------------- api: search and sessions


def test_search_in_process_plans_and_finds(api):
    resp = api.handler(event("api/search.json"))  # JWT claim custom:tenant = acme
    assert resp["statusCode"] == 200, resp
    out = body(resp)
    assert REFUNDS in [m["uri"] for m in out["resources"][:2]]  # the refunds page, or its folder first
    assert out["query_plan"]["planner"] == "session-rewrite"


def test_search_with_a_zero_query_plan_is_empty(api, world):
    planner = EmptyPlanner()
    serve_with(api, world["services"](planner=planner))
    out = body(api.handler(event("api/search.json")))
    assert out["total"] == 0 and out["query_plan"]["queries"] == []
    assert planner.asked == ["what is the refund window?"]


def test_search_through_the_workflow_sends_the_credential_tenant(api, world):
    result = {"memories": [], "resources": [], "skills": [], "total": 0}
    sfn = RecordingSFN({"status": "SUCCEEDED", "output": json.dumps(result)})
    serve_with(api, world["services"](SFN_ARN, sfn=sfn))
    resp = api.handler(event("api/search.json"))
    assert resp["statusCode"] == 200 and body(resp)["total"] == 0
    sent = WorkflowInput.model_validate_json(sfn.calls[0]["input"])
    assert sent.tenant == "acme" and sent.request.mode == "auto" and sent.request.limit == 3  # resolved by the Plan task


def test_a_failed_execution_answers_with_the_tasks_error(api, world):
    task_error = CairnTaskError.__name__
    cause = json.dumps({"errorType": task_error, "errorMessage": json.dumps(
        {**SessionNotFound("session 'x' not found").to_dict(), "status": 404})})
    sfn = RecordingSFN({"status": "FAILED", "error": task_error, "cause": cause})
    serve_with(api, world["services"](SFN_ARN, sfn=sfn))
    resp = api.handler(event("api/search.json"))
    assert resp["statusCode"] == 404 and body(resp)["error"] == "session_not_found"
    sfn.response = {"status": "FAILED", "error": "States.Timeout", "cause": "task timed out"}
    resp = api.handler(event("api/search.json"))
    assert resp["statusCode"] == 503 and body(resp)["retryable"] is True and resp["headers"]["Retry-After"] == "1"


def test_sessions_create_append_get(api):
    created = api.handler(event("api/create_session.json"))
    assert created["statusCode"] == 201
    sid = body(created)["id"]
    ev = at(event("api/append_message.json"), "POST", f"/v1/sessions/{sid}/messages")
    appended = api.handler(ev)
    assert appended["statusCode"] == 201 and body(appended)["seq"] == 1
    ev = at(event("api/get_session.json"), "GET", f"/v1/sessions/{sid}")
    view = body(api.handler(ev))
    assert view["session"]["tenant"] == "acme" and view["recent"][0]["role"] == "user"


def test_another_tenant_cannot_read_a_session(api):
    sid = body(api.handler(event("api/create_session.json")))["id"]
    ev = at(event("api/get_session.json"), "GET", f"/v1/sessions/{sid}")
    ev["requestContext"]["authorizer"] = {"lambda": {"tenant": "globex"}}
    resp = api.handler(ev)
    assert resp["statusCode"] == 404 and body(resp)["error"] == "session_not_found"


def test_a_bad_message_is_a_400(api):
    sid = body(api.handler(event("api/create_session.json")))["id"]
    ev = at(event("api/append_message.json"), "POST", f"/v1/sessions/{sid}/messages")
    ev["body"] = json.dumps({"role": "robot", "content": "hi"})
    resp = api.handler(ev)
    assert resp["statusCode"] == 400 and "role: Input should be 'user' or 'assistant'" in body(resp)["message"]


# --------------------------------------------------------------------------- workflow tasks


def asl() -> dict[str, Any]:
    return json.loads(ASL.read_text())


def resolve(template: dict[str, Any], state: Any, context: dict[str, Any] | None = None) -> dict[str, Any]:
    """Apply an ASL Parameters/ItemSelector template (the JSONPath subset the workflow uses)."""

    def path(expr: str) -> Any:
        root, rest = (context, expr[3:]) if expr.startswith("$$.") else (state, expr[2:])
        value = root
        for part in filter(None, rest.split(".")):
            value = value[part]
        return value

    return {k[:-2] if k.endswith(".$") else k: path(v) if k.endswith(".$") else v for k, v in template.items()}


@pytest.fixture
def tasks(world):
    mods = {name: load_handler(name) for name in ("plan", "retrieve", "rerank")}
    for name, mod in mods.items():
        mod.services = world["services"](function=name)
    return mods


def test_each_states_output_is_the_next_states_input(tasks):
    """Plan → (Choice) → Map(ItemSelector) → Retrieve → Rerank(Parameters), as the ASL wires them."""
    states = asl()["States"]
    state = tasks["plan"].handler(event("plan.json"))
    PlanOutput.model_validate(state)
    choice = states["HasQueries"]["Choices"][0]
    assert choice["Variable"] == "$.query_count" and state["query_count"] >= 1
    mapping = states["RetrieveEach"]
    assert mapping["ItemsPath"] == "$.plan.queries"
    items = state["plan"]["queries"]
    retrieved = []
    for item in items:
        task = resolve(mapping["ItemSelector"], state, {"Map": {"Item": {"Value": item}}})
        RetrieveTask.model_validate(task)
        out = tasks["retrieve"].handler(task)
        RetrieveOutput.model_validate(out)
        retrieved.append(out)
    state["retrieved"] = retrieved  # the Map's ResultPath
    assert mapping["ResultPath"] == "$.retrieved"
    rerank_input = resolve(states["Rerank"]["Parameters"], state)
    RerankInput.model_validate(rerank_input)
    result = tasks["rerank"].handler(rerank_input)
    assert FindResult.model_validate(result).resources[0].uri == REFUNDS
    assert result["query_plan"]["queries"]


def test_the_plan_task_resolves_searchs_auto_mode_for_every_typed_query(tasks, world):
    s = world["sessions"].create("acme")
    world["sessions"].append("acme", s.id, "user", "I was charged twice this month, can I get my money back?")
    follow_up = event("plan.json") | {"session_id": s.id}
    follow_up["request"] = follow_up["request"] | {"mode": "auto", "query": "and how long does that take?"}
    state = tasks["plan"].handler(follow_up)
    assert state["query_count"] == 2 and state["request"]["mode"] == "quick"  # the conversation carried: flat
    mapping = asl()["States"]["RetrieveEach"]
    for item in state["plan"]["queries"]:
        task = resolve(mapping["ItemSelector"], state, {"Map": {"Item": {"Value": item}}})
        assert RetrieveOutput.model_validate(tasks["retrieve"].handler(task)).trace.stats.mode == "quick"
    alone = tasks["plan"].handler(follow_up | {"session_id": None})
    assert alone["query_count"] == 1 and alone["request"]["mode"] == "thinking"


def test_a_zero_query_plan_takes_the_empty_branch(tasks, world):
    tasks["plan"].services = world["services"](function="plan", planner=EmptyPlanner())
    state = tasks["plan"].handler(event("plan.json"))
    assert state["query_count"] == 0
    states = asl()["States"]
    assert states["HasQueries"]["Choices"][0]["Next"] == "NoRetrievalNeeded"
    empty = resolve(states["NoRetrievalNeeded"]["Parameters"], state)
    result = FindResult.model_validate(empty)
    assert result.total == 0 and result.query_plan is not None and result.query_plan.planner == "empty"


def test_retrieve_output_travels_without_vectors(tasks):
    out = RetrieveOutput.model_validate(tasks["retrieve"].handler(event("retrieve.json")))
    assert out.candidates and all(c.record.vector is None for c in out.candidates)
    assert out.candidates[0].record.uri == REFUNDS
    # the raw matches the Rerank task weighs a conversation-carrying query by travel with them
    assert out.raw_matches and out.raw_matches[0][0] == REFUNDS and out.raw_matches[0][1] == out.raw_best


def test_rerank_sample_event_gives_a_find_result(tasks):
    result = FindResult.model_validate(tasks["rerank"].handler(event("rerank.json")))
    assert [m.uri for m in result.resources] == [REFUNDS]


def test_task_errors_carry_retryable_names(tasks, world):
    bad = event("retrieve.json")
    bad["request"]["limit"] = 0
    with pytest.raises(CairnTaskError) as caught:
        tasks["retrieve"].handler(bad)
    payload = json.loads(str(caught.value))
    assert payload["error"] == "bad_request" and payload["status"] == 400 and "limit" in payload["message"]

    tasks["retrieve"].services = world["services"](function="retrieve", store=UnavailableStore(world["store"]))
    with pytest.raises(CairnRetryableError) as caught:
        tasks["retrieve"].handler(event("retrieve.json"))
    assert type(caught.value).__name__ == "CairnRetryableError"  # what Lambda reports as errorType
    assert json.loads(str(caught.value))["retryable"] is True
    # and the api turns the failed execution back into the original error
    cause = json.dumps({"errorType": "CairnRetryableError", "errorMessage": str(caught.value)})
    failed = execution_error("CairnRetryableError", cause)
    assert failed.status == 503 and failed.code == "vector_store_unavailable" and failed.retryable


def test_every_task_retries_on_the_retryable_name_and_catches_both():
    def tasks_of(states: dict[str, Any]):
        for name, state in states.items():
            if state["Type"] == "Task":
                yield name, state
            if state["Type"] == "Map":
                yield from tasks_of(state["ItemProcessor"]["States"])

    found = dict(tasks_of(asl()["States"]))
    assert set(found) == {"Plan", "Retrieve", "Rerank", "AssembleWithoutRerank"}
    for name, state in found.items():
        if name != "Retrieve":  # one try each, within the budget: a failed Plan is a retryable 503 to the
            assert "Retry" not in state, name  # caller; a failed Rerank falls back to AssembleWithoutRerank
            continue
        assert RETRYABLE_ERROR in state["Retry"][0]["ErrorEquals"], name
        assert TASK_ERROR not in state["Retry"][0]["ErrorEquals"], name
    catches = [c for s in asl()["States"].values() for c in s.get("Catch", [])]
    assert any(c["ErrorEquals"] == [RETRYABLE_ERROR, TASK_ERROR] and c["Next"] == "TaskFailed" for c in catches)


def test_plan_with_an_unknown_session_is_a_task_error(tasks):
    ev = event("plan.json")
    ev["session_id"] = "nosuchsession"
    with pytest.raises(CairnTaskError, match="session_not_found"):
        tasks["plan"].handler(ev)


def test_candidates_travel_by_reference_and_are_read_back_whole(tasks, world):
    out = RetrieveOutput.model_validate(tasks["retrieve"].handler(event("retrieve.json")))
    assert out.candidates and all(c.record.text == "" and c.record.abstract == "" for c in out.candidates)
    (back,) = hydrate([out], world["store"], "acme")
    assert [(c.uri, c.score) for c in back.candidates] == [(c.uri, c.score) for c in out.candidates]
    refunds = next(c for c in back.candidates if c.uri == REFUNDS)
    assert "within 30 days" in refunds.record.text and refunds.record.vector is None  # whole again, not cut


def test_compact_keeps_every_candidate_at_limit_100_and_drops_only_past_the_budget(tasks):
    out = RetrieveOutput.model_validate(tasks["retrieve"].handler(event("retrieve.json")))
    leaf = next(c for c in out.candidates if c.record.level == 2)

    def fat(n: int) -> RetrieveOutput:
        big = [leaf.model_copy(update={"score": 1 - i / 1000, "record": leaf.record.model_copy(
            update={"uri": f"{leaf.record.uri}-{i}", "text": "word " * 1600, "vector": [0.1] * 384})}) for i in range(n)]
        return out.model_copy(update={"candidates": big})

    slim = compact(fat(200))  # limit 100 with a reranker after it: 200 candidates, texts of 8,000 characters
    assert len(slim.candidates) == 200 and state_size(slim) <= RETRIEVE_OUTPUT_BUDGET
    slim = compact(fat(200), budget=10_000)  # a budget the references cannot meet: the best are kept, the trace says so
    assert 0 < len(slim.candidates) < 200 and slim.candidates[0].score == 1.0
    assert slim.raw_matches == out.raw_matches and slim.raw_best == out.raw_best  # what rerank compares on is never cut
    assert "lowest-scored candidates dropped" in slim.trace.events[-1].detail


# --------------------------------------------------------------------------- on_message and ingest


def stream_event(session_id: str, role: str = "user", content: str | None = None) -> dict[str, Any]:
    ev = copy.deepcopy(event("on_message.json"))
    image = ev["Records"][0]["dynamodb"]["NewImage"]
    image["pk"]["S"] = f"TENANT#acme#SESSION#{session_id}"
    image["session_id"]["S"] = session_id
    image["role"]["S"] = role
    if content is not None:
        image["content"]["S"] = content
    return ev


def test_on_message_stores_prefetched_context(world):
    """The deployed on_message has no store: it starts the workflow (end to end: test_packaged.py)."""
    mod = load_handler("on_message")
    result = {"memories": [], "resources": [{"uri": REFUNDS, "context_type": "resource", "level": 2, "score": 0.9,
                                             "abstract": "Refunds", "tags": []}], "skills": [], "total": 1}
    sfn = RecordingSFN({"status": "SUCCEEDED", "output": json.dumps(result)})
    mod.services = world["services"](SFN_ARN, function="on_message", sfn=sfn)
    sessions = world["sessions"]
    sid = sessions.create("acme", "ann").id
    sessions.append("acme", sid, "user", "How long until a refund reaches my card?")
    assert mod.handler(stream_event(sid)) == {"batchItemFailures": []}
    sent = WorkflowInput.model_validate_json(sfn.calls[0]["input"])
    assert sent.tenant == "acme" and sent.session_id == sid and sent.request.query == "How long until a refund reaches my card?"
    prefetched = sessions.get("acme", sid).prefetched
    assert prefetched is not None and prefetched["resources"][0]["uri"] == REFUNDS


def test_on_message_skips_assistant_messages_and_reports_retryable_failures(world):
    from botocore.exceptions import ClientError

    class Throttled:
        def start_sync_execution(self, **kw: Any) -> dict[str, Any]:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
                               "ResponseMetadata": {"HTTPStatusCode": 400}}, "StartSyncExecution")

    mod = load_handler("on_message")
    sessions = world["sessions"]
    sid = sessions.create("acme").id
    idle = RecordingSFN({"status": "SUCCEEDED", "output": "{}"})
    mod.services = world["services"](SFN_ARN, function="on_message", sfn=idle)
    assert mod.handler(stream_event(sid, role="assistant")) == {"batchItemFailures": []}
    assert sessions.get("acme", sid).prefetched is None and idle.calls == []
    mod.services = world["services"](SFN_ARN, function="on_message", sfn=Throttled())
    out = mod.handler(stream_event(sid))
    assert out == {"batchItemFailures": [{"itemIdentifier": "111000000000000000000001"}]}
    # a session deleted meanwhile is not worth retrying
    assert mod.handler(stream_event("gone")) == {"batchItemFailures": []}


def _records(*messages: tuple[str, int, str]) -> dict[str, Any]:
    """A stream batch of user messages (session, seq, content), each its own record."""
    template = stream_event("x")["Records"][0]
    records = []
    for n, (sid, seq, content) in enumerate(messages):
        rec = copy.deepcopy(template)
        image = rec["dynamodb"]["NewImage"]
        image["pk"]["S"], image["session_id"]["S"] = f"TENANT#acme#SESSION#{sid}", sid
        image["seq"]["N"], image["content"]["S"] = str(seq), content
        rec["eventID"], rec["dynamodb"]["SequenceNumber"] = f"event-{n}", f"{222000000000000000000000 + n}"
        records.append(rec)
    return {"Records": records}


def test_on_message_is_idempotent_and_debounced_per_session(world):
    """A redelivered record runs no second search; of a session's messages in one batch only the
    newest is prefetched; each workflow carries the record's eventID as its correlation id."""
    mod = load_handler("on_message")
    sfn = RecordingSFN({"status": "SUCCEEDED", "output": json.dumps({"memories": [], "resources": [], "skills": [], "total": 0})})
    mod.services = world["services"](SFN_ARN, function="on_message", sfn=sfn)
    sessions = world["sessions"]
    a, b = sessions.create("acme").id, sessions.create("acme").id
    for text in ("refunds?", "no wait, invoices?", "invoices from March?"):
        sessions.append("acme", a, "user", text)
    sessions.append("acme", b, "user", "travel rules?")
    batch = _records((a, 1, "refunds?"), (a, 2, "no wait, invoices?"), (b, 1, "travel rules?"), (a, 3, "invoices from March?"))
    assert mod.handler(batch) == {"batchItemFailures": []}
    sent = sorted((WorkflowInput.model_validate_json(c["input"]) for c in sfn.calls), key=lambda w: w.request.query)
    assert [(w.session_id, w.request.query) for w in sent] == [(a, "invoices from March?"), (b, "travel rules?")]
    assert {w.correlation_id for w in sent} == {"event-3", "event-2"}
    assert sessions.prefetched_seq("acme", a) == 3 and sessions.prefetched_seq("acme", b) == 1
    assert mod.handler(batch) == {"batchItemFailures": []}  # the batch again (a retry): nothing to do
    assert mod.handler(_records((a, 2, "no wait, invoices?"))) == {"batchItemFailures": []}  # late: older
    assert len(sfn.calls) == 2


def test_on_message_prefetches_sessions_side_by_side(world):
    """Two sessions' workflows run at once: each call waits until the other has started."""
    import threading

    both = threading.Barrier(2, timeout=30)

    class Meeting(RecordingSFN):
        def start_sync_execution(self, **kw: Any) -> dict[str, Any]:
            both.wait()  # one at a time, the first would wait here for good (BrokenBarrierError)
            return super().start_sync_execution(**kw)

    mod = load_handler("on_message")
    sfn = Meeting({"status": "SUCCEEDED", "output": json.dumps({"memories": [], "resources": [], "skills": [], "total": 0})})
    mod.services = world["services"](SFN_ARN, function="on_message", sfn=sfn)
    sessions = world["sessions"]
    a, b = sessions.create("acme").id, sessions.create("acme").id
    sessions.append("acme", a, "user", "refunds?")
    sessions.append("acme", b, "user", "travel?")
    assert mod.handler(_records((a, 1, "refunds?"), (b, 1, "travel?"))) == {"batchItemFailures": []}
    assert len(sfn.calls) == 2


def test_ingest_builds_the_tree_from_an_uploaded_payload(world, tmp_path):
    mod = load_handler("ingest")
    ev = event("ingest.json")
    s3 = ev["Records"][0]["s3"]
    payload = (EVENTS / "ingest_payload.json").read_bytes()
    store = LocalVectorStore(tmp_path / "fresh", dimension=384)
    mod.services = world["services"](function="ingest", store=store, s3=FakeS3({(s3["bucket"]["name"], s3["object"]["key"]): payload}))
    out = mod.handler(ev)
    report = out["objects"][0]
    assert report["tenant"] == "acme" and report["documents"] == 3 and report["error"] is None
    api = load_handler("api")
    serve_with(api, world["services"](store=store))
    found = body(api.handler(event("api/find.json")))
    assert found["resources"][0]["uri"] == REFUNDS


def test_ingest_refuses_keys_outside_a_tenant_prefix(world):
    mod = load_handler("ingest")
    ev = event("ingest.json")
    ev["Records"][0]["s3"]["object"]["key"] = "elsewhere/acme.json"
    mod.services = world["services"](function="ingest", s3=FakeS3({}))
    report = mod.handler(ev)["objects"][0]
    assert report["error"]["error"] == "bad_request" and "ingest/<tenant>/" in report["error"]["message"]


def test_ingest_takes_the_eventbridge_object_created_event(world, tmp_path):
    mod = load_handler("ingest")
    ev = event("ingest_eventbridge.json")
    detail = ev["detail"]
    payload = (EVENTS / "ingest_payload.json").read_bytes()
    store = LocalVectorStore(tmp_path / "fresh", dimension=384)
    mod.services = world["services"](function="ingest", store=store, s3=FakeS3({(detail["bucket"]["name"], detail["object"]["key"]): payload}))
    report = mod.handler(ev)["objects"][0]
    assert report["tenant"] == "acme" and report["documents"] == 3 and report["error"] is None


class DeletedS3:
    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:  # noqa: N803 - boto3's names
        from botocore.exceptions import ClientError

        raise ClientError({"Error": {"Code": "NoSuchKey", "Message": "The specified key does not exist."},
                           "ResponseMetadata": {"HTTPStatusCode": 404}}, "GetObject")


@pytest.mark.parametrize("poison", [None, {"Records": "not a list"}, {"Records": [{"s3": 1}]}, {"detail": []}, []])
def test_ingest_skips_poison_events_without_raising(world, poison):
    mod = load_handler("ingest")
    mod.services = world["services"](function="ingest", s3=FakeS3({}))
    assert mod.handler(poison) == {"objects": []}


def test_ingest_reports_a_deleted_or_too_deep_object_and_does_not_retry_it(world):
    mod = load_handler("ingest")
    mod.services = world["services"](function="ingest", s3=DeletedS3())
    report = mod.handler(event("ingest.json"))["objects"][0]
    assert report["error"]["error"] == "bad_request" and "NoSuchKey" in report["error"]["message"]
    ev = event("ingest.json")
    s3 = ev["Records"][0]["s3"]
    mod.services = world["services"](function="ingest", s3=FakeS3({(s3["bucket"]["name"], s3["object"]["key"]): b"[" * 100_000}))
    report = mod.handler(ev)["objects"][0]
    assert "not a JSON ingest payload" in report["error"]["message"]


@pytest.mark.parametrize(
    ("change", "status", "says"),
    [
        ({"filter": {"level": {"$near": 2}}}, 400, "$near"),
        ({"filter": {"uri": {"$in": [f"cairn://resources/handbook/doc-{n:05d}-{'x' * 40}.md" for n in range(1000)]}}},
         413, "the workflow takes at most"),
        ({"session_id": "nosuchsession"}, 404, "nosuchsession"),
    ],
)
def test_search_is_refused_before_the_workflow_starts(api, world, change, status, says):
    sfn = RecordingSFN({"status": "SUCCEEDED", "output": "{}"})
    serve_with(api, world["services"](SFN_ARN, sfn=sfn))
    ev = event("api/search.json")
    ev["body"] = json.dumps({**json.loads(ev["body"]), **change})
    resp = api.handler(ev)
    assert resp["statusCode"] == status and says in body(resp)["message"], body(resp)
    assert sfn.calls == []  # no execution, no paid planning


def test_time_budgets_nest_from_the_gateway_down_to_each_task():
    """API Gateway (30 s) > the API function > the StartSyncExecution read timeout > the workflow
    > each task's timeout times its attempts, with the waits between them."""
    from cairn.core.config import Settings

    SFN_READ_TIMEOUT_S = Settings().workflow_timeout_s  # noqa: N806
    machine = asl()
    workflow_s = machine["TimeoutSeconds"]
    template = (REPO / "template.yaml").read_text()
    api_block = template[template.index("  ApiFunction:"):]
    api_timeout = int(re.search(r"\n      Timeout: (\d+)", api_block).group(1))
    assert 30 > api_timeout > SFN_READ_TIMEOUT_S > workflow_s
    def tasks(states):
        for name, state in states.items():
            if state["Type"] == "Task":
                yield name, state
            if state["Type"] == "Map":
                yield from tasks(state["ItemProcessor"]["States"])
    def worst(state):  # every attempt times out, every wait is the longest
        retry = (state.get("Retry") or [{}])[0]
        attempts = 1 + retry.get("MaxAttempts", 0)
        waits = sum(min(retry.get("IntervalSeconds", 1) * retry.get("BackoffRate", 2) ** n, retry.get("MaxDelaySeconds", 10**6))
                    for n in range(attempts - 1))
        return state["TimeoutSeconds"] * attempts + waits

    found = dict(tasks(machine["States"]))
    longest = worst(found["Plan"]) + worst(found["Retrieve"]) + worst(found["Rerank"]) + worst(found["AssembleWithoutRerank"])
    assert longest < workflow_s, f"the longest path takes {longest} s, over the workflow's {workflow_s} s"
    # a task never gives up on a function that is still running: function timeout <= task timeout
    from tests.stack import Stack

    functions = Stack.load().functions
    for task, function in (("Plan", "PlanFunction"), ("Retrieve", "RetrieveFunction"), ("Rerank", "RerankFunction"),
                           ("AssembleWithoutRerank", "RerankFunction")):
        assert functions[function].timeout <= found[task]["TimeoutSeconds"], (task, function)


def test_a_throttled_workflow_start_is_a_503_with_retry_after(api, world):
    from botocore.exceptions import ClientError

    class Throttled:
        def start_sync_execution(self, **kw: Any) -> dict[str, Any]:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
                               "ResponseMetadata": {"HTTPStatusCode": 400}}, "StartSyncExecution")

    serve_with(api, world["services"](SFN_ARN, sfn=Throttled()))
    resp = api.handler(event("api/search.json"))
    assert resp["statusCode"] == 503 and resp["headers"]["Retry-After"] == "1" and body(resp)["retryable"] is True


def test_each_find_leaves_a_usage_record_with_its_tenant(api, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="cairn.usage")
    assert api.handler(event("api/find.json"))["statusCode"] == 200
    usage = [r for r in caplog.records if r.name == "cairn.usage" and r.getMessage() == "usage"]
    assert usage, "no usage record"
    fields = usage[-1].__dict__
    assert fields["tenant"] == "acme" and fields["operation"] == "find"
    assert fields["searches"] == 1 and fields["vector_calls"] >= 1 and fields["results"] >= 1


@pytest.mark.parametrize(
    ("body", "b64", "says"),
    [
        ("@@@not-base64", True, "not valid base64"),
        ('{"query": "x", "limit": ' + "9" * 5000 + "}", False, "4300 digits"),
        ('{"query": "x", "score_threshold": NaN}', False, "NaN is not a number JSON allows"),
        ('{"query": "x", "score_threshold": -Infinity}', False, "-Infinity is not a number"),
        ('{"query": "x", "score_threshold": 7}', False, "score_threshold: Input should be less than or equal to 1"),
        ('{"query": "\\ud800 refund"}', False, "unpaired surrogate"),
        ("[" * 100_000, False, "nested too deeply"),
    ],
)
def test_malformed_bodies_are_400s(api, body, b64, says):
    ev = event("api/find.json")
    ev["body"], ev["isBase64Encoded"] = body, b64
    resp = api.handler(ev)
    assert resp["statusCode"] == 400 and says in body_of(resp)["message"], resp["body"][:300]


def body_of(resp: dict[str, Any]) -> dict[str, Any]:
    return json.loads(resp["body"])


def test_a_lone_surrogate_is_refused_by_the_library_too(world):
    from cairn.core.errors import RequestError

    cairn = Cairn(world["services"](), "acme")
    with pytest.raises(RequestError, match="unpaired surrogate"):
        cairn.find("\ud800 refund")
    sid = world["sessions"].create("acme").id
    with pytest.raises(RequestError, match="unpaired surrogate"):
        world["sessions"].append("acme", sid, "user", "hi \udfff")


def test_the_prefetch_of_a_new_message_searches_its_users_memories_only(world):
    """on_message starts the workflow for the session's owner: the Plan and Retrieve tasks then read
    that user's memories and no other's (the tasks' side: test_workflow.py)."""
    sfn = RecordingSFN({"status": "SUCCEEDED", "output": json.dumps({"memories": [], "resources": [], "skills": [], "total": 0})})
    sid = world["sessions"].create("acme", "ann").id
    world["sessions"].append("acme", sid, "user", "Which food allergy do I have?")
    mod = load_handler("on_message")
    mod.services = world["services"](SFN_ARN, function="on_message", sfn=sfn)
    assert mod.handler(stream_event(sid, content="Which food allergy do I have?")) == {"batchItemFailures": []}
    sent = WorkflowInput.model_validate_json(sfn.calls[0]["input"])
    assert sent.request.user == "ann" and sent.session_id == sid and sent.tenant == "acme"


def test_a_backend_that_is_down_is_a_503_that_names_no_host(api, world):
    from cairn.core.errors import VectorStoreUnavailable

    class Down(UnavailableStore):
        def __getattr__(self, name: str) -> Any:
            if name.startswith("query"):
                def fail(*a: Any, **kw: Any) -> Any:  # the backend's own words name its host
                    raise VectorStoreUnavailable("opensearch backend failed: ConnectionError: http://10.0.3.7:9200 refused")

                return fail
            return getattr(self.real, name)

    serve_with(api, world["services"](store=Down(world["store"])))
    resp = api.handler(event("api/find.json"))
    assert resp["statusCode"] == 503 and resp["headers"]["Retry-After"] == "1"
    assert "10.0.3.7" not in resp["body"] and "9200" not in resp["body"]
    assert body(resp)["error"] == "vector_store_unavailable" and body(resp)["retryable"] is True


def test_the_api_writes_its_use_counts_before_it_returns(api, world):
    """Lambda freezes the container between invocations (and the recorder's thread): the counts of
    what a find returned are written when the handler returns, not some time later."""
    resp = api.handler(event("api/find.json"))
    assert resp["statusCode"] == 200
    recorder = api.services.__dict__.get("recorder")
    assert recorder is not None and recorder.pending() == 0


def test_a_snapstart_init_builds_every_client_before_the_snapshot(monkeypatch, tmp_path):
    """With SnapStart (or provisioned concurrency) the api function's init builds the settings and
    the AWS and backend clients, so the snapshot holds them and no request pays for them."""
    monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", "snap-start")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path))
    monkeypatch.setenv("CAIRN_RATE_LIMITS", "5/second")
    monkeypatch.setenv("CAIRN_RATE_LIMIT_TABLE", "cairn-ratelimits")
    path = REPO / "functions" / "api" / "app.py"
    spec = importlib.util.spec_from_file_location("cairn_function_api_snapstart", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    built = set(module.services.__dict__)
    assert {"settings", "sfn", "sessions", "content", "store", "embedder", "limiter"} <= built, built
    assert module.services.limiter.counter._client is not None
    monkeypatch.delenv("AWS_LAMBDA_INITIALIZATION_TYPE")
    spec.loader.exec_module(module)  # an on-demand init builds nothing before its first request
    assert "sfn" not in module.services.__dict__


@pytest.mark.parametrize("function, prepared", [("retrieve", {"settings", "store", "embedder"}),
                                                ("rerank", {"settings", "store", "embedder", "reranker"})])
def test_a_workflow_functions_snapstart_init_builds_its_clients(monkeypatch, tmp_path, function, prepared):
    """WorkflowSnapStart / WorkflowProvisionedConcurrency: the init of retrieve and rerank builds the
    store and the embedder (their clients) before the snapshot; an on-demand init builds none."""
    monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", "snap-start")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path))
    path = REPO / "functions" / function / "app.py"
    spec = importlib.util.spec_from_file_location(f"cairn_function_{function}_snapstart", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    assert prepared <= set(module.services.__dict__), set(module.services.__dict__)
    monkeypatch.delenv("AWS_LAMBDA_INITIALIZATION_TYPE")
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    assert not {"store", "embedder"} & set(module.services.__dict__)
