"""The alarms and the dashboard watch what the code emits: every metric of the ``cairn`` namespace
that template.yaml's alarms and dashboard name — with its dimensions, names and values — is in the
EMF the route table and the retrieval statistics print for real requests (find with each context
type, search, context, a refused request). A renamed metric or dimension, or an alarm on a value
nothing emits, fails here."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from cairn import Cairn
from cairn.api.routes import build_app, resolve
from cairn.app.services import Services
from cairn.core.config import Settings
from cairn.engine.ingest import IngestPayload
from tests.fakes import HANDBOOK_DOCS
from tests.stack import Stack

pytestmark = pytest.mark.integration
Metric = tuple[str, str, frozenset[tuple[str, str]]]
ROOT = "cairn://resources/handbook"


def _event(method: str, path: str, body: Any = None, tenant: str = "acme") -> dict[str, Any]:
    return {"version": "2.0", "rawPath": path, "rawQueryString": "", "headers": {"content-type": "application/json"},
            "requestContext": {"requestId": f"req-{path}", "stage": "$default", "http": {"method": method, "path": path},
                               "authorizer": {"lambda": {"tenant": tenant}}},
            "body": json.dumps(body) if body is not None else None, "isBase64Encoded": False}


@pytest.fixture(scope="module")
def emitted(tmp_path_factory, embedder) -> set[Metric]:
    services = Services(Settings(home=tmp_path_factory.mktemp("metrics")), embedder=embedder)
    payload = IngestPayload.parse({"root_uri": ROOT, "documents": HANDBOOK_DOCS})
    Cairn(services, "acme").ingestor().ingest(payload.to_documents(), ROOT)
    app = build_app(services)
    answers = [resolve(app, _event("POST", "/v1/find", {"query": "refund to my card"}))]
    for context_type in ("memory", "resource", "skill"):
        answers.append(resolve(app, _event("POST", "/v1/find", {"query": "refund", "context_type": context_type})))
    answers.append(resolve(app, _event("POST", "/v1/search", {"query": "refund to my card"})))
    answers.append(resolve(app, _event("POST", "/v1/context", {"query": "refund to my card"})))
    answers.append(resolve(app, _event("POST", "/v1/find", {"limit": 0})))  # a 400
    assert [a["statusCode"] for a in answers] == [200] * 6 + [400], answers
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        services.emit_metrics()
    found: set[Metric] = set()
    for line in out.getvalue().splitlines():
        doc = json.loads(line)
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            for dims in directive["Dimensions"]:
                for metric in directive["Metrics"]:
                    found.add((directive["Namespace"], metric["Name"], frozenset((d, str(doc[d])) for d in dims)))
    return found


def _dashboard_rows(body: str) -> list[list[Any]]:
    """Each metric row of the dashboard, CloudWatch's "..." and "." shorthands expanded."""
    rows: list[list[Any]] = []
    for widget in json.loads(body)["widgets"]:
        previous: list[Any] = []
        for row in widget["properties"].get("metrics", []):
            items = [x for x in row if not isinstance(x, dict)]
            if not items:  # an expression row
                rows.append(row)
                continue
            if items[0] == "...":
                items = previous[: len(previous) - (len(items) - 1)] + items[1:]
            items = [previous[i] if x == "." else x for i, x in enumerate(items)]
            previous = items
            rows.append(items)
    return rows


def _watched(stack: Stack) -> tuple[set[Metric], set[tuple[str, frozenset[str]]]]:
    """The cairn metrics the alarms and the dashboard name (exact), and those its SEARCHes match."""
    exact: set[Metric] = set()
    searched: set[tuple[str, frozenset[str]]] = set()
    for res in stack.resources.values():
        if res["Type"] != "AWS::CloudWatch::Alarm":
            continue
        props = res["Properties"]
        stats = [q["MetricStat"]["Metric"] for q in props.get("Metrics", []) if "MetricStat" in q]
        if "MetricName" in props:
            stats.append(props)
        for metric in stats:
            if metric["Namespace"] == "cairn":
                exact.add(("cairn", metric["MetricName"], frozenset((d["Name"], d["Value"]) for d in metric["Dimensions"])))
    for row in _dashboard_rows(stack.resources["Dashboard"]["Properties"]["DashboardBody"]):
        if isinstance(row[0], dict):
            for schema, name in re.findall(r"SEARCH\('\{([^}]*)\} MetricName=\"(\w+)\"", row[0]["expression"]):
                namespace, *dims = schema.split(",")
                if namespace == "cairn":
                    searched.add((name, frozenset(dims)))
        elif row[0] == "cairn":
            exact.add(("cairn", row[1], frozenset(zip(row[2::2], row[3::2], strict=True))))
    return exact, searched


def test_every_cairn_metric_the_alarms_and_dashboard_watch_is_emitted(emitted):
    exact, searched = _watched(Stack.load())
    assert exact and searched
    missing = sorted(str(sorted(dims)) + f" {name}" for _, name, dims in exact - emitted)
    assert not missing, f"watched but never emitted: {missing}"
    emitted_shapes = {(name, frozenset(d for d, _ in dims)) for _, name, dims in emitted}
    assert searched <= emitted_shapes, sorted(map(str, searched - emitted_shapes))


def test_the_check_fails_on_a_dimension_the_code_does_not_emit(emitted):
    text = (Path(__file__).resolve().parents[2] / "template.yaml").read_text()
    renamed = text.replace("{Name: operation, Value: find}", "{Name: route, Value: find}", 1)
    assert renamed != text
    exact, _ = _watched(Stack.load(text=renamed))
    assert ("cairn", "RequestLatency", frozenset({("service", "cairn"), ("route", "find")})) in exact - emitted


def test_every_operation_is_counted_with_its_errors(emitted):
    operations = {dict(dims).get("operation") for _, name, dims in emitted if name == "Requests"}
    assert {"find", "search", "context"} <= operations
