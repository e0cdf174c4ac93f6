"""Lambda: the Retrieve state, one invocation per typed query (RetrieveTask -> RetrieveOutput).

Embeds the query once and runs quick or thinking (hierarchical) retrieval against the vector
store; the output is compacted (no vectors, bounded texts) to fit Step Functions' state size.
"""

from __future__ import annotations

from typing import Any

from cairn import stages
from cairn.workflow import RetrieveTask, Runtime, compact, parse_state, task_errors

runtime = Runtime()  # store and embedder are built on the first invocation, then reused


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    with task_errors():
        task: RetrieveTask = parse_state(RetrieveTask, event)
        out = stages.retrieve(
            task.query,
            task.request,
            tenant=task.tenant,
            store=runtime.store,
            embedder=runtime.embedder,
            thinking=runtime.thinking,
            rerank_follows=task.rerank,
        )
    return compact(out).model_dump(mode="json")
