"""Retrieval quality of every mode on every shared collection, next to its own BM25 and latency.

    python -m benchmarks.run quality --data ../shared/data               # every collection, every query
    python -m benchmarks.run quality --data ../shared/data --queries 300  # the first 300 queries of each

Collections (ingested once through the public Ingestor and cached, :mod:`.collections`):
scifact and cranfield (flat, ``find()``), dstc11 (a tree titled from metadata; ``search()`` with
the dialogue before the last turn as the session, the no-LLM planner with the folder-name
resolver). Each query asks for 30 results and is judged on its first 10 documents (ir-measures
nDCG@10 and R@10). Modes: quick / thinking × dense / hybrid, ``default`` (no options: what the
settings choose), and the local reranker on the
first ``RERANK_QUERIES`` queries. ``bm25`` is plain BM25 (bm25s) over the raw documents with the
raw query: the floor every default must clear. Latency is the whole call, with the query
embedding served from a cache filled by an untimed pass (``embed_p50_ms`` is what a real
embedding adds). ``gibberish`` counts the results of three nonsense queries in every mode
(default threshold): it must be 0; ``noise`` gives the tenant's noise floor and how many of 1,000
fresh random strings would still beat it (:mod:`cairn.engine.retrieval.evidence`).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from cairn import Cairn
from cairn.engine.planning.scope import FolderResolver
from cairn.engine.planning.session_planner import SessionRewritePlanner
from cairn.engine.retrieval.scope import roots_for
from cairn.ports.embeddings.base import Embedder
from cairn.ports.rerank import build_reranker
from cairn.ports.sessions import open_session_store

from .beir import BeirSet
from .collections import COLLECTIONS, TENANT, Collection, cached_store
from .metrics import evaluate, percentiles

SUITE = "quality"
LIMIT = 30
RERANK_QUERIES = 200
RERANK_LIMIT = 10  # the local reranker embeds 2·limit candidates a query: 20 here
GIBBERISH = ("qwzx plorf vrum", "zzkq vlemb ortx", "blorptang quiffle")
MODES = {
    "quick_dense": {"mode": "quick", "hybrid": False},
    "quick_hybrid": {"mode": "quick", "hybrid": True},
    "thinking_dense": {"mode": "thinking", "hybrid": False},
    "thinking_hybrid": {"mode": "thinking", "hybrid": True},
    "default": {},  # what a caller gets without options: find() quick hybrid; search() thinking, hybrid "auto"
}


class MemoEmbedder(Embedder):
    """Query embeddings kept in memory: every mode after the first pays retrieval only."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name, self.dimension = inner, inner.name, inner.dimension
        self.batch_size = inner.batch_size
        self.languages = inner.languages  # as the model declares: it decides the fusion (cairn.engine.stages.retrieve)
        self._memo: dict[str, np.ndarray] = {}
        self.embed_ms: list[float] = []

    def tokenizer(self):  # the wrapped model's (the evidence gate and token counts read it)
        return self.inner.tokenizer()

    def forget(self) -> None:
        """Drop every query vector (the memo's and the model's own): the next call embeds as a new
        turn would."""
        self._memo.clear()
        getattr(self.inner, "_cache", {}).clear()

    def _embed(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing:
            t0 = time.perf_counter()
            for t, v in zip(missing, self.inner.embed(missing)):
                self._memo[t] = v
            self.embed_ms.append((time.perf_counter() - t0) * 1000 / len(missing))
        return np.stack([self._memo[t] for t in texts])


def bm25_run(ds: BeirSet, queries: list[dict], *, stemmed: bool = False) -> dict[str, dict[str, float]]:
    """Plain BM25 (bm25s, English stop words) over the raw documents; ``stemmed``: with the
    Snowball English stemmer too (the stronger anchor, what cairn's keyword search does)."""
    import bm25s

    stemmer = None
    if stemmed:
        import Stemmer

        stemmer = Stemmer.Stemmer("english").stemWords
    docs = [d for d in ds.corpus if (d.get("title") or d.get("text"))]
    texts = [" ".join(filter(None, (d.get("title"), d.get("text")))) for d in docs]
    index = bm25s.BM25()
    index.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    run = {}
    for q in queries:
        tokens = bm25s.tokenize([q["text"]], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
        ids, scores = index.retrieve(tokens, k=10, show_progress=False)
        run[q["_id"]] = {docs[i]["_id"]: float(s) for i, s in zip(ids[0], scores[0]) if s > 0}
    return run


def noise_check(store: Any, embedder: Embedder, n: int = 1000) -> dict[str, Any]:
    """The tenant's noise floor and the share of ``n`` fresh random strings (another seed than the
    floor's probes) whose best dense match still beats it: how often gibberish would pass the
    evidence check on dense evidence alone."""
    from cairn.engine.retrieval.evidence import noise_floor, random_strings
    from cairn.ports.vectorstores import VectorQuery

    texts = random_strings(n, seed=7)
    vectors = embedder.embed(texts, input_type="query")
    best: list[float] = []
    for start in range(0, n, 64):
        requests = [VectorQuery(tenant=TENANT, vector=v.tolist(), limit=1) for v in vectors[start : start + 64]]
        best += [hits[0].score if hits else 0.0 for hits in store.query_many(requests)]
    floor = noise_floor(store, embedder, TENANT)
    return {"floor": round(floor, 3), "random_strings": n, "passing": round(sum(b > floor for b in best) / n, 4)}


def judged(col: Collection, result: Any) -> dict[str, float]:
    ranked: dict[str, float] = {}
    for m in result.all():
        if m.level == 2:
            ranked.setdefault(col.corpus_id(m.uri), m.score)
    return dict(list(ranked.items())[:10])


def measure(col: Collection, queries: list[dict], qrels: dict, ask: Any) -> dict[str, Any]:
    run, lat, calls = {}, [], []
    for q in queries:
        t = time.perf_counter()
        res = ask(q)
        lat.append((time.perf_counter() - t) * 1000)
        calls += [qr.trace.stats.vector_calls for qr in res.query_results]
        run[q["_id"]] = judged(col, res)
    out: dict[str, Any] = {k: round(v, 4) for k, v in evaluate({q["_id"]: qrels[q["_id"]] for q in queries}, run).items()}
    out.update(percentiles(lat))
    out["vector_calls_mean"] = round(statistics.mean(calls), 2) if calls else 0
    return out


def scoping(col: Collection, planner: Any, sessions: Any, session_of: dict, queries: list[dict], qrels: dict) -> dict[str, Any]:
    """How often the planner boosts (scopes) a dialogue to the folder of the entity its judged documents
    belong to (the first two path segments below the root: domain / entity)."""
    right = wrong = none = 0
    lat = []
    for q in queries:
        view = sessions.get(TENANT, session_of[q["_id"]], recent=5)
        t = time.perf_counter()
        plan = planner.plan(q["text"], view)
        lat.append((time.perf_counter() - t) * 1000)
        folders = set(plan.queries[0].boost_uris or plan.queries[0].target_uris)
        gold = {f"{col.root}/{'/'.join(d.split('/')[:2])}" for d in qrels[q["_id"]]}
        if not folders:
            none += 1
        elif folders & gold:
            right += 1
        else:
            wrong += 1
    n = max(len(queries), 1)
    return {"right": round(right / n, 4), "wrong": round(wrong / n, 4), "none": round(none / n, 4), **percentiles(lat)}


def previous_user_turn(q: dict) -> str:
    """The user turn before the last one of a dialogue ("" when there is none)."""
    turns = (q.get("metadata", {}).get("context") or [])[:-1]
    return next((t["text"] for t in reversed(turns) if t["speaker"] == "U"), "")


def conversation_arms(col: Collection, ds: BeirSet, svc: Cairn, queries: list[dict], qrels: dict) -> dict[str, Any]:
    """The ways to use a conversation the session search must beat (issue 19): ``find`` on the
    turn, ``find`` on the previous user turn + the turn, BM25 on the last two user turns."""
    opts = dict(limit=LIMIT, context_type="resource", score_threshold=-1.0)
    two = [{**q, "text": f"{previous_user_turn(q)} {q['text']}".strip()} for q in queries]
    out = {
        "find_turn": measure(col, queries, qrels, lambda q: svc.find(q["text"], **opts)),
        "find_previous_user_turn_and_turn": measure(col, two, qrels, lambda q: svc.find(q["text"], **opts)),
        "bm25_last_two_user_turns": {k: round(v, 4) for k, v in evaluate(qrels, bm25_run(ds, two, stemmed=True)).items()},
    }
    for name, r in out.items():
        print(f"  dstc11 {name}: {r}", flush=True)
    return out


def bench(key: str, data: Path, limit_queries: int | None) -> dict[str, Any]:
    col = COLLECTIONS[key]
    wanted = [m for m in os.environ.get("CAIRN_BENCH_MODES", ",".join(MODES)).split(",") if m]
    unknown = sorted(set(wanted) - set(MODES))
    if unknown:
        raise SystemExit(f"CAIRN_BENCH_MODES: unknown mode(s) {unknown}; known: {', '.join(MODES)}")
    modes = {m: MODES[m] for m in wanted}
    rerank_arm = os.environ.get("CAIRN_BENCH_RERANK", "1") != "0"
    store, embedder, ds = cached_store(key, data)
    memo = MemoEmbedder(embedder)
    queries = list(ds.queries.values())[:limit_queries]
    qrels = {q["_id"]: ds.qrels[q["_id"]] for q in queries}
    out: dict[str, Any] = {"queries": len(queries)}
    out["bm25"] = {k: round(v, 4) for k, v in evaluate(qrels, bm25_run(ds, queries)).items()}
    out["bm25_stemmed"] = {k: round(v, 4) for k, v in evaluate(qrels, bm25_run(ds, queries, stemmed=True)).items()}
    print(f"  {key} bm25: {out['bm25']}; stemmed: {out['bm25_stemmed']}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        dialogue = key == "dstc11"
        svc = Cairn(store, memo, TENANT)
        session_of: dict[str, str] = {}
        if dialogue:
            sessions = open_session_store("sqlite", path=Path(tmp) / "sessions.db")
            for q in queries:  # the dialogue before the last user turn is the session
                s = sessions.create(TENANT)
                for turn in (q.get("metadata", {}).get("context") or [])[:-1]:
                    sessions.append(TENANT, s.id, "user" if turn["speaker"] == "U" else "assistant", turn["text"])
                session_of[q["_id"]] = s.id
            resolver = FolderResolver(store, TENANT)
            planner = SessionRewritePlanner(resolver=resolver, roots=lambda ct: roots_for(ct, (), None))
            svc = Cairn(store, memo, TENANT, planner=planner, sessions=sessions)
            if os.environ.get("CAIRN_BENCH_BASELINES", "1") != "0":  # 0: the session search only (a full run's time)
                out["raw_last_turn_quick_dense"] = measure(
                    col, queries, qrels, lambda q: svc.find(q["text"], limit=LIMIT, context_type="resource", score_threshold=-1.0)
                )
                out.update(conversation_arms(col, ds, svc, queries, qrels))

        def ask(rerank: bool = False, **opts: Any) -> Any:
            base = dict(limit=LIMIT, context_type="resource", score_threshold=-1.0, include_provenance=True)
            base.update(opts)
            if dialogue:
                return lambda q: svc.search(q["text"], session_id=session_of[q["_id"]], rerank=rerank, **base)
            return lambda q: svc.find(q["text"], rerank=rerank, **base)

        if not dialogue and "default" in modes:  # search() without a session: planned, thinking, hybrid "auto"
            base = dict(limit=LIMIT, context_type="resource", score_threshold=-1.0, include_provenance=True)
            out["search_default"] = measure(col, queries, qrels, lambda q: svc.search(q["text"], rerank=False, **base))
            print(f"  {key} search_default: {out['search_default']}", flush=True)
        if dialogue:
            out["scoping"] = scoping(col, planner, sessions, session_of, queries, qrels)
            print(f"  {key} scoping: {out['scoping']}", flush=True)
        measure(col, queries, qrels, ask(**MODES["quick_dense"]))  # untimed: fills the query embeddings
        for name, opts in modes.items():
            out[name] = measure(col, queries, qrels, ask(**opts))
            print(f"  {key} {name}: {out[name]}", flush=True)
        svc.reranker = build_reranker("local", embedder=embedder)
        sub = queries[:RERANK_QUERIES]
        for name in [m for m in ("quick_hybrid", "thinking_hybrid") if m in modes and rerank_arm]:
            r = measure(col, sub, qrels, ask(rerank=True, **{**MODES[name], "limit": RERANK_LIMIT}))
            r["queries"] = len(sub)
            out[f"{name}_rerank"] = r
            print(f"  {key} {name}_rerank: {r}", flush=True)
        svc.reranker = None
        out["gibberish_results"] = {
            name: sum(len(svc.find(g, limit=10, **o).all()) + len(svc.search(g, limit=10, **o).all()) for g in GIBBERISH)
            for name, o in modes.items()
        }
    out["noise"] = noise_check(store, embedder)
    out["embed_p50_ms"] = round(statistics.median(memo.embed_ms), 2) if memo.embed_ms else None
    # the best explicit mode (None when only ``default`` ran)
    out["best_mode"] = max((m for m in modes if m != "default"), key=lambda m: out[m]["nDCG@10"], default=None)
    out["thinking_recall_ge_quick"] = {
        kind: out[f"thinking_{kind}"]["recall@10"] >= out[f"quick_{kind}"]["recall@10"]
        for kind in ("dense", "hybrid") if f"thinking_{kind}" in out and f"quick_{kind}" in out
    }
    return out


def run(data: Path, limit_queries: int | None = None) -> dict[str, Any]:
    """``CAIRN_BENCH_COLLECTIONS=scifact,cranfield`` runs only those collections,
    ``CAIRN_BENCH_MODES=quick_dense,thinking_dense`` only those modes, ``CAIRN_BENCH_RERANK=0``
    skips the (slow) local-reranker arm, ``CAIRN_BENCH_BASELINES=0`` dstc11's conversation
    baselines (find(turn), find(previous user turn + turn), BM25 on two turns)."""
    keys = [k for k in os.environ.get("CAIRN_BENCH_COLLECTIONS", ",".join(COLLECTIONS)).split(",") if k]
    return {"suite": SUITE, **{key: bench(key, data, limit_queries) for key in keys}}
