"""A typed query's retrieved candidates (:class:`RetrieveOutput`), and how a plan that carries
the conversation weighs the turn searched with the one before it against the turn alone.

The session planner searches a follow-up twice: as it is, and with the previous user turn before
it (:mod:`.planning.session_planner`). The second search counts only where it adds something: it
is left out when its best match is no better than the turn's, and when its lift is small and the
page it lifts is one the turn alone ranks low (a turn that moved on). Where it counts, its matches
are put on the turn's scale (:func:`merge_factor`) and combined with the turn's.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from cairn.core.models import Candidate, MatchedContext, ThinkingTrace, TypedQuery
from cairn.engine.assemble import document_key
from cairn.engine.retrieval.memories import background_of


class RetrieveOutput(BaseModel):
    """What the retrieve stage hands to rerank for one typed query."""

    query: TypedQuery
    candidates: list[Candidate] = Field(default_factory=list)
    trace: ThinkingTrace = Field(default_factory=ThinkingTrace)
    failure: dict[str, Any] | None = None  # set by the workflow when this typed query's retrieval failed
    # the best score of the query's own vector over what it may search, before thinking mode's
    # feedback moves it or a boost reorders it (one quick search): typed queries compare on it
    raw_best: float | None = None
    # the query's own vector's best matches there (URI, raw score), best first, ``BACKGROUND_RANK``
    # at most: the last is the query's background; a plan's typed queries compare on them
    raw_matches: list[tuple[str, float]] = Field(default_factory=list)
    evidence: str = ""  # what the query kept its candidates on (retrieval/evidence.py); "" when gated out or not asked


# A carried query whose best page the turn alone rates under ``SHARED_BEST`` of the way from its
# background to its best counts only if it lifts the best match by ``CARRIED_LIFT`` of that margin
# (chosen on both embedders' per-turn figures: benchmarks/README.md, issue 19, session 11)
CARRIED_LIFT = 0.25
SHARED_BEST = 0.5


def context_left_out(out: RetrieveOutput, outputs: list[RetrieveOutput]) -> str | None:
    """Why ``out``, a weighted typed query (the turn with the conversation's words,
    :mod:`.planning.session_planner`), is left out of the merge, or None when it counts. Adding the
    previous turn's words to a turn that moved on to a new topic makes its best match weaker (the
    words pull toward two topics at once), while a follow-up ("what about the fee?") matches better
    with what it follows; so the words count only when they help the best match. A turn that moved
    on can still match slightly better with the old topic's words when those find the old topic's
    page (the previous turn's answer) and the turn alone ranks that page at its background; such a
    lift must be clear (:data:`CARRIED_LIFT`) unless the turn itself rates that page
    (:data:`SHARED_BEST`). Full-weight queries, and states without raw scores, always count."""
    if out.query.weight >= 1.0 or out.raw_best is None:
        return None
    own = [o for o in outputs if o.query.weight >= 1.0 and o.raw_best is not None and o.failure is None]
    if not own:
        return None
    turn = max(own, key=lambda o: o.raw_best or 0.0)
    best = turn.raw_best or 0.0
    if out.raw_best <= best:
        return f"with the conversation's words the best match scores {out.raw_best:.3f}, no better than the turn alone ({best:.3f})"
    background = background_of([s for _, s in turn.raw_matches])
    if background is None or best <= background or not out.raw_matches:
        return None
    span = best - background
    lift = (out.raw_best - best) / span
    top = out.raw_matches[0][0]
    own_score = {document_key(uri): s for uri, s in reversed(turn.raw_matches)}.get(document_key(top))  # any chunk of the page
    shared = -1.0 if own_score is None else (own_score - background) / span  # not among the turn's: under its background
    if lift >= CARRIED_LIFT or shared >= SHARED_BEST:
        return None
    return (f"with the conversation's words the best match, {top}, scores {out.raw_best:.3f}: {lift:.2f} of the turn's margin "
            f"over its background above the turn's best ({best:.3f} over {background:.3f}), under {CARRIED_LIFT}, and the turn "
            f"alone rates it {'under its background' if shared < 0 else f'{shared:.2f} of the way from its background to its best'}, "
            f"under {SHARED_BEST}")


def merge_factor(out: RetrieveOutput, matches: list[MatchedContext], listed: list[tuple[RetrieveOutput, list[MatchedContext]]]) -> float:
    """What ``out``'s match scores are multiplied by when the typed queries are merged: 1 for a
    full-weight typed query; for a weighted one (the turn with the conversation's words), its
    ``weight`` times its matches put on the full-weight query's scale by the two raw bests: its best
    match lands at ``weight · (its raw best / the turn's raw best) · the turn's best final score``
    (1 at most).
    Thinking mode lifts the best match of each search toward 1 (feedback), so final scores of two
    searches are not on one scale; their raw bests are (one quick search of each query's vector),
    and they say by how much the conversation's words helped (measured: benchmarks/README.md)."""
    if out.query.weight >= 1.0:
        return 1.0
    own = [(o.raw_best, max((m.score for m in ms), default=0.0)) for o, ms in listed
           if o.query.weight >= 1.0 and o.raw_best is not None and o.failure is None]
    top = max((m.score for m in matches), default=0.0)
    if not own or out.raw_best is None or top <= 0:
        return out.query.weight
    raw_own, final_own = max(own)
    if raw_own <= 0 or final_own <= 0:
        return out.query.weight
    # scores stay in 0..1: the carried query's best match scores 1 at most
    return min(out.query.weight * (out.raw_best / raw_own) * (final_own / top), 1.0 / top)

