"""The user's standing facts for every question they ask: the profile arm of a search.

A remembered fact can bear on a question that shares no word with it: "Ann is vegetarian and
never eats meat." for "what should I cook tonight?". Its cosine to the question is small (0.08
with MiniLM, under most of the tenant's pages), so the memory search's bar
(:mod:`.memories`: as relevant as the best other match) never keeps it. But a user's profile and
preference memories are few, so each question of that user considers all of them, with a bar of
their own, and keeps the ones that *stand out*:

* **Two kinds of evidence per fact.** Its dense cosine to the question, and a *bridge*: how much
  closer the fact is to the pages the question finds first (its top ``BRIDGE_TOP``) than to the
  next ones (ranks ``BRIDGE_TOP+1`` to ``BACKGROUND_RANK``). The pages say what the question is
  about in the tenant's own words ("vegetarian" is on the canteen page a lunch question finds),
  so what the library knows of the question's topic it learns from the tenant's content.
  ``score = (cos(fact, q) − background + BRIDGE_WEIGHT · bridge) / (best − background)``, where
  ``best`` and ``background`` are the question's dense cosines to its best page and to its
  ``BACKGROUND_RANK``-th: the score is in units of the question's own margin, so it does not
  depend on the model's cosine scale.
* **Standing out.** A fact is kept when its score stands above the median of the user's *other*
  facts' scores by ``FIRST_MARGIN`` (the best fact) or ``NEXT_MARGIN`` (the second and third; at
  most ``KEPT`` in all). A question no fact bears on scores them all alike, so nothing stands out;
  a user with fewer than two other facts is compared with the question's background as well (a
  fact scoring like the question's ``BACKGROUND_RANK``-th page, 0 on this scale).

Two vector calls per question of a known user (the facts, with their vectors; the question's
pages, with theirs); the trace says what was kept and why. The profile and preference facts are
the memories under the user's ``profile`` and ``preferences`` folders (``remember`` writes there
by default); episodes (archived turns) and other categories are left to the memory search.
Measured on the indirect-memory sets (benchmarks/README.md, "Memories that bear on the question").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

import numpy as np

from cairn.core.models import Candidate, Level, ThinkingTrace
from cairn.engine.assemble import best_chunk_per_document
from cairn.engine.memory.models import TypedCategory, memory_root
from cairn.engine.retrieval.memories import BACKGROUND_RANK, STANDING_REASON
from cairn.engine.retrieval.scope import keyword_statistics, scope_filter
from cairn.ports.vectorstores import SearchMode, VectorQuery, VectorStore

CATEGORIES = (TypedCategory.PROFILE.value, TypedCategory.PREFERENCES.value)
MAX_FACTS = 50  # a user's standing facts considered per question (the closest to it by cosine)
BRIDGE_TOP = 3
BRIDGE_WEIGHT = 0.5
# chosen on the indirect-memory sets with MiniLM (benchmarks/standing_facts.py, benchmarks/README.md):
# 0.833 and 0.812 of the asked facts kept, one fact on 52.5 % of the 219 unrelated turns, two on 1.8 %
FIRST_MARGIN = 0.2
NEXT_MARGIN = 0.3
KEPT = 3


@dataclass(frozen=True)
class Evidence:
    """What a question's pages say: its dense cosines to its best page and its background, and the
    vectors of its first pages and of the next ones."""

    best: float
    background: float
    top: np.ndarray  # (BRIDGE_TOP, dim)
    rest: np.ndarray  # (n, dim), possibly empty


def profile_roots(user: str) -> list[str]:
    root = memory_root(user)
    return [f"{root}/{c}" for c in CATEGORIES]


def fact_scores(query: np.ndarray, facts: np.ndarray, evidence: Evidence) -> np.ndarray:
    """Each fact's score on the question's scale (module doc)."""
    direct = facts @ query
    bridge = (facts @ evidence.top.T).max(axis=1)
    if len(evidence.rest):
        bridge = bridge - (facts @ evidence.rest.T).mean(axis=1)
    else:
        bridge = np.zeros(len(facts))
    span = max(evidence.best - evidence.background, 1e-6)
    return (direct - evidence.background + BRIDGE_WEIGHT * bridge) / span


def standing_out(scores: Sequence[float]) -> list[int]:
    """The indexes of the facts that stand out (module doc), best first."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    kept: list[int] = []
    for rank, i in enumerate(order[:KEPT]):
        others = [s for j, s in enumerate(scores) if j != i]
        if len(others) < 2:
            others.append(0.0)  # the question's background
        if scores[i] - median(others) >= (FIRST_MARGIN if rank == 0 else NEXT_MARGIN):
            kept.append(i)
        elif rank == 0:
            break
    return kept


