"""The real workflow definition, executed by moto's Step Functions interpreter, calling the
project's Lambda handlers in process.

How: a ``ThreadedMotoServer`` on 127.0.0.1 runs in this process. Its config endpoint
(``POST /moto-api/config``) switches on ``stepfunctions.execute_state_machine`` (moto then runs
the ASL with its interpreter; ``lambda.use_docker`` stays on, or moto would answer invocations
from its echoing "simple" backend, but Docker is never reached). The plan / retrieve / rerank
functions are created in moto's Lambda with real boto3 calls (a placeholder zip), and the one
fixture ``handlers_in_process`` patches ``moto.awslambda.models.LambdaFunction.invoke`` so that
invoking a function calls ``functions/<name>/app.py:handler`` with the payload, answering as the
Lambda Python runtime does (a raised exception becomes ``FunctionError: Unhandled`` with
``{"errorMessage", "errorType", "stackTrace"}``). So every Task goes: interpreter → boto3
``lambda.invoke`` over HTTP → moto → our handler, and Retry/Catch see the real error names.
"""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest

from cairn import Cairn
from cairn.app.services import Services
from cairn.app.workflow import WorkflowInput
from cairn.core.config import load_settings
from cairn.core.models import FindResult, QueryPlan
from cairn.core.requests import FindRequest
from cairn.engine.ingest import Document, Ingestor
from cairn.ports.sessions import open_session_store
from cairn.ports.vectorstores.local import LocalVectorStore
from tests.fakes import UnavailableStore
from tests.ports import free_port, fresh_moto
from tests.stack import as_deployed

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ASL = REPO / "infra" / "statemachine" / "retrieval.asl.json"
REGION = "us-east-1"
TABLE = "cairn-sessions"
FUNCTIONS = ("plan", "retrieve", "rerank")
ALIAS = "live"  # template.yaml's AutoPublishAlias: the state machine invokes each function's alias
DEPLOYED: dict[str, str] = {}  # function -> the version this deploy published (what its alias must point at)
REFUNDS = "cairn://resources/handbook/billing/refunds.md"
DOCS = [
    Document(("billing", "refunds.md"), "Customers can request a refund within 30 days of purchase. "
             "Refunds are paid back to the original card within five business days."),
    Document(("billing", "invoices.md"), "Invoices are emailed on the first day of each month. "
             "Past invoices can be downloaded as PDF from the billing page."),
    Document(("travel", "expenses.md"), "Employees book flights through the travel portal. "
             "Hotel costs above 200 euros per night need a manager's approval."),
]


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"cairn_workflow_fn_{name}", REPO / "functions" / name / "app.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return as_deployed(module, name)  # given only what the deployed function has


@pytest.fixture(scope="module")
def moto_server():
    """A moto server that executes state machines; env and config restored afterwards."""
    import requests
    from moto.server import ThreadedMotoServer

    mp = pytest.MonkeyPatch()
    port = free_port()
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": REGION, "MOTO_PORT": str(port)}.items():
        mp.setenv(key, value)  # MOTO_PORT: where the interpreter's own boto3 clients (lambda.invoke) go
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = fresh_moto(f"http://127.0.0.1:{port}")
    before = requests.get(f"{endpoint}/moto-api/config", timeout=10).json()
    # keep lambda.use_docker on: with it off moto swaps in its "simple" Lambda backend, which echoes
    # payloads instead of calling LambdaFunction.invoke (patched below; Docker itself is never used)
    requests.post(f"{endpoint}/moto-api/config", timeout=10, json={"stepfunctions": {"execute_state_machine": True}})
    yield endpoint
    requests.post(f"{endpoint}/moto-api/config", timeout=10,
                  json={"stepfunctions": before.get("stepfunctions", {"execute_state_machine": False})})
    server.stop()
    mp.undo()


