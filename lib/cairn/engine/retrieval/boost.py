"""A folder the conversation is about ranks first; it never hides the rest of the tenant.

A typed query with ``boost_uris`` (the planner's reading of the conversation, :mod:`cairn.engine.planning.scope`)
is searched twice: over every root it may search (the whole tenant, memories and skills included),
as it would be without the boost (hybrid by default), and inside the boosted folders (dense, no
feedback: there the entity's words match every document). A candidate under a boosted folder is
*good* when it scores at least ``GOOD_RATIO`` of the best candidate anywhere (in a topic folder,
``TypedQuery.boost_good``: at least ``TOPIC_GOOD_RATIO`` of the way from the query's background to
the best), on the inside's scale: when the two searches score differently (hybrid everywhere, dense
inside), the best anywhere is the query's own dense best (``best``). The good ones rank first (so
one hotel's "animals are welcome" page beats another hotel's page that shares the word "dog"), then
everything else in the whole tenant's order, its scores scaled under the last good one. When the
folders hold nothing good, the order is the whole tenant's, and the trace says which happened.

A folder of a kind also steps aside when the question is about something no instance holds
(:func:`asked_elsewhere`): its best match scores under the query's background and the best page
anywhere lies in no folder of a kind. ``GOOD_RATIO`` of the best cannot tell this on an embedder
whose cosines sit in a narrow high band (multilingual-e5: a Jira page at 0.77 for an audit-log
question whose best page scores 0.84); the background can, and the test of where the best page lies
keeps the spoken dialogues' boosts, two thirds of which score under their background, because
their best page anywhere is another entity's (benchmarks/README.md, issue 19, session 14).

Searching the whole tenant dense as well (until session 13) lost its keyword evidence: on
multilingual-e5, whose dense scores rank folder summaries over pages, "how long is that history
kept?" a turn after a question about Jira lost the audit-log page that ``find`` ranks first
(benchmarks/README.md, issue 19, session 13).
"""

from __future__ import annotations

from collections.abc import Sequence

from cairn.core.models import Candidate, Level, ThinkingTrace
from cairn.core.uri import is_under
from cairn.core.uri import parent as parent_of
from cairn.engine.assemble import document_key, finite
from cairn.engine.retrieval.kinds import folder_kinds
from cairn.engine.retrieval.memories import background_of
from cairn.ports.vectorstores import VectorStore

# Chosen by measurement (benchmarks/README.md): how close to the best match anywhere a
# match inside the conversation's folder must come to rank before it. Low on purpose: once the
# conversation names the folder, its page that answers the question at all beats another
# folder's page that answers it better (0.5 sent 6 of 100 spoken dialogues to another entity's
# reviews; the right entity's best match scored 0.41-0.49 of the best one anywhere).
GOOD_RATIO = 0.3
# A topic folder (not one of a kind; planning/scope.py) ranks first only where its match is about as
# good as the best anywhere: at least halfway from the query's background (its 10th raw match) to its
# best, a bar that holds on any embedder's score scale (a share of the best does not: multilingual-e5
# scores every page 0.8-0.9), the same "halfway" as :data:`cairn.engine.carried.SHARED_BEST`. Its name decides
# between comparable answers and does not override a clearly better one elsewhere. Measured (MiniLM):
# a customer's contract for "what are the payment terms?" lies 0.62 of the way to the best (another
# customer's), a handbook's office/ parking page 0.09 for "my computer got stolen on the train", two
# turns after a question about the office car park (benchmarks/README.md, issue 19, session 12).
TOPIC_GOOD_RATIO = 0.5


def under_any(uri: str, folders: tuple[str, ...]) -> bool:
    return any(uri == f or is_under(uri, f) for f in folders)


