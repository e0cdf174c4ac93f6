"""The three stages of a retrieval: plan, retrieve, rerank + assemble.

Each stage takes and returns typed models, so the Lambda of each Step Functions state and
the in-process pipeline call the same functions.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from cairn.core.models import (
    Candidate,
    ContextType,
    FindResult,
    Level,
    MatchedContext,
    QueryPlan,
    QueryResult,
    ScoreTerm,
    ThinkingTrace,
    TraceStats,
    TypedQuery,
    combine_scores,
)
from cairn.core.requests import FindRequest
from cairn.core.uri import is_under
from cairn.engine.assemble import (
    DEFAULT_THRESHOLD,
    above_threshold,
    blend_hotness,
    dedupe_by_uri,
    document_key,
    finite,
    to_match,
)
from cairn.engine.carried import RetrieveOutput, context_left_out, merge_factor
from cairn.engine.explain import merged, query_label, reranked, rescaled
from cairn.engine.planning.base import Planner, raw_query
from cairn.engine.retrieval.boost import asked_elsewhere, merge_boosted
from cairn.engine.retrieval.evidence import has_evidence, inherits_words
from cairn.engine.retrieval.memories import (
    BACKGROUND_RANK,
    STANDING_REASON,
    background_of,
    lifted,
    memory_roots,
    questions_capped,
    questions_under_facts,
    relevance_bar,
    relevant,
    standing_beside,
)
from cairn.engine.retrieval.profile import standing_facts
from cairn.engine.retrieval.quick import quick_search
from cairn.engine.retrieval.scope import roots_for
from cairn.engine.retrieval.thinking import ThinkingConfig, thinking_search
from cairn.ports.embeddings import Embedder
from cairn.ports.embeddings.base import covers
from cairn.ports.rerank.base import RERANK_REASON, Reranker
from cairn.ports.sessions.base import SessionView
from cairn.ports.usecounts import UseCounts, with_uses
from cairn.ports.vectorstores import VectorStore
from cairn.ports.vectorstores.fusion import UNCOVERED_DENSE_WEIGHT, uncovered_event


def plan(request: FindRequest, planner: Planner | None = None, session: SessionView | None = None) -> QueryPlan:
    """Plan the typed queries. Without a planner (``find()``), the raw query as it is, across
    the requested type (or every type). A planner never raises: it falls back to the raw query."""
    if planner is not None:
        return planner.plan(request.query, session, context_type=request.context_type, target_uris=request.target_uris)
    tq = raw_query(request.query, request.context_type, request.target_uris)
    return QueryPlan(reasoning="no planner: the raw query is searched as it is", queries=(tq,), planner="raw")


def carries_conversation(queries: Sequence[TypedQuery]) -> bool:
    """Whether a plan searches the turn a second time with the conversation's words (a weighted
    typed query: :mod:`.planning.session_planner`)."""
    return any(q.weight < 1.0 for q in queries)


def for_plan(request: FindRequest, plan_: QueryPlan, session: SessionView | None = None) -> FindRequest:
    """The request ``plan_``'s typed queries are retrieved with: mode ``auto`` (``search()``'s
    default) becomes ``quick`` for a plan that carries the conversation, and for the first turn of a
    conversation (``session`` holds no user message yet, nor a summary of earlier ones) unless a
    folder is boosted; else ``thinking``.

    Such a plan's typed queries search the same turn with and without the previous one, and their
    matches are combined (:func:`combined`), which needs the raw scale of a flat search: thinking
    mode's feedback and propagation move each search's scores by a different amount (a folder's
    siblings lifted with it, the best match pulled toward 1). Measured on conversations in topic
    folders (benchmarks/README.md, issue 19): session search nDCG@10 0.868 -> 0.874 and turns
    under ``find`` 16 -> 6; with multilingual-e5 0.744 -> 0.792 (21 -> 5 turns). A conversation's
    first turn is searched as ``find`` searches it: thinking mode there ranked 27 of 164 first turns
    of two public conversational sets under ``find`` for no gain on average, and the quality gate's
    sets hold or gain (benchmarks/README.md, issue 38). A plan of one typed query without a session,
    or with a folder the conversation is about, keeps thinking mode, whose feedback and folder
    descent were measured to help there."""
    if request.mode != "auto":
        return request
    first_turn = (session is not None and not session.summary  # a summary holds earlier turns
                  and not any(m.role == "user" for m in session.recent) and not any(q.boost_uris for q in plan_.queries))
    return request.model_copy(update={"mode": "quick" if carries_conversation(plan_.queries) or first_turn else "thinking"})


def combined(scores: Sequence[float]) -> float:
    """One URI's score from the typed queries of a conversation-carrying plan that found it:
    ``1 − Π(1 − s)`` (each weighted match is evidence of its own; a URI that the turn and the
    turn with the conversation both find ranks above one either finds alone; stays in 0..1)."""
    return combine_scores("noisy_or", [ScoreTerm(label="typed query", score=s) for s in scores])


def retrieve(
    typed_query: TypedQuery,
    request: FindRequest,
    *,
    tenant: str,
    store: VectorStore,
    embedder: Embedder,
    thinking: ThinkingConfig | None = None,
    rerank_follows: bool = False,
    language: str | None = None,
    searched: Sequence[RetrieveOutput] = (),
    vector: list[float] | None = None,
) -> RetrieveOutput:
    """Search for one typed query (quick or thinking); hand on candidates for rerank:
    ``2·limit`` when a reranker follows, else ``limit``. A typed query with ``boost_uris`` is
    searched everywhere it may search and inside those folders, merged (:mod:`.retrieval.boost`).
    A query in a language the embedder was not trained on (``language``: the tenant's fixed one,
    else detected) is fused with the keyword side leading (``UNCOVERED_DENSE_WEIGHT``) in every
    search it makes, those that would have been dense only included. ``searched``: the plan's typed
    queries retrieved before (one whose text this query holds may have passed the gate for it);
    ``vector``: the query's, when the caller embedded it already."""
    started = time.perf_counter()
    if request.mode == "auto":  # not resolved for the whole plan (for_plan): this typed query's own
        request = for_plan(request, QueryPlan(reasoning="", queries=(typed_query,)))
    vector = vector if vector is not None else embedder.embed_one(typed_query.query).tolist()
    roots = roots_for(typed_query.context_type, typed_query.target_uris, request.user)
    hand_on = 2 * request.limit if rerank_follows else request.limit
    threshold = request.score_threshold if request.score_threshold is not None else (thinking or ThinkingConfig()).threshold
    gate = ThinkingTrace(stats=TraceStats(mode="quick" if request.mode == "quick" else "thinking"))
    alike = [(o.query.query, o.evidence) for o in searched if _same_roots(o.query, typed_query)]
    evidence = "words" if inherits_words(typed_query.query, alike) else ""
    if roots and threshold >= 0 and not evidence and not (evidence := has_evidence(
        store, embedder, tenant, typed_query.query, vector, roots, request.filter, gate
    )):  # a negative threshold asks for every candidate, evidence or not
        gate.stats.stop_reason = "no_evidence"
        gate.stats.latency_ms = (time.perf_counter() - started) * 1000
        return RetrieveOutput(query=typed_query, candidates=[], trace=gate)
    # Folders the planner narrowed the query to: inside them the query's entity words match every
    # document, so keywords and feedback stop discriminating (measured: benchmarks/README.md).
    # ``hybrid=None`` (search()'s "auto") is hybrid everywhere else.
    folders = tuple(u for u in typed_query.boost_uris if any(u == r or is_under(u, r) for r in roots))
    folders = folders if not typed_query.target_uris else ()
    # A boosted query searches the whole tenant as it would unboosted (hybrid by default) and inside
    # the folders dense; whether a match inside is good is judged against the query's own dense
    # scores everywhere, so "good" means one thing on either side. Planners boost a folder that names
    # an entity, never a topic folder named by an ordinary word (planning/scope.py)
    hybrid = request.hybrid if request.hybrid is not None else True
    # every type for a known user: the memories get a search of their own (retrieval/memories.py)
    own_memories = typed_query.context_type is None and not typed_query.target_uris and bool(request.user)
    mem_roots = memory_roots(request.user) if own_memories else []
    search_roots = [r for r in roots if r not in mem_roots]
    uncovered = covers(embedder, typed_query.query, language)
    weight = None if uncovered is None else UNCOVERED_DENSE_WEIGHT
    # the embedder's cosines in a language it was not trained on rank noise: every search of this
    # query (inside narrowed folders and with hybrid off too) is fused with the keywords leading
    hybrid = hybrid or uncovered is not None
    candidates, trace = _search(typed_query.query, vector, search_roots, request, store, tenant, thinking, hand_on, hybrid,
                                narrowed=False, dense_weight=weight)
    if uncovered is not None:
        trace.events.insert(0, uncovered_event(embedder.name, store, uncovered, weight))
    inside: list[Candidate] = []
    inside_hybrid = (request.hybrid if request.hybrid is not None else False) or uncovered is not None
    # the scale a boosted query's matches inside are judged on
    raw_hybrid = inside_hybrid if folders else hybrid
    if folders:
        inside, inside_trace = _search(typed_query.query, vector, list(folders), request, store, tenant, thinking, hand_on,
                                       inside_hybrid, narrowed=True, dense_weight=weight)
        trace.events += inside_trace.events
        trace.stats.vector_calls += inside_trace.stats.vector_calls
        trace.stats.rounds += inside_trace.stats.rounds
    # the query's own raw scores (a boosted query's are searched apart: its merged scores are moved);
    # a topic folder's boost measures its matches against their background (retrieval/boost.py)
    raw_scores = _raw_scores(typed_query.query, vector, search_roots, candidates or inside, request,
                             store, tenant, raw_hybrid, weight, trace, moved=request.mode == "thinking" or bool(folders),
                             hand_on=hand_on, background=own_memories)
    raw = raw_scores[0][1] if raw_scores else 0.0
    if folders:
        background = background_of([s for _, s in raw_scores])
        # a folder of a kind yields when the question is about something no instance holds (retrieval/boost.py)
        elsewhere = None if typed_query.boost_good is not None else asked_elsewhere(
            store, tenant, vector, folders, inside, candidates, background, search_roots, trace)
        candidates = merge_boosted(candidates, inside, folders, typed_query.boost, hand_on, trace, typed_query.boost_good,
                                   background, best=raw if raw_hybrid != hybrid else None, elsewhere=elsewhere)
    if own_memories and request.user:
        # memories compete with the whole tenant's matches, on the scale of its search (a boosted
        # query's own raw scores above are the folder's scale: one more quick search when they differ)
        mem_scores = raw_scores if raw_hybrid == hybrid else _raw_scores(
            typed_query.query, vector, search_roots, candidates, request, store, tenant, hybrid, weight, trace,
            moved=True, hand_on=hand_on, background=True)
        standing = _standing(typed_query, vector, search_roots, request, store, tenant, trace)
        candidates = candidates + _own_memories(typed_query.query, vector, mem_roots, candidates, [s for _, s in mem_scores],
                                                request, store, tenant, hybrid, weight, threshold, trace, standing)
    elif typed_query.context_type is ContextType.RESOURCE and request.context_type is None and (standing := _standing(
            typed_query, vector, search_roots, request, store, tenant, trace)):
        # a planner that typed its queries (an LLM's plan) of a request for every type: the facts come
        # with its resource query, on the scale of the memories the rule keeps beside an untyped query
        scores = [s for _, s in raw_scores]
        bar = max(relevance_bar(raw, background=background_of(scores)), threshold + 1e-6)
        candidates = candidates + lifted(standing_beside([], standing, bar), max((finite(c.score) for c in candidates), default=0.0))
    trace.events[:0] = gate.events
    trace.stats.latency_ms = (time.perf_counter() - started) * 1000
    return RetrieveOutput(query=typed_query, candidates=candidates, trace=trace, raw_best=raw,
                          raw_matches=raw_scores[:BACKGROUND_RANK], evidence=evidence)


