"""The deployed stack, tested as packaged (tests/deployment.py): every function its own process
with only its folder, the layers template.yaml attaches and what the Lambda runtime provides; the
real workflow on moto; the Pinecone and OpenSearch emulators; Bedrock on the embeddings emulator.

Through the doors AWS would use: an S3 upload delivered to the ingest function, an HTTP API event
to the api function (which starts the state machine with a real StartSyncExecution), the
sessions table's stream records to on_message.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.deployment import HOST_LAYERS, LLM_MODEL, RATE_TABLE, STATE_LIMIT, Deployment, host_build

# one worker builds build/package-host and runs every function from it (make test: --dist loadfile);
# a second worker building the same folder at once would delete files the first is copying or importing
pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]

REFUNDS = "cairn://resources/handbook/billing/refunds.md"
HANDBOOK = {
    "root_uri": "cairn://resources/handbook",
    "documents": [
        {"path": "billing/refunds.md", "text": "Customers can request a refund within 30 days of purchase. "
         "Refunds are paid back to the original card within five business days."},
        {"path": "billing/invoices.md", "text": "Invoices are emailed on the first day of each month. "
         "Past invoices can be downloaded as PDF from the billing page."},
        {"path": "travel/expenses.md", "text": "Employees book flights through the travel portal. "
         "Hotel costs above 200 euros per night need a manager's approval."},
    ],
}
TOPICS = ("refund", "invoice", "travel", "hotel", "card", "payment", "policy", "manager", "portal", "month")


def _notes(count: int = 240) -> dict[str, Any]:
    """Many short notes that share words with the queries: enough candidates for limit 100."""
    docs = []
    for i in range(count):
        words = [TOPICS[(i + k) % len(TOPICS)] for k in range(4)]
        docs.append({"path": f"team{i % 12}/note{i}.md",
                     "text": f"Note {i} about the {words[0]} and {words[1]} rules: how the {words[2]} relates to "
                             f"the {words[3]} for case {i * 7 % 101}."})
    return {"root_uri": "cairn://resources/notes", "documents": docs}


def _plan(*queries: tuple[str, str]) -> str:
    return json.dumps({"reasoning": "typed queries", "queries": [
        {"query": q, "context_type": ct, "intent": "find", "priority": 1} for q, ct in queries]})


@pytest.fixture(scope="session")
def packaged():
    return host_build()


@pytest.fixture(scope="module", params=["opensearch", "pinecone"])
def deployment(request, packaged, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"deployed-{request.param}")
    parameters = {"LlmProvider": "bedrock", "LlmModel": LLM_MODEL, "TenantRateLimitOverrides": json.dumps({"trial": "3/hour"})}
    with Deployment.start(tmp, request.param, parameters=parameters, paths=packaged) as dep:
        for logical, pool in ((lg, dep.function(lg)) for lg in dep.stack.functions):
            pool.warm(5 if logical == "RetrieveFunction" else 1)  # the Map runs 5 retrieves at once
        assert dep.ingest("handbook.json", HANDBOOK)["objects"][0]["error"] is None
        assert dep.ingest("notes.json", _notes())["objects"][0]["error"] is None
        yield dep


def _uris(body: dict[str, Any]) -> list[str]:
    return [m["uri"] for bucket in ("memories", "resources", "skills") for m in body[bucket]]


def _search(dep: Deployment, query: str, limit: int, plan: str | None = None, **extra: Any) -> tuple[int, Any]:
    dep.emulators["bedrock"].converse_for[query] = plan or _plan((query, "resource"))
    dep.invocations.clear()
    return dep.api("POST", "/v1/search", {"query": query, "limit": limit, **extra})


def _count(dep: Deployment, logical: str, operation: str) -> int:
    return sum(1 for c in dep.function(logical).recorded() if c.get("operation") == operation)


def test_search_answers_through_the_packaged_workflow(deployment):
    embeds_before = _count(deployment, "RerankFunction", "InvokeModel")
    status, body = _search(deployment, "how long until a refund reaches my card", 5)
    assert status == 200, body
    assert _uris(body)[0] == REFUNDS
    assert "five business days" in body["resources"][0]["text"]  # the answer text travels back through the states
    assert body["query_plan"]["queries"][0]["query"] == "how long until a refund reaches my card"
    called = sorted(i.function for i in deployment.invocations)  # each packaged function once, none failed
    assert called == ["ApiFunction", "PlanFunction", "RerankFunction", "RetrieveFunction"]
    # the reranker scored the stored vectors: one Bedrock embedding (the query), no candidate re-embedded
    assert _count(deployment, "RerankFunction", "InvokeModel") - embeds_before == 1
    assert all(i.error is None for i in deployment.invocations)


def _lines(dep: Deployment, logical: str, since: int) -> list[dict[str, Any]]:
    out = []
    for line in dep.logs(logical)[since:]:
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


KITCHEN = {"root_uri": "cairn://resources/kitchen", "documents": [
    {"path": "stew.md", "text": "Beef stew: brown the beef, add onions and wine, simmer; a dinner for cold nights."},
    {"path": "curry.md", "text": "Lentil curry: a quick dinner for tonight, strictly vegetarian, meatless food."},
    {"path": "salad.md", "text": "Greek salad: tomatoes, cucumber and feta, a quick dinner."},
]}


def test_a_standing_fact_that_bears_on_the_question_travels_through_the_workflow(deployment):
    """An LLM's typed plan through the packaged functions: the resource query brings the user's standing
    fact that its pages bear on (cairn.engine.retrieval.profile), without its vector in the states."""
    assert deployment.api("PUT", "/v1/documents", KITCHEN)[0] == 200
    status, kept = deployment.api("POST", "/v1/memories", {"user": "ann", "text": "Ann eats strictly vegetarian, meatless food.", "category": "preferences",
                                                           "key": "diet"})
    assert status == 201, kept
    sid = deployment.api("POST", "/v1/sessions", {"user": "ann"})[1]["id"]
    status, body = _search(deployment, "what should I cook tonight for dinner", 5, session_id=sid, include_provenance=True)
    assert status == 200, body
    assert "cairn://user/ann/memories/preferences/diet" in [m["uri"] for m in body["memories"][:3]]
    reasons = {m["uri"]: m["reason"] for q in body["provenance"] for m in q["matches"]}
    assert reasons["cairn://user/ann/memories/preferences/diet"] == "standing-fact"
    assert all(i.error is None for i in deployment.invocations)
    bob = deployment.api("POST", "/v1/sessions", {"user": "bob"})[1]["id"]
    status, body = _search(deployment, "what should I cook tonight for dinner", 5, session_id=bob)
    assert status == 200 and not [m for m in body["memories"] if "/user/ann/" in m["uri"]]


def test_one_correlation_id_from_the_api_request_through_every_task(deployment):
    """API Gateway's requestId is the correlation_id of every log line of every task of that
    request's workflow, and the metadata of the api function's metrics."""
    tasks = ("PlanFunction", "RetrieveFunction", "RerankFunction")
    before = {lg: len(deployment.logs(lg)) for lg in ("ApiFunction", *tasks)}
    plan = _plan(("refund card", "resource"), ("invoice month", "resource"))
    deployment.emulators["bedrock"].converse_for["refunds and invoices"] = plan
    status, body = deployment.api("POST", "/v1/search", {"query": "refunds and invoices", "limit": 3},
                                  request_id="req-correlated-42")
    assert status == 200, body
    for logical in tasks:
        logged = [d for d in _lines(deployment, logical, before[logical]) if "level" in d]  # the logger's lines
        assert logged, f"{logical} logged nothing for the request"
        assert {d.get("correlation_id") for d in logged} == {"req-correlated-42"}, (logical, logged[:3])
    assert len([d for d in _lines(deployment, "RetrieveFunction", before["RetrieveFunction"])
                if d.get("message") == "task started"]) == 2  # one per typed query
    api_metrics = [d for d in _lines(deployment, "ApiFunction", before["ApiFunction"]) if "_aws" in d]
    assert any(d.get("operation") == "search" and d.get("correlation_id") == "req-correlated-42" for d in api_metrics)


def test_limit_100_with_five_typed_queries_keeps_every_state_under_256_kb(deployment):
    plan = _plan(("refund card rules", "resource"), ("invoice month rules", "resource"), ("travel hotel policy", "resource"),
                 ("manager portal", "resource"), ("payment policy", "resource"))
    status, body = _search(deployment, "refund invoice travel payment manager", 100, plan=plan, include_provenance=True)
    assert status == 200, body
    assert body.get("query_plan") and len(body["query_plan"]["queries"]) == 5, (
        {k: str(v)[:300] for k, v in body.items()}, [(i.function, i.error, str(i.payload)[:300]) for i in deployment.invocations])
    assert len(body["resources"]) >= 100  # five typed queries, up to 100 each, deduplicated by URI
    retrieves = [i for i in deployment.invocations if i.function == "RetrieveFunction"]
    assert len(retrieves) == 5
    for inv in deployment.invocations:
        if inv.function == "ApiFunction":
            continue  # the API's answer is no state (API Gateway allows 6 MB)
        assert inv.request_bytes < STATE_LIMIT and inv.response_bytes < STATE_LIMIT, (inv.function, inv.request_bytes,
                                                                                      inv.response_bytes)
    rerank = next(i for i in deployment.invocations if i.function == "RerankFunction")
    assert sum(len(out["candidates"]) for out in rerank.event["retrieved"]) >= 500  # 2 x limit... per typed query


def test_a_new_user_message_prefetches_context(deployment):
    status, session = deployment.api("POST", "/v1/sessions", {"user": "ann"})
    assert status in (200, 201), session
    sid = session["id"]
    status, _ = deployment.api("POST", f"/v1/sessions/{sid}/messages", {"role": "user", "content": "How long until a refund reaches my card?"})
    assert status in (200, 201)
    mine = deployment.new_user_messages(sid)  # what the event source mapping hands on_message
    assert len(mine) == 1
    deployment.emulators["bedrock"].converse_for["How long until a refund reaches my card?"] = _plan(("refund card", "resource"))
    out, error = deployment.invoke(deployment.stack.functions["OnMessageFunction"].name, {"Records": mine})
    assert error is None and out == {"batchItemFailures": []}, out
    status, got = deployment.api("GET", f"/v1/sessions/{sid}")
    assert status == 200
    assert got["prefetched"] is not None and got["prefetched"]["resources"][0]["uri"] == REFUNDS


def test_a_tenant_over_its_quota_is_refused_by_every_api_instance_while_another_is_served(deployment):
    """The limits are counted in the DynamoDB table every api container shares: three requests of
    tenant 'trial' an hour, spread over two containers, then 429 with Retry-After from either."""
    import boto3

    deployment.function("ApiFunction").warm(2)
    answers = [deployment.api("GET", "/v1/me", tenant="trial", container=i % 2) for i in range(3)]
    assert [status for status, _ in answers] == [200, 200, 200], answers
    for container in (0, 1):
        status, body = deployment.api("GET", "/v1/me", tenant="trial", container=container)
        assert status == 429, body
        assert body["error"] == "rate_limited" and body["details"]["limit"] == "3/hour", body
        assert "tenant 'trial' is over its rate limit of 3 requests per hour" in body["message"]
        assert int(deployment.last["headers"]["Retry-After"]) == body["details"]["retry_after_s"] > 0
    for container in (0, 1):  # acme has the stack's default (25/second): served
        assert deployment.api("GET", "/v1/me", container=container)[0] == 200
    ddb = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=deployment.moto_url)
    items = ddb.scan(TableName=RATE_TABLE)["Items"]
    trial = [i for i in items if i["pk"]["S"].startswith("trial/hour/")]
    assert len(trial) == 1 and trial[0]["n"] == {"N": "3"} and int(trial[0]["expires_at"]["N"]) > 0


def _every_path(dep: Deployment) -> None:
    """The api function's other doors: documents, contents, find, a session committed to memories."""
    status, _ = dep.api("PUT", "/v1/documents", {"root_uri": "cairn://resources/faq",
                                                 "documents": [{"path": "cards.md", "text": "Lost cards are blocked at once."}]})
    assert status == 200
    status, body = dep.api("GET", "/v1/contents", query="uri=cairn://resources/faq/cards.md&level=2")
    assert status == 200 and "blocked" in json.dumps(body)
    status, _ = dep.api("POST", "/v1/find", {"query": "lost card", "limit": 3})
    assert status == 200
    status, session = dep.api("POST", "/v1/sessions", {"user": "ann"})
    sid = session["id"]
    dep.api("POST", f"/v1/sessions/{sid}/messages", {"role": "user", "content": "I prefer refunds to my card."})
    status, _ = dep.api("POST", f"/v1/sessions/{sid}/commit", {})
    assert status == 200


