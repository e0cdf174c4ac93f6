"""Every metric cairn emits, by name, in one place.

Names are CloudWatch metric names (the ``cairn`` namespace; retrieval metrics have the dimensions
``service`` and ``context_type``, operation metrics ``service`` and ``operation``). Dashboards, alarms and tests refer to these constants, never to string
literals, so a rename happens here once.
"""

from __future__ import annotations

from typing import Final

NAMESPACE: Final = "cairn"
DEFAULT_SERVICE: Final = "cairn"

# Dimensions
DIM_CONTEXT_TYPE: Final = "context_type"
DIM_SERVICE: Final = "service"  # added by Powertools from its ``service`` setting
DIM_OPERATION: Final = "operation"  # the API operation (its OpenAPI operationId: find, search, ...)

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
