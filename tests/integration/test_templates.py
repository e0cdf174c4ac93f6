"""The SAM template (cfn-lint, SAM transform included) and the workflow (asl-validator) are valid.

cfn-lint is pinned to 1.53.3 in the ``dev`` extra (newer versions skip the SAM transform and miss
broken references). asl-validator is installed by ``make test`` into ``.tools/node_modules``;
without npm on the machine the ASL check is skipped, saying so.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ASL = REPO / "infra" / "statemachine" / "retrieval.asl.json"
ASL_VALIDATOR = REPO / ".tools" / "node_modules" / ".bin" / "asl-validator"
ASL_VALIDATOR_VERSION = "4.0.0"  # keep in step with the Makefile
SUBSTITUTIONS = {  # each function's alias "live" (template.yaml: AutoPublishAlias)
    "PlanFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:cairn-plan:live",
    "RetrieveFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:cairn-retrieve:live",
    "RerankFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:cairn-rerank:live",
}


def _cfn_lint() -> list[str]:
    exe = Path(sys.executable).with_name("cfn-lint")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "cfnlint"]


@pytest.fixture(scope="module")
def lint(tmp_path_factory) -> dict[str, list[str]]:
    """One cfn-lint run (it is slow to start) over the template and a copy with a broken reference;
    the problems found in each, by file. Paths in the templates resolve from the repository."""
    broken = tmp_path_factory.mktemp("broken") / "template.yaml"
    text = (REPO / "template.yaml").read_text()
    broken.write_text(text.replace("TableName: !Ref SessionsTable", "TableName: !Ref SessionTable", 1))
    out = subprocess.run([*_cfn_lint(), "--format", "parseable", "--", "template.yaml", str(broken)],
                         capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
    assert not out.stderr.strip() or "Traceback" not in out.stderr, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    return {"template": [ln for ln in lines if ln.startswith("template.yaml")],
            "broken": [ln for ln in lines if ln.startswith(str(broken))]}


def test_cfn_lint_is_the_pinned_version():
    from importlib.metadata import version

    assert version("cfn-lint") == "1.53.3", "pin cfn-lint==1.53.3 (make dev): newer versions skip the SAM transform"


def test_the_template_passes_cfn_lint(lint):
    assert lint["template"] == [], "cfn-lint found problems:\n" + "\n".join(lint["template"])


def test_cfn_lint_catches_a_broken_reference(lint):
    """The check can fail: a reference to a resource that does not exist is an error (the SAM transform ran)."""
    assert any("E1020" in ln and "SessionTable" in ln for ln in lint["broken"]), lint["broken"]


def _substituted(definition: str) -> str:
    """The definition as deployed: SAM's DefinitionSubstitutions applied."""
    for key, value in SUBSTITUTIONS.items():
        definition = definition.replace("${" + key + "}", value)
    assert "${" not in definition, "a substitution in the ASL is not in SUBSTITUTIONS (nor in template.yaml)"
    return definition


