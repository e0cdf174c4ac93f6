"""Per-tenant usage records: one structured log line per API operation, for billing.

Metrics carry no tenant (a dimension per tenant would multiply CloudWatch's cost by the number of
tenants); usage lines do. Each line is JSON with ``"message": "usage"`` and the fields below, so a
CloudWatch Logs Insights query over the API function's log group sums them per tenant and month::

    fields tenant, operation, searches, vector_calls, results, embedded_texts, bytes_in
    | filter message = "usage"
    | stats sum(searches) as searches, sum(vector_calls) as vector_calls,
            sum(embedded_texts) as embedded_texts, sum(bytes_in) as bytes_in by tenant, bin(30d)
"""

from __future__ import annotations

from typing import Any

from .logging import get_logger

log = get_logger("cairn.usage")


def record_usage(tenant: str, operation: str, **counts: int | float) -> dict[str, Any]:
    """Log one usage record; returns it (what the line holds)."""
    record: dict[str, Any] = {"tenant": tenant, "operation": operation, **counts}
    log.info("usage", **record)
    return record


def retrieval_counts(result: Any) -> dict[str, int]:
    """The countable work of a find/search result: searches (typed queries), vector calls, results."""
    traces = [qr.trace for qr in getattr(result, "query_results", [])]
    return {
        "searches": len(traces),
        "vector_calls": sum(t.stats.vector_calls for t in traces),
        "results": int(getattr(result, "total", 0)),
    }