@pytest.fixture(scope="module")
def handlers(tmp_path_factory, embedder, moto_server):
    """The plan/retrieve/rerank handler modules over one local store holding acme's handbook,
    with sessions in a DynamoDB table on the moto server."""
    import boto3

    from cairn.ports.sessions.dynamodb import create_table

    home = tmp_path_factory.mktemp("cairn")
    store = LocalVectorStore(home / "store", dimension=embedder.dimension)
    Ingestor(store, embedder, "acme").ingest(DOCS, "cairn://resources/handbook")
    create_table(boto3.client("dynamodb", region_name=REGION, endpoint_url=moto_server), TABLE)
    sessions = open_session_store("dynamodb", table=TABLE, region=REGION, endpoint_url=moto_server)
    settings = load_settings(env={"CAIRN_HOME": str(home), "CAIRN_RERANKER": "local"})  # a reranker in the workflow
    mods = {name: _load(name) for name in FUNCTIONS}
    mods["plan"].services = Services(settings, store=store, embedder=embedder, sessions=sessions)
    for name in ("retrieve", "rerank"):  # no session access: their roles grant none
        mods[name].services = Services(settings, store=store, embedder=embedder)
    return {"modules": mods, "store": store, "sessions": sessions, "settings": settings, "embedder": embedder}


@pytest.fixture(scope="module")
def handlers_in_process(moto_server, handlers):
    """Route moto's Lambda invocations to the handler modules, as the Lambda Python runtime would."""
    from moto.awslambda.models import LambdaFunction

    calls: list[tuple[str, dict[str, Any]]] = []

    def invoke(self: Any, body: str, request_headers: Any, response_headers: Any) -> bytes:
        name = self.function_name.removeprefix("cairn-")
        event = json.loads(body) if body else {}
        calls.append((name, event))
        try:
            if str(self.version) != DEPLOYED.get(name):  # $LATEST or an older version: not this deploy's code
                raise RuntimeError(f"cairn-{name} version {self.version} invoked; this deploy published {DEPLOYED.get(name)}")
            result = handlers["modules"][name].handler(event, None)
        except Exception as exc:  # the runtime's error payload: the exception's class name is errorType
            response_headers["x-amz-function-error"] = "Unhandled"
            payload = {"errorMessage": str(exc), "errorType": type(exc).__name__, "stackTrace": []}
            return json.dumps(payload).encode()
        return json.dumps(result).encode()

    mp = pytest.MonkeyPatch()
    mp.setattr(LambdaFunction, "invoke", invoke)
    yield calls
    mp.undo()


def _zip(deploy: str = "an earlier deploy") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", f"# {deploy}\ndef handler(event, context):\n    raise RuntimeError('replaced in tests')\n")
    return buf.getvalue()


@pytest.fixture(scope="module")
def state_machine(moto_server, handlers_in_process):
    import boto3

    iam = boto3.client("iam", region_name=REGION, endpoint_url=moto_server)
    role = iam.create_role(RoleName="cairn-test", AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"},
                                                "Action": "sts:AssumeRole"}]}))["Role"]["Arn"]
    lam = boto3.client("lambda", region_name=REGION, endpoint_url=moto_server)
    arns = _deployed_aliases(lam, role)
    definition = ASL.read_text()
    for key, arn in arns.items():  # what SAM's DefinitionSubstitutions do at deploy time
        definition = definition.replace("${" + key + "}", arn)
    sfn = boto3.client("stepfunctions", region_name=REGION, endpoint_url=moto_server)
    # deployed as EXPRESS (template.yaml); STANDARD here because the test waits with DescribeExecution,
    # which AWS offers for standard executions only, and moto's interpreter runs both types alike
    arn = sfn.create_state_machine(name="cairn-retrieval", definition=definition, roleArn=role,
                                   type="STANDARD")["stateMachineArn"]
    return sfn, arn


def _deployed_aliases(lam: Any, role: str) -> dict[str, str]:
    """Each function as two deploys leave it (AutoPublishAlias): version 1 of an earlier deploy,
    version 2 of this one, and the alias ``live`` on version 2. The definition gets the alias's
    qualified ARN, as template.yaml substitutes ``!Ref <Function>.Alias``; only version 2 runs the
    handler (``handlers_in_process``), so an alias on the wrong version fails the workflow."""
    arns = {}
    for name in FUNCTIONS:
        lam.create_function(FunctionName=f"cairn-{name}", Runtime="python3.12", Role=role, Handler="app.handler",
                            Code={"ZipFile": _zip()}, Architectures=["arm64"])
        lam.publish_version(FunctionName=f"cairn-{name}", Description="an earlier deploy")
        lam.update_function_code(FunctionName=f"cairn-{name}", ZipFile=_zip("this deploy"))
        DEPLOYED[name] = lam.publish_version(FunctionName=f"cairn-{name}", Description="this deploy")["Version"]
        alias = lam.create_alias(FunctionName=f"cairn-{name}", Name=ALIAS, FunctionVersion=DEPLOYED[name])
        assert alias["AliasArn"].endswith(f":cairn-{name}:{ALIAS}")
        arns[f"{name.capitalize()}FunctionArn"] = alias["AliasArn"]
    return arns


