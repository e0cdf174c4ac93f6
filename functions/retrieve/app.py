"""Lambda: the Retrieve state, one invocation per typed query (RetrieveTask -> RetrieveOutput).

Embeds the query once and runs quick or thinking (hierarchical) retrieval against the vector
store; the output is compacted (no vectors, bounded texts) to fit Step Functions' state size.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cairn import stages
from cairn.services import Services
from cairn.workflow import RetrieveTask, compact, parse_state, prepare_at_init, task_errors, to_state

services = Services()  # built on the first invocation, then reused while the container is warm
prepare_at_init(services, ("settings", "store", "embedder"))  # SnapStart / provisioned concurrency: before the snapshot


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    with task_errors():
        task: RetrieveTask = parse_state(RetrieveTask, event)
        cairn = services.cairn(task.tenant)
        thinking = cairn.thinking
        if task.request.score_threshold is not None:
            thinking = replace(thinking, threshold=task.request.score_threshold)
        out = stages.retrieve(
            task.query,
            task.request,
            tenant=task.tenant,
            store=cairn.store,
            embedder=cairn.embedder,
            thinking=thinking,
            rerank_follows=task.rerank,
            language=services.languages.for_tenant(task.tenant),
        )
    return to_state(compact(out))  # candidates by reference; the Rerank task reads them back
