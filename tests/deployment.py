"""A cairn stack "deployed" on this machine: template.yaml translated and resolved (tests/stack.py),
every function packaged for this platform from the layer locks (infra/package/host.py) and run as
its own process with exactly its layers (tests/packaged.py), AWS on a moto server that executes the
real state machine, the vector store on the Pinecone or OpenSearch emulator, Bedrock (embeddings,
Converse) on the embeddings emulator.

    with Deployment.start(tmp, backend="opensearch") as dep:
        dep.ingest("handbook.json", payload)                  # S3 upload -> the ingest function
        status, body = dep.api("POST", "/v1/search", {...})  # API Gateway event -> the api function

What moto cannot do is done the way AWS would do it, outside cairn's code: API Gateway's invoke
(the api function gets a payload-2.0 event with the JWT authorizer's claims), EventBridge's
delivery of "Object Created" and the stream's event source mapping (the ingest and on_message
functions get the events AWS would send), and ``StartSyncExecution`` (added to moto's Step
Functions as StartExecution + waiting for the end, so the api function's real boto3 call works).
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import time
import uuid
import zipfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.packaged import FunctionPool
from tests.ports import free_port
from tests.stack import ACCOUNT, REGION, Stack

REPO = Path(__file__).resolve().parents[1]
ASL = REPO / "infra" / "statemachine" / "retrieval.asl.json"
TABLE = "cairn-sessions"
RATE_TABLE = "cairn-ratelimits"
USE_TABLE = "cairn-use-counts"
BUCKET = "cairn-content"
SECRET = "cairn-keys"
PINECONE_KEY = "pc-test-key"
LLM_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
# template.yaml's layers (logical id prefix, before SAM's hash) -> infra/package layer names
LAYER_NAMES = {"CoreLayer": "core", "OpenSearchLayer": "opensearch", "PineconeLayer": "pinecone", "LlmLayer": "llm",
               "LocalEmbeddingLayer": "local-embedding", "DocsLayer": "docs"}
STATE_LIMIT = 256 * 1024  # Step Functions' limit on a state's input or output
# the workflow's timeouts are stretched this many times: this machine is shared and its processes
# are slower than Lambda's; the budget itself (task x attempts within the workflow) is checked
# statically in tests/integration/test_templates.py
TIME_SCALE = 20
HOST_LAYERS = ("core", "opensearch", "pinecone", "docs")


def host_build() -> dict[str, Path]:
    spec = importlib.util.spec_from_file_location("cairn_package_host", REPO / "infra" / "package" / "host.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.build_all(layers=HOST_LAYERS)


def _placeholder_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", "def handler(event, context):\n    raise RuntimeError('runs as a packaged process')\n")
    return buf.getvalue()


def _add_start_sync_execution() -> Any:
    """moto's Step Functions has no StartSyncExecution route: add one (start, wait for the end)."""
    from moto.core.responses import ActionResult
    from moto.stepfunctions.responses import StepFunctionResponse

    def start_sync_execution(self: Any) -> Any:
        arn = self._get_param("stateMachineArn")
        execution = self.stepfunction_backend.start_execution(arn, self._get_param("name") or uuid.uuid4().hex,
                                                              self._get_param("input", if_none="{}"))
        deadline = time.time() + 120
        while time.time() < deadline:
            done = self.stepfunction_backend.describe_execution(execution.execution_arn)
            status = str(getattr(done.status, "value", done.status))
            # moto's execution thread sets the status before the output: wait for both
            if status != "RUNNING" and (status != "SUCCEEDED" or done.output is not None):
                break
            time.sleep(0.02)
        out = {"executionArn": execution.execution_arn, "stateMachineArn": arn, "name": done.name,
               "startDate": done.start_date, "stopDate": done.stop_date, "status": str(getattr(done.status, "value", done.status)),
               "input": done.execution_input}
        if done.output is not None:
            out["output"] = done.output if isinstance(done.output, str) else json.dumps(done.output)
        for key in ("error", "cause"):
            if getattr(done, key, None) is not None:
                out[key] = getattr(done, key)
        return ActionResult(out)

    previous = getattr(StepFunctionResponse, "start_sync_execution", None)
    StepFunctionResponse.start_sync_execution = start_sync_execution
    return previous


