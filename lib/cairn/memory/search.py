"""Searching one user's memories: dense and keyword (BM25) rankings fused by reciprocal rank.

Memories are short, personal and full of names, dates and rare words, where keyword matching is
at least as strong as the embedding (see the LoCoMo figures in benchmarks/README.md). Rank fusion
keeps both rankings' say without putting their scores on one scale; each hit keeps its dense
cosine as ``score`` so that a threshold means what it means elsewhere. A store without keyword
search (a capability) gets the dense ranking alone. Only memory leaves (L2) are searched, only
under ``cairn://user/{user}/memories`` (optionally some categories): another user's memories
cannot match.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..embeddings import Embedder
from ..models import ContextRecord, Level
from ..sessions.base import check_id
from ..vectorstores import VectorQuery, VectorStore
from ..vectorstores.base import MAX_QUERY_LIMIT, SearchMode
from .models import check_category, memory_root

RRF_K = 60


@dataclass(frozen=True)
class MemoryHit:
    record: ContextRecord
    rank_score: float  # the fused reciprocal-rank score the hits are ordered by
    score: float  # dense cosine (0 when only the keyword ranking found it)


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal-rank fusion: ``sum over rankings of 1 / (k + rank)``, rank from 1."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return fused


def search_memories(
    store: VectorStore,
    embedder: Embedder,
    tenant: str,
    user: str,
    query: str,
    *,
    limit: int = 10,
    categories: Sequence[str] = (),
    depth: int | None = None,
    rrf_k: int = RRF_K,
) -> list[MemoryHit]:
    """The ``limit`` best memories of ``user`` for ``query`` (see the module doc)."""
    check_id("user", user)
    root = memory_root(user)
    scope: dict = {"ancestors": root, "level": int(Level.DETAIL)}
    if categories:
        scope = {"$and": [scope, {"parent_uri": {"$in": [f"{root}/{check_category(c)}" for c in categories]}}]}
    deep = min(depth or max(3 * limit, 50), MAX_QUERY_LIMIT)
    vector = embedder.embed([query], input_type="query")[0].tolist()
    requests = [VectorQuery(tenant=tenant, vector=vector, filter=scope, limit=deep)]
    if store.capabilities().keyword and query.strip():
        requests.append(VectorQuery(tenant=tenant, text=query, mode=SearchMode.KEYWORD, filter=scope, limit=deep))
    results = store.query_many(requests)
    records = {h.record.id: h.record for hits in results for h in hits}
    cosine = {h.record.id: h.score for h in results[0]}
    fused = rrf([[h.record.id for h in hits] for hits in results], rrf_k)
    ranked = sorted(fused, key=lambda i: (-fused[i], -cosine.get(i, 0.0)))[:limit]
    return [MemoryHit(records[i], fused[i], cosine.get(i, 0.0)) for i in ranked]
