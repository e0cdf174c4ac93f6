"""Searching one user's memories, and nothing else: their memory leaves (L2) under
``cairn://user/{user}/memories`` (optionally some categories), dense + BM25 fused by the store
(hybrid) where the backend declares it, else dense. Memories are short and full of names, dates
and rare words, where keyword matching is as strong as the embedding: on a conversation benchmark, hybrid finds
far more of the evidence than dense alone (benchmarks/README.md). Another user's memories cannot
match: the user's root is part of the filter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cairn.core.models import ContextRecord, Level
from cairn.engine.memory.models import check_category, memory_root
from cairn.engine.retrieval.scope import keyword_statistics
from cairn.ports.embeddings import Embedder
from cairn.ports.sessions.base import check_id
from cairn.ports.vectorstores import VectorQuery, VectorStore
from cairn.ports.vectorstores.base import SearchMode


@dataclass(frozen=True)
class MemoryHit:
    record: ContextRecord
    score: float  # the store's score: fused (hybrid) or cosine (dense)


def search_memories(
    store: VectorStore,
    embedder: Embedder,
    tenant: str,
    user: str,
    query: str,
    *,
    limit: int = 10,
    categories: Sequence[str] = (),
) -> list[MemoryHit]:
    """The ``limit`` best memories of ``user`` for ``query`` (see the module doc)."""
    check_id("user", user)
    root = memory_root(user)
    scope: dict = {"ancestors": root, "level": int(Level.DETAIL)}
    if categories:
        scope = {"$and": [scope, {"parent_uri": {"$in": [f"{root}/{check_category(c)}" for c in categories]}}]}
    vector = embedder.embed([query], input_type="query")[0].tolist()
    hybrid = store.capabilities().hybrid and bool(query.strip())
    hits = store.query(VectorQuery(
        tenant=tenant, vector=vector, text=query if hybrid else None,
        mode=SearchMode.HYBRID if hybrid else SearchMode.DENSE, filter=scope, limit=limit,
        keyword_statistics=keyword_statistics([root]),
    ))
    return [MemoryHit(h.record, h.score) for h in hits]
