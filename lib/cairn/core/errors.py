"""One error tree for cairn: every error class cairn raises on purpose lives here.

Each family carries the HTTP status the API answers with (``status``) and a ``retryable`` flag
(Step Functions retries on it; the API adds ``Retry-After`` to a retryable 429/503). Vendor
exceptions are mapped into the most specific family at the boundary that meets them, by a table
per vendor; no other module decides a status::

    CairnError                          500  base; never raised bare
    ├── RequestError                    400  the caller sent something cairn cannot accept
    │   ├── InvalidURIError             400
    │   ├── FilterError                 400  every problem at once, each with its path
    │   │   └── UnsupportedFilterError  400  valid, but the backend cannot express it exactly
    │   ├── RecordValidationError       400  (also a VectorStoreError)
    │   ├── PayloadTooLarge             413  a request or response past a size limit
    │   └── UnsupportedMediaType        415  a body that is not JSON
    ├── Unauthorized                    401  no credentials, or unknown ones
    ├── Forbidden                       403  credentials that may not do this
    ├── NotFound                        404  one family for everything that is not there
    │   ├── SessionNotFound
    │   ├── ContextNotFound             a URI with no record
    │   ├── ContentNotFound             a URI with no full body in the content store
    │   └── RouteNotFound
    ├── Conflict                        409
    │   └── SessionConflict             retryable: a concurrent writer won the race
    ├── Throttled                       429  retryable: slow down (Retry-After)
    │   └── RateLimited                      the tenant is over a rate limit or quota (which: details)
    ├── ConfigError                     500  a setting is missing or invalid (start-up)
    │   ├── MissingExtra                500  a configuration needs an optional extra
    │   ├── DimensionMismatch                the embedder's vectors do not fit the index
    │   ├── EmbedderMismatch                 the index was embedded by another embedder
    │   └── SecretUnavailable                a secret a setting names cannot be read
    ├── UpstreamError                   502  a service cairn depends on failed or refused
    │   ├── VectorStoreError
    │   │   ├── VectorStoreRequestError      the backend refused the request
    │   │   ├── PartitionUnreadable          one tenant's embedded partition cannot be read
    │   │   └── VectorStoreUnavailable  503  retryable: unreachable, timed out, throttled
    │   ├── EmbeddingError
    │   ├── RerankError
    │   │   └── RerankResponseError          an answer without one score per document
    │   ├── LLMError                         an LLM call failed (planning, summaries, memories)
    │   ├── SessionError                     the session store failed
    │   └── ContentStoreError                the content store failed
    ├── PlanningError                   502  planning failed for a reason other than the LLM
    │   └── PlanParseError                   the answer holds no usable plan
    ├── IngestError                     422  content that cannot be ingested
    │   ├── ParseFailed                      a file that cannot be parsed (the report says why)
    │   │   └── ParserMissing                its format needs an optional extra
    │   └── FetchRefused                     a URL not fetched: an internal address, robots.txt, the budget
    ├── Unavailable                     503  retryable: try again later
    └── WorkflowError                   the retrieval workflow (Step Functions)
        ├── CairnRetryableError              a task's retryable error (the ASL retries its name)
        ├── CairnTaskError                   a task's error that retrying will not fix
        └── WorkflowFailed                   an execution failed: carries the task's status

A retryable error in a 5xx family answers 503, so a client (and ``cairn.client``) knows it may
try again. Messages name the thing, the bad value, what is allowed and how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cairn.core.distribution import install_hint


class CairnError(Exception):
    """Base of every error cairn raises on purpose."""

    retryable: bool = False
    code: str = "cairn_error"
    status: int = 500

    def __init__(self, message: str, *, retryable: bool | None = None, details: Any = None):
        super().__init__(message)
        self.message = message
        if retryable is not None:
            self.retryable = retryable
        self.details = details

    @property
    def http_status(self) -> int:
        """The status the API answers with: the family's, or 503 for a retryable server error."""
        if self.retryable and self.status >= 500:
            return 503
        return self.status

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "error": self.code,
            "type": type(self).__name__,
            "message": self.message,
            "retryable": self.retryable,
        }
        if self.details is not None:
            out["details"] = self.details
        return out