def asked_elsewhere(
    store: VectorStore, tenant: str, vector: list[float], folders: tuple[str, ...], inside: Sequence[Candidate],
    everywhere: Sequence[Candidate], background: float | None, roots: Sequence[str], trace: ThinkingTrace | None = None,
) -> str | None:
    """Why a boosted folder *of a kind* does not rank first for this query, or None when it does.

    A folder of a kind is boosted because the conversation named one instance (a hotel, an
    integration): the name picks which instance's page answers a question every instance answers
    ("is there parking?"). It does not pick when the question is about something no instance holds:
    the folder's best match scores under the query's background (its ``BACKGROUND_RANK``-th match
    anywhere) and the best page anywhere lies in no folder of a kind, not even another instance's
    ("how long is that history kept?", asked about the audit log two turns after naming Jira).
    ``everywhere``: the whole tenant's matches (the best page among them is the one looked at: a
    folder's summary answers nothing, and multilingual-e5 ranks the named folder's summary first);
    ``background``: the query's (:func:`.memories.background_of` its own raw scores anywhere, on the
    scale of ``inside``; None: no raw scores, nothing to judge by). One batched search and one fetch (:func:`.kinds.folder_kinds`), only when the rest holds; ``trace``
    counts them."""
    best_inside = max((finite(c.score) for c in inside), default=0.0)
    pages = [c for c in everywhere if c.record.level is Level.DETAIL]
    if background is None or best_inside >= background or not pages:
        return None
    top = document_key(max(pages, key=lambda c: finite(c.score)).uri)
    if under_any(top, folders):
        return None
    above: list[str] = []
    node: str | None = top
    while node and any(is_under(node, r) for r in roots):
        above.append(node)
        node = parent_of(node)
    kinds = folder_kinds(store, tenant, vector, above)
    if trace is not None:
        trace.stats.vector_calls += 1
        trace.stats.fetch_calls += bool(kinds)  # no folder with a sibling and a child: no fetch
    if any(kinds.values()):
        return None  # another instance's page: the name still picks the instance
    said = f"its best match scores {best_inside:.3f}" if inside else "nothing inside passes the score threshold"
    return (f"{said}, under the query's background {background:.3f}, and the best match anywhere, {top}, lies in "
            "no folder of a kind: the question is not about one instance")


def merge_boosted(
    everywhere: list[Candidate],
    inside: list[Candidate],
    folders: tuple[str, ...],
    boost: float,
    hand_on: int,
    trace: ThinkingTrace,
    good_ratio: float | None = None,
    background: float | None = None,
    best: float | None = None,
    elsewhere: str | None = None,
) -> list[Candidate]:
    """``everywhere`` and ``inside`` merged (module doc), best first, cut to ``hand_on``; the
    trace records whether the best candidate came from the boosted folders. ``boost`` (the
    planner's strength) is recorded; any mention strong enough to be boosted ranks its folder.
    ``good_ratio``: how far from the background (the 10th best score) to the best a match inside must
    reach (``TOPIC_GOOD_RATIO``); None: ``GOOD_RATIO`` of the best score. ``background``: the query's
    (None: the 10th of ``everywhere``, or its last). ``best``: when ``everywhere`` is scored on
    another scale than ``inside`` (hybrid against dense), the best score anywhere on the inside's
    scale; the good matches then come from ``inside`` alone and the rest keeps ``everywhere``'s order.
    ``elsewhere``: why nothing inside ranks first (:func:`asked_elsewhere`); the answer is then the
    whole tenant's."""
    apart = best is not None
    merged_best: dict[str, Candidate] = {}
    for c in [*everywhere, *inside] if not apart else inside:
        key = f"{c.uri}\x00{int(c.record.level)}"
        if key not in merged_best or finite(c.score) > finite(merged_best[key].score):
            merged_best[key] = c
    top = max([finite(c.score) for c in merged_best.values()] + ([finite(best)] if best is not None else []), default=0.0)
    if good_ratio is None:
        bar, said = GOOD_RATIO * top, f"{GOOD_RATIO:g} of the best match"
    else:
        background = background if background is not None else background_of([finite(c.score) for c in everywhere]) or 0.0
        bar = background + good_ratio * max(top - background, 0.0)
        said = f"{good_ratio:g} of the way from its background to the best match"
    good = sorted((c for c in merged_best.values() if under_any(c.uri, folders) and finite(c.score) >= bar),
                  key=lambda c: (-finite(c.score), c.uri)) if elsewhere is None else []
    if apart:
        taken = {(c.uri, c.record.level) for c in good}
        rest = sorted((c for c in everywhere if (c.uri, c.record.level) not in taken), key=lambda c: (-finite(c.score), c.uri))
    else:
        rest = sorted((c for c in merged_best.values() if c not in good), key=lambda c: (-finite(c.score), c.uri))
    if good and rest and finite(rest[0].score) >= finite(good[-1].score):  # scale the rest under the last good one
        factor = 0.999 * finite(good[-1].score) / finite(rest[0].score)
        rest = [c.model_copy(update={"score": finite(c.score) * factor}) for c in rest]
    good = [c.model_copy(update={"reason": f"{c.reason}+boost"}) for c in good]
    merged = (good + rest)[:hand_on]
    detail = (
        f"boosted {', '.join(folders)} (strength {boost:.2f}): {len(good)} match(es) inside rank first"
        if good else
        f"boosted {', '.join(folders)} (strength {boost:.2f}): "
        + (elsewhere if elsewhere else f"nothing inside scores {said}") + ", answered from the whole tenant"
    )
    trace.add("keep" if good else "fallback", detail=detail)
    return merged
