"""Small pure functions of hierarchical retrieval: propagation, pruning, pooling, convergence."""

from __future__ import annotations

import math
from collections.abc import Iterable

from cairn.core.models import Candidate


def propagate(child: float, parent: float, alpha: float) -> float:
    """``alpha·child + (1−alpha)·parent``; a parent of score 0 (a root) passes the child through."""
    if not math.isfinite(child):
        return 0.0
    if parent == 0.0 or not math.isfinite(parent):
        return child
    return alpha * child + (1.0 - alpha) * parent


def passes(score: float, threshold: float) -> bool:
    """A child at or under the threshold is neither kept nor expanded (strict ``>``)."""
    return math.isfinite(score) and score > threshold


def add_to_pool(pool: dict[str, Candidate], cand: Candidate) -> bool:
    """Keep the highest-scoring candidate per (URI, level); True if the pool changed."""
    key = f"{cand.record.uri}\x00{int(cand.record.level)}"
    old = pool.get(key)
    if old is None or cand.score > old.score:
        pool[key] = cand
        return True
    return False


def top_uris(pool: dict[str, Candidate], limit: int) -> frozenset[str]:
    """The URIs of the best ``limit`` candidates (a directory's L0 and L1 count once)."""
    best: dict[str, float] = {}
    for c in pool.values():
        best[c.record.uri] = max(best.get(c.record.uri, -math.inf), c.score)
    ranked = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))
    return frozenset(u for u, _ in ranked[:limit])


def ranked(pool: Iterable[Candidate]) -> list[Candidate]:
    return sorted(pool, key=lambda c: (-c.score, c.record.uri, int(c.record.level)))


class Convergence:
    """Tracks the two "nothing is changing" stop rules across rounds."""

    def __init__(self, patience: int = 3) -> None:
        self.patience = patience
        self._last_top: frozenset[str] | None = None
        self._last_size = -1
        self.top_unchanged = 0
        self.size_unchanged = 0

    def update(self, top: frozenset[str], size: int) -> str | None:
        """Record one round; returns the stop rule that fired, or None."""
        self.top_unchanged = self.top_unchanged + 1 if top == self._last_top else 0
        self.size_unchanged = self.size_unchanged + 1 if size == self._last_size else 0
        self._last_top, self._last_size = top, size
        if self.top_unchanged >= self.patience:
            return "converged"
        if self.size_unchanged >= self.patience:
            return "pool_stable"
        return None