def _same_roots(a: TypedQuery, b: TypedQuery) -> bool:
    return (a.context_type, a.target_uris) == (b.context_type, b.target_uris)


def _raw_scores(
    text: str, vector: list[float], roots: list[str], candidates: list[Candidate], request: FindRequest,
    store: VectorStore, tenant: str, hybrid: bool, weight: float | None, trace: ThinkingTrace, *, moved: bool,
    hand_on: int, background: bool,
) -> list[tuple[str, float]]:
    """The raw scores of the query's own vector under ``roots`` with their URIs, best first (their
    best is ``RetrieveOutput.raw_best``; the first ``BACKGROUND_RANK`` give the query's background):
    the candidates' own in an unboosted quick search, else one quick search of ``BACKGROUND_RANK``;
    with ``background`` (the user's memories will be compared) also when the limit cut the
    candidates to fewer than that."""
    if not candidates:
        return []
    short = background and BACKGROUND_RANK > len(candidates) == hand_on  # cut by the limit before the background
    if not moved and not short:
        return sorted(((c.record.uri, finite(c.score)) for c in candidates), key=lambda m: -m[1])
    ref, ref_trace = quick_search(store, tenant, vector, roots, BACKGROUND_RANK, request.filter, text if hybrid else None,
                                  request.collapse_chunks, weight)
    trace.stats.vector_calls += ref_trace.stats.vector_calls
    scores = sorted(((c.record.uri, finite(c.score)) for c in ref), key=lambda m: -m[1])
    raw = scores[0][1] if scores else 0.0
    searched = next((e.detail for e in ref_trace.events if e.kind == "global_search"), "")
    trace.add("global_search", score=round(raw, 4), detail=f"raw best {raw:.3f} of the query's own vector ({searched})")
    return scores


