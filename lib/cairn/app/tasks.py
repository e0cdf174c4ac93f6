"""The retrieval workflow's three tasks as the application runs them: each takes the state Step
Functions hands over and returns the next one (the Lambda functions ``plan``, ``retrieve`` and
``rerank`` only pass it on).

* :func:`plan` — ``WorkflowInput`` → ``PlanOutput``: the session read (summary and last
  messages) when the execution names one, then the typed queries.
* :func:`retrieve` — ``RetrieveTask`` → ``RetrieveOutput``: one typed query, embedded once and
  retrieved (quick or thinking), compacted to fit the state's size limit.
* :func:`rerank` — ``RerankInput`` → the ``FindResult`` as JSON: one rerank call per typed query,
  the threshold, dedupe, cut and buckets; the statistics leave as CloudWatch EMF.

Every failure leaves as one of the workflow's two error names (:func:`~cairn.app.workflow.task_errors`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cairn.app.workflow import (
    PlanOutput,
    RerankInput,
    RetrieveTask,
    WorkflowInput,
    compact,
    hydrate,
    parse_state,
    raise_failure,
    task_errors,
    to_state,
    within_state,
)
from cairn.engine import stages
from cairn.ports.observability.usage import record_usage, retrieval_counts

if TYPE_CHECKING:
    from cairn.app.parts import AppParts


def plan(services: AppParts, event: dict[str, Any]) -> dict[str, Any]:
    """The Plan state. The planner never raises for a bad model answer (it falls back to the raw
    query); a missing session or a bad input is a task error, a throttled read a retryable one."""
    with task_errors():
        start: WorkflowInput = parse_state(WorkflowInput, event)
        engine = services.pipeline(start.tenant)
        view = engine.session_view(start.session_id)
        chosen = stages.plan(start.request, engine.planner, view)
        out = PlanOutput(
            tenant=start.tenant,
            request=stages.for_plan(start.request, chosen, view),  # mode "auto" resolved for every typed query
            session_id=start.session_id,
            rerank=start.rerank and engine.reranker is not None,
            plan=chosen,
            query_count=len(chosen.queries),
            correlation_id=start.correlation_id,
        )
    # the planner's LLM calls and tokens are this task's billable work (the search's line is Rerank's)
    record_usage(start.tenant, "plan", typed_queries=len(chosen.queries))
    return out.model_dump(mode="json")


def retrieve(services: AppParts, event: dict[str, Any]) -> dict[str, Any]:
    """The Retrieve state, once per typed query; candidates leave by reference (no vectors, bounded
    texts), and the Rerank task reads them back."""
    with task_errors():
        task: RetrieveTask = parse_state(RetrieveTask, event)
        engine = services.pipeline(task.tenant)
        thinking = engine.thinking
        if task.request.score_threshold is not None:
            thinking = replace(thinking, threshold=task.request.score_threshold)
        out = stages.retrieve(
            task.query,
            task.request,
            tenant=task.tenant,
            store=engine.store,
            embedder=engine.embedder,
            thinking=thinking,
            rerank_follows=task.rerank,
            language=services.languages.for_tenant(task.tenant),
        )
    return to_state(compact(out))


def rerank(services: AppParts, event: dict[str, Any]) -> dict[str, Any]:
    """The Rerank state, and its fallback AssembleWithoutRerank (the same stage without the
    reranker, after the Rerank task failed: the retrieval order, and the trace says why)."""
    with task_errors():
        inp: RerankInput = parse_state(RerankInput, event)
        failed = [out.failure for out in inp.retrieved if out.failure is not None]
        if failed and len(failed) == len(inp.retrieved):  # nothing to answer with: fail as the first one did
            raise_failure(failed[0])
        engine = services.pipeline(inp.tenant)
        reranker = engine.reranker if inp.rerank else None
        stored = bool(getattr(reranker, "stored_vectors", False))  # scores the stored vectors: fetch them
        result = stages.rerank(
            hydrate(list(inp.retrieved), engine.store, inp.tenant, vectors=stored),  # the state carried references
            inp.request,
            inp.plan,
            reranker=reranker,
            hotness_weight=engine.hotness_weight,
            counts=services.use_counts if engine.hotness_weight > 0 else None,  # read back only to blend them
            threshold=engine.thinking.threshold,
            language=services.languages.for_tenant(inp.tenant),
        )
    if inp.rerank_failure:
        for qr in result.query_results:
            qr.trace.stats.rerank_fallback = "error"
            qr.trace.add("fallback", detail=f"the rerank task failed ({inp.rerank_failure}); retrieval order kept")
    record_usage(inp.tenant, "search", **retrieval_counts(result))  # the workflow's usage record
    engine.stats.record_many(result.query_results)
    engine.stats.emit_emf()
    return within_state(result.to_dict(include_provenance=inp.request.include_provenance))
