"""Reciprocal-rank fusion, shared by every backend that offers hybrid search.

Hybrid search runs a dense and a keyword (BM25) search for the same query, each ``depth``
deep, and fuses the two rankings: a record scores ``sum(1 / (k + rank))`` over the rankings it
appears in (ranks start at 1), with ``k = 60`` (Cormack et al., 2009). Both the local and the
OpenSearch store use these functions, so a hybrid score means the same on both.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

from .base import MAX_QUERY_LIMIT

K = TypeVar("K", bound=Hashable)

RRF_K = 60


def hybrid_depth(limit: int) -> int:
    """How deep each of the two searches of a hybrid query goes for ``limit`` results."""
    return min(max(2 * limit, 20), MAX_QUERY_LIMIT)


def rrf(rankings: Sequence[Sequence[K]], k: int = RRF_K) -> dict[K, float]:
    """Reciprocal-rank fusion: ``sum(1 / (k + rank))`` over the rankings a key appears in (rank from 1)."""
    fused: dict[K, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return fused


def rrf_top(rankings: Sequence[Sequence[K]], limit: int, k: int = RRF_K) -> list[tuple[K, float]]:
    """The ``limit`` best keys after fusion, best first; ties keep first-seen order (dense first)."""
    fused = rrf(rankings, k)
    best = sorted(fused, key=lambda key: -fused[key])[:limit]
    return [(key, fused[key]) for key in best]