def run(sfn: Any, arn: str, start: WorkflowInput, timeout_s: float = 30) -> dict[str, Any]:
    name = uuid.uuid4().hex  # moto's interpreter names every unnamed execution "None"
    execution = sfn.start_execution(stateMachineArn=arn, name=name, input=start.model_dump_json())["executionArn"]
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        desc = sfn.describe_execution(executionArn=execution)
        if desc["status"] != "RUNNING":
            return desc
        time.sleep(0.1)
    raise AssertionError(f"execution still running after {timeout_s}s")


def test_the_workflow_runs_end_to_end(state_machine, handlers_in_process):
    sfn, arn = state_machine
    handlers_in_process.clear()
    start = WorkflowInput(tenant="acme", request=FindRequest(query="how long do refunds take to reach my card?",
                                                              limit=3, mode="thinking"))
    desc = run(sfn, arn, start)
    if desc["status"] != "SUCCEEDED":
        print(json.dumps(sfn.get_execution_history(executionArn=desc["executionArn"])["events"], default=str, indent=1)[:6000])
    assert desc["status"] == "SUCCEEDED", desc
    result = FindResult.model_validate(json.loads(desc["output"]))
    assert result.resources[0].uri == REFUNDS
    assert result.query_plan is not None and result.query_plan.queries
    assert [name for name, _ in handlers_in_process] == ["plan", "retrieve", "rerank"]


def test_the_workflow_invokes_each_alias_and_fails_when_it_points_at_another_version(moto_server, state_machine):
    """The definition holds qualified alias ARNs, as the template substitutes them; an alias left
    on the earlier deploy's version runs that version's code, and the workflow says so."""
    import boto3

    sfn, arn = state_machine
    definition = json.loads(sfn.describe_state_machine(stateMachineArn=arn)["definition"])
    plan_arn = definition["States"]["Plan"]["Resource"]
    assert plan_arn.endswith(f":function:cairn-plan:{ALIAS}"), plan_arn
    lam = boto3.client("lambda", region_name=REGION, endpoint_url=moto_server)
    lam.update_alias(FunctionName="cairn-plan", Name=ALIAS, FunctionVersion="1")
    try:
        desc = run(sfn, arn, WorkflowInput(tenant="acme", request=FindRequest(query="refunds", limit=3)))
    finally:
        lam.update_alias(FunctionName="cairn-plan", Name=ALIAS, FunctionVersion=DEPLOYED["plan"])
    assert desc["status"] == "FAILED", desc
    assert "cairn-plan version 1 invoked" in json.dumps(desc, default=str) + json.dumps(
        sfn.get_execution_history(executionArn=desc["executionArn"])["events"], default=str)


def test_a_zero_query_plan_succeeds_with_an_empty_result(state_machine, handlers, handlers_in_process):
    class NothingToRetrieve:
        name = "empty"

        def plan(self, query, session=None, *, context_type=None, target_uris=()):
            return QueryPlan(reasoning="chit-chat", queries=(), planner="empty")

    sfn, arn = state_machine
    plan_mod = handlers["modules"]["plan"]
    saved = plan_mod.services
    plan_mod.services = Services(handlers["settings"], planner=NothingToRetrieve(), sessions=handlers["sessions"])
    handlers_in_process.clear()
    try:
        desc = run(sfn, arn, WorkflowInput(tenant="acme", request=FindRequest(query="thanks, bye!")))
    finally:
        plan_mod.services = saved
    assert desc["status"] == "SUCCEEDED", desc
    out = json.loads(desc["output"])
    assert out["total"] == 0 and out["query_plan"]["planner"] == "empty"
    assert [name for name, _ in handlers_in_process] == ["plan"]


