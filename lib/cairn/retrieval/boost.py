"""A folder the conversation is about ranks first; it never hides the rest of the tenant.

A typed query with ``boost_uris`` (the planner's reading of the conversation, :mod:`cairn.planning.scope`)
is searched twice: over every root it may search (the whole tenant, memories and skills included)
and inside the boosted folders (dense, no feedback: there the entity's words match every document).
The two candidate lists are merged by URI: a candidate under a boosted folder scores its best
score plus ``MAX_MARGIN × boost``, every other keeps its own. So the folder's content wins over
look-alikes elsewhere (another hotel's identical parking page), and a better answer elsewhere still
comes first when the folder has nothing good: the result then comes from the whole tenant, and the
trace says which happened.
"""

from __future__ import annotations

from ..assemble import finite
from ..models import Candidate, ThinkingTrace
from ..uri import is_under

# Chosen by measurement (benchmarks/README.md, agent_day and dstc11): how far a boosted folder's
# content may rank above an equally scored candidate elsewhere, at boost 1.
MAX_MARGIN = 0.15


def under_any(uri: str, folders: tuple[str, ...]) -> bool:
    return any(uri == f or is_under(uri, f) for f in folders)


def merge_boosted(
    everywhere: list[Candidate],
    inside: list[Candidate],
    folders: tuple[str, ...],
    boost: float,
    hand_on: int,
    trace: ThinkingTrace,
) -> list[Candidate]:
    """``everywhere`` and ``inside`` merged (module doc), best first, cut to ``hand_on``; the
    trace records whether the best candidate came from the boosted folders."""
    margin = MAX_MARGIN * max(0.0, min(boost, 1.0))
    best: dict[str, Candidate] = {}
    for c in [*everywhere, *inside]:
        key = f"{c.uri}\x00{int(c.record.level)}"
        if key not in best or finite(c.score) > finite(best[key].score):
            best[key] = c
    merged = [
        c.model_copy(update={"score": finite(c.score) + margin, "reason": f"{c.reason}+boost"}) if under_any(c.uri, folders) else c
        for c in best.values()
    ]
    merged.sort(key=lambda c: (-finite(c.score), c.uri))
    merged = merged[:hand_on]
    top_inside = bool(merged) and under_any(merged[0].uri, folders)
    detail = (
        f"boosted {', '.join(folders)} by {margin:.3f}: the best match is "
        + ("inside the boosted folders" if top_inside else "outside them (the boosted folders had nothing better): answered from the whole tenant")
    )
    trace.add("keep" if top_inside else "fallback", detail=detail)
    return merged
