"""One error tree for cairn.

Every error carries a ``retryable`` flag: Step Functions retries on it, and the CLI and
the API turn any ``CairnError`` into a clear message (never a stack trace). Vendor
exceptions are mapped into the most specific family at the boundary that meets them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class CairnError(Exception):
    """Base of every error cairn raises on purpose."""

    retryable: bool = False
    code: str = "cairn_error"

    def __init__(self, message: str, *, retryable: bool | None = None, details: Any = None):
        super().__init__(message)
        self.message = message
        if retryable is not None:
            self.retryable = retryable
        self.details = details

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


# --- request / configuration -------------------------------------------------------


class RequestError(CairnError):
    """The caller sent something cairn cannot accept (bad query, bad limit, ...)."""

    code = "bad_request"


class InvalidURIError(RequestError):
    code = "invalid_uri"


class ConfigError(CairnError):
    """A setting is missing or invalid; raised once, at start-up."""

    code = "config_error"


# --- filters -----------------------------------------------------------------------


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


# --- vector stores -----------------------------------------------------------------


class VectorStoreError(CairnError):
    code = "vector_store_error"


class VectorStoreUnavailable(VectorStoreError):
    """The backend could not be reached, timed out, or throttled us; try again."""

    code = "vector_store_unavailable"
    retryable = True


class VectorStoreRequestError(VectorStoreError):
    """The backend refused the request (a 4xx); retrying will not help."""

    code = "vector_store_rejected"


class RecordValidationError(VectorStoreError, RequestError):
    """A record is not valid for the store (wrong dimension, bad id, too large)."""

    code = "invalid_record"


# --- embeddings, rerank, planning, sessions, ingest ------------------------------------


class EmbeddingError(CairnError):
    code = "embedding_error"


class RerankError(CairnError):
    code = "rerank_error"


class PlanningError(CairnError):
    code = "planning_error"


class SessionError(CairnError):
    code = "session_error"


class SessionNotFound(SessionError, RequestError):
    code = "session_not_found"


class SessionConflict(SessionError):
    """A concurrent writer won the race; the write can be retried."""

    code = "session_conflict"
    retryable = True


class IngestError(CairnError):
    code = "ingest_error"