def _standing(typed_query: TypedQuery, vector: list[float], page_roots: list[str], request: FindRequest,
              store: VectorStore, tenant: str, trace: ThinkingTrace) -> list[tuple[Candidate, float]]:
    """The user's standing facts that bear on a full-weight, untargeted query (:mod:`.retrieval.profile`);
    a weighted one (the turn with the conversation's words) adds nothing the turn's own does not."""
    if not request.user or typed_query.weight < 1.0 or typed_query.target_uris:
        return []
    return standing_facts(store, tenant, vector, request.user, page_roots, request.filter, trace)


def _own_memories(
    text: str, vector: list[float], mem_roots: list[str], others: list[Candidate], raw_scores: list[float],
    request: FindRequest, store: VectorStore, tenant: str, hybrid: bool, weight: float | None, threshold: float,
    trace: ThinkingTrace, standing: Sequence[tuple[Candidate, float]] = (),
) -> list[Candidate]:
    """The user's memories as relevant as ``others`` (the other roots' candidates, ``raw_scores``
    the raw scores of the query's vector there, best first), compared on raw scores and listed next
    to the others (:mod:`.retrieval.memories`); with the ``standing`` facts that bear on the query
    (:mod:`.retrieval.profile`), each at least at the bar the others had to pass, after them."""
    raw_best = raw_scores[0] if raw_scores else 0.0
    background = background_of(raw_scores)
    found, mem_trace = quick_search(store, tenant, vector, mem_roots, request.limit, request.filter, text if hybrid else None,
                                    request.collapse_chunks, weight)
    found = [c for c in found if c.record.level is Level.DETAIL]  # a memory folder's summary cites nothing
    trace.stats.vector_calls += mem_trace.stats.vector_calls
    kept = questions_under_facts(relevant(found, raw_best, threshold, background=background))
    kept += standing_beside(kept, standing, max(relevance_bar(raw_best, background=background), threshold + 1e-6))
    kept = lifted(kept, max((finite(c.score) for c in others), default=0.0))
    best_mem = max((finite(c.score) for c in found), default=0.0)
    behind = "" if background is None else f", background {background:.3f}"
    trace.add("keep", detail=f"memories of {request.user}: {len(kept)} of {len(found)} as relevant as the other matches "
              f"(raw scores: best other {raw_best:.3f}{behind}, best memory {best_mem:.3f})")
    return kept


