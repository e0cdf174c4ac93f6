"""Small pure functions that turn candidates into the matches an agent reads."""

from __future__ import annotations

import math
from collections.abc import Iterable

from . import uri as uris
from .models import Candidate, MatchedContext

DEFAULT_THRESHOLD = 0.1


def finite(score: float) -> float:
    """NaN and infinities become 0."""
    return score if math.isfinite(score) else 0.0


def above_threshold(candidates: Iterable[Candidate], threshold: float) -> list[Candidate]:
    """Keep candidates whose score is strictly greater than ``threshold``."""
    return [c for c in candidates if finite(c.score) > threshold]


def dedupe_by_uri(candidates: Iterable[Candidate]) -> list[Candidate]:
    """One candidate per URI (a directory's L0 and L1 share one), the highest score kept; best first."""
    best: dict[str, Candidate] = {}
    for c in candidates:
        if c.uri not in best or finite(c.score) > finite(best[c.uri].score):
            best[c.uri] = c
    return sorted(best.values(), key=lambda c: (-finite(c.score), c.uri))


def to_match(c: Candidate) -> MatchedContext:
    r = c.record
    return MatchedContext(
        context_type=r.context_type,
        uri=uris.display_uri(r.uri, r.level),
        level=r.level,
        score=round(finite(c.score), 6),
        abstract=r.abstract,
        tags=tuple(r.tags),
        title=r.title,
    )