def test_retryable_errors_are_retried_then_fail_with_the_task_error(state_machine, handlers, handlers_in_process):
    sfn, arn = state_machine
    mod = handlers["modules"]["retrieve"]
    saved = mod.services
    mod.services = Services(handlers["settings"], store=UnavailableStore(handlers["store"]), embedder=handlers["embedder"])
    handlers_in_process.clear()
    try:
        desc = run(sfn, arn, WorkflowInput(tenant="acme", request=FindRequest(query="refund")), timeout_s=60)
    finally:
        mod.services = saved
    assert desc["status"] == "FAILED", desc
    assert desc.get("error") == "CairnRetryableError"
    cause = json.loads(json.loads(desc["cause"])["errorMessage"])
    assert cause["error"] == "vector_store_unavailable" and cause["retryable"] is True
    retrieves = [name for name, _ in handlers_in_process if name == "retrieve"]
    assert len(retrieves) == 2  # the first attempt and 1 retry (MaxAttempts: the budget allows no more)


class SyncOverStartExecution:
    """StartSyncExecution (which moto lacks) done as StartExecution + DescribeExecution on moto."""

    def __init__(self, sfn: Any) -> None:
        self.sfn = sfn

    def start_sync_execution(self, stateMachineArn: str, input: str) -> dict[str, Any]:  # noqa: N803, A002
        desc = run(self.sfn, stateMachineArn, WorkflowInput.model_validate_json(input))
        return {k: v for k, v in desc.items() if k in ("executionArn", "status", "output", "error", "cause")}


def stream_records(moto_server: str, session_id: str) -> list[dict[str, Any]]:
    """The table's stream records of one session, as DynamoDB Streams serves them."""
    import boto3

    ddb = boto3.client("dynamodb", region_name=REGION, endpoint_url=moto_server)
    streams = boto3.client("dynamodbstreams", region_name=REGION, endpoint_url=moto_server)
    arn = ddb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    records = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")
        records += streams.get_records(ShardIterator=it["ShardIterator"])["Records"]
    return [r for r in records if session_id in json.dumps(r["dynamodb"].get("Keys", {}))]


def matches_filter(record: dict[str, Any]) -> bool:
    """The event source mapping's filter in template.yaml: inserted user messages."""
    image = record["dynamodb"].get("NewImage", {})
    return record["eventName"] == "INSERT" and image.get("type") == {"S": "message"} and image.get("role") == {"S": "user"}


def test_a_new_user_message_prefetches_context_through_the_workflow(moto_server, state_machine, handlers):
    """DynamoDB stream (moto) → on_message → the workflow (moto) → prefetched context in the session."""
    sfn, arn = state_machine
    sessions = handlers["sessions"]
    sid = sessions.create("acme", "ann").id
    sessions.append("acme", sid, "assistant", "Hello! How can I help?")
    sessions.append("acme", sid, "user", "How long until a refund reaches my card?")
    records = [r for r in stream_records(moto_server, sid) if matches_filter(r)]
    assert len(records) == 1
    sample = json.loads((REPO / "events" / "on_message.json").read_text())["Records"][0]["dynamodb"]["NewImage"]
    assert set(records[0]["dynamodb"]["NewImage"]) == set(sample)  # the sample event has the real shape

    on_message = _load("on_message")
    on_message.services = Services(handlers["settings"].model_copy(update={"state_machine_arn": arn}), sessions=sessions,
                                   sfn=SyncOverStartExecution(sfn))
    event = {"Records": [{**r, "dynamodb": {**r["dynamodb"], "SequenceNumber": str(r["dynamodb"]["SequenceNumber"])}}
                         for r in records]}
    assert on_message.handler(json.loads(json.dumps(event, default=str))) == {"batchItemFailures": []}
    prefetched = sessions.get("acme", sid).prefetched
    assert prefetched is not None and prefetched["resources"][0]["uri"] == REFUNDS
    assert prefetched["query_plan"]["queries"]