def _search(
    text: str, vector: list[float], roots: list[str], request: FindRequest, store: VectorStore, tenant: str,
    thinking: ThinkingConfig | None, hand_on: int, hybrid: bool, *, narrowed: bool, dense_weight: float | None = None,
) -> tuple[list[Candidate], ThinkingTrace]:
    """One quick or thinking search under ``roots`` (``dense_weight``: the hybrid fusion's, None: the default)."""
    hybrid_text = text if hybrid else None  # dense + keyword, in either mode
    collapse = request.collapse_chunks  # one result per document unless asked
    if request.mode == "thinking":
        cfg = thinking or ThinkingConfig()
        if request.score_threshold is not None:
            cfg = replace(cfg, threshold=request.score_threshold)
        if narrowed:  # feedback would pull the query toward what the narrowed folders' documents all share
            cfg = replace(cfg, feedback_docs=0)
        return thinking_search(
            store, tenant, vector, roots, request.limit, request.filter, cfg, hand_on,
            hybrid_text=hybrid_text, collapse_chunks=collapse, dense_weight=dense_weight,
        )
    return quick_search(store, tenant, vector, roots, hand_on, request.filter, hybrid_text, collapse, dense_weight)


def _rescore(out: RetrieveOutput, reranker: Reranker | None, hotness_weight: float, language: str | None = None,
             counts: UseCounts | None = None) -> list[Candidate]:
    """One rerank call per typed query (its fallbacks recorded in the trace), then hotness (with
    the use counts read back from ``counts``, where they are kept beside the vectors)."""
    candidates = out.candidates
    # a standing fact bears on the query through its pages, not its words (retrieval/profile.py): the
    # reranker reads words, so the fact is not sent and keeps its place relative to the best of the others
    others = [c for c in candidates if c.reason != STANDING_REASON]
    if reranker is not None and others:
        outcome = reranker.rerank(out.query.query, others, language=language)
        before = {(c.uri, int(c.record.level)): c for c in others}
        best_before = max((finite(c.score) for c in others), default=0.0)
        factor = max((finite(c.score) for c in outcome.candidates), default=0.0) / best_before if best_before > 0 else 1.0
        candidates = [reranked(before[(c.uri, int(c.record.level))], c, outcome.reranker)
                      if c.reason == RERANK_REASON and (c.uri, int(c.record.level)) in before else c
                      for c in outcome.candidates]
        # a moved score's explanation would be stale: it is dropped (engine/explain.py)
        candidates += [c.model_copy(update={"score": finite(c.score) * factor, "explanation": None})
                       for c in out.candidates if c.reason == STANDING_REASON]
        out.trace.stats.rerank_used = outcome.used
        out.trace.stats.rerank_fallback = outcome.fallback
        out.trace.add("rerank", detail=f"{outcome.reranker}: sent={outcome.sent} used={outcome.used}")
        if outcome.fallback:
            out.trace.add("fallback", detail=f"rerank kept vector scores: {outcome.fallback}")
    if hotness_weight > 0:
        now = time.time()
        candidates = [blend_hotness(c, hotness_weight, now) for c in with_uses(candidates, counts)]
    return candidates