def standing_facts(
    store: VectorStore, tenant: str, vector: list[float], user: str, page_roots: list[str],
    user_filter: dict | None, trace: ThinkingTrace,
) -> list[tuple[Candidate, float]]:
    """The user's profile and preference facts that bear on the question (``vector``), each with
    its score on the question's scale, best first; ``page_roots``: where the question's pages are."""
    facts, scores, evidence = scored_facts(store, tenant, vector, user, page_roots, user_filter, trace)
    if evidence is None:
        return []
    kept = standing_out(scores)
    trace.add("keep", detail=f"standing facts of {user}: {len(kept)} of {len(facts)} stand out (best score "
              f"{max(scores):.2f}, kept {', '.join(f'{scores[i]:.2f}' for i in kept) or '-'}; margins {FIRST_MARGIN}/"
              f"{NEXT_MARGIN} over the others' median, in units of the question's margin {evidence.best:.3f} over "
              f"its background {evidence.background:.3f})")
    # the vectors were for this rule: a candidate goes on without one (a workflow state carries it)
    return [(facts[i].model_copy(update={"reason": STANDING_REASON, "record": facts[i].record.without_vector()}),
             scores[i]) for i in kept]


def scored_facts(
    store: VectorStore, tenant: str, vector: list[float], user: str, page_roots: list[str],
    user_filter: dict | None, trace: ThinkingTrace,
) -> tuple[list[Candidate], list[float], Evidence | None]:
    """The user's standing facts closest to the question, each one's score (:func:`fact_scores`) and
    the question's evidence; no evidence (and no scores) when the user has no facts or the question
    finds too few pages. Two vector calls at most."""
    facts = _search(store, tenant, vector, profile_roots(user), MAX_FACTS, user_filter, trace)
    facts = [c for c in facts if c.record.level is Level.DETAIL and c.record.vector]
    if not facts:
        return [], [], None
    pages = _search(store, tenant, vector, page_roots, 3 * BACKGROUND_RANK, _leaves(user_filter), trace) if page_roots else []
    pages = best_chunk_per_document(c for c in pages if c.record.vector)[:BACKGROUND_RANK]
    if len(pages) <= BRIDGE_TOP:
        trace.add("keep", detail=f"standing facts of {user}: none considered, the question finds {len(pages)} pages")
        return facts, [], None
    mat = np.asarray([p.record.vector for p in pages], dtype=np.float32)
    evidence = Evidence(best=pages[0].score, background=pages[-1].score, top=mat[:BRIDGE_TOP], rest=mat[BRIDGE_TOP:])
    scores = fact_scores(np.asarray(vector, dtype=np.float32),
                         np.asarray([c.record.vector for c in facts], dtype=np.float32), evidence)
    return facts, [float(s) for s in scores], evidence


def _leaves(user_filter: dict | None) -> dict:
    """Pages and their chunks only (a folder's abstract reads like every question about the folder)."""
    leaves = {"level": int(Level.DETAIL)}
    return {"$and": [leaves, user_filter]} if user_filter else leaves


def _search(store: VectorStore, tenant: str, vector: list[float], roots: list[str], limit: int,
            user_filter: dict | None, trace: ThinkingTrace) -> list[Candidate]:
    """One dense search under ``roots`` with the records' vectors, best first."""
    hits = store.query(VectorQuery(
        tenant=tenant, vector=vector, mode=SearchMode.DENSE, filter=scope_filter(roots, user_filter), limit=limit,
        include_vectors=True, keyword_statistics=keyword_statistics(roots),
    ))
    trace.stats.vector_calls += 1
    return [Candidate(record=h.record, score=h.score, reason="vector") for h in hits]
