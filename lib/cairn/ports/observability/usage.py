"""Per-tenant usage records: one structured log line per API operation, for billing.

Metrics carry no tenant (a dimension per tenant would multiply CloudWatch's cost by the number of
tenants); usage lines do. Each line is JSON with ``"message": "usage"`` and the fields below, so a
CloudWatch Logs Insights query over the API function's log group sums them per tenant and month::

    fields tenant, operation, searches, vector_calls, embedding_tokens, llm_input_tokens, llm_output_tokens
    | filter message = "usage"
    | stats sum(searches) as searches, sum(vector_calls) as vector_calls,
            sum(embedding_tokens) as embedding_tokens, sum(llm_input_tokens) as llm_in,
            sum(llm_output_tokens) as llm_out by tenant, bin(30d)

Every function writes the lines of its own work (api: find, read, ingest, commit...; plan: the
planner's LLM tokens; rerank: the search; ingest: each S3 object; on_message: each prefetch), so the
query runs over all of cairn's log groups. docs/cost.md turns the sums into dollars.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, TypeVar

from cairn.core.logging import get_logger

T = TypeVar("T")

log = get_logger("cairn.usage")

# what billable clients count (cumulative attributes) -> the usage line's field
METERED = {
    "requests": "embedding_requests",  # Bedrock InvokeModel calls of an embedder
    "tokens": "embedding_tokens",  # input tokens Bedrock says it embedded
    "llm_calls": "llm_calls",
    "input_tokens": "llm_input_tokens",
    "output_tokens": "llm_output_tokens",
}
_sources: weakref.WeakSet[Any] = weakref.WeakSet()
_seen: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def watch(client: T) -> T:
    """Count ``client``'s billable work (an embedder's requests and tokens, an LLM's calls and
    tokens) into the usage lines of this process; returns it."""
    try:
        with _lock:
            _sources.add(client)
            _seen[client] = _counters(client)
    except TypeError:  # not weak-referenceable: not metered
        pass
    return client


def billable() -> dict[str, int]:
    """The billable work the watched clients did since the previous usage line of this process.

    One Lambda container serves one request at a time, so there a line holds exactly its request's
    work. In a threaded server (``cairn serve``) the work of requests that overlap goes to the line
    written first: every token is in exactly one line, but not always its own tenant's."""
    out: dict[str, int] = {}
    with _lock:
        for client in list(_sources):
            now, before = _counters(client), _seen.get(client, {})
            for attr, value in now.items():
                delta = value - before.get(attr, 0)
                if delta:
                    out[METERED[attr]] = out.get(METERED[attr], 0) + delta
            _seen[client] = now
    return out


def _counters(client: Any) -> dict[str, int]:
    return {attr: int(getattr(client, attr)) for attr in METERED if isinstance(getattr(client, attr, None), int | float)}


def record_usage(tenant: str, operation: str, **counts: int | float) -> dict[str, Any]:
    """Log one usage record; returns it (what the line holds): ``counts``, and the billable work
    (Bedrock embedding requests and tokens, LLM calls and tokens) done since the previous line."""
    record: dict[str, Any] = {"tenant": tenant, "operation": operation, **billable(), **counts}
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
