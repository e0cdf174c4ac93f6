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


def test_one_blob_per_context_type_with_dimensions_and_values(capsys):
    s = RetrievalStats()
    s.record("resource", scores=[0.9, 0.4], latency_ms=12.5, vector_calls=3, rounds=2, rerank_used=True)
    s.record("resource", scores=[], latency_ms=30.0, vector_calls=1, rerank_fallback="error")
    s.record("memory", scores=[0.2], latency_ms=4.0, vector_calls=1)
    assert s.emit_emf(service="cairn-rerank") == 2

    blobs = {b[m.DIM_CONTEXT_TYPE]: b for b in emf_lines(capsys.readouterr().out)}
    assert set(blobs) == {"resource", "memory"}
    res = blobs["resource"]
    (directive,) = res["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == m.NAMESPACE == "cairn"
    assert sorted(directive["Dimensions"][0]) == [m.DIM_CONTEXT_TYPE, m.DIM_SERVICE]
    assert res[m.DIM_SERVICE] == "cairn-rerank"
    assert res[m.QUERIES] == [2.0]
    assert res[m.RESULTS] == [2.0]
    assert res[m.ZERO_RESULT_QUERIES] == [1.0]
    assert res[m.VECTOR_CALLS] == [4.0] and res[m.ROUNDS] == [2.0]
    assert res[m.RERANK_USED] == [1.0] and res[m.RERANK_FALLBACKS] == [1.0]
    assert res[m.SCORE_MIN] == [0.4] and res[m.SCORE_MAX] == [0.9] and res[m.SCORE_MEAN] == [pytest.approx(0.65)]
    assert res[m.LATENCY] == [12.5, 30.0]  # one value per query: CloudWatch can compute percentiles
    assert res["rerank_fallback_reasons"] == {"error": 1}
    units = {d["Name"]: d["Unit"] for d in directive["Metrics"]}
    assert units[m.LATENCY] == "Milliseconds" and units[m.QUERIES] == "Count"
    assert blobs["memory"][m.QUERIES] == [1.0] and "rerank_fallback_reasons" not in blobs["memory"]


def test_a_type_without_scores_emits_no_score_metrics(capsys):
    s = RetrievalStats()
    s.record("skill", scores=[], latency_ms=1.0)
    s.emit_emf()
    (blob,) = emf_lines(capsys.readouterr().out)
    assert m.SCORE_MIN not in metric_names(blob) and blob[m.ZERO_RESULT_QUERIES] == [1.0]
    assert blob[m.DIM_SERVICE] == m.DEFAULT_SERVICE


def test_emit_sends_only_what_is_new_and_keeps_the_snapshot(capsys):
    s = RetrievalStats()
    s.record("resource", scores=[0.5], latency_ms=1.0)
    s.emit_emf()
    capsys.readouterr()
    assert s.emit_emf() == 0
    assert capsys.readouterr().out == ""
    s.record("resource", scores=[0.5], latency_ms=2.0)
    s.emit_emf()
    (blob,) = emf_lines(capsys.readouterr().out)
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
    assert all(b[m.DIM_CONTEXT_TYPE] == "resource" for b in blobs)
    assert sum(b.get(m.QUERIES, [0])[0] for b in blobs) == 150


def test_a_handlers_own_metrics_are_left_alone(capsys):
    from aws_lambda_powertools import Metrics

    handler_metrics = Metrics(namespace="cairn", service="api")
    handler_metrics.add_metric(name="Requests", unit="Count", value=1)
    s = RetrievalStats()
    s.record("resource", scores=[0.5], latency_ms=1.0)
    s.emit_emf()
    (blob,) = emf_lines(capsys.readouterr().out)
    assert "Requests" not in blob and "Requests" not in metric_names(blob)
    handler_metrics.flush_metrics()
    (own,) = emf_lines(capsys.readouterr().out)
    assert own["Requests"] == [1.0] and m.DIM_CONTEXT_TYPE not in own


def test_every_metric_name_has_a_unit():
    assert set(m.ALL_METRICS) == {
        m.QUERIES, m.RESULTS, m.ZERO_RESULT_QUERIES, m.SCORE_MIN, m.SCORE_MEAN, m.SCORE_MAX, m.LATENCY,
        m.VECTOR_CALLS, m.ROUNDS, m.RERANK_USED, m.RERANK_FALLBACKS,
        m.REQUESTS, m.CLIENT_ERRORS, m.SERVER_ERRORS, m.RATE_LIMITED, m.REQUEST_LATENCY,
    }



def test_operation_metrics_are_one_document_per_operation_with_its_errors(capsys):
    from cairn.ports.observability.operations import OperationStats

    ops = OperationStats()
    ops.record("find", 200, 12.5)
    ops.record("find", 429, 0.4)
    ops.record("find", 400, None)
    ops.record("search", 503, 900.0)
    assert ops.emit_emf() == 2
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    by_op = {d["operation"]: d for d in docs}
    assert by_op["find"]["Requests"] == [3.0] and by_op["find"]["ClientErrors"] == [2.0]
    assert by_op["find"]["RateLimited"] == [1.0] and by_op["find"]["RequestLatency"] == [12.5, 0.4]
    assert by_op["search"]["ServerErrors"] == [1.0]
    assert docs[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["operation", "service"]]
    assert ops.emit_emf() == 0  # emitted once