@dataclass
class Invocation:
    function: str
    request_bytes: int
    response_bytes: int
    error: str | None
    event: Any = field(repr=False, default=None)
    payload: Any = field(repr=False, default=None)


@dataclass
class Deployment:
    tmp: Path
    backend: str
    stack: Stack
    moto_url: str
    functions: dict[str, FunctionPool]
    emulators: dict[str, Any]
    invocations: list[Invocation] = field(default_factory=list)
    last: Any = None  # the api function's last answer (status, headers, body)
    _exit: ExitStack = field(default_factory=ExitStack, repr=False)

    # ------------------------------------------------------------------ set-up

    @classmethod
    def start(cls, tmp: Path, backend: str = "opensearch", parameters: dict[str, Any] | None = None,
              template: str | None = None, paths: dict[str, Path] | None = None) -> Deployment:
        import boto3
        import requests
        from moto.server import ThreadedMotoServer

        from tests.emulators.embeddings_emulator import EmbeddingsEmulator

        exit_stack = ExitStack()
        paths = paths or host_build()
        port = free_port()
        saved_env = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "MOTO_PORT")}
        os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                           "AWS_DEFAULT_REGION": REGION, "MOTO_PORT": str(port)})

        def restore_env() -> None:
            for k, v in saved_env.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)

        exit_stack.callback(restore_env)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        exit_stack.callback(server.stop)
        moto_url = f"http://127.0.0.1:{port}"
        requests.post(f"{moto_url}/moto-api/reset", timeout=10)
        requests.post(f"{moto_url}/moto-api/config", timeout=10, json={"stepfunctions": {"execute_state_machine": True}})
        exit_stack.callback(lambda: requests.post(f"{moto_url}/moto-api/config", timeout=10,
                                                  json={"stepfunctions": {"execute_state_machine": False}}))
        previous = _add_start_sync_execution()
        from moto.stepfunctions.responses import StepFunctionResponse

        exit_stack.callback(lambda: setattr(StepFunctionResponse, "start_sync_execution", previous)
                            if previous else delattr(StepFunctionResponse, "start_sync_execution"))

        embeddings = EmbeddingsEmulator()
        embeddings.words = True
        exit_stack.callback(embeddings.close)
        emulators: dict[str, Any] = {"bedrock": embeddings}
        params: dict[str, Any] = {"StoreBackend": backend, "SecretName": SECRET}
        if backend == "opensearch":
            from tests.emulators.opensearch_emulator import OpenSearchEmulator

            emulators["store"] = OpenSearchEmulator().start()
            exit_stack.callback(emulators["store"].stop)
            params["OpenSearchUrl"] = emulators["store"].url
        else:
            from tests.emulators.pinecone_emulator import start_pinecone_emulator

            emulators["store"] = start_pinecone_emulator(1024, api_key=PINECONE_KEY)
            exit_stack.callback(emulators["store"].stop)
            params["PineconeIndexHost"] = emulators["store"].host
        params.update(parameters or {})

        clients = {name: boto3.client(name, region_name=REGION, endpoint_url=moto_url)
                   for name in ("dynamodb", "s3", "secretsmanager", "iam", "lambda", "stepfunctions")}
        from cairn.ports.sessions.dynamodb import create_table

        create_table(clients["dynamodb"], TABLE)
        from cairn.ports.ratelimit import create_table as create_rate_table

        create_rate_table(clients["dynamodb"], RATE_TABLE)
        from cairn.ports.usecounts import create_table as create_use_table

        create_use_table(clients["dynamodb"], USE_TABLE)  # kept whatever RecordUse says: the parameter decides its use
        clients["s3"].create_bucket(Bucket=BUCKET)
        clients["secretsmanager"].create_secret(Name=SECRET, SecretString=json.dumps({"pinecone_api_key": PINECONE_KEY}))
        role = clients["iam"].create_role(RoleName="cairn-fn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]

        tables = {"SessionsTable": TABLE, "RateLimitTable": RATE_TABLE, "UseCountsTable": USE_TABLE}
        draft = Stack.load(params, physical={**tables, "ContentBucket": BUCKET}, text=template)
        for fn in draft.functions.values():
            clients["lambda"].create_function(FunctionName=fn.name, Runtime="python3.12", Role=role, Handler="app.handler",
                                              Code={"ZipFile": _placeholder_zip()}, Architectures=["arm64"],
                                              Timeout=fn.timeout, MemorySize=fn.memory)
        for res in draft.resources.values():  # AutoPublishAlias: a version, and the alias the state machine invokes
            if res["Type"] == "AWS::Lambda::Alias":
                props = res["Properties"]
                version = clients["lambda"].publish_version(FunctionName=props["FunctionName"])["Version"]
                clients["lambda"].create_alias(FunctionName=props["FunctionName"], Name=props["Name"], FunctionVersion=version)
        machine = draft.resources["RetrievalStateMachine"]["Properties"]
        definition = machine["DefinitionString"]
        for key, value in machine.get("DefinitionSubstitutions", {}).items():  # what CloudFormation does
            definition = definition.replace("${" + key + "}", value)
        definition = _stretched(definition)
        sm_arn = clients["stepfunctions"].create_state_machine(name="cairn-retrieval", definition=definition, roleArn=role,
                                                               type=machine.get("StateMachineType", "EXPRESS"))["stateMachineArn"]
        stack = Stack.load(params, physical={**tables, "ContentBucket": BUCKET,
                                           "RetrievalStateMachine": sm_arn},
                           text=template)

        functions = {}
        for fn in stack.functions.values():
            code = paths[f"function:{_folder(fn.logical)}"]
            layer_paths = [paths[LAYER_NAMES[_layer_prefix(layer)]] for layer in fn.layers]
            home = tmp / fn.logical
            home.mkdir(parents=True, exist_ok=True)
            env = {**fn.environment, "CAIRN_HOME": str(home),
                   "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8", "TZ": ":UTC",
                   "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
                   "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION, "AWS_ENDPOINT_URL": moto_url,
                   "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": embeddings.url, "AWS_DISABLE_HOST_PREFIX_INJECTION": "true",
                   "AWS_LAMBDA_FUNCTION_NAME": fn.name, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(fn.memory),
                   "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12", "LAMBDA_TASK_ROOT": str(code),
                   "CAIRN_WORKFLOW_TIMEOUT_S": str(27 * TIME_SCALE)}  # the workflow's timeouts are stretched
            functions[fn.name] = FunctionPool(fn.logical, [code, *layer_paths, paths["runtime"]], env,
                                                  logs=tmp / f"{fn.logical}.log", timeout_s=fn.timeout,
                                                  calls=tmp / f"{fn.logical}.calls.jsonl")
            exit_stack.callback(functions[fn.name].close)
        dep = cls(tmp, backend, stack, moto_url, functions, emulators, _exit=exit_stack)
        dep._route_lambda()
        return dep

    def _route_lambda(self) -> None:
        from moto.awslambda.models import LambdaFunction

        dep = self
        real = LambdaFunction.invoke

        def invoke(fn: Any, body: str, request_headers: Any, response_headers: Any) -> bytes:
            event = json.loads(body) if body else {}
            payload, error = dep.invoke(fn.function_name, event)
            if error is not None:
                response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps(payload).encode()

        LambdaFunction.invoke = invoke
        self._exit.callback(lambda: setattr(LambdaFunction, "invoke", real))

    def close(self) -> None:
        self._exit.close()

    def __enter__(self) -> Deployment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ doors

    def function(self, logical: str) -> FunctionPool:
        return self.functions[self.stack.functions[logical].name]

    def invoke(self, name: str, event: Any, container: int | None = None) -> tuple[Any, str | None]:
        """Invoke a function as Lambda does (an idle container, or a new one), or in one given container."""
        fn = self.functions[name]
        payload, error = fn.invoke(event) if container is None else fn.containers[container].invoke(event)
        self.invocations.append(Invocation(fn.name, len(json.dumps(event)), len(json.dumps(payload)), error, event, payload))
        return payload, error

    def new_user_messages(self, session_id: str) -> list[dict[str, Any]]:
        """The sessions table's stream records of ``session_id``'s new user messages: what the
        event source mapping hands on_message (filtered as template.yaml filters it), as JSON."""
        import boto3

        ddb = boto3.client("dynamodb", region_name=REGION, endpoint_url=self.moto_url)
        streams = boto3.client("dynamodbstreams", region_name=REGION, endpoint_url=self.moto_url)
        arn = ddb.describe_table(TableName="cairn-sessions")["Table"]["LatestStreamArn"]
        records = []
        for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")
            records += streams.get_records(ShardIterator=it["ShardIterator"])["Records"]
        mine = [r for r in records if session_id in json.dumps(r["dynamodb"].get("Keys", {}), default=str)
                and r["eventName"] == "INSERT" and r["dynamodb"]["NewImage"].get("type") == {"S": "message"}
                and r["dynamodb"]["NewImage"].get("role") == {"S": "user"}]
        return json.loads(json.dumps(mine, default=str))

    def api(self, method: str, path: str, body: Any = None, *, tenant: str = "acme", user: str | None = None,
            query: str = "", container: int | None = None, request_id: str | None = None) -> tuple[int, Any]:
        """An HTTP API (payload 2.0) request with the JWT authorizer's claims, to the api function
        (``container``: to that one of its containers; the answer's headers are in ``self.last``)."""
        claims = {"sub": user or "svc", "custom:tenant": tenant}
        event = {
            "version": "2.0", "routeKey": f"{method} {path}", "rawPath": path, "rawQueryString": query,
            "headers": {"content-type": "application/json", "host": "api.example.com"},
            "requestContext": {"accountId": ACCOUNT, "apiId": "api", "authorizer": {"jwt": {"claims": claims, "scopes": None}},
                               "domainName": "api.example.com", "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                                                                         "sourceIp": "203.0.113.7", "userAgent": "test"},
                               "requestId": request_id or uuid.uuid4().hex, "routeKey": f"{method} {path}", "stage": "$default",
                               "time": "01/Dec/2026:00:00:00 +0000", "timeEpoch": int(time.time() * 1000)},
            "isBase64Encoded": False,
        }
        if query:
            event["queryStringParameters"] = dict(p.split("=", 1) for p in query.split("&"))
        if body is not None:
            event["body"] = json.dumps(body)
        payload, error = self.invoke(self.stack.functions["ApiFunction"].name, event, container)
        self.last = payload
        if error is not None:
            return 502, payload  # API Gateway answers 502 when the integration fails
        out = json.loads(payload.get("body") or "null")
        if payload["statusCode"] >= 500 and isinstance(out, dict):  # what failed inside, for the test's message
            out["failed_tasks"] = [(i.function, i.error, str(i.payload)[:400]) for i in self.invocations if i.error]
        return payload["statusCode"], out

    def ingest(self, key: str, payload: Any) -> dict[str, Any]:
        """Upload ``payload`` under ingest/acme/ and deliver the EventBridge event to the ingest function."""
        import boto3

        s3 = boto3.client("s3", region_name=REGION, endpoint_url=self.moto_url)
        full = f"ingest/acme/{key}"
        s3.put_object(Bucket=BUCKET, Key=full, Body=json.dumps(payload).encode())
        event = {"version": "0", "detail-type": "Object Created", "source": "aws.s3", "account": ACCOUNT, "region": REGION,
                 "detail": {"bucket": {"name": BUCKET}, "object": {"key": full}}}
        # delivered asynchronously: Lambda tries a failed event again, up to the function's
        # EventInvokeConfig.MaximumRetryAttempts (a retryable error raises for that reason)
        retries = int(self.stack.resources.get("IngestFunctionEventInvokeConfig", {}).get("Properties", {})
                      .get("MaximumRetryAttempts", 2))
        for _ in range(1 + retries):
            out, error = self.invoke(self.stack.functions["IngestFunction"].name, event)
            if error is None:
                return out
        raise AssertionError(out)

    def logs(self, logical: str) -> list[str]:
        path = self.tmp / f"{logical}.log"
        return path.read_text().splitlines() if path.exists() else []


def _stretched(definition: str) -> str:
    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: v * TIME_SCALE if k == "TimeoutSeconds" and isinstance(v, int) else walk(v) for k, v in node.items()}
        return [walk(v) for v in node] if isinstance(node, list) else node

    return json.dumps(walk(json.loads(definition)))


def _folder(logical: str) -> str:
    names = {"ApiFunction": "api", "PlanFunction": "plan", "RetrieveFunction": "retrieve", "RerankFunction": "rerank",
             "OnMessageFunction": "on_message", "IngestFunction": "ingest"}
    return names[logical]


def _layer_prefix(logical: str) -> str:
    return next(name for name in sorted(LAYER_NAMES, key=len, reverse=True) if logical.startswith(name))

