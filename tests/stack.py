"""template.yaml as CloudFormation would deploy it: the SAM transform (samtranslator, as cfn-lint
and ``sam deploy`` run it), then the parameters, conditions and intrinsic functions resolved.

    stack = Stack.load(parameters={"StoreBackend": "pinecone"}, physical={"SessionsTable": "t"})
    stack.functions["RerankFunction"].layers        # ["CoreLayer", "PineconeLayer"]
    stack.functions["RerankFunction"].environment   # the Globals merged in, every !Ref resolved
    stack.role_statements("RerankFunction")         # every Allow statement its role holds

A resource's physical id (what ``!Ref`` gives) is taken from ``physical`` when the test created
the real thing (a table on moto), else made up the way CloudFormation names things; ``!GetAtt
X.Arn`` is the ARN of that id. Only what template.yaml uses is resolved; anything else is an error.
"""

from __future__ import annotations

import copy
import json
import re
import types
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "template.yaml"
REGION = "us-east-1"
ACCOUNT = "123456789012"
NO_VALUE = object()
# what the JWT authorizer needs and has no default
REQUIRED_PARAMETERS = {"JwtIssuer": "https://issuer.example.com", "JwtAudience": "cairn"}


def translate(text: str, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    """The SAM transform of ``text``, local code paths replaced by S3 locations first (as ``sam
    package`` does) and the state machine's definition inlined. ``parameters`` are the stack's
    parameter values, which CloudFormation hands the transform (SAM resolves a ``!Ref`` to a
    parameter itself in some properties, e.g. an HttpApi's CorsConfiguration)."""
    import boto3
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator
    from samtranslator.yaml_helper import yaml_parse

    doc = yaml_parse(text)
    for logical, res in doc["Resources"].items():
        props = res.get("Properties", {})
        if res["Type"] == "AWS::Serverless::Function" and isinstance(props.get("CodeUri"), str):
            props["CodeUri"] = f"s3://cairn-artifacts/{logical}.zip"
        if res["Type"] == "AWS::Serverless::LayerVersion":
            props["ContentUri"] = f"s3://cairn-artifacts/{logical}.zip"
        if res["Type"] == "AWS::Serverless::StateMachine" and "DefinitionUri" in props:
            props["Definition"] = json.loads((REPO / props.pop("DefinitionUri")).read_text())
    translator = Translator({}, Parser(), boto_session=boto3.session.Session(region_name=REGION))
    values = {k: str(v) for k, v in (parameters or {}).items()}
    return translator.translate(doc, parameter_values=values)


@dataclass
class Function:
    logical: str
    name: str
    role: str
    layers: list[str]
    environment: dict[str, str]
    timeout: int
    memory: int
    properties: dict[str, Any] = field(repr=False, default_factory=dict)


@dataclass
class Stack:
    template: dict[str, Any]
    parameters: dict[str, Any]
    physical: dict[str, str]

    @classmethod
    def load(cls, parameters: dict[str, Any] | None = None, physical: dict[str, str] | None = None,
             text: str | None = None) -> Stack:
        given = {**REQUIRED_PARAMETERS, **(parameters or {})}
        translated = translate(text if text is not None else TEMPLATE.read_text(), given)
        values = {name: p.get("Default") for name, p in translated.get("Parameters", {}).items()}
        values.update(REQUIRED_PARAMETERS)
        values.update(parameters or {})
        missing = [n for n, v in values.items() if v is None]
        if missing:
            raise ValueError(f"parameters without a value: {missing}")
        return cls(translated, values, dict(physical or {}))

    # ------------------------------------------------------------------ resolution

    @cached_property
    def conditions(self) -> dict[str, bool]:
        out: dict[str, bool] = {}
        raw = self.template.get("Conditions", {})

        def cond(name: str) -> bool:
            if name not in out:
                out[name] = bool(self.resolve(raw[name], cond=cond))
            return out[name]

        for name in raw:
            cond(name)
        return out

    def ref(self, name: str) -> Any:
        pseudo = {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws",
                  "AWS::StackName": "cairn", "AWS::URLSuffix": "amazonaws.com", "AWS::NoValue": NO_VALUE}
        if name in pseudo:
            return pseudo[name]
        if name in self.parameters:
            value = self.parameters[name]
            ptype = self.template["Parameters"][name].get("Type", "String")
            if ptype == "CommaDelimitedList" and isinstance(value, str):
                return [v.strip() for v in value.split(",")]
            return value
        if name in self.physical:
            return self.physical[name]
        res = self.template["Resources"].get(name)
        if res is None:
            raise KeyError(f"!Ref {name}: no such parameter or resource")
        kind = res["Type"]
        if kind == "AWS::IAM::ManagedPolicy":
            return f"arn:aws:iam::{ACCOUNT}:policy/cairn-{name}"
        if kind == "AWS::StepFunctions::StateMachine":
            return f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:cairn-{name}"
        if kind in ("AWS::SNS::Topic",):
            return f"arn:aws:sns:{REGION}:{ACCOUNT}:cairn-{name}"
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/cairn-{name}"
        if kind == "AWS::Lambda::LayerVersion":
            return f"arn:aws:lambda:{REGION}:{ACCOUNT}:layer:{name}:1"
        if kind in ("AWS::Lambda::Alias", "AWS::Lambda::Version"):  # a qualified function ARN
            props = self.resolve(res["Properties"])
            qualifier = props["Name"] if kind == "AWS::Lambda::Alias" else "1"
            return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{props['FunctionName']}:{qualifier}"
        return f"cairn-{name}"

    def get_att(self, name: str, attr: str) -> Any:
        res = self.template["Resources"][name]
        kind, ident = res["Type"], self.ref(name)
        arns = {
            "AWS::Lambda::Function": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{ident}",
            "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/{ident}",
            "AWS::DynamoDB::Table": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{ident}",
            "AWS::S3::Bucket": f"arn:aws:s3:::{ident}",
            "AWS::SQS::Queue": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{str(ident).rsplit('/', 1)[-1]}",
            "AWS::Logs::LogGroup": f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{ident}:*",
            "AWS::KMS::Key": f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{ident}",
        }
        if attr == "Arn" and kind in arns:
            return arns[kind]
        if attr == "QueueName":
            return str(ident).rsplit("/", 1)[-1]
        if attr == "StreamArn":
            return f"{self.get_att(name, 'Arn')}/stream/2026-01-01T00:00:00.000"
        if attr == "Name":
            return ident
        if attr == "Version" and kind == "AWS::Lambda::Version":
            return "1"
        service = kind.split("::")[1].lower()
        return f"arn:aws:{service}:{REGION}:{ACCOUNT}:{ident}" if attr == "Arn" else f"{ident}.{attr}"

    def resolve(self, node: Any, cond: Any = None) -> Any:
        cond = cond or (lambda name: self.conditions[name])
        if isinstance(node, list):
            items = [self.resolve(v, cond) for v in node]
            return [v for v in items if v is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (key, arg), = node.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::If":
                return self.resolve(arg[1] if cond(arg[0]) else arg[2], cond)
            if key == "Condition":
                return cond(arg)
            if key == "Fn::Equals":
                a, b = (self.resolve(v, cond) for v in arg)
                return str(a) == str(b)
            if key == "Fn::Not":
                return not self.resolve(arg[0], cond)
            if key == "Fn::Or":
                return any(self.resolve(v, cond) for v in arg)
            if key == "Fn::And":
                return all(self.resolve(v, cond) for v in arg)
            if key == "Fn::GetAtt":
                name, attr = arg if isinstance(arg, list) else arg.split(".", 1)
                return self.get_att(name, attr)
            if key == "Fn::Join":
                return arg[0].join(str(v) for v in self.resolve(arg[1], cond))
            if key == "Fn::Select":
                return self.resolve(arg[1], cond)[int(self.resolve(arg[0], cond))]
            if key == "Fn::Sub":
                return self._sub(arg, cond)
            if key == "Fn::Split":
                return str(self.resolve(arg[1], cond)).split(arg[0])
            if key.startswith("Fn::"):
                raise KeyError(f"{key} is not resolved by tests/stack.py")
        out = {k: self.resolve(v, cond) for k, v in node.items()}
        return {k: v for k, v in out.items() if v is not NO_VALUE}

    def _sub(self, arg: Any, cond: Any) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], self.resolve(arg[1], cond))

        def one(m: re.Match) -> str:
            name = m.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return str(variables[name])
            if "." in name and name.split(".", 1)[0] in self.template["Resources"]:
                return str(self.get_att(*name.split(".", 1)))
            return str(self.ref(name))

        return re.sub(r"\$\{([^}]+)\}", one, text)

    # ------------------------------------------------------------------ views

    @cached_property
    def resources(self) -> dict[str, dict[str, Any]]:
        """Every resource the conditions keep, its properties resolved."""
        out = {}
        for logical, res in self.template["Resources"].items():
            if "Condition" in res and not self.conditions[res["Condition"]]:
                continue
            out[logical] = {"Type": res["Type"], "Properties": self.resolve(copy.deepcopy(res.get("Properties", {})))}
        return out

    @cached_property
    def functions(self) -> dict[str, Function]:
        out = {}
        for logical, res in self.resources.items():
            if res["Type"] != "AWS::Lambda::Function":
                continue
            p = res["Properties"]
            layers = [self._layer_logical(arn) for arn in p.get("Layers", [])]
            out[logical] = Function(
                logical=logical, name=self.ref(logical), role=p["Role"].split("/")[-1], layers=layers,
                environment={k: str(v) for k, v in p.get("Environment", {}).get("Variables", {}).items()},
                timeout=int(p.get("Timeout", 3)), memory=int(p.get("MemorySize", 128)), properties=p,
            )
        return out

    def _layer_logical(self, arn: str) -> str:
        for logical, res in self.template["Resources"].items():
            if res["Type"] == "AWS::Lambda::LayerVersion" and self.ref(logical) == arn:
                return logical
        raise KeyError(f"layer {arn} is no layer of the template")

    def role_statements(self, function: str) -> list[dict[str, Any]]:
        """The statements of the function's role: inline policies and the managed policies it attaches."""
        role_logical = self.functions[function].role
        return self.statements_of_role(next(lg for lg, r in self.resources.items()
                                            if r["Type"] == "AWS::IAM::Role" and self.ref(lg) == role_logical))

    def statements_of_role(self, logical: str) -> list[dict[str, Any]]:
        """The statements of the role ``logical`` (e.g. ``RetrievalStateMachineRole``)."""
        role = self.resources[logical]
        docs = [p["PolicyDocument"] for p in role["Properties"].get("Policies", [])]
        for arn in role["Properties"].get("ManagedPolicyArns", []):
            for lg, res in self.resources.items():
                if res["Type"] == "AWS::IAM::ManagedPolicy" and self.ref(lg) == arn:
                    docs.append(res["Properties"]["PolicyDocument"])
        statements = []
        for doc in docs:
            stmts = doc["Statement"]
            statements += stmts if isinstance(stmts, list) else [stmts]
        return statements