def _denied(dep: Deployment, stack: Any) -> dict[str, list[str]]:
    from urllib.parse import urlparse

    from tests.iam import denied, requests_of

    host = urlparse(dep.stack.parameters["OpenSearchUrl"]).netloc if dep.backend == "opensearch" else None
    out = {}
    for logical in stack.functions:
        requests = requests_of(dep.function(logical).recorded(), opensearch_host=host)
        bad = denied(stack.role_statements(logical), requests)
        if bad:
            out[logical] = [str(r) for r in bad]
    return out


def test_every_aws_call_a_function_makes_is_allowed_by_its_own_role(deployment):
    """What each packaged function called on every path above (recorded in its process), as IAM
    requests, checked against its role in the translated template — and the check can fail."""
    from tests.stack import Stack

    _every_path(deployment)
    assert _denied(deployment, deployment.stack) == {}
    called = {lg: {c.get("operation") for c in deployment.function(lg).recorded() if c["kind"] == "aws"}
              for lg in deployment.stack.functions}
    assert "StartSyncExecution" in called["ApiFunction"] and "PutObject" in called["IngestFunction"]
    assert "Converse" in called["PlanFunction"] and "InvokeModel" in called["RetrieveFunction"]
    # the same calls against a template whose api role lost StartSyncExecution
    text = (REPO / "template.yaml").read_text()
    weaker = text.replace("              Action: states:StartSyncExecution\n              Resource: !Ref RetrievalStateMachine\n",
                          "              Action: states:DescribeExecution\n              Resource: !Ref RetrievalStateMachine\n", 1)
    assert weaker != text
    lost = Stack.load(deployment.stack.parameters, deployment.stack.physical, text=weaker)
    assert any("states:StartSyncExecution" in r for r in _denied(deployment, lost).get("ApiFunction", []))