def http_status(exc: CairnError) -> int:
    """The HTTP status of an error (its family's; 503 for a retryable server error)."""
    return exc.http_status


# --- the caller's side (4xx) --------------------------------------------------------


class RequestError(CairnError):
    """The caller sent something cairn cannot accept (bad query, bad limit, ...)."""

    code = "bad_request"
    status = 400


class InvalidURIError(RequestError):
    code = "invalid_uri"


class PayloadTooLarge(RequestError):
    """A request (or the response it would need) is past a size limit."""

    code = "payload_too_large"
    status = 413


class UnsupportedMediaType(RequestError):
    """A request body of a type the API does not read (it reads JSON)."""

    code = "unsupported_media_type"
    status = 415


class Unauthorized(CairnError):
    """No credentials, or credentials cairn does not know."""

    code = "unauthorized"
    status = 401


class Forbidden(CairnError):
    """Known credentials that may not do this (another end user's data, say)."""

    code = "forbidden"
    status = 403


class NotFound(CairnError):
    """Something the caller named is not there."""

    code = "not_found"
    status = 404


class ContextNotFound(NotFound):
    """A URI with no record in the store."""

    code = "context_not_found"


class RouteNotFound(NotFound):
    code = "route_not_found"


class Conflict(CairnError):
    code = "conflict"
    status = 409


class Throttled(CairnError):
    """Too many requests: slow down and try again (``Retry-After``)."""

    code = "throttled"
    status = 429
    retryable = True


class RateLimited(Throttled):
    """The tenant is over one of its rate limits or quotas (:mod:`cairn.ports.ratelimit`); ``details``
    names the limit, ``retry_after_s`` is when its window ends."""

    code = "rate_limited"

    def __init__(self, message: str, *, retry_after_s: int | None = None, retryable: bool | None = None,
                 details: Any = None) -> None:
        super().__init__(message, retryable=retryable, details=details)
        given = details.get("retry_after_s") if isinstance(details, dict) else None  # a client's copy of the server's
        self.retry_after_s = int(retry_after_s or given or 1)


class Unavailable(CairnError):
    """cairn cannot answer right now; try again later."""

    code = "unavailable"
    status = 503
    retryable = True


# --- configuration --------------------------------------------------------------------


class ConfigError(CairnError):
    """A setting is missing or invalid; raised once, at start-up."""

    code = "config_error"


class MissingExtra(ConfigError):
    """The configuration needs an optional extra that is not installed."""

    code = "missing_extra"

    def __init__(self, feature: str, extra: str, module: str, **kw: Any) -> None:
        super().__init__(
            f"{feature} needs the optional extra '{extra}' (module {module!r} is not installed); "
            f"install it with: {install_hint(extra)}",
            **kw,
        )
        self.extra = extra


class DimensionMismatch(ConfigError):
    """The embedder's vectors do not have the vector index's dimension (raised once, at start-up)."""

    code = "dimension_mismatch"


class EmbedderMismatch(ConfigError):
    """The index was embedded by another embedder than the one configured (checked on a tenant's first use)."""

    code = "embedder_mismatch"


class SecretUnavailable(ConfigError):
    """A secret a setting refers to (``ssm:...``, ``secretsmanager:...``) cannot be read."""

    code = "secret_unavailable"


def require(module: str, *, extra: str, feature: str) -> Any:
    """Import ``module``, or raise :class:`MissingExtra` naming the extra that provides it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name and module.split(".")[0] != exc.name.split(".")[0]:
            raise  # the module is there but one of its own imports is broken: show that
        raise MissingExtra(feature, extra, module) from None


# --- filters ----------------------------------------------------------------------------


@dataclass(frozen=True)
class FilterProblem:
    """One problem found in a filter: where, what was there, and what is allowed."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class FilterError(RequestError):
    """A filter is invalid, or uses something the chosen backend cannot express.

    ``problems`` lists every problem found, each with its path in the filter.
    """

    code = "invalid_filter"

    def __init__(self, problems: list[FilterProblem] | FilterProblem | str, **kw: Any):
        if isinstance(problems, str):
            problems = [FilterProblem("filter", problems)]
        elif isinstance(problems, FilterProblem):
            problems = [problems]
        self.problems = list(problems)
        if len(self.problems) == 1:
            message = str(self.problems[0])
        else:
            message = f"{len(self.problems)} problems in filter:\n" + "\n".join(
                f"  - {p}" for p in self.problems
            )
        super().__init__(message, details=[{"path": p.path, "message": p.message} for p in self.problems], **kw)