def _validate(path: Path) -> subprocess.CompletedProcess:
    if not ASL_VALIDATOR.exists():
        if shutil.which("npm") is None:
            pytest.skip("npm is not installed: the ASL cannot be checked with asl-validator")
        pytest.fail(f"asl-validator missing: run `make test` (it installs asl-validator@{ASL_VALIDATOR_VERSION} into .tools)")
    return subprocess.run([str(ASL_VALIDATOR), "--json-path", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_workflow_passes_asl_validator(tmp_path):
    definition = _substituted(ASL.read_text())
    assert json.loads(definition)["QueryLanguage"] == "JSONPath"  # moto runs JSONPath, not JSONata
    path = tmp_path / "retrieval.asl.json"
    path.write_text(definition)
    out = _validate(path)
    assert out.returncode == 0, f"asl-validator:\n{out.stdout}{out.stderr}"


def test_asl_validator_rejects_a_broken_workflow(tmp_path):
    broken = json.loads(_substituted(ASL.read_text()))
    broken["States"]["Plan"]["Next"] = "NoSuchState"
    path = tmp_path / "broken.asl.json"
    path.write_text(json.dumps(broken))
    assert _validate(path).returncode != 0


def _invoked(stack) -> list[str]:
    """The Resource of every Task in the state machine's definition as deployed."""
    machine = stack.resources["RetrievalStateMachine"]["Properties"]
    definition = machine["DefinitionString"]
    for key, value in machine["DefinitionSubstitutions"].items():
        definition = definition.replace("${" + key + "}", value)
    assert "${" not in definition, "a substitution of the ASL is missing from template.yaml"
    out = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("Type") == "Task":
                out.append(node["Resource"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads(definition))
    return out


def test_the_workflow_invokes_each_functions_alias_and_its_role_may():
    """Every Task invokes its function's alias "live" (the published version SnapStart and provisioned
    concurrency apply to), and the state machine's role allows lambda:InvokeFunction on that
    qualified ARN — the check fails for a role scoped to the unqualified function."""
    from tests.iam import Request, denied
    from tests.stack import Stack

    stack = Stack.load()
    invoked = _invoked(stack)
    aliases = {stack.ref(f"{name}FunctionAliaslive") for name in ("Plan", "Retrieve", "Rerank")}
    assert set(invoked) == aliases and all(arn.endswith(":live") for arn in aliases), invoked
    requests = [Request("lambda:InvokeFunction", arn, source="states") for arn in sorted(aliases)]
    assert denied(stack.statements_of_role("RetrievalStateMachineRole"), requests) == []
    text = (REPO / "template.yaml").read_text()
    narrow = text.replace("        - LambdaInvokePolicy:\n            FunctionName: !Ref PlanFunction\n",
                          "        - Statement:\n            - {Effect: Allow, Action: lambda:InvokeFunction, "
                          "Resource: !GetAtt PlanFunction.Arn}\n", 1)
    assert narrow != text
    lost = denied(Stack.load(text=narrow).statements_of_role("RetrievalStateMachineRole"), requests)
    assert [r.resource for r in lost] == [stack.ref("PlanFunctionAliaslive")]


def test_samconfig_names_only_template_parameters_and_satisfies_its_rules():
    import tomllib

    from tests.stack import Stack

    config = tomllib.loads((REPO / "samconfig.toml").read_text())
    template = Stack.load().template
    for env in ("staging", "production"):
        overrides = dict(item.split("=", 1) for item in config[env]["deploy"]["parameters"]["parameter_overrides"])
        assert set(overrides) <= set(template["Parameters"]), env
        if overrides.get("StoreBackend", "opensearch") == "opensearch":
            assert overrides.get("OpenSearchUrl", "").startswith("https://"), env  # the rule OpenSearchNeedsItsEndpoint


def test_the_rules_refuse_a_backend_without_its_endpoint():
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    rules = yaml.load((REPO / "template.yaml").read_text(), Loader=Loader)["Rules"]
    assert {"OpenSearchNeedsItsEndpoint", "PineconeNeedsItsHostAndKey", "LlmNeedsAModel", "CohereRerankNeedsAKey"} <= set(rules)


def test_snapstart_and_provisioned_concurrency_are_parameters_off_by_default():
    """The api function publishes a version behind the alias the HTTP API invokes; SnapStart and
    provisioned concurrency apply to it only when their parameters ask (the workflow's: below)."""
    import json as _json

    from tests.stack import Stack

    default = Stack.load()
    fn = default.resources["ApiFunction"]["Properties"]
    assert fn["SnapStart"] == {"ApplyOn": "None"}
    assert "ProvisionedConcurrencyConfig" not in default.resources["ApiFunctionAliaslive"]["Properties"]
    assert default.ref("ApiFunctionAliaslive").endswith(":live")
    assert default.ref("ApiFunctionAliaslive") in _json.dumps(default.resources["HttpApi"])  # the API invokes the alias
    on = Stack.load({"ApiSnapStart": "PublishedVersions", "ApiProvisionedConcurrency": 2})
    assert on.resources["ApiFunction"]["Properties"]["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    assert on.resources["ApiFunctionAliaslive"]["Properties"]["ProvisionedConcurrencyConfig"] == {
        "ProvisionedConcurrentExecutions": 2}


WORKFLOW_FUNCTIONS = ("PlanFunction", "RetrieveFunction", "RerankFunction")


def test_the_workflows_functions_take_snapstart_or_provisioned_concurrency_by_parameter():
    """plan, retrieve and rerank: off by default, SnapStart on each function with
    WorkflowSnapStart, N provisioned instances on each alias with WorkflowProvisionedConcurrency."""
    from tests.stack import Stack

    default = Stack.load()
    for fn in WORKFLOW_FUNCTIONS:
        assert default.resources[fn]["Properties"]["SnapStart"] == {"ApplyOn": "None"}, fn
        assert "ProvisionedConcurrencyConfig" not in default.resources[f"{fn}Aliaslive"]["Properties"], fn
    snap = Stack.load({"WorkflowSnapStart": "PublishedVersions"})
    warm = Stack.load({"WorkflowProvisionedConcurrency": 3})
    for fn in WORKFLOW_FUNCTIONS:
        assert snap.resources[fn]["Properties"]["SnapStart"] == {"ApplyOn": "PublishedVersions"}, fn
        assert warm.resources[f"{fn}Aliaslive"]["Properties"]["ProvisionedConcurrencyConfig"] == {
            "ProvisionedConcurrentExecutions": 3}, fn
    assert snap.resources["ApiFunction"]["Properties"]["SnapStart"] == {"ApplyOn": "None"}  # one parameter per door


def test_the_rules_refuse_snapstart_with_provisioned_concurrency():
    """Lambda refuses both on one function: the template says so before anything is created."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: {suffix: loader.construct_sequence(node)
                                                                    if isinstance(node, yaml.SequenceNode)
                                                                    else loader.construct_scalar(node)})
    rules = yaml.load((REPO / "template.yaml").read_text(), Loader=Loader)["Rules"]
    for door in ("Api", "Workflow"):
        rule = rules[f"{door}SnapStartOrProvisioned"]
        assert rule["RuleCondition"] == {"Equals": [{"Ref": f"{door}SnapStart"}, "PublishedVersions"]}
        assert rule["Assertions"][0]["Assert"] == {"Equals": [{"Ref": f"{door}ProvisionedConcurrency"}, "0"]}


def test_cors_is_off_by_default_and_allows_the_given_origins():
    """CorsAllowOrigins empty: the HTTP API has no CORS configuration (a browser on another origin is
    refused). Set: those origins, the console's headers and methods (API Gateway answers the preflight)."""
    from tests.stack import Stack

    def cors(stack):
        return stack.resources["HttpApi"]["Properties"]["Body"].get("x-amazon-apigateway-cors")

    assert cors(Stack.load()) is None
    on = cors(Stack.load({"CorsAllowOrigins": "http://127.0.0.1:8080,https://console.example.com"}))
    assert on["allowOrigins"] == ["http://127.0.0.1:8080", "https://console.example.com"]
    assert set(on["allowHeaders"]) == {"Authorization", "Content-Type", "Idempotency-Key"}
    assert set(on["allowMethods"]) == {"GET", "POST", "PUT", "DELETE", "OPTIONS"}
    import re

    pattern = Stack.load().template["Parameters"]["CorsAllowOrigins"]["AllowedPattern"]  # CloudFormation refuses the rest
    for good in ("", "http://127.0.0.1:8080", "https://a.example.com,https://b.example.com:8443", "*"):
        assert re.fullmatch(pattern, good), good
    for bad in ("https://a.example.com, https://b.example.com", "a.example.com", "https://a.example.com/console"):
        assert not re.fullmatch(pattern, bad), bad