def _emf(lines: list[str]) -> list[dict[str, Any]]:
    """The CloudWatch Embedded Metric Format documents a function printed (its log lines)."""
    out = []
    for line in lines:
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("_aws"), dict) and doc["_aws"].get("CloudWatchMetrics"):
            out.append(doc)
    return out


def _deliver(cw: Any, docs: list[dict[str, Any]]) -> int:
    """What CloudWatch Logs does with EMF: one datum per metric and dimension set."""
    sent = 0
    for doc in docs:
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            for dims in directive["Dimensions"]:
                for metric in directive["Metrics"]:
                    values = doc.get(metric["Name"])
                    values = values if isinstance(values, list) else [values]
                    cw.put_metric_data(Namespace=directive["Namespace"], MetricData=[{
                        "MetricName": metric["Name"], "Dimensions": [{"Name": d, "Value": str(doc[d])} for d in dims],
                        "Values": [float(v) for v in values if v is not None], "Unit": metric.get("Unit", "None")}])
                    sent += 1
    return sent


@pytest.fixture(scope="module")
def default_stack(packaged, tmp_path_factory):
    """The stack with its default parameters (no LLM: the session-rewrite planner) on OpenSearch."""
    with Deployment.start(tmp_path_factory.mktemp("deployed-default"), "opensearch", paths=packaged) as dep:
        assert dep.ingest("handbook.json", HANDBOOK)["objects"][0]["error"] is None
        yield dep


