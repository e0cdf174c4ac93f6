"""Lambda: the Plan state of the retrieval workflow (WorkflowInput -> PlanOutput).

Reads the session (summary + last messages) when the execution names one, then plans the typed
queries. The planner never raises for a bad model answer (it falls back to the raw query); a
missing session or a bad input is a ``CairnTaskError``, a throttled read a ``CairnRetryableError``.
"""

from __future__ import annotations

from typing import Any

from cairn import stages
from cairn.workflow import PlanOutput, Runtime, WorkflowInput, parse_state, task_errors

runtime = Runtime()  # clients are built on the first invocation and kept while the container is warm


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    with task_errors():
        start: WorkflowInput = parse_state(WorkflowInput, event)
        view = runtime.sessions.get(start.tenant, start.session_id) if start.session_id else None
        plan = stages.plan(start.request, runtime.planner, view)
        out = PlanOutput(
            tenant=start.tenant,
            request=start.request,
            session_id=start.session_id,
            rerank=start.rerank and runtime.reranker_configured,
            plan=plan,
            query_count=len(plan.queries),
        )
    return out.model_dump(mode="json")
