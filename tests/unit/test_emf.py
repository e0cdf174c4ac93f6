"""Retrieval statistics leave Lambda as CloudWatch EMF: asserted by reading the EMF JSON."""

from __future__ import annotations

import json

import pytest

from cairn.ports.observability import metrics as m
from cairn.ports.observability.stats import RetrievalStats

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _metrics_enabled(monkeypatch):
    for var in ("POWERTOOLS_METRICS_DISABLED", "POWERTOOLS_DEV", "POWERTOOLS_METRICS_NAMESPACE",
                "POWERTOOLS_SERVICE_NAME"):
        monkeypatch.delenv(var, raising=False)


def emf_lines(captured: str) -> list[dict]:
    blobs = [json.loads(line) for line in captured.splitlines() if line.startswith("{")]
    return [b for b in blobs if "_aws" in b]


def metric_names(blob: dict) -> set[str]:
    (directive,) = blob["_aws"]["CloudWatchMetrics"]
    return {d["Name"] for d in directive["Metrics"]}


def test_one_blob_per_context_type_then_one_by_service_with_the_rest(capsys):
    s = RetrievalStats()
    s.record("resource", scores=[0.9, 0.4], latency_ms=12.5, vector_calls=3, rounds=2, rerank_used=True)
    s.record("resource", scores=[], latency_ms=30.0, vector_calls=1, rerank_fallback="error")
    s.record("memory", scores=[0.2], latency_ms=4.0, vector_calls=1)
    assert s.emit_emf(service="cairn-rerank") == 2

    lines = emf_lines(capsys.readouterr().out)
    blobs = {b.get(m.DIM_CONTEXT_TYPE): b for b in lines}
    assert set(blobs) == {"resource", "memory", None} and len(lines) == 3
    res = blobs["resource"]
    (directive,) = res["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == m.NAMESPACE == "cairn"
    assert sorted(directive["Dimensions"][0]) == [m.DIM_CONTEXT_TYPE, m.DIM_SERVICE]
    assert res[m.DIM_SERVICE] == "cairn-rerank"
    assert metric_names(res) == set(m.BY_CONTEXT_TYPE)
    assert res[m.QUERIES] == [2.0] and res[m.ZERO_RESULT_QUERIES] == [1.0]
    assert res[m.LATENCY] == [12.5, 30.0]  # one value per query: CloudWatch can compute percentiles
    assert blobs["memory"][m.QUERIES] == [1.0]
    rest = blobs[None]  # summed over the types, by service alone
    (directive,) = rest["_aws"]["CloudWatchMetrics"]
    assert directive["Dimensions"] == [[m.DIM_SERVICE]] and rest[m.DIM_SERVICE] == "cairn-rerank"
    assert rest[m.RESULTS] == [3.0]
    assert rest[m.VECTOR_CALLS] == [5.0] and rest[m.ROUNDS] == [2.0]
    assert rest[m.RERANK_USED] == [1.0] and rest[m.RERANK_FALLBACKS] == [1.0]
    assert rest[m.SCORE_MIN] == [0.2] and rest[m.SCORE_MAX] == [0.9] and rest[m.SCORE_MEAN] == [pytest.approx(0.5)]
    assert rest["rerank_fallback_reasons"] == {"error": 1}
    units = {d["Name"]: d["Unit"] for b in lines for d in b["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert units[m.LATENCY] == "Milliseconds" and units[m.QUERIES] == "Count"


def test_a_type_without_scores_emits_no_score_metrics(capsys):
    s = RetrievalStats()
    s.record("skill", scores=[], latency_ms=1.0)
    s.emit_emf()
    blob, rest = emf_lines(capsys.readouterr().out)
    assert m.SCORE_MIN not in metric_names(rest) and blob[m.ZERO_RESULT_QUERIES] == [1.0]
    assert blob[m.DIM_SERVICE] == rest[m.DIM_SERVICE] == m.DEFAULT_SERVICE


def test_emit_sends_only_what_is_new_and_keeps_the_snapshot(capsys):
    s = RetrievalStats()
    s.record("resource", scores=[0.5], latency_ms=1.0)
    s.emit_emf()
    capsys.readouterr()
    assert s.emit_emf() == 0
    assert capsys.readouterr().out == ""
    s.record("resource", scores=[0.5], latency_ms=2.0)
    s.emit_emf()
    blob, _ = emf_lines(capsys.readouterr().out)
    assert blob[m.QUERIES] == [1.0] and blob[m.LATENCY] == [2.0]
    assert s.snapshot().by_type["resource"].queries == 2  # embedded totals are not reset by emitting


def test_more_than_100_latencies_are_split_across_blobs_without_losing_dimensions(capsys):
    s = RetrievalStats()
    for i in range(150):
        s.record("resource", scores=[0.5], latency_ms=float(i))
    s.emit_emf()
    blobs = emf_lines(capsys.readouterr().out)
    latencies = [v for b in blobs for v in b.get(m.LATENCY, [])]
    assert sorted(latencies) == [float(i) for i in range(150)]
    typed = [b for b in blobs if m.LATENCY in b]
    assert typed and all(b[m.DIM_CONTEXT_TYPE] == "resource" for b in typed)
    assert sum(b.get(m.QUERIES, [0])[0] for b in typed) == 150


def test_a_handlers_own_metrics_are_left_alone(capsys):
    from aws_lambda_powertools import Metrics

    handler_metrics = Metrics(namespace="cairn", service="api")
    handler_metrics.add_metric(name="Requests", unit="Count", value=1)
    s = RetrievalStats()
    s.record("resource", scores=[0.5], latency_ms=1.0)
    s.emit_emf()
    blobs = emf_lines(capsys.readouterr().out)
    assert all("Requests" not in blob and "Requests" not in metric_names(blob) for blob in blobs)
    handler_metrics.flush_metrics()
    (own,) = emf_lines(capsys.readouterr().out)
    assert own["Requests"] == [1.0] and m.DIM_CONTEXT_TYPE not in own


def test_every_metric_name_has_a_unit():
    assert set(m.ALL_METRICS) == {
        m.QUERIES, m.RESULTS, m.ZERO_RESULT_QUERIES, m.SCORE_MIN, m.SCORE_MEAN, m.SCORE_MAX, m.LATENCY,
        m.VECTOR_CALLS, m.ROUNDS, m.RERANK_USED, m.RERANK_FALLBACKS,
        m.REQUESTS, m.CLIENT_ERRORS, m.SERVER_ERRORS, m.RATE_LIMITED, m.REQUEST_LATENCY,
    }



def test_operation_metrics_are_one_document_per_named_operation_and_one_for_the_others(capsys):
    from cairn.ports.observability.operations import OperationStats

    ops = OperationStats()
    ops.record("find", 200, 12.5)
    ops.record("find", 429, 0.4)
    ops.record("find", 400, None)
    ops.record("search", 503, 900.0)
    ops.record("create_session", 201, 3.0)
    ops.record("tree", 404, 2.0)
    assert ops.emit_emf() == 4
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    by_op = {d.get("operation"): d for d in docs}
    assert set(by_op) == {"find", "search", m.OTHER_OPERATIONS, None}
    assert by_op["find"]["Requests"] == [3.0] and by_op["find"]["ClientErrors"] == [2.0]
    assert by_op["find"]["RequestLatency"] == [12.5, 0.4]
    assert by_op["search"]["ServerErrors"] == [1.0]
    other = by_op[m.OTHER_OPERATIONS]  # every other route together; which ones, in a field that is no dimension
    assert other["Requests"] == [2.0] and other["ClientErrors"] == [1.0] and other["RequestLatency"] == [3.0, 2.0]
    assert other["operations"] == {"create_session": 1, "tree": 1}
    assert by_op["find"]["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["operation", "service"]]
    assert by_op[None]["RateLimited"] == [1.0] and by_op[None]["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service"]]
    assert ops.emit_emf() == 0  # emitted once


MAX_DISTINCT_METRICS = 40  # CloudWatch bills each name x dimension values a month: the default stack stays under this


def _distinct_metrics(out: str) -> set[tuple[str, str, frozenset[tuple[str, str]]]]:
    found = set()
    for blob in emf_lines(out):
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            for dims in directive["Dimensions"]:
                for metric in directive["Metrics"]:
                    found.add((directive["Namespace"], metric["Name"], frozenset((d, str(blob[d])) for d in dims)))
    return found


def test_every_operation_and_context_type_together_emit_at_most_40_distinct_metrics(capsys):
    """Every API operation answered with every kind of status, and retrievals of every context type
    (and of all types) with and without results, reranked and falling back: the distinct metrics
    (name + dimension values) that reach CloudWatch are bounded by the dimension design, not by
    the number of operations."""
    from cairn.api.openapi import OPERATIONS
    from cairn.core.kinds import ContextType
    from cairn.ports.observability.operations import OperationStats

    ops = OperationStats()
    for op in OPERATIONS.values():
        for status in (200, 400, 429, 500):
            ops.record(op.id, status, 5.0)
    ops.record("unknown", 404, None)  # a path with no route
    stats = RetrievalStats()
    for ct in [*ContextType, None]:
        stats.record(ct, scores=[0.5], latency_ms=3.0, vector_calls=2, rounds=1, rerank_used=True)
        stats.record(ct, scores=[], latency_ms=1.0, rerank_fallback="error")
    assert ops.emit_emf() and stats.emit_emf()
    found = _distinct_metrics(capsys.readouterr().out)
    assert len(OPERATIONS) >= 20 and len(found) <= MAX_DISTINCT_METRICS, (len(found), sorted(map(str, found)))
    operations = {dict(dims).get(m.DIM_OPERATION) for _, _, dims in found} - {None}
    assert operations == {"find", "search", "context", m.OTHER_OPERATIONS}  # the alarmed ones by name, the rest together
    types = {dict(dims).get(m.DIM_CONTEXT_TYPE) for _, _, dims in found} - {None}
    assert types == {"memory", "resource", "skill", "all"}