def test_the_default_stacks_latency_alarm_receives_what_its_functions_emit(default_stack):
    """The EMF the Rerank task prints under the default configuration, delivered to CloudWatch (moto)
    as CloudWatch Logs would, is data for the alarm's own metric queries."""
    import boto3

    status, body = default_stack.api("POST", "/v1/search", {"query": "how long until a refund reaches my card", "limit": 5})
    assert status == 200 and _uris(body)[0] == REFUNDS
    cw = boto3.client("cloudwatch", region_name="us-east-1", endpoint_url=default_stack.moto_url)
    assert _deliver(cw, _emf(default_stack.logs("RerankFunction"))) > 0
    alarm = default_stack.stack.resources["RetrievalLatencyP95Alarm"]["Properties"]
    import datetime as dt

    now = dt.datetime.now(dt.timezone.utc)
    with_data = []
    for query in alarm["Metrics"]:
        if "MetricStat" not in query:
            continue
        metric = query["MetricStat"]["Metric"]
        stats = cw.get_metric_statistics(Namespace=metric["Namespace"], MetricName=metric["MetricName"],
                                         Dimensions=metric["Dimensions"], StartTime=now - dt.timedelta(hours=1),
                                         EndTime=now + dt.timedelta(minutes=5), Period=300, Statistics=["SampleCount"])
        if stats["Datapoints"]:
            with_data.append(query["Id"])
    assert with_data, "no metric the latency alarm watches received data from the default stack"


