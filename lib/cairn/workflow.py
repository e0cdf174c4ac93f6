"""The retrieval workflow as Step Functions runs it: state I/O models, task errors, the runtime.

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

**Runtime.** :class:`Runtime` holds the clients one Lambda container builds once (store,
embedder, reranker, planner, session store, AWS clients) and reuses across warm invocations.
Nothing is built at import time: each is built on first use, so importing a handler stays cheap.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from .errors import CairnError, ConfigError, RequestError, SessionNotFound
from .models import Candidate, QueryPlan, TypedQuery
from .requests import FindRequest, parse_request
from .stages import RetrieveOutput

if TYPE_CHECKING:
    from .pipeline import Cairn

__all__ = [
    "RETRYABLE_ERROR",
    "TASK_ERROR",
    "CairnRetryableError",
    "CairnTaskError",
    "PlanOutput",
    "RerankInput",
    "RetrieveOutput",
    "RetrieveTask",
    "Runtime",
    "WorkflowFailed",
    "WorkflowInput",
    "compact",
    "http_status",
    "parse_state",
    "task_errors",
]

# Step Functions state data is limited to 256 KiB; the Map collects every RetrieveOutput, and up
# to 5 typed queries may run, so each output is kept under this many bytes of JSON.
RETRIEVE_OUTPUT_BUDGET = 40_000
MIN_CANDIDATE_TEXT = 300
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


class PlanOutput(_State):
    """The Plan task's output; the Choice reads ``query_count``, the Map iterates ``plan.queries``."""

    tenant: str
    request: FindRequest
    session_id: str | None = None
    rerank: bool = False  # True when a reranker is configured and the caller wants one
    plan: QueryPlan
    query_count: int


class RetrieveTask(_State):
    """One Map iteration: a typed query and what the retrieve stage needs beside it."""

    tenant: str
    request: FindRequest
    query: TypedQuery
    rerank: bool = False


class RerankInput(_State):
    """The Rerank task's input: the plan and every typed query's candidates."""

    tenant: str
    request: FindRequest
    plan: QueryPlan
    rerank: bool = False
    retrieved: list[RetrieveOutput] = Field(default_factory=list)