def per_type(candidates: list[Candidate], limit: int) -> list[Candidate]:
    """At most ``limit`` candidates of each context type, order kept: a user's memories do not
    take the places of resources, nor resources theirs."""
    seen: dict[str, int] = {}
    out = []
    for c in candidates:
        t = c.record.context_type.value
        if seen.get(t, 0) < limit:
            seen[t] = seen.get(t, 0) + 1
            out.append(c)
    return out


def _rescore_all(outputs: list[RetrieveOutput], reranker: Reranker | None, hotness_weight: float,
                 language: str | None = None, counts: UseCounts | None = None) -> list[list[Candidate]]:
    """:func:`_rescore` of every typed query; side by side when a reranker waits on a network."""
    if reranker is None or len(outputs) < 2:
        return [_rescore(out, reranker, hotness_weight, language, counts) for out in outputs]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(outputs), thread_name_prefix="cairn-rerank") as pool:
        return list(pool.map(lambda out: _rescore(out, reranker, hotness_weight, language, counts), outputs))


def _memories_beside(best: dict[str, MatchedContext], memories: dict[str, Candidate]) -> None:
    """The memories of ``best`` (each at its best score across the typed queries) placed as
    :func:`retrieve` places them for one: an episode in which the user only asked under a
    remembered fact, and the best of them raised to the best other match's merged score when under
    it (:mod:`.retrieval.memories`); in place. The other matches' scores were combined
    (:func:`combined`), so a memory lifted to one typed query's best would fall behind them."""
    keys = [key for key, m in best.items() if m.uri in memories]
    if not keys:
        return
    others = max((m.score for key, m in best.items() if m.uri not in memories), default=0.0)
    listed = [memories[best[key].uri].model_copy(update={"score": best[key].score}) for key in keys]
    for key, c in zip(keys, lifted(questions_capped(listed), others)):
        if round(c.score, 6) != best[key].score:
            best[key] = rescaled(best[key], c.score, others)