@pytest.mark.parametrize("limit", [5, 100])
def test_search_with_a_session_gives_the_same_ranked_uris_in_process_and_through_the_workflow(
    moto_server, state_machine, handlers, handlers_in_process, limit
):
    """One composition root: the Lambda path plans with the same entity scoping, threshold and
    reranker as Cairn in process, so the same request over the same data ranks the same URIs."""
    from cairn.app import workflow
    from cairn.core.requests import FindRequest

    sfn, arn = state_machine
    sessions = handlers["sessions"]
    sid = sessions.create("acme", "ann").id
    sessions.append("acme", sid, "user", "I bought the annual plan and I want my money back.")
    request = FindRequest(query="how long does it take to reach my card?", mode="thinking", limit=limit, score_threshold=0.2)
    local = Services(handlers["settings"], store=handlers["store"], embedder=handlers["embedder"], sessions=sessions)
    in_process = Cairn(local, "acme").search(request, sid).to_dict()
    deployed = Services(handlers["settings"].model_copy(update={"state_machine_arn": arn}), store=handlers["store"],
                        embedder=handlers["embedder"], sessions=sessions, sfn=SyncOverStartExecution(sfn))
    through_workflow = workflow.search(deployed, "acme", request, sid)

    def ranked(result: dict[str, Any]) -> list[tuple[str, float]]:
        return [(m["uri"], round(m["score"], 4)) for bucket in ("memories", "resources", "skills") for m in result[bucket]]

    assert ranked(through_workflow) == ranked(in_process) and ranked(in_process)
    assert all(score > 0.2 for _, score in ranked(in_process))  # the request's threshold reached the final cut
    assert through_workflow["query_plan"] == in_process["query_plan"]
    # nothing cut on the way: the same abstracts (the state carried references, read back whole)
    assert [m["abstract"] for m in through_workflow["resources"]] == [m["abstract"] for m in in_process["resources"]]


def test_a_failed_rerank_task_still_answers_with_the_retrieval_order(state_machine, handlers, handlers_in_process):
    """The Catch on Rerank: the candidates are in the state already, so the search answers with
    them in retrieval order, and the trace says the reranker failed."""
    sfn, arn = state_machine
    mod = handlers["modules"]["rerank"]
    real = mod.handler

    def crashing(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        if event.get("rerank") and not event.get("rerank_failure"):
            raise RuntimeError("out of memory")  # a crash, not a cairn error: no retry helps
        return real(event, context)

    mod.handler = crashing
    handlers_in_process.clear()
    try:
        start = WorkflowInput(tenant="acme", request=FindRequest(query="how long do refunds take?", include_provenance=True))
        desc = run(sfn, arn, start.model_copy(update={"rerank": True}))
    finally:
        mod.handler = real
    assert desc["status"] == "SUCCEEDED", desc
    out = json.loads(desc["output"])
    assert out["resources"] and out["resources"][0]["uri"] == REFUNDS
    stats = out["provenance"][0]["trace"]["stats"]
    assert stats["rerank_used"] is False and stats["rerank_fallback"] == "error"
    assert [name for name, _ in handlers_in_process].count("rerank") == 2  # the failed task, then the fallback


class TwoQueries:
    """A planner that asks for resources and for memories (two Map iterations)."""

    name = "two"

    def plan(self, query, session=None, *, context_type=None, target_uris=()):
        from cairn.core.models import ContextType, QueryPlan, TypedQuery

        return QueryPlan(reasoning="both", planner=self.name, queries=(
            TypedQuery(query=query, context_type=ContextType.RESOURCE), TypedQuery(query=query, context_type=ContextType.MEMORY)))


def test_a_failed_map_iteration_gives_partial_results_with_a_trace(state_machine, handlers, handlers_in_process):
    sfn, arn = state_machine
    plan_mod, retrieve_mod = handlers["modules"]["plan"], handlers["modules"]["retrieve"]
    saved_services, real_retrieve = plan_mod.services, retrieve_mod.handler

    def memories_crash(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        if event["query"]["context_type"] == "memory":
            raise RuntimeError("the memory index is on fire")
        return real_retrieve(event, context)

    plan_mod.services = Services(handlers["settings"], planner=TwoQueries(), sessions=handlers["sessions"],
                                 store=handlers["store"], embedder=handlers["embedder"])
    retrieve_mod.handler = memories_crash
    try:
        start = WorkflowInput(tenant="acme", request=FindRequest(query="how long do refunds take?", include_provenance=True))
        desc = run(sfn, arn, start)
    finally:
        plan_mod.services, retrieve_mod.handler = saved_services, real_retrieve
    assert desc["status"] == "SUCCEEDED", desc
    out = json.loads(desc["output"])
    assert out["resources"][0]["uri"] == REFUNDS  # the resources query still answers
    memory_trace = next(p for p in out["provenance"] if p["query"]["context_type"] == "memory")
    assert any("retrieval failed" in e["detail"] for e in memory_trace["trace"]["events"])