def compact(out: RetrieveOutput, budget: int = RETRIEVE_OUTPUT_BUDGET) -> RetrieveOutput:
    """The same output, small enough to travel between states (``budget`` bytes of JSON).

    Vectors are dropped and the trace's events capped (its statistics are kept). When that is
    not enough, every candidate's text and abstract are cut to an equal share (head 75 % + tail
    25 %, as the rerank token budget cuts documents); if even that does not fit, the
    lowest-scored candidates are dropped and the trace says so.
    """
    candidates = [c.model_copy(update={"record": c.record.without_vector()}) for c in out.candidates]
    trace = out.trace.model_copy(deep=True)
    if len(trace.events) > MAX_TRACE_EVENTS:
        dropped = len(trace.events) - MAX_TRACE_EVENTS
        trace.events = trace.events[:MAX_TRACE_EVENTS]
        trace.add("fallback", detail=f"trace cut for transport: {dropped} events dropped")
    slim = RetrieveOutput(query=out.query, candidates=candidates, trace=trace)
    if _size(slim) <= budget or not candidates:
        return slim
    bare = [_cut(c, 0) for c in candidates]
    overhead = _size(RetrieveOutput(query=out.query, candidates=bare, trace=trace))
    per = max(MIN_CANDIDATE_TEXT, (budget - overhead) // len(candidates) - 16)  # 16: the cut marks
    cut = [_cut(c, per) for c in candidates]
    slim = RetrieveOutput(query=out.query, candidates=cut, trace=trace)
    if _size(slim) <= budget:
        return slim
    ranked = sorted(cut, key=lambda c: -c.score)
    kept: list[Candidate] = []
    used = _size(RetrieveOutput(query=out.query, trace=trace)) + 200  # room for the note below
    for c in ranked:
        used += len(c.model_dump_json().encode()) + 1
        if used > budget:
            break
        kept.append(c)
    trace.add("fallback", detail=f"{len(cut) - len(kept)} lowest-scored candidates dropped to fit the state size limit")
    return RetrieveOutput(query=out.query, candidates=kept, trace=trace)


def _size(model: BaseModel) -> int:
    return len(model.model_dump_json().encode())


def _shorten(text: str, chars: int) -> str:
    if len(text) <= chars:
        return text
    if chars <= 0:
        return ""
    head = int(chars * 0.75)
    return text[:head] + " ... " + text[len(text) - (chars - head):]


def _cut(c: Candidate, chars: int) -> Candidate:
    """Text and abstract sharing ``chars`` characters (the abstract at most a third)."""
    rec = c.record
    abstract = _shorten(rec.abstract, max(chars // 3, chars - len(rec.text)))
    text = _shorten(rec.text, chars - len(abstract))
    if text == rec.text and abstract == rec.abstract:
        return c
    return c.model_copy(update={"record": rec.model_copy(update={"text": text, "abstract": abstract})})


# --------------------------------------------------------------------------- task errors


def http_status(exc: CairnError) -> int:
    """The HTTP status an error maps to: 400 bad request, 404 unknown session, 503 retry later,
    500 misconfiguration, 502 a backend refused."""
    if isinstance(exc, SessionNotFound):
        return 404
    if isinstance(exc, RequestError):
        return 400
    if exc.retryable:
        return 503
    if isinstance(exc, ConfigError):
        return 500
    return 502


def _payload(exc: CairnError) -> str:
    return json.dumps({**exc.to_dict(), "status": http_status(exc)}, default=str)


class CairnRetryableError(CairnError):
    """Raised by a workflow task for an error worth retrying; Step Functions retries on its name."""

    retryable = True
    code = "retryable_error"


class CairnTaskError(CairnError):
    """Raised by a workflow task for an error that retrying will not fix."""

    code = "task_error"


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


class WorkflowFailed(CairnError):
    """An execution failed; carries the original error's code, message, status and retryability."""

    code = "workflow_failed"

    def __init__(self, message: str, *, code: str = "workflow_failed", status: int = 502, retryable: bool = False,
                 details: Any = None) -> None:
        super().__init__(message, retryable=retryable, details=details)
        self.code = code
        self.status = status

    @classmethod
    def from_execution(cls, error: str | None, cause: str | None) -> WorkflowFailed:
        """Rebuild the task's error from a failed execution's ``error`` and ``cause``.

        ``cause`` is the Lambda error payload (``{"errorMessage", "errorType", ...}``) whose
        message is the JSON a task wrote (see :func:`task_errors`); anything else (a timeout, a
        crash) becomes a 502, retryable when Step Functions says the task timed out."""
        original = _task_payload(cause)
        if original is not None:
            return cls(
                str(original.get("message", "")),
                code=str(original.get("error", "workflow_failed")),
                status=int(original.get("status", 502)),
                retryable=bool(original.get("retryable", False)),
                details=original.get("details"),
            )
        retryable = error in (RETRYABLE_ERROR, "States.Timeout", "Lambda.TooManyRequestsException", "Lambda.ServiceException")
        return cls(
            f"the retrieval workflow failed: {error or 'unknown error'}",
            status=503 if retryable else 502,
            retryable=retryable,
        )


def _task_payload(cause: str | None) -> dict[str, Any] | None:
    try:
        outer = json.loads(cause or "")
        inner = json.loads(outer["errorMessage"]) if isinstance(outer, dict) else None
    except (ValueError, KeyError, TypeError):
        return None
    return inner if isinstance(inner, dict) and "error" in inner and "message" in inner else None


# --------------------------------------------------------------------------- the runtime

_UNSET: Any = object()


class Runtime:
    """The clients of one Lambda container, built on first use and kept for warm invocations.

    Pass any of them in (tests, the local runner); what is not passed is built from ``settings``
    (default: :func:`cairn.config.load_settings` from the environment). Environment variables read
    here, beside the ``CAIRN_*`` settings: ``CAIRN_STATE_MACHINE_ARN`` (run ``search`` through the
    Express workflow; unset: in process) and ``CAIRN_CONTENT_BUCKET`` (S3 content store).
    """

    def __init__(
        self,
        settings: Any = _UNSET,
        *,
        store: Any = _UNSET,
        embedder: Any = _UNSET,
        reranker: Any = _UNSET,
        planner: Any = _UNSET,
        sessions: Any = _UNSET,
        stats: Any = _UNSET,
        content: Any = _UNSET,
        sfn: Any = _UNSET,
        s3: Any = _UNSET,
        state_machine_arn: str | None = _UNSET,
    ) -> None:
        given = {"settings": settings, "store": store, "embedder": embedder, "reranker": reranker,
                 "planner": planner, "sessions": sessions, "stats": stats, "content": content, "sfn": sfn,
                 "s3": s3, "state_machine_arn": state_machine_arn}
        for name, value in given.items():
            if value is not _UNSET:
                self.__dict__[name] = value  # pre-fills the cached_property of that name

    @cached_property
    def settings(self) -> Any:
        from .config import load_settings

        return load_settings()

    @cached_property
    def embedder(self) -> Any:
        from . import factory

        return factory.build_embedder(self.settings)

    @cached_property
    def store(self) -> Any:
        from . import factory

        return factory.build_store(self.settings, self.embedder.dimension)

    @cached_property
    def reranker(self) -> Any:
        from . import factory

        return factory.build_reranker_from(self.settings, self.embedder)

    @cached_property
    def planner(self) -> Any:
        from . import factory

        return factory.build_planner(self.settings, factory.build_llm_client(self.settings))

    @cached_property
    def sessions(self) -> Any:
        from . import factory

        return factory.build_session_store(self.settings)

    @cached_property
    def stats(self) -> Any:
        """The container's statistics (the rerank task records and emits them as EMF)."""
        from .observability.stats import RetrievalStats

        return RetrievalStats()

    def tenant_stats(self, tenant: str) -> Any:
        """One tenant's statistics in this container (what ``GET /stats`` shows that tenant)."""
        from .observability.stats import RetrievalStats

        by_tenant = self.__dict__.setdefault("_tenant_stats", {})
        if tenant not in by_tenant:
            by_tenant[tenant] = RetrievalStats()
        return by_tenant[tenant]

    @cached_property
    def thinking(self) -> Any:
        from .retrieval.thinking import ThinkingConfig

        return ThinkingConfig(alpha=self.settings.alpha, threshold=self.settings.score_threshold)

    @cached_property
    def state_machine_arn(self) -> str | None:
        return os.environ.get("CAIRN_STATE_MACHINE_ARN") or None

    @cached_property
    def sfn(self) -> Any:
        import boto3

        return boto3.client("stepfunctions")

    @cached_property
    def s3(self) -> Any:
        import boto3

        return boto3.client("s3")

    @cached_property
    def content(self) -> Any:
        from .ingest.content import LocalContentStore, S3ContentStore

        bucket = os.environ.get("CAIRN_CONTENT_BUCKET")
        if bucket:
            return S3ContentStore(bucket, prefix="content", client=self.s3)
        return LocalContentStore(self.settings.home / "content")

    @property
    def reranker_configured(self) -> bool:
        return self.settings.rerank.kind != "none"

    def cairn(self, tenant: str, *, planning: bool = False) -> Cairn:
        """A tenant's :class:`Cairn` over the shared clients (the planner and sessions only when
        ``planning``: ``find()`` needs neither)."""
        from .pipeline import Cairn

        return Cairn(
            self.store,
            self.embedder,
            tenant,
            thinking=self.thinking,
            reranker=self.reranker,
            planner=self.planner if planning else None,
            sessions=self.sessions if planning else None,
            hotness_weight=self.settings.hotness_weight,
            stats=self.tenant_stats(tenant),
        )

    def search(self, tenant: str, request: FindRequest, session_id: str | None = None, *, rerank: bool = True) -> dict[str, Any]:
        """``search()``: through the Express workflow when ``CAIRN_STATE_MACHINE_ARN`` is set, else in
        process. With a session, its prefetched context is updated with the result."""
        if not self.state_machine_arn:
            svc = self.cairn(tenant, planning=True)
            result = svc.search(request, session_id, rerank=rerank)
            svc.stats.emit_emf()
            return result.to_dict(include_provenance=request.include_provenance)
        start = WorkflowInput(tenant=tenant, request=request, session_id=session_id, rerank=rerank)
        out = self.start_sync(start)
        if session_id is not None:
            self.sessions.set_prefetched(tenant, session_id, out)
        return out

    def start_sync(self, start: WorkflowInput) -> dict[str, Any]:
        """StartSyncExecution of the Express state machine; a failed execution raises its task's error."""
        resp = self.sfn.start_sync_execution(
            stateMachineArn=self.state_machine_arn, input=start.model_dump_json()
        )
        status = resp.get("status")
        if status == "SUCCEEDED":
            return json.loads(resp.get("output") or "{}")
        if status == "TIMED_OUT":
            raise WorkflowFailed("the retrieval workflow timed out; retry", status=504, retryable=True)
        raise WorkflowFailed.from_execution(resp.get("error"), resp.get("cause"))


def parse_state(model: type[BaseModel], event: Any) -> Any:
    """Validate a task's input; a malformed input is a non-retryable task error."""
    if not isinstance(event, dict):
        raise RequestError(f"{model.__name__}: expected a JSON object, got {type(event).__name__}")
    return parse_request(model, event)
