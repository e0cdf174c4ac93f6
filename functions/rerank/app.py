"""Lambda: the Rerank state (RerankInput -> the FindResult as JSON), and its fallback
AssembleWithoutRerank (the same stage without the reranker, after the Rerank task failed).

One rerank call per typed query (the reranker's fallbacks keep vector scores and are counted),
threshold, dedupe, cut and bucket; the retrieval statistics leave as CloudWatch EMF.
"""

from __future__ import annotations

from typing import Any

from cairn import stages
from cairn.observability.usage import record_usage, retrieval_counts
from cairn.services import Services
from cairn.workflow import RerankInput, hydrate, parse_state, prepare_at_init, raise_failure, task_errors

services = Services()  # built on the first invocation, then reused while the container is warm
prepare_at_init(services, ("settings", "store", "embedder", "reranker"))  # SnapStart / provisioned concurrency: before the snapshot


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    with task_errors():
        inp: RerankInput = parse_state(RerankInput, event)
        failed = [out.failure for out in inp.retrieved if out.failure is not None]
        if failed and len(failed) == len(inp.retrieved):  # nothing to answer with: fail as the first one did
            raise_failure(failed[0])
        cairn = services.cairn(inp.tenant)
        reranker = cairn.reranker if inp.rerank else None
        stored = bool(getattr(reranker, "stored_vectors", False))  # scores the stored vectors: fetch them
        result = stages.rerank(
            hydrate(list(inp.retrieved), cairn.store, inp.tenant, vectors=stored),  # the state carried references
            inp.request,
            inp.plan,
            reranker=reranker,
            hotness_weight=cairn.hotness_weight,
            threshold=cairn.thinking.threshold,
            language=services.languages.for_tenant(inp.tenant),
        )
    if inp.rerank_failure:  # the Catch on Rerank: the retrieval order, and the trace says why
        for qr in result.query_results:
            qr.trace.stats.rerank_fallback = "error"
            qr.trace.add("fallback", detail=f"the rerank task failed ({inp.rerank_failure}); retrieval order kept")
    record_usage(inp.tenant, "search", **retrieval_counts(result))  # the workflow's usage record
    cairn.stats.record_many(result.query_results)
    cairn.stats.emit_emf()
    return result.to_dict(include_provenance=inp.request.include_provenance)
