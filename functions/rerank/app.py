"""Lambda: the Rerank state (RerankInput -> the FindResult as JSON).

One rerank call per typed query (the reranker's fallbacks keep vector scores and are counted),
threshold, dedupe, cut and bucket; the retrieval statistics leave as CloudWatch EMF.
"""

from __future__ import annotations

from typing import Any

from cairn import stages
from cairn.workflow import RerankInput, Runtime, parse_state, task_errors

runtime = Runtime()  # the reranker (and its embedder) are built on the first invocation, then reused


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    with task_errors():
        inp: RerankInput = parse_state(RerankInput, event)
        result = stages.rerank(
            list(inp.retrieved),
            inp.request,
            inp.plan,
            reranker=runtime.reranker if inp.rerank else None,
            hotness_weight=runtime.settings.hotness_weight,
        )
    runtime.stats.record_many(result.query_results)
    runtime.stats.emit_emf()
    return result.to_dict(include_provenance=inp.request.include_provenance)
