"""The retrieval workflow as Step Functions runs it: state I/O models, task errors, running a search.

The workflow (``infra/statemachine/retrieval.asl.json``)::

    WorkflowInput ─► Plan ─► PlanOutput ─► HasQueries? ── 0 queries ─► an empty result (Succeed)
                                               │
                        Map over plan.queries (ItemSelector builds one RetrieveTask each)
                                               │
                       Retrieve: RetrieveTask ─► RetrieveOutput  (collected at $.retrieved)
                                               │
                       Rerank: RerankInput (Parameters pick it from the state) ─► FindResult dict

Every state's input and output is a model below (a unit test applies the ASL's ``ItemSelector``
and ``Parameters`` to each output and validates the next state's input).

**Tenancy.** ``tenant`` travels in the execution input. Only cairn's own functions (api,
on_message) may start the state machine (IAM), and they put there the tenant of the caller's
credentials, so the tenant a task reads is trusted; no request body ever names one.

**Errors.** A task turns every :class:`CairnError` into one of two exception types whose *names*
are what Lambda reports as ``errorType`` and Step Functions matches in ``Retry``/``Catch``:
``CairnRetryableError`` (``retryable=True``: throttling, timeouts, lost races; the ASL retries it
with backoff) and ``CairnTaskError`` (retrying will not help). The message of either is the JSON
of ``CairnError.to_dict()`` plus the HTTP ``status`` it maps to, so whoever reads the failed
execution (the api function) can answer with the original error.

**Services.** Every task takes the container's :class:`~cairn.app.services.Services` (the one
composition root, built on first use and kept for warm invocations), so a task builds exactly
what ``Cairn`` builds in process: the same planner (scoped to the tenant's folders), content
store, threshold and reranker.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from cairn.core.errors import (
    CairnError,
    CairnRetryableError,
    CairnTaskError,
    PayloadTooLarge,
    RequestError,
    Unavailable,
    WorkflowFailed,
)
from cairn.core.logging import correlation_id, get_logger, set_correlation_id
from cairn.core.models import Candidate, QueryPlan, TypedQuery
from cairn.core.requests import FindRequest, parse_request
from cairn.engine.stages import RetrieveOutput

if TYPE_CHECKING:
    from cairn.app.parts import AppParts

__all__ = [
    "RETRYABLE_ERROR",
    "TASK_ERROR",
    "CairnRetryableError",
    "CairnTaskError",
    "PlanOutput",
    "RerankInput",
    "RetrieveOutput",
    "RetrieveTask",
    "WorkflowFailed",
    "WorkflowInput",
    "compact",
    "hydrate",
    "to_state",
    "execution_error",
    "parse_state",
    "raise_failure",
    "search",
    "start_sync",
    "task_errors",
]

log = get_logger(__name__)
# Step Functions state data is limited to 256 KiB; the Map collects every RetrieveOutput, and up
# to 5 typed queries may run, so each output is kept under this many bytes of JSON.
RETRIEVE_OUTPUT_BUDGET = 40_000
MAX_INPUT_BYTES = 64_000  # an execution's input: the Map copies request and plan into every iteration
# the Rerank state's output is the execution's output, under the same 256 KiB limit
ANSWER_BUDGET = 240_000
MAX_TRACE_EVENTS = 40


# --------------------------------------------------------------------------- state models


class _State(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WorkflowInput(_State):
    """What starts an execution (and the Plan task's input)."""

    tenant: str
    request: FindRequest
    session_id: str | None = None
    rerank: bool = True
    correlation_id: str | None = None  # the API request's id: on every task's log lines


class PlanOutput(_State):
    """The Plan task's output; the Choice reads ``query_count``, the Map iterates ``plan.queries``."""

    tenant: str
    request: FindRequest
    session_id: str | None = None
    rerank: bool = False  # True when a reranker is configured and the caller wants one
    plan: QueryPlan
    query_count: int
    correlation_id: str | None = None


class RetrieveTask(_State):
    """One Map iteration: a typed query and what the retrieve stage needs beside it."""

    tenant: str
    request: FindRequest
    query: TypedQuery
    rerank: bool = False
    correlation_id: str | None = None


class RerankInput(_State):
    """The Rerank task's input: the plan and every typed query's candidates."""

    tenant: str
    request: FindRequest
    plan: QueryPlan
    rerank: bool = False
    retrieved: list[RetrieveOutput] = Field(default_factory=list)
    rerank_failure: str | None = None  # set by the Catch on Rerank: the error the reranker failed with
    correlation_id: str | None = None


# what a candidate's record carries between states: the rest is derived from the URI when the
# state is read (ContextRecord) or read back from the store by the Rerank task (hydrate)
_REFERENCE = {"tenant", "uri", "level"}


def to_state(out: RetrieveOutput) -> dict[str, Any]:
    """A retrieve output as the workflow state carries it: candidates by reference."""
    data = out.model_dump(mode="json")
    for c in data["candidates"]:
        c["record"] = {k: v for k, v in c["record"].items() if k in _REFERENCE}
        # a retrieval score's arithmetic (the hybrid arms) stays behind: the state carries references
        # and scores within its budget; the answer explains the merge, rerank and hotness made after it
        c.pop("explanation", None)
    return data


def within_state(answer: dict[str, Any], budget: int = ANSWER_BUDGET) -> dict[str, Any]:
    """The Rerank state's answer under ``budget`` bytes of JSON: when it is over (limit 100 with five
    typed queries and provenance), the scores' arithmetic is left out, the provenance's first, then the
    matches'; the scores stay, and the log says what was left out."""
    for where in ("provenance", "matches"):
        if len(json.dumps(answer, separators=(",", ":")).encode()) <= budget:
            return answer
        entries = [m for q in answer.get("provenance") or [] for m in q.get("matches", [])] if where == "provenance" \
            else [m for bucket in ("memories", "resources", "skills") for m in answer.get(bucket, [])]
        for m in entries:
            m.pop("explanation", None)
        log.warning("answer over the state budget: score explanations left out", extra={"where": where, "budget": budget})
    return answer


def state_size(out: RetrieveOutput) -> int:
    return len(json.dumps(to_state(out), separators=(",", ":")).encode())


def compact(out: RetrieveOutput, budget: int = RETRIEVE_OUTPUT_BUDGET) -> RetrieveOutput:
    """The same output, small enough to travel between states (``budget`` bytes) as references.

    Candidates travel by reference (:func:`to_state`: tenant, URI and level, with their score and
    reason); their text, abstract, title and metadata stay in the store and the Rerank task reads
    them back in one fetch (:func:`hydrate`), so nothing is cut and the reranker scores the real
    text. The trace's events are capped (its statistics are kept). Only if even the references do
    not fit (far beyond ``limit`` = 100) are the lowest-scored candidates dropped, and the trace
    says so.
    """
    trace = out.trace.model_copy(deep=True)
    if len(trace.events) > MAX_TRACE_EVENTS:
        dropped = len(trace.events) - MAX_TRACE_EVENTS
        trace.events = trace.events[:MAX_TRACE_EVENTS]
        trace.add("fallback", detail=f"trace cut for transport: {dropped} events dropped")
    slim = out.model_copy(update={"candidates": list(out.candidates), "trace": trace})
    if state_size(slim) <= budget or not out.candidates:
        return slim
    ranked = sorted(out.candidates, key=lambda c: -c.score)
    kept: list[Candidate] = []
    used = state_size(out.model_copy(update={"candidates": [], "trace": trace})) + 200  # room for the note below
    for c in ranked:
        used += state_size(RetrieveOutput(query=out.query, candidates=[c])) - state_size(RetrieveOutput(query=out.query)) + 1
        if used > budget:
            break
        kept.append(c)
    trace.add("fallback", detail=f"{len(out.candidates) - len(kept)} lowest-scored candidates dropped to fit the state size limit")
    return out.model_copy(update={"candidates": kept, "trace": trace})


def hydrate(outputs: list[RetrieveOutput], store: Any, tenant: str, *, vectors: bool = False) -> list[RetrieveOutput]:
    """Read the candidates' records back from the store (one fetch for every typed query), so
    the reranker and the answer see their full text, abstract and citation (and, with
    ``vectors``, their stored vectors, which the local reranker scores instead of re-embedding
    every text). A record deleted in the meantime keeps its reference (and its vector score)."""
    ids = list(dict.fromkeys(c.record.id for out in outputs for c in out.candidates))
    if not ids:
        return outputs
    found = {r.id: r if vectors else r.without_vector() for r in store.fetch(tenant, ids)}
    return [
        out.model_copy(update={"candidates": [
            c.model_copy(update={"record": found.get(c.record.id, c.record)}) for c in out.candidates
        ]})
        for out in outputs
    ]


# --------------------------------------------------------------------------- task errors


def _payload(exc: CairnError) -> str:
    return json.dumps({**exc.to_dict(), "status": exc.http_status}, default=str)


# the Lambda error types (errorType) Step Functions sees; the ASL's Retry and Catch name them
RETRYABLE_ERROR = CairnRetryableError.__name__
TASK_ERROR = CairnTaskError.__name__


@contextmanager
def task_errors() -> Iterator[None]:
    """Inside a workflow task: re-raise any :class:`CairnError` under the two stable names."""
    try:
        yield
    except (CairnRetryableError, CairnTaskError):
        raise
    except CairnError as exc:
        wrapper = CairnRetryableError if exc.retryable else CairnTaskError
        raise wrapper(_payload(exc), retryable=exc.retryable) from exc


def execution_error(error: str | None, cause: str | None) -> WorkflowFailed:
    """Rebuild the task's error from a failed execution's ``error`` and ``cause``.

    ``cause`` is the Lambda error payload (``{"errorMessage", "errorType", ...}``) whose message
    is the JSON a task wrote (see :func:`task_errors`); anything else (a timeout, a crash)
    becomes a 502, retryable (503) when Step Functions says the task timed out or was throttled."""
    original = _task_payload(cause)
    if original is not None:
        return WorkflowFailed(
            str(original.get("message", "")),
            code=str(original.get("error", "workflow_failed")),
            status=int(original.get("status", 502)),
            retryable=bool(original.get("retryable", False)),
            details=original.get("details"),
        )
    retryable = error in (RETRYABLE_ERROR, "States.Timeout", "Lambda.TooManyRequestsException", "Lambda.ServiceException")
    return WorkflowFailed(
        f"the retrieval workflow failed: {error or 'unknown error'}",
        status=503 if retryable else 502,
        retryable=retryable,
    )


def raise_failure(failure: dict[str, Any]) -> None:
    """Raise again, under its own name, the error a caught task failed with (``{"Error", "Cause"}``)."""
    error = str(failure.get("Error") or "")
    cause = failure.get("Cause")
    original = _task_payload(cause if isinstance(cause, str) else None)
    message = json.dumps(original) if original is not None else f"the retrieval failed: {error or 'unknown error'}"
    retryable = error in (RETRYABLE_ERROR, "States.Timeout", "Lambda.TooManyRequestsException", "Lambda.ServiceException")
    raise (CairnRetryableError if retryable else CairnTaskError)(message, retryable=retryable)


def _task_payload(cause: str | None) -> dict[str, Any] | None:
    try:
        outer = json.loads(cause or "")
        inner = json.loads(outer["errorMessage"]) if isinstance(outer, dict) else None
    except (ValueError, KeyError, TypeError):
        return None
    return inner if isinstance(inner, dict) and "error" in inner and "message" in inner else None


# --------------------------------------------------------------------------- running a search


def search(services: AppParts, tenant: str, request: FindRequest, session_id: str | None = None, *,
           rerank: bool = True, prefetch_seq: int | None = None, correlation: str | None = None) -> dict[str, Any]:
    """``search()`` as the API serves it: through the Express workflow when
    ``settings.state_machine_arn`` is set (Lambda), else in process. Either way the result
    becomes the session's prefetched context and the statistics are recorded.

    ``prefetch_seq``: the message this search prefetches for; the result is stored only over the
    context of an earlier message (a newer message's stays, and the log says so).
    ``correlation``: the id the workflow's tasks log (default: this process's current one)."""
    cairn = services.pipeline(tenant)
    request = cairn.with_defaults(request, search=True)
    if not services.settings.state_machine_arn:
        result = cairn.search(request, session_id, rerank=rerank)  # no workflow: answered in process
        from cairn.ports.observability.usage import record_usage, retrieval_counts

        record_usage(tenant, "search", **retrieval_counts(result))
        return result.to_dict(include_provenance=request.include_provenance)
    # refused before any work (and before an LLM planner is paid): a foreign or unknown session,
    # another user's memories, a filter that does not parse, an input over the state size limit
    request = cairn.for_session_user(request, cairn.session_view(session_id))
    if request.filter is not None:
        from cairn.core.filters import parse

        parse(request.filter)
    start = WorkflowInput(tenant=tenant, request=request, session_id=session_id, rerank=rerank,
                          correlation_id=correlation or correlation_id())
    size = len(start.model_dump_json().encode())
    if size > MAX_INPUT_BYTES:
        raise PayloadTooLarge(
            f"the search request is {size:,} bytes; the workflow takes at most {MAX_INPUT_BYTES:,} "
            "(shorten the filter's value lists or the query)"
        )
    out = start_sync(services, start)
    sessions = services.sessions  # a session_id was checked against it before the workflow ran
    if session_id is not None and sessions is not None and not sessions.set_prefetched(tenant, session_id, out, seq=prefetch_seq):
        log.info("prefetch not stored: a later message's is", session=session_id, seq=prefetch_seq)
    return out


def start_sync(services: AppParts, start: WorkflowInput) -> dict[str, Any]:
    """StartSyncExecution of the Express state machine; a failed execution raises its task's error."""
    try:
        resp = services.sfn.start_sync_execution(
            stateMachineArn=services.settings.state_machine_arn, input=start.model_dump_json()
        )
    except Exception as exc:  # botocore: throttled or unreachable answers 503 (retry), anything else 502
        from cairn.core.retry import AwsError

        aws = AwsError.of(exc)
        if aws.retryable or not aws.code:
            raise Unavailable(f"the retrieval workflow cannot start now ({aws.code or type(exc).__name__}); retry") from None
        raise WorkflowFailed(f"the retrieval workflow refused to start: {aws.code}", status=502) from None
    status = resp.get("status")
    if status == "SUCCEEDED":
        return json.loads(resp.get("output") or "{}")
    if status == "TIMED_OUT":
        raise WorkflowFailed("the retrieval workflow timed out; retry", status=503, retryable=True)
    raise execution_error(resp.get("error"), resp.get("cause"))


def parse_state(model: type[BaseModel], event: Any) -> Any:
    """Validate a task's input; a malformed input is a non-retryable task error. The state's
    ``correlation_id`` (the API request's id) is on every log line of the task from here on."""
    if not isinstance(event, dict):
        raise RequestError(f"{model.__name__}: expected a JSON object, got {type(event).__name__}")
    given = event.get("correlation_id")
    set_correlation_id(given if isinstance(given, str) else None)  # never the previous invocation's
    state = parse_request(model, event)
    log.info("task started", state=model.__name__, tenant=getattr(state, "tenant", None))
    return state


# Lambda's AWS_LAMBDA_INITIALIZATION_TYPE when the init is snapshotted (SnapStart) or kept warm
# (provisioned concurrency): what it builds then, no request pays for
PREPARED_INITS = ("snap-start", "provisioned-concurrency")


def prepare_at_init(services: AppParts, names: tuple[str, ...]) -> list[str]:
    """Under SnapStart or provisioned concurrency, build ``names`` (attributes of ``services``:
    settings, store, embedder, ...) now, at init, each on its own; on demand, nothing. One that
    cannot be built is logged and left to the first invocation, which fails as it would have.
    Returns the names built."""
    import os

    if os.environ.get("AWS_LAMBDA_INITIALIZATION_TYPE") not in PREPARED_INITS:
        return []
    built = []
    for name in names:
        try:
            getattr(services, name)
            built.append(name)
        except Exception as exc:  # noqa: BLE001 - the first invocation meets the same error and reports it
            get_logger("cairn.app.workflow").warning("not prepared at init", service=name, error=type(exc).__name__,
                                                 message=str(exc)[:300])
    return built
