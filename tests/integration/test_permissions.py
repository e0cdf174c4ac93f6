"""The roles' policies, linted with parliament (duo-labs' IAM linter, from PyPI, with its own copy
of AWS's action and resource tables) in every configuration the template accepts, and the
Bedrock policies checked for what Bedrock authorises. What the code actually calls is checked
against each role in tests/integration/test_packaged.py."""

from __future__ import annotations

import json
from itertools import product

import pytest

from tests.iam import Request, allowed
from tests.stack import ACCOUNT, REGION, Stack

pytestmark = pytest.mark.integration

PROFILE = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
CONFIGURATIONS = [
    {"StoreBackend": store, "OpenSearchService": service, "Embedder": embedder, "LlmProvider": llm,
     "LlmModel": PROFILE if llm else "", "SecretName": "cairn-keys"}
    for store, service, embedder, llm in product(("opensearch", "pinecone"), ("es", "aoss"), ("bedrock", "local"), ("", "bedrock"))
    if not (store == "pinecone" and service == "aoss")
]
# parliament's pattern for Bedrock model ARNs rejects model ids with a ':' (amazon.titan-embed-text-v2:0),
# which every Bedrock model id has; those findings are its own, not the policy's (see the test below)
KNOWN_FALSE = {("RESOURCE_MISMATCH", "bedrock")}


def findings(statements: list[dict]) -> list[tuple[str, str]]:
    from parliament import analyze_policy_string

    policy = analyze_policy_string(json.dumps({"Version": "2012-10-17", "Statement": statements}))
    out = []
    for f in policy.findings:
        services = {str(d.get("action", "")).split(":")[0] for d in f.detail} if isinstance(f.detail, list) else set()
        if services and all((f.issue, s) in KNOWN_FALSE for s in services):
            continue
        out.append((f.issue, json.dumps(f.detail, default=str)[:300]))
    return out


@pytest.mark.parametrize("params", CONFIGURATIONS, ids=lambda p: "-".join(v for v in p.values() if v and v != "cairn-keys")[:60])
def test_no_role_names_an_action_or_resource_that_does_not_exist(params):
    stack = Stack.load(params)
    problems = {lg: findings(stack.role_statements(lg)) for lg in stack.functions}
    assert {lg: f for lg, f in problems.items() if f} == {}


def test_the_linter_fails_on_an_action_that_does_not_exist():
    """What the template used to grant: bedrock:Converse is no IAM action (Converse is authorised as InvokeModel)."""
    statement = {"Effect": "Allow", "Action": ["bedrock:InvokeModel", "bedrock:Converse"],
                 "Resource": "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku"}
    assert any(issue == "UNKNOWN_ACTION" and "bedrock:Converse" in detail for issue, detail in findings([statement]))
    assert findings([{**statement, "Action": "bedrock:InvokeModel"}]) == []  # a model id without ':' lints clean


def test_the_bedrock_llm_policy_covers_inference_profiles_and_nothing_else():
    stack = Stack.load({"LlmProvider": "bedrock", "LlmModel": PROFILE})
    statements = stack.role_statements("PlanFunction")
    profile = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{PROFILE}"
    # the profile itself, and the models it routes to in other regions
    assert allowed(statements, Request("bedrock:InvokeModel", profile))
    routed = Request("bedrock:InvokeModel", "arn:aws:bedrock:us-west-2::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0",
                     (("bedrock:InferenceProfileArn", profile),))
    assert allowed(statements, routed)
    # but not a model called directly outside the profile, nor another profile
    assert not allowed(statements, Request("bedrock:InvokeModel", "arn:aws:bedrock:us-west-2::foundation-model/anthropic.claude-3-opus"))
    assert not allowed(statements, Request("bedrock:InvokeModel", f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/us.other"))
    # a plain model id works as before
    direct = Stack.load({"LlmProvider": "bedrock", "LlmModel": "anthropic.claude-3-haiku-20240307-v1:0"})
    assert allowed(direct.role_statements("PlanFunction"),
                   Request("bedrock:InvokeModel", f"arn:aws:bedrock:{REGION}::foundation-model/anthropic.claude-3-haiku-20240307-v1:0"))
