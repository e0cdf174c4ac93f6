"""Every metric cairn emits, by name, in one place.

Names are CloudWatch metric names (the ``cairn`` namespace). Dashboards, alarms and tests refer to
these constants, never to string literals, so a rename happens here once.

**Dimensions are designed to keep the metrics few.** CloudWatch bills every distinct metric name
x dimension values a month ($0.30), whatever the traffic; one dimension value per API operation
and context type made about 150 metrics. So:

* by ``service`` and ``context_type`` (memory, resource, skill, all): only :data:`BY_CONTEXT_TYPE`
  (queries, zero-result queries, latency: what the alarms and the dashboard split by type);
* by ``service`` alone: the other retrieval metrics, summed over the types, and ``RateLimited``;
* by ``service`` and ``operation``: requests, 4xx, 5xx and latency, with ``operation`` one of
  :data:`NAMED_OPERATIONS` (the retrieval operations the latency alarm watches) or
  :data:`OTHER_OPERATIONS` for every other route. Which operations a document counted is in its
  ``operations`` field (not a dimension: free, and searchable with Logs Insights).

At most 3 x 4 + 8 + 1 + 4 x 4 = 37 metrics, however many routes and types there are (a test
counts them over every operation and context type).
"""

from __future__ import annotations

from typing import Final

NAMESPACE: Final = "cairn"
DEFAULT_SERVICE: Final = "cairn"

# Dimensions
DIM_CONTEXT_TYPE: Final = "context_type"
DIM_SERVICE: Final = "service"  # added by Powertools from its ``service`` setting
DIM_OPERATION: Final = "operation"  # find, search, context, or "other" (the OpenAPI operationIds)
NAMED_OPERATIONS: Final = ("find", "search", "context")  # operations with their own dimension value
OTHER_OPERATIONS: Final = "other"  # every other operation's dimension value

# Retrieval, one data point per flush unless noted
QUERIES: Final = "Queries"  # typed queries retrieved
RESULTS: Final = "Results"  # matches returned, summed over the queries
ZERO_RESULT_QUERIES: Final = "ZeroResultQueries"  # queries that returned nothing
SCORE_MIN: Final = "ScoreMin"  # lowest returned score in the window
SCORE_MEAN: Final = "ScoreMean"  # mean returned score in the window
SCORE_MAX: Final = "ScoreMax"  # highest returned score in the window
LATENCY: Final = "RetrievalLatency"  # one value per query (milliseconds), so percentiles work
VECTOR_CALLS: Final = "VectorCalls"  # vector-store round trips, summed
ROUNDS: Final = "Rounds"  # hierarchical search rounds, summed

# Rerank
RERANK_USED: Final = "RerankUsed"  # queries whose scores came (at least partly) from a reranker
RERANK_FALLBACKS: Final = "RerankFallbacks"  # queries that kept their vector scores; reason in metadata

# Operations (the api function, every request; dimensions service and operation)
REQUESTS: Final = "Requests"  # requests answered
CLIENT_ERRORS: Final = "ClientErrors"  # answered 4xx (429 included)
SERVER_ERRORS: Final = "ServerErrors"  # answered 5xx
RATE_LIMITED: Final = "RateLimited"  # refused by the tenant's rate limit or quota (429)
REQUEST_LATENCY: Final = "RequestLatency"  # one value per request (milliseconds), so percentiles work

UNITS: Final[dict[str, str]] = {
    QUERIES: "Count",
    RESULTS: "Count",
    ZERO_RESULT_QUERIES: "Count",
    SCORE_MIN: "None",
    SCORE_MEAN: "None",
    SCORE_MAX: "None",
    LATENCY: "Milliseconds",
    VECTOR_CALLS: "Count",
    ROUNDS: "Count",
    RERANK_USED: "Count",
    RERANK_FALLBACKS: "Count",
    REQUESTS: "Count",
    CLIENT_ERRORS: "Count",
    SERVER_ERRORS: "Count",
    RATE_LIMITED: "Count",
    REQUEST_LATENCY: "Milliseconds",
}

ALL_METRICS: Final = tuple(UNITS)
BY_CONTEXT_TYPE: Final = (QUERIES, ZERO_RESULT_QUERIES, LATENCY)  # the retrieval metrics split by context_type
BY_OPERATION: Final = (REQUESTS, CLIENT_ERRORS, SERVER_ERRORS, REQUEST_LATENCY)  # the operation metrics split by operation


def operation_dimension(operation: str) -> str:
    """The ``operation`` dimension's value for an API operation."""
    return operation if operation in NAMED_OPERATIONS else OTHER_OPERATIONS
