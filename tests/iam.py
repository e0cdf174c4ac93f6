"""What a function's code called, as IAM requests, and whether its role allows each one.

``requests_of(calls, ...)`` turns what a packaged function recorded (tests/packaged.py: every
botocore API call, every HTTP request) into ``(action, resource, context)`` triples, the way IAM
authorises them: ``Converse`` is ``bedrock:InvokeModel`` on the model (or inference profile),
``ListObjectsV2`` is ``s3:ListBucket`` on the bucket with ``s3:prefix``, an HTTP request to the
OpenSearch domain is ``es:ESHttp<Method>`` on ``domain/<name>/<path>``. ``denied(statements,
requests)`` evaluates Allow statements (actions and resources with IAM's ``*`` and ``?``
wildcards, the ``StringLike``/``StringEquals`` conditions the template uses) and lists what no
statement allows.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

from tests.stack import ACCOUNT, REGION

# botocore operation -> IAM action, where the names differ (else "<signing name>:<operation>")
S3_ACTIONS = {"HeadObject": "s3:GetObject", "ListObjectsV2": "s3:ListBucket", "ListObjects": "s3:ListBucket",
              "DeleteObjects": "s3:DeleteObject", "CopyObject": "s3:PutObject"}
BEDROCK_ACTIONS = {"Converse": "bedrock:InvokeModel", "ConverseStream": "bedrock:InvokeModelWithResponseStream",
                   "InvokeModel": "bedrock:InvokeModel", "InvokeModelWithResponseStream": "bedrock:InvokeModelWithResponseStream"}
REGION_PREFIXES = ("us.", "eu.", "apac.", "global.", "jp.", "au.", "ca.", "us-gov.")


@dataclass(frozen=True)
class Request:
    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = field(default=())
    source: str = ""

    def __str__(self) -> str:
        ctx = "".join(f" [{k}={v}]" for k, v in self.context)
        return f"{self.action} on {self.resource}{ctx} (from {self.source})"


def _bedrock_resource(model: str) -> str:
    if model.startswith("arn:"):
        return model
    if model.startswith(REGION_PREFIXES):
        return f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{model}"
    return f"arn:aws:bedrock:{REGION}::foundation-model/{model}"


def _aws(call: dict[str, Any]) -> list[Request]:
    service, op, params = call["service"], call["operation"], call.get("params", {})
    src = f"{service}.{op}"
    if service == "dynamodb":
        tables = params.get("RequestItems") or params.get("TransactItems") or [params.get("TableName", "")]
        return [Request(f"dynamodb:{op}", f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{t}", source=src) for t in tables]
    if service == "s3":
        action = S3_ACTIONS.get(op, f"s3:{op}")
        bucket = params.get("Bucket", "")
        if action == "s3:ListBucket":
            return [Request(action, f"arn:aws:s3:::{bucket}", (("s3:prefix", params.get("Prefix", "")),), src)]
        key = params.get("Key", "*")
        return [Request(action, f"arn:aws:s3:::{bucket}/{key}", source=src)]
    if service == "bedrock":
        return [Request(BEDROCK_ACTIONS.get(op, f"bedrock:{op}"), _bedrock_resource(params.get("modelId", "")), source=src)]
    if service == "states":
        return [Request(f"states:{op}", params.get("stateMachineArn", "*"), source=src)]
    if service == "secretsmanager":
        secret = params.get("SecretId", "")
        arn = secret if secret.startswith("arn:") else f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{secret}-AbCdEf"
        return [Request(f"secretsmanager:{op}", arn, source=src)]
    if service == "ssm":
        name = params.get("Name", "").lstrip("/")
        return [Request(f"ssm:{op}", f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/{name}", source=src)]
    return [Request(f"{service}:{op}", "*", source=src)]


def requests_of(calls: list[dict[str, Any]], *, opensearch_host: str | None = None, domain: str = "cairn") -> list[Request]:
    """The IAM requests behind what a function recorded (duplicates removed, order kept)."""
    out: list[Request] = []
    for call in calls:
        if call["kind"] == "aws":
            out += _aws(call)
        elif call["kind"] == "http" and opensearch_host and call["host"] == opensearch_host:
            method = call["method"].capitalize()
            out.append(Request(f"es:ESHttp{method}", f"arn:aws:es:{REGION}:{ACCOUNT}:domain/{domain}{call['path']}",
                               source=f"opensearch {call['method']} {call['path']}"))
    return list(dict.fromkeys(out))


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _matches(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    if ignore_case:
        pattern, value = pattern.lower(), value.lower()
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def _conditions_hold(condition: dict[str, Any] | None, context: dict[str, str]) -> bool:
    for operator, tests in (condition or {}).items():
        for key, expected in tests.items():
            if key not in context:
                return False
            value = context[key]
            if operator in ("StringLike", "ArnLike") and not any(_matches(p, value) for p in _as_list(expected)):
                return False
            if operator == "StringEquals" and value not in _as_list(expected):
                return False
            if operator not in ("StringLike", "ArnLike", "StringEquals"):
                raise ValueError(f"condition operator {operator} is not evaluated by tests/iam.py")
    return True


def allowed(statements: list[dict[str, Any]], request: Request) -> bool:
    context = dict(request.context)
    for s in statements:
        if s.get("Effect") != "Allow":
            continue
        if not any(_matches(a, request.action, ignore_case=True) for a in _as_list(s.get("Action", []))):
            continue
        if not any(_matches(r, request.resource) for r in _as_list(s.get("Resource", []))):
            continue
        if _conditions_hold(s.get("Condition"), context):
            return True
    return False


def denied(statements: list[dict[str, Any]], requests: list[Request]) -> list[Request]:
    return [r for r in requests if not allowed(statements, r)]