class UnsupportedFilterError(FilterError):
    """The filter is valid but the backend cannot express it exactly."""

    code = "unsupported_filter"


# --- the services cairn depends on (5xx) -----------------------------------------------


class UpstreamError(CairnError):
    """A service cairn depends on failed or refused."""

    code = "upstream_error"
    status = 502


class VectorStoreError(UpstreamError):
    code = "vector_store_error"


class VectorStoreUnavailable(VectorStoreError):
    """The backend could not be reached, timed out, or throttled us; try again."""

    code = "vector_store_unavailable"
    retryable = True


class VectorStoreRequestError(VectorStoreError):
    """The backend refused the request (a 4xx); retrying will not help."""

    code = "vector_store_rejected"


class PartitionUnreadable(VectorStoreError):
    """One tenant's embedded partition cannot be read; other tenants are unaffected."""

    code = "partition_unreadable"


class RecordValidationError(VectorStoreError, RequestError):
    """A record is not valid for the store (wrong dimension, bad id, too large)."""

    code = "invalid_record"
    status = 400


class EmbeddingError(UpstreamError):
    code = "embedding_error"


class RerankError(UpstreamError):
    code = "rerank_error"


class RerankResponseError(RerankError):
    """The backend answered, but not with exactly one score per document.

    ``fallback`` names the rule the reranker base applies (see :mod:`cairn.ports.rerank.base`)."""

    code = "rerank_bad_response"

    def __init__(self, message: str, *, fallback: str = "length_mismatch", **kw: Any) -> None:
        super().__init__(message, **kw)
        self.fallback = fallback


class LLMError(UpstreamError):
    """An LLM call failed: planning, summaries and memory extraction all raise this."""

    code = "llm_error"


class SessionError(UpstreamError):
    code = "session_error"


class SessionNotFound(SessionError, NotFound):
    code = "session_not_found"
    status = 404


class SessionConflict(SessionError, Conflict):
    """A concurrent writer won the race; the write can be retried."""

    code = "session_conflict"
    status = 409
    retryable = True


class ContentStoreError(UpstreamError):
    code = "content_store_error"


class ContentNotFound(ContentStoreError, NotFound):
    code = "content_not_found"
    status = 404


# --- planning and ingestion ---------------------------------------------------------------


class PlanningError(CairnError):
    """Planning failed for a reason of its own (a prompt, an answer); LLM failures are LLMError."""

    code = "planning_error"
    status = 502


class PlanParseError(PlanningError):
    """The answer holds no usable plan."""

    code = "plan_parse_error"


class IngestError(CairnError):
    """Content that cannot be ingested as it is."""

    code = "ingest_error"
    status = 422


class ParseFailed(IngestError):
    """A file could not be parsed; ``message`` says why (shown in the ingest report)."""

    code = "parse_failed"


class ParserMissing(ParseFailed):
    """The library a format needs is not installed."""

    code = "parser_missing"


class FetchRefused(IngestError):
    """A URL that URL ingestion will not fetch: an internal address the operator did not allow,
    credentials in the URL, robots.txt, or the ingest's budget spent (the report says which)."""

    code = "fetch_refused"


# --- the retrieval workflow -------------------------------------------------------------


class WorkflowError(CairnError):
    code = "workflow_error"
    status = 502


class CairnRetryableError(WorkflowError):
    """Raised by a workflow task for an error worth retrying; Step Functions retries on its name."""

    retryable = True
    code = "retryable_error"


class CairnTaskError(WorkflowError):
    """Raised by a workflow task for an error that retrying will not fix."""

    code = "task_error"


class WorkflowFailed(WorkflowError):
    """An execution failed; carries the original error's code, message, status and retryability."""

    code = "workflow_failed"

    def __init__(self, message: str, *, code: str = "workflow_failed", status: int = 502, retryable: bool = False,
                 details: Any = None) -> None:
        super().__init__(message, retryable=retryable, details=details)
        self.code = code
        self.status = status

    @property
    def http_status(self) -> int:
        return self.status
