"""The three stages of a retrieval: plan, retrieve, rerank + assemble.

Each stage takes and returns typed models, so the Lambda of each Step Functions state and
the in-process pipeline call the same functions.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, Field

from .assemble import DEFAULT_THRESHOLD, above_threshold, dedupe_by_uri, to_match
from .embeddings import Embedder
from .models import Candidate, FindResult, QueryPlan, QueryResult, ThinkingTrace, TypedQuery
from .requests import FindRequest
from .retrieval.quick import quick_search
from .retrieval.scope import roots_for
from .vectorstores import VectorStore


class RetrieveOutput(BaseModel):
    """What the retrieve stage hands to rerank for one typed query."""

    query: TypedQuery
    candidates: list[Candidate] = Field(default_factory=list)
    trace: ThinkingTrace = Field(default_factory=ThinkingTrace)


def plan(request: FindRequest) -> QueryPlan:
    """The raw-query plan: the query as it is, across the requested type (or every type)."""
    tq = TypedQuery(
        query=request.query,
        context_type=request.context_type,
        intent="raw query",
        target_uris=request.target_uris,
    )
    return QueryPlan(reasoning="no planner configured: the raw query is searched as it is", queries=(tq,), planner="raw")


def retrieve(
    typed_query: TypedQuery, request: FindRequest, *, tenant: str, store: VectorStore, embedder: Embedder
) -> RetrieveOutput:
    """Search for one typed query; hand on candidates for rerank."""
    started = time.perf_counter()
    vector = embedder.embed_one(typed_query.query).tolist()
    roots = roots_for(typed_query.context_type, typed_query.target_uris, request.user)
    candidates, trace = quick_search(store, tenant, vector, roots, request.limit, request.filter)
    trace.stats.latency_ms = (time.perf_counter() - started) * 1000
    return RetrieveOutput(query=typed_query, candidates=candidates, trace=trace)


def rerank(outputs: list[RetrieveOutput], request: FindRequest, plan_: QueryPlan | None = None) -> FindResult:
    """Threshold, dedupe by URI, cut to ``limit`` per typed query, bucket by context type."""
    threshold = DEFAULT_THRESHOLD if request.score_threshold is None else request.score_threshold
    result = FindResult(query_plan=plan_)
    seen: dict[str, float] = {}
    for out in outputs:
        kept = dedupe_by_uri(above_threshold(out.candidates, threshold))[: request.limit]
        out.trace.stats.candidates_excluded += len(out.candidates) - len(kept)
        matches = [to_match(c) for c in kept]
        result.query_results.append(
            QueryResult(query=out.query, matches=matches, tiers={m.uri: c.reason for m, c in zip(matches, kept)}, trace=out.trace)
        )
        for m in matches:
            if m.uri in seen and seen[m.uri] >= m.score:
                continue
            bucket = getattr(result, m.context_type.bucket)
            bucket[:] = [x for x in bucket if x.uri != m.uri]
            bucket.append(m)
            seen[m.uri] = m.score
    for name in ("memories", "resources", "skills"):
        getattr(result, name).sort(key=lambda m: -m.score)
    return result