def test_a_function_that_loses_a_layer_fails_here_as_it_would_on_aws(deployment, packaged):
    """The standing check on layers: Rerank run with the layers of a template whose rerank function
    lost its store layer (the bug this suite first caught) cannot answer the same state."""
    from tests.deployment import LAYER_NAMES, _layer_prefix
    from tests.packaged import FunctionPool
    from tests.stack import Stack

    status, _ = _search(deployment, "how long until a refund reaches my card", 5)
    assert status == 200
    state = next(i.event for i in deployment.invocations if i.function == "RerankFunction")
    text = (REPO / "template.yaml").read_text()
    marker = "        # the state carries candidates by reference: their records are read back from the store\n"
    weaker = text.replace(marker + "        - !If [IsOpenSearch, !Ref OpenSearchLayer, !Ref PineconeLayer]\n", marker, 1)
    assert weaker != text
    lost = Stack.load(deployment.stack.parameters, deployment.stack.physical, text=weaker).functions["RerankFunction"]
    kept = deployment.function("RerankFunction")
    layers = [packaged[LAYER_NAMES[_layer_prefix(layer)]] for layer in lost.layers]
    assert len(layers) == len(kept.paths) - 3  # one layer fewer than the deployed function's
    pool = FunctionPool("RerankWithoutStore", [kept.paths[0], *layers, packaged["runtime"]], kept.env,
                        logs=deployment.tmp / "RerankWithoutStore.log", timeout_s=kept.timeout_s)
    try:
        payload, error = pool.invoke(state)
    finally:
        pool.close()
    assert error is not None and "missing_extra" in json.dumps(payload), payload
    payload, error = kept.invoke(state)  # the deployed layers answer the very same state
    assert error is None, payload


