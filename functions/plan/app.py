"""Lambda: the Plan state of the retrieval workflow (WorkflowInput -> PlanOutput).

Reads the session (summary + last messages) when the execution names one, then plans the typed
queries. The planner never raises for a bad model answer (it falls back to the raw query); a
missing session or a bad input is a ``CairnTaskError``, a throttled read a ``CairnRetryableError``.
"""

from __future__ import annotations

from typing import Any

from cairn import stages
from cairn.observability.usage import record_usage
from cairn.services import Services
from cairn.workflow import PlanOutput, WorkflowInput, parse_state, prepare_at_init, task_errors

services = Services()  # built on the first invocation, then reused while the container is warm
prepare_at_init(services, ("settings", "sessions", "llm"))  # SnapStart / provisioned concurrency: before the snapshot


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    with task_errors():
        start: WorkflowInput = parse_state(WorkflowInput, event)
        cairn = services.cairn(start.tenant)
        plan = stages.plan(start.request, cairn.planner, cairn.session_view(start.session_id))
        out = PlanOutput(
            tenant=start.tenant,
            request=stages.for_plan(start.request, plan),  # mode "auto" resolved for every typed query
            session_id=start.session_id,
            rerank=start.rerank and cairn.reranker is not None,
            plan=plan,
            query_count=len(plan.queries),
            correlation_id=start.correlation_id,
        )
    # the planner's LLM calls and tokens are this function's billable work (the search's line is Rerank's)
    record_usage(start.tenant, "plan", typed_queries=len(plan.queries))
    return out.model_dump(mode="json")