def rerank(
    outputs: list[RetrieveOutput],
    request: FindRequest,
    plan_: QueryPlan | None = None,
    *,
    reranker: Reranker | None = None,
    hotness_weight: float = 0.0,
    threshold: float = DEFAULT_THRESHOLD,
    language: str | None = None,
    counts: UseCounts | None = None,
) -> FindResult:
    """Rerank each typed query's candidates, then threshold (strict ``>``; the request's
    ``score_threshold``, else ``threshold``: the settings'), dedupe by URI, cut to ``limit`` per
    type and typed query, merge the typed queries (each URI at its best score times its typed
    query's ``weight``), and bucket by context type, ``limit`` per bucket. A weighted typed query
    (the turn with the conversation's words, :mod:`.planning.session_planner`) whose raw best does
    not beat the full-weight query's clearly is left out (:func:`context_left_out`). ``language``: the
    tenant's fixed one (None: detected), for a reranker that reads the embedder's cosines. ``counts``:
    where the use counts the hotness blend reads are kept, when not in the records."""
    threshold = threshold if request.score_threshold is None else request.score_threshold
    result = FindResult(query_plan=plan_)
    best: dict[str, MatchedContext] = {}  # a URI found by several typed queries is listed once
    listed: list[tuple[RetrieveOutput, list[MatchedContext]]] = []
    memories: dict[str, Candidate] = {}  # the memories matched, by display URI (what they are: fact or episode)
    for out, rescored in zip(outputs, _rescore_all(outputs, reranker, hotness_weight, language, counts)):
        if (why := context_left_out(out, outputs)) is not None:
            out.trace.add("exclude", detail=f"{why}: the turn has moved on, its own matches answer it")
            rescored = []
        kept = per_type(dedupe_by_uri(above_threshold(rescored, threshold), request.collapse_chunks), request.limit)
        out.trace.stats.candidates_excluded += len(out.candidates) - len(kept)
        matches = [to_match(c) for c in kept]
        result.query_results.append(
            QueryResult(query=out.query, matches=matches, tiers={m.uri: c.reason for m, c in zip(matches, kept)}, trace=out.trace)
        )
        listed.append((out, matches))
        memories.update({m.uri: c for m, c in zip(matches, kept) if m.context_type is ContextType.MEMORY})
    combine = carries_conversation([out.query for out in outputs])
    found: dict[str, list[tuple[MatchedContext, ScoreTerm]]] = {}  # per URI (per document when collapsing)
    for n, (out, matches) in enumerate(listed, 1):
        factor = merge_factor(out, matches, listed)
        for m in matches:
            key = document_key(m.uri) if request.collapse_chunks else m.uri
            term = ScoreTerm(label=query_label(n, out.query.query), score=m.score, weight=factor, explanation=m.explanation)
            found.setdefault(key, []).append((m, term))
    for key, finders in found.items():  # each URI's score is its explanation's: the arithmetic travels with it
        best[key] = merged(finders, combine and finders[0][0].context_type is not ContextType.MEMORY)
    if combine:  # the user's memories listed next to the combined matches, as each typed query listed them
        _memories_beside(best, memories)
    for m in sorted(best.values(), key=lambda m: -m.score):
        bucket = getattr(result, m.context_type.bucket)
        if len(bucket) < request.limit:  # several typed queries: still ``limit`` per type
            bucket.append(m)
    return result