FUNCTION_LOGICAL = {"api": "ApiFunction", "plan": "PlanFunction", "retrieve": "RetrieveFunction", "rerank": "RerankFunction",
                    "on_message": "OnMessageFunction", "ingest": "IngestFunction"}
_DEFAULT: list[Stack] = []


def deployable(function: str) -> set[str]:
    """The services (names of :class:`cairn.app.services.Services`) that the deployed ``function``
    can build in the default stack: the store only with a store layer, sessions only with a
    DynamoDB permission, content and s3 only with an S3 permission, sfn only with StartSyncExecution.
    The embedder, planner, LLM and reranker are built from settings by every function."""
    if not _DEFAULT:
        _DEFAULT.append(Stack.load())
    stack = _DEFAULT[0]
    fn = stack.functions[FUNCTION_LOGICAL[function]]
    actions = {a for s in stack.role_statements(fn.logical) if s.get("Effect") == "Allow"
               for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    out = {"embedder", "llm", "reranker", "planner", "recorder"}
    if any(layer.startswith(("OpenSearchLayer", "PineconeLayer")) for layer in fn.layers):
        out.add("store")
    if any(a.startswith("dynamodb:") for a in actions):
        out.add("sessions")
    if any(a.startswith("s3:") for a in actions):
        out |= {"content", "s3"}
    if "states:StartSyncExecution" in actions:
        out.add("sfn")
    return out


def check_deployable(function: str, services: object) -> None:
    """Fail when a test hands ``function`` a service its deployed function could not build."""
    given = {name for name in ("store", "sessions", "content", "s3", "sfn") if name in vars(services)}
    extra = sorted(given - deployable(function))
    if extra:
        raise AssertionError(f"the test gives functions/{function} {', '.join(extra)}, which the deployed function "
                             f"does not have (template.yaml: its layers and role); give it only {sorted(deployable(function))}")


class _DeployedModule(types.ModuleType):
    """A handler module whose ``services`` may hold only what its deployed function can build."""

    def __setattr__(self, key: str, value: Any) -> None:
        if key == "services" and type(value).__name__ == "Services":
            check_deployable(self.__dict__["_cairn_function"], value)
        super().__setattr__(key, value)


def as_deployed(module: types.ModuleType, function: str) -> types.ModuleType:
    """``module`` (functions/<function>/app.py, loaded by a test), refusing any service its
    deployed function could not build (:func:`check_deployable`)."""
    module.__dict__["_cairn_function"] = function
    module.__class__ = _DeployedModule
    return module