def _host() -> Any:
    spec = importlib.util.spec_from_file_location("cairn_package_host", REPO / "infra" / "package" / "host.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _bytecode() -> Any:
    _host()._builder()  # build.py imports infra/package/layer_bytecode.py
    return sys.modules["layer_bytecode"]


def test_every_module_of_every_built_layer_has_its_bytecode(packaged):
    """As built for this interpreter by the same steps as `make package` (whose own check covers the
    arm64 layers for python3.12): no module of a layer is compiled on a cold start."""
    bytecode = _bytecode()
    for layer in HOST_LAYERS:
        assert bytecode.count_modules(packaged[layer]) > 100, layer
        assert bytecode.missing_bytecode(packaged[layer], sys.implementation.cache_tag,
                                         magic=importlib.util.MAGIC_NUMBER) == [], layer


_IMPORT_PROBE = """
import importlib._bootstrap_external as loaders, json, sys
paths = json.loads(sys.argv[1])
if paths:
    sys.path[:] = paths + [p for p in sys.path if p and "site-packages" not in p]
compiled = []
compile_source = loaders.SourceLoader.source_to_code
def source_to_code(self, data, path, *, _optimize=-1):
    compiled.append(str(path))
    return compile_source(self, data, path, _optimize=_optimize)
loaders.SourceLoader.source_to_code = source_to_code
import app
print(json.dumps({"compiled": compiled, "modules": sorted(sys.modules)}))
"""


def _import_app(folder: Path, paths: list[Path] | None) -> dict[str, Any]:
    """Import a function's app.py in a fresh interpreter: which modules were compiled from source and
    which were loaded. ``paths``: only these on sys.path (``-S -I``, as packaged); None: the repository's."""
    flags = ["-S", "-I"] if paths is not None else []
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = subprocess.run([sys.executable, *flags, "-c", _IMPORT_PROBE, json.dumps([str(p) for p in paths or []])],
                         capture_output=True, text=True, cwd=folder, env=env, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("function", ["api", "retrieve"])
def test_the_packaged_function_imports_from_bytecode_what_the_repository_imports(packaged, function):
    """What makes the built function's import no slower than the repository's: the same packages, no
    module compiled from source. (The seconds are measured by benchmarks/imports.py, `packaged_vs_repo`:
    timings on a shared machine are not a test.)"""
    paths = [packaged[f"function:{function}"], packaged["core"], packaged["opensearch"], packaged["runtime"]]
    built = _import_app(paths[0], paths)
    repo = _import_app(REPO / "functions" / function, None)
    mine = [c for c in built["compiled"] if any(c.startswith(str(p)) for p in paths)]
    assert mine == [], f"compiled from source on a cold start: {mine[:5]}"
    def packages(modules: list[str]) -> set[str]:  # not the modules: the locks may pin other versions than the venv
        return {m.split(".")[0] for m in modules if m.split(".")[0] not in sys.stdlib_module_names}

    assert "cairn" in packages(built["modules"]) and "numpy" in packages(built["modules"])
    assert packages(built["modules"]) <= packages(repo["modules"]), packages(built["modules"]) - packages(repo["modules"])


def test_the_llm_and_local_embedding_layers_answer_from_bytecode_alone():
    """litellm (completion, embedding) and the local embedder in processes that see only core, the
    layer and the runtime, built as `make package` builds them: bytecode in place of the source."""
    host = _host()
    out = host.HOST_OUT
    core = host.build_layer("core", out / "layers" / "core")
    runtime = host.build_runtime(out / "runtime")
    llm = host.build_layer("llm", out / "layers" / "llm")
    embedding = host.build_layer("local-embedding", out / "layers" / "local-embedding")
    assert not list((llm / "litellm").rglob("*.py")) and (llm / "litellm" / "__init__.pyc").is_file()
    checks = {llm: """
import litellm
answer = litellm.completion(model="openai/gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], mock_response="hello")
assert answer.choices[0].message.content == "hello"
assert litellm.embedding(model="openai/text-embedding-3-small", input=["a"], mock_response=[0.1, 0.2]).data
""", embedding: """
from cairn.ports.embeddings.local import LocalEmbedder
assert LocalEmbedder().embed(["a short text"]).shape == (1, 384)
"""}
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    for layer, code in checks.items():
        paths = json.dumps([str(core), str(layer), str(runtime)])
        setup = f"import json, sys\nsys.path[:] = json.loads({paths!r}) + [p for p in sys.path if p and 'site-packages' not in p]\n"
        subprocess.run([sys.executable, "-S", "-I", "-c", setup + code], env=env, cwd=out, timeout=600, check=True)


_CAIRN_THROUGH_LITELLM = """
import json, sys
from cairn.core.models import Candidate, ContextRecord
from cairn.ports.embeddings.litellm_embedder import LiteLLMEmbedder
from cairn.ports.llm.litellm_client import LiteLLMClient
from cairn.ports.rerank.litellm_provider import LiteLLMReranker
url = sys.argv[1]
plan = LiteLLMClient("openai/gpt-4o-mini", api_base=url + "/v1", api_key="test").complete("refunds to my card", system="plan")
vectors = LiteLLMEmbedder("openai/text-embedding-3-small", dimension=64, base_url=url + "/v1", api_key="test").embed(["a", "b c"])
texts = {"invoices": "Invoices are emailed monthly.", "refunds": "Refunds reach the card in five days."}
candidates = [Candidate(record=ContextRecord.build(tenant="acme", uri="cairn://resources/" + k, level=2, text=t), score=0.5)
              for k, t in texts.items()]
reranked = LiteLLMReranker(model="cohere/rerank-v3.5", api_base=url, api_key="test", backoff_s=0.0).rerank(
    "when do refunds reach the card", candidates)
import aiohttp.http_parser, litellm
assert aiohttp.http_parser.HttpResponseParser is aiohttp.http_parser.HttpResponseParserPy  # its speedups are left out
deepseek = litellm.token_counter(model="deepseek/deepseek-chat", messages=[{"role": "user", "content": "hello world"}])
print(json.dumps({"plan": plan, "shape": list(vectors.shape), "first": reranked.candidates[0].uri,
                  "fallback": reranked.fallback, "deepseek_tokens": deepseek,
                  "files": sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())})}))
"""


def test_cairns_litellm_calls_answer_in_the_packaged_llm_layer():
    """The LLM, embedder and reranker of cairn over LiteLLM, in a process that sees only core, the llm
    layer (pruned as `make package` prunes it: no module that cannot load, no DeepSeek tokenizer data,
    no LibYAML binding, no aiohttp speedups, no pydantic.v1) and the runtime, against a server speaking OpenAI's and Cohere's wire formats:
    real requests, no mock_response. Every module the calls load comes from those folders."""
    from tests.emulators.embeddings_emulator import EmbeddingsEmulator

    host = _host()
    out = host.HOST_OUT
    core = host.build_layer("core", out / "layers" / "core")
    runtime = host.build_runtime(out / "runtime")
    llm = host.build_layer("llm", out / "layers" / "llm")
    assert not (llm / "litellm" / "proxy" / "proxy_server.pyc").exists()  # imports fastapi: cannot load here
    assert (llm / "litellm" / "proxy" / "_types.pyc").is_file()  # loads, and litellm.utils imports it
    assert not list((llm / "litellm").rglob("deepseek_tokenizer.json")) and not list((llm / "yaml").glob("_yaml*"))
    assert not list((llm / "aiohttp").rglob("*.so")) and not (core / "pydantic" / "v1").exists()
    emulator = EmbeddingsEmulator()
    emulator.converse_for["refunds to my card"] = '{"reasoning": "r", "queries": []}'
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    paths = json.dumps([str(core), str(llm), str(runtime)])
    setup = f"import json, sys\nsys.path[:] = json.loads({paths!r}) + [p for p in sys.path if p and 'site-packages' not in p]\n"
    try:
        done = subprocess.run([sys.executable, "-S", "-I", "-c", setup + _CAIRN_THROUGH_LITELLM, emulator.url], env=env,
                              cwd=out, timeout=600, capture_output=True, text=True)
    finally:
        emulator.close()
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert json.loads(answer["plan"]) == {"reasoning": "r", "queries": []}
    assert answer["shape"] == [2, 64] and answer["deepseek_tokens"] > 0
    assert answer["first"] == "cairn://resources/refunds" and answer["fallback"] is None
    assert {path for path, _, _ in emulator.requests} == {"/v1/chat/completions", "/v1/embeddings", "/v2/rerank"}
    stdlib = os.path.dirname(os.__file__)
    foreign = [f for f in answer["files"] if f and not f.startswith((str(core), str(llm), str(runtime), stdlib))]
    assert foreign == []
