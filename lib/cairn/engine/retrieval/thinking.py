"""Thinking mode: hierarchical, best-first retrieval with bounded cost.

1. one global search over every level under the roots: leaves go straight into the pool
   (no file depends on its directory's summary to be found), directories seed the frontier;
2. rounds: pop up to ``dirs_per_round`` unvisited directories, search inside all of them with
   ONE ``query_many`` call, propagate scores from parent to child, prune at the threshold,
   put new directories back on the frontier; a hybrid search inside a folder fuses on the global
   search's keyword scale (``VectorQuery.keyword_scale``), so a child's own score means there what
   it means in the global search;
3. stop when the top set or the pool stops changing for ``patience`` rounds, the frontier
   is empty, or a budget (rounds, vector calls, deadline) is spent. The trace says which.

**Which folders lift their children.** Propagation (``alpha``, chosen on a tree of entity
folders, each holding one entity's pages) is right where a folder is one of several of a kind,
each holding the same kinds of children (every product folder has ``manual.md`` and ``faq.md``,
every customer folder ``contracts/``): there the folder's own score says which instance a child
belongs to, which the child's words often do not. A folder whose siblings hold few of its
children's names is a topic (``billing/`` beside ``support/``): its score adds nothing its
documents' own words do not say, and lifting them all with it ranked a topic's unrelated pages
over a better page elsewhere (measured on a handbook in topic folders and on a tree of entity
folders: benchmarks/README.md, issue 19, session 9). So after each round's expansion one fetch
asks, for each expanded folder, whether its children's names exist under its siblings that the
search has seen (:mod:`.kinds`): of a kind, the folder propagates with ``alpha``; a topic folder's
children keep their own scores (``alpha`` 1); with no sibling seen, ``alpha`` as configured.

Between 1 and 2, **relevance feedback** (Rocchio, on the query vector): the best
``feedback_docs`` leaves the global search found (over the threshold, by their fused score, and
within ``feedback_ratio`` of the best one: a clear winner is not diluted by the runners-up) are
averaged into the query vector, and the global search runs again with it; the first pool is
discarded. A question phrased unlike its answer moves toward the vocabulary of the documents that
answer it. The centroid's weight is ``feedback_weight`` times the share of ``feedback_docs`` that
qualified: one clear winner is weaker evidence of what the answers look like than three leaves
that agree. At full weight, a single winner pulled a question with two answers on different pages
("if I cancel mid-month, do I get money back?") toward the winner's neighbours, and the second
answer fell under pages that do not answer it (benchmarks/README.md, session 15).
It costs one fetch and one vector call; a query that found nothing over the threshold (gibberish)
gets no feedback. It runs in hybrid searches only, where the feedback leaves were chosen by dense
and keyword evidence together: measured on the shared collections it raised hybrid nDCG@10 on both
flat document collections (+0.006 and +0.021), while feedback from dense-only leaves lowered one of
them (-0.013) (benchmarks/README.md, the quality section).
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from cairn.core.models import Candidate, Level, ThinkingTrace, TraceStats, record_id
from cairn.core.uri import is_under
from cairn.core.uri import parent as parent_of
from cairn.engine.assemble import best_chunk_per_document, document_key
from cairn.engine.retrieval import kinds
from cairn.engine.retrieval.scope import keyword_statistics, scope_filter
from cairn.engine.retrieval.scoring import Convergence, add_to_pool, passes, propagate, ranked, top_uris
from cairn.ports.vectorstores import SearchMode, VectorHit, VectorQuery, VectorStore
from cairn.ports.vectorstores.base import MAX_QUERY_LIMIT

# Chosen by measurement: the best of {0.3, 0.5, 0.7, 1.0} on the hierarchical benchmark (benchmarks/README.md).
DEFAULT_ALPHA = 0.3


@dataclass(frozen=True)
class ThinkingConfig:
    alpha: float = DEFAULT_ALPHA
    threshold: float = 0.1
    dirs_per_round: int = 4
    global_limit: int = 0  # 0: max(3·limit, 30)
    max_rounds: int = 3  # rounds past 2 added nothing on the hierarchical benchmark; 3 keeps vector calls <= 4
    max_vector_calls: int = 8
    deadline_ms: float = 2000.0
    patience: int = 3
    # relevance feedback after the global search (0 docs: off); see the module doc
    feedback_docs: int = 3
    feedback_weight: float = 1.0  # with all feedback_docs leaves qualifying; fewer leaves, that share of it
    feedback_ratio: float = 0.9  # a feedback leaf scores at least this share of the best leaf's score
    # what one expansion searches: a directory's children, or its whole subtree
    # (one call reaches leaves at any depth; the directories below are then not expanded again)
    scope: Literal["children", "subtree"] = "children"
    # score every candidate against its ancestors (one key lookup of their L0/L1 records per
    # round) instead of only the directory it was reached through: a leaf found by the global
    # search then carries its directory's score too, so the order no longer depends on the path
    ancestor_scores: bool = False
    # children of a topic folder (no sibling folder holds children of the same names) keep their own
    # scores instead of being lifted with their folder (module doc); False: every folder propagates
    topic_folders: bool = True

    def global_k(self, limit: int) -> int:
        return self.global_limit or max(3 * limit, 30)

    @staticmethod
    def per_dir_k(limit: int) -> int:
        return max(2 * limit, 20)


def _unit(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    return m / np.where(norms == 0, 1.0, norms)


def _expand_filter(directory: str, scope: str, user_filter: dict | None) -> dict[str, Any]:
    inside: dict[str, Any] = {"parent_uri": directory} if scope == "children" else {"ancestors": directory}
    return {"$and": [inside, user_filter]} if user_filter else inside


class _Search:
    """State of one hierarchical search (kept small; the rules live in scoring.py)."""

    def __init__(
        self, store: VectorStore, tenant: str, vector: list[float], cfg: ThinkingConfig, limit: int, user_filter: dict | None,
        text: str | None = None, collapse: bool = False, hand_on: int | None = None,
    ):
        self.store, self.tenant, self.vector, self.cfg = store, tenant, vector, cfg
        self.collapse, self.hand_on = collapse, hand_on or limit
        self.text = text  # set: every search is hybrid (dense + keyword)
        self.dense_weight: float | None = None  # the hybrid fusion's weight of the dense score (None: default)
        self.statistics: Literal["tenant", "filter"] = "tenant"  # whose words score the keyword side (scope.py)
        self.keyword_scale: float | None = None  # the global search's best BM25: expansions fuse on its scale
        self.qvec = _unit(np.asarray(vector, dtype=np.float32))
        self.limit, self.user_filter = limit, user_filter
        self.pool: dict[str, Candidate] = {}
        self.frontier: list[tuple[float, str]] = []  # (-score, dir uri)
        self.dir_scores: dict[str, float] = {}
        self.visited: set[str] = set()
        self.trace = ThinkingTrace(stats=TraceStats(mode="thinking"))
        self.seen_dirs: set[str] = set()  # every directory among or above the hits so far (siblings are looked up here)

    def push_dir(self, uri: str, score: float) -> None:
        if score > self.dir_scores.get(uri, -1.0):
            self.dir_scores[uri] = score
            if uri not in self.visited:
                heapq.heappush(self.frontier, (-score, uri))

    def score_dirs(self, hits: list[VectorHit], roots: list[str]) -> None:
        """Score the directories above ``hits`` (and the directory hits themselves) from their
        own L0/L1 records, outermost first: ``score(d) = propagate(raw(d), score(parent(d)))``."""
        wanted = {h.record.uri for h in hits if h.record.level is not Level.DETAIL}
        wanted |= {a for h in hits for a in h.record.ancestors if any(is_under(a, r) for r in roots)}
        missing = sorted(wanted - self.dir_scores.keys())
        if not missing:
            return
        ids = [record_id(self.tenant, u, lvl) for u in missing for lvl in (0, 1)]
        recs = [r for r in self.store.fetch(self.tenant, ids) if r.vector is not None]
        self.trace.stats.fetch_calls += 1
        raw: dict[str, float] = {}
        if recs:
            cos = _unit(np.asarray([r.vector for r in recs], dtype=np.float32)) @ self.qvec
            for rec, c in zip(recs, cos.tolist()):
                raw[rec.uri] = max(raw.get(rec.uri, -1.0), c)
        for u in sorted(missing, key=lambda u: u.count("/")):
            parent = self.dir_scores.get(parent_of(u) or "", 0.0)
            score = propagate(raw[u], parent, self.cfg.alpha) if u in raw else parent
            self.dir_scores[u] = score
            if passes(score, self.cfg.threshold) and u not in self.visited:
                heapq.heappush(self.frontier, (-score, u))

    def take_all(self, hits: list[VectorHit], parent_score: float, round_: int, reason: str, roots: list[str],
                 expandable: bool = True, alpha: float | None = None) -> None:
        for h in hits:
            self.seen_dirs.update(h.record.ancestors)
            if h.record.level is not Level.DETAIL:
                self.seen_dirs.add(h.record.uri)
        if self.cfg.ancestor_scores:
            self.score_dirs(hits, roots)
        for h in hits:
            parent = self.dir_scores.get(h.record.parent_uri or "", 0.0) if self.cfg.ancestor_scores else parent_score
            self.take(h, parent, round_, reason, expandable, alpha)

    def take(self, hit: VectorHit, parent_score: float, round_: int, reason: str, expandable: bool = True,
             alpha: float | None = None) -> None:
        score = propagate(hit.score, parent_score, self.cfg.alpha if alpha is None else alpha)
        rec = hit.record
        if not passes(score, self.cfg.threshold):
            self.trace.stats.candidates_excluded += 1
            self.trace.add("exclude", round=round_, uri=rec.uri, score=round(score, 4), detail=f"L{int(rec.level)} under threshold")
            return
        add_to_pool(self.pool, Candidate(record=rec, score=score, reason=reason, round=round_))
        if rec.level is not Level.DETAIL and expandable:
            self.push_dir(rec.uri, score)

    def request(self, filter: dict[str, Any], limit: int, scale: float | None = None) -> VectorQuery:
        mode = SearchMode.HYBRID if self.text else SearchMode.DENSE
        return VectorQuery(tenant=self.tenant, vector=self.vector, text=self.text, mode=mode, filter=filter, limit=limit,
                           dense_weight=self.dense_weight if self.text else None, keyword_statistics=self.statistics,
                           keyword_scale=scale if self.text else None)

    def global_search(self, roots: list[str]) -> None:
        k = self.cfg.global_k(self.limit)
        while True:  # with collapse_chunks, deeper while a few documents' chunks fill the page
            req = self.request(scope_filter(roots, self.user_filter), k)
            hits = self.store.query(req)
            self.trace.stats.vector_calls += 1
            self.trace.add("global_search", detail=f"roots={roots} limit={k} mode={req.mode.value} hits={len(hits)}")
            kept = {(document_key(h.record.uri), 2) if "#" in h.record.uri else (h.record.uri, int(h.record.level)) for h in hits}
            crowded = len(kept) < len(hits) and len(kept) < self.hand_on  # chunks of one file took the places
            if not (self.collapse and crowded) or len(hits) < k or k >= MAX_QUERY_LIMIT:
                break
            k = min(4 * k, MAX_QUERY_LIMIT)
        if self.statistics == "tenant":  # BM25 inside a folder is then on the global search's scale (fusion.py)
            self.keyword_scale = max((h.keyword for h in hits if h.keyword), default=None)
        self.take_all(hits, 0.0, 0, "global", roots)
        if self.cfg.scope == "subtree":
            return  # the global search already searched the roots' whole subtrees
        for r in roots:  # roots seed the frontier with score 0
            if r not in self.dir_scores:
                self.dir_scores[r] = 0.0
                heapq.heappush(self.frontier, (0.0, r))

    def feedback(self, roots: list[str]) -> bool:
        """Move the query vector toward its best leaves and search globally again (module doc)."""
        leaves = [c for c in ranked(self.pool.values()) if c.record.level is Level.DETAIL]
        if not leaves:
            return False
        cutoff = self.cfg.feedback_ratio * leaves[0].score  # only leaves nearly as good as the best
        best = [c for c in leaves[: self.cfg.feedback_docs] if c.score >= cutoff]
        if not best:  # a best score at or under 0 (a negative threshold) gives no usable feedback
            return False
        recs = [r for r in self.store.fetch(self.tenant, [c.record.id for c in best]) if r.vector is not None]
        self.trace.stats.fetch_calls += 1
        if not recs:
            return False
        centroid = _unit(np.asarray([r.vector for r in recs], dtype=np.float32)).mean(axis=0)
        weight = self.cfg.feedback_weight * len(recs) / self.cfg.feedback_docs  # leaves that agree count more
        self.qvec = _unit(self.qvec + weight * centroid)
        self.vector = self.qvec.tolist()
        self.trace.add("feedback", detail=f"query moved toward {len(recs)} leaves with weight {weight:.2f}: "
                                          f"{', '.join(r.uri for r in recs)}")
        self.pool.clear()
        self.frontier.clear()
        self.dir_scores.clear()
        self.global_search(roots)
        return True

    def pop_round(self) -> list[str]:
        batch: list[str] = []
        while self.frontier and len(batch) < self.cfg.dirs_per_round:
            neg, uri = heapq.heappop(self.frontier)
            if uri in self.visited or -neg < self.dir_scores.get(uri, 0.0):
                continue  # already expanded, or a stale entry superseded by a better score
            if self.cfg.scope == "subtree" and any(is_under(uri, v) for v in self.visited):
                continue  # inside a subtree that was already searched
            self.visited.add(uri)
            batch.append(uri)
        return batch

    def expand(self, dirs: list[str], round_: int, roots: list[str]) -> None:
        k = self.cfg.per_dir_k(self.limit)
        requests = [self.request(_expand_filter(d, self.cfg.scope, self.user_filter), k, self.keyword_scale) for d in dirs]
        results = self.store.query_many(requests)  # one call for the whole round
        self.trace.stats.vector_calls += 1
        self.trace.stats.directories_searched += len(dirs)
        # A subtree search already covered every directory below d: they are kept, not expanded.
        expandable = self.cfg.scope == "children"
        kind_of = self.of_a_kind(dict(zip(dirs, results))) if self.cfg.topic_folders else {}
        for d, hits in zip(dirs, results, strict=True):
            parent = self.dir_scores.get(d, 0.0)
            topic = kind_of.get(d) is False
            detail = f"hits={len(hits)}" + (": a topic folder, its children keep their own scores" if topic else "")
            self.trace.add("expand", round=round_, uri=d, score=round(parent, 4), detail=detail)
            self.take_all(hits, parent, round_, f"child-of:{d}" if expandable else f"under:{d}", roots, expandable,
                          1.0 if topic else None)

    def of_a_kind(self, found: dict[str, list[VectorHit]]) -> dict[str, bool]:
        """For each expanded folder (its children found), whether it is one of sibling folders of a
        kind, judged against its siblings seen so far (:mod:`.kinds`); a folder with no sibling seen
        is left out. One fetch for the round."""
        asked = {d: (sorted(u for u in self.seen_dirs if u != d and parent_of(u) == parent_of(d)), kinds.child_names(d, hits))
                 for d, hits in found.items()}
        out = kinds.of_a_kind(self.store, self.tenant, asked)
        if out:
            self.trace.stats.fetch_calls += 1
        return out

def _stop_by_budget(s: _Search, started: float, rounds: int) -> str | None:
    cfg = s.cfg
    if rounds >= cfg.max_rounds:
        return "max_rounds"
    if s.trace.stats.vector_calls >= cfg.max_vector_calls:
        return "max_vector_calls"
    if (time.perf_counter() - started) * 1000 >= cfg.deadline_ms:
        return "deadline"
    if not s.frontier:
        return "frontier_empty"
    return None


def thinking_search(
    store: VectorStore,
    tenant: str,
    vector: list[float],
    roots: list[str],
    limit: int,
    user_filter: dict | None = None,
    config: ThinkingConfig | None = None,
    hand_on: int | None = None,
    hybrid_text: str | None = None,
    collapse_chunks: bool = True,
    dense_weight: float | None = None,
) -> tuple[list[Candidate], ThinkingTrace]:
    """Hierarchical search; returns the best ``hand_on`` (default ``limit``) candidates and the trace.
    With ``hybrid_text`` and a backend that declares hybrid search, every search (the global one
    and each expansion) fuses dense and keyword scores (``dense_weight``: the dense score's share, None:
    the default); without, it is dense and the trace says so."""
    cfg = config or ThinkingConfig()
    started = time.perf_counter()
    hybrid = bool(hybrid_text) and store.capabilities().hybrid
    s = _Search(store, tenant, vector, cfg, limit, user_filter, hybrid_text if hybrid else None, collapse_chunks, hand_on)
    s.dense_weight = dense_weight
    s.statistics = keyword_statistics(roots)  # the folders it descends into lie under the roots
    if hybrid_text and not hybrid:
        s.trace.add("fallback", detail=f"the {store.backend} backend has no hybrid search: dense only")
    if not roots:
        s.trace.stats.stop_reason = "no_roots"
        return [], s.trace
    s.global_search(roots)
    if hybrid and cfg.feedback_docs > 0 and cfg.feedback_weight > 0:  # dense-only feedback lowered quality where measured
        s.feedback(roots)
    conv = Convergence(cfg.patience)
    rounds = 0
    stop = _stop_by_budget(s, started, rounds)
    while stop is None:
        dirs = s.pop_round()
        if not dirs:
            stop = "frontier_empty"
            break
        rounds += 1
        s.expand(dirs, rounds, roots)
        stop = conv.update(top_uris(s.pool, limit), len(s.pool)) or _stop_by_budget(s, started, rounds)
    s.trace.stats.rounds = rounds
    s.trace.stats.stop_reason = stop
    s.trace.add("stop", round=rounds, detail=stop)
    pool = ranked(s.pool.values())
    out = (best_chunk_per_document(pool) if collapse_chunks else pool)[: hand_on or limit]
    s.trace.stats.candidates_kept = len(out)
    s.trace.stats.latency_ms = (time.perf_counter() - started) * 1000
    return out, s.trace
