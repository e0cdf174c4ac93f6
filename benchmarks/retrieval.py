"""Quick vs thinking vs thinking + rerank, on dstc11 (a natural tree, queries with their
dialogue as a session) and scifact (flat). Reports nDCG@10, recall@10, p50/p95 latency and
vector calls per query, and sweeps alpha (the default is the best on dstc11).

    python -m benchmarks.run retrieval --data ../shared/data [--queries N]
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cairn import Cairn
from cairn.engine.ingest import Document, Ingestor
from cairn.engine.ingest.titles import DirTitleRule
from cairn.engine.planning.scope import FolderResolver
from cairn.engine.planning.session_planner import SessionRewritePlanner
from cairn.engine.retrieval.scope import roots_for
from cairn.engine.retrieval.thinking import ThinkingConfig
from cairn.ports.embeddings.local import LocalEmbedder
from cairn.ports.rerank import build_reranker
from cairn.ports.sessions import open_session_store
from cairn.ports.vectorstores.local import LocalVectorStore

from .beir import BeirSet, load
from .cache import CachedEmbedder
from .metrics import evaluate, percentiles

SUITE = "retrieval"
ALPHAS = (0.3, 0.5, 0.7, 1.0)
# Results hold folders (L0/L1) and leaves; the qrels judge leaves, so each query asks for 30
# results and is judged on its first 10 leaves.
LIMIT = 30
RERANK_QUERIES = 300  # the local reranker embeds 2·limit candidates per query: ~0.5-1 s each here
RERANK_LIMIT = 10  # rerank runs ask for 10 results (20 candidates reranked) to stay affordable
VARIANTS = ("children", "children-ancestors", "subtree-ancestors")
DSTC_ROOT = "cairn://resources/dstc11"
SCIFACT_ROOT = "cairn://resources/scifact"
# The natural tree: domain / entity / faq|review / [review] / sentence; folders named from metadata.
DSTC_TITLES = tuple(
    DirTitleRule.parse(r)
    for r in (
        "*/*={entity_name} ({domain})",
        "*/*/faq=FAQ of {entity_name}",
        "*/*/review=Reviews of {entity_name}",
        "*/*/review/*=Review of {entity_name}",
    )
)


def dstc11_documents(ds: BeirSet) -> list[Document]:
    return [
        Document(path=tuple(d["metadata"]["path"]), text=d["text"], title=d.get("title") or "", metadata=_flat(d["metadata"]))
        for d in ds.corpus
    ]


def _flat(meta: dict) -> dict:
    return {k: v for k, v in meta.items() if isinstance(v, str) and k in ("domain", "entity_name", "doc_type")}


def scifact_documents(ds: BeirSet) -> list[Document]:
    return [Document(path=(d["_id"],), text=d["text"] or d["title"], title=d["title"]) for d in ds.corpus]


def corpus_id(uri: str, root: str) -> str:
    return uri[len(root) + 1 :].split("#", 1)[0]


Ask = Callable[[Cairn, dict], Any]  # runs one query, returns a FindResult


def measure(svc: Cairn, queries: list[dict], qrels: dict, root: str, ask: Ask) -> dict[str, Any]:
    run: dict[str, dict[str, float]] = {}
    lat, calls, rounds, fallbacks = [], [], [], 0
    for q in queries:
        t = time.perf_counter()
        res = ask(svc, q)
        lat.append((time.perf_counter() - t) * 1000)
        for qr in res.query_results:
            calls.append(qr.trace.stats.vector_calls)
            rounds.append(qr.trace.stats.rounds)
            fallbacks += bool(qr.trace.stats.rerank_fallback)
        ranked: dict[str, float] = {}
        for m in res.all():
            if m.level == 2:
                ranked.setdefault(corpus_id(m.uri, root), m.score)
        run[q["_id"]] = dict(list(ranked.items())[:10])
    out: dict[str, Any] = {k: round(v, 4) for k, v in evaluate({q["_id"]: qrels[q["_id"]] for q in queries}, run).items()}
    out.update(percentiles(lat))
    out["vector_calls_mean"] = round(statistics.mean(calls), 2) if calls else 0
    out["vector_calls_max"] = max(calls, default=0)
    out["rounds_mean"] = round(statistics.mean(rounds), 2) if rounds else 0
    out["calls_within_1_plus_rounds"] = all(c <= 1 + r for c, r in zip(calls, rounds))
    out["rerank_fallbacks"] = fallbacks
    return out


def _store(docs: list[Document], root: str, tmp: str, embedder: CachedEmbedder, **ingest: Any) -> LocalVectorStore:
    store = LocalVectorStore(Path(tmp) / "store", dimension=embedder.dimension)
    report = Ingestor(store, embedder, "bench", **ingest).ingest(docs, root)
    embedder.save()
    print(f"  ingested {report.documents} documents -> {report.records} records", flush=True)
    return store


def _sweep(name: str, svc: Cairn, queries: list[dict], qrels: dict, root: str, modes: dict[str, tuple[ThinkingConfig | None, Ask]]) -> dict:
    out = {}
    for n, (key, (cfg, ask)) in enumerate(modes.items()):
        if cfg is not None:
            svc.thinking = cfg
        if n == 0:  # an untimed pass fills the embedding cache: latencies exclude embedding
            measure(svc, queries, qrels, root, ask)
        out[key] = measure(svc, queries, qrels, root, ask)
        print(f"  {name} {key}: {out[key]}", flush=True)
    return out


def _modes(ask: Callable[..., Ask], best_alpha: float | None = None) -> dict[str, tuple[ThinkingConfig | None, Ask]]:
    base = dict(limit=LIMIT, context_type="resource", score_threshold=-1.0)
    modes: dict[str, tuple[ThinkingConfig | None, Ask]] = {"quick": (None, ask(mode="quick", rerank=False, **base))}
    for variant in VARIANTS:
        for alpha in ALPHAS:
            modes[f"thinking_{variant}_alpha_{alpha}"] = (_config_of(f"{variant}_{alpha}"), ask(mode="thinking", rerank=False, **base))
    return modes


def bench_dstc11(data: Path, limit_queries: int | None) -> dict[str, Any]:
    ds = load(data, "dstc11_track5")
    queries = list(ds.queries.values())[:limit_queries]
    embedder = CachedEmbedder(LocalEmbedder())
    with tempfile.TemporaryDirectory() as tmp:
        store = _store(dstc11_documents(ds), DSTC_ROOT, tmp, embedder, title_rules=DSTC_TITLES)
        sessions = open_session_store("sqlite", path=Path(tmp) / "sessions.db")
        session_of: dict[str, str] = {}
        for q in queries:  # the dialogue before the last user turn is the session
            s = sessions.create("bench")
            for turn in (q.get("metadata", {}).get("context") or [])[:-1]:
                sessions.append("bench", s.id, "user" if turn["speaker"] == "U" else "assistant", turn["text"])
            session_of[q["_id"]] = s.id
        planner = SessionRewritePlanner(
            resolver=FolderResolver(store, "bench", embedder), roots=lambda ct: roots_for(ct, (), None)
        )
        svc = Cairn(store, embedder, "bench", planner=planner, sessions=sessions)

        def with_session(**opts: Any) -> Ask:
            return lambda svc, q: svc.search(q["text"], session_id=session_of[q["_id"]], include_provenance=True, **opts)

        out: dict[str, Any] = {"queries": len(queries)}
        out["raw_last_turn_quick"] = measure(
            svc, queries, ds.qrels, DSTC_ROOT, lambda svc, q: svc.find(q["text"], limit=LIMIT, context_type="resource", score_threshold=-1.0)
        )
        print(f"  dstc11 raw_last_turn_quick: {out['raw_last_turn_quick']}", flush=True)
        out.update(_sweep("dstc11", svc, queries, ds.qrels, DSTC_ROOT, _modes(with_session)))
        best = max((k for k in out if k.startswith("thinking")), key=lambda k: out[k]["nDCG@10"])
        out["best_thinking"] = best
        svc.reranker = build_reranker("local", embedder=embedder.inner)
        svc.thinking = _config_of(best)
        out["thinking_rerank"] = measure(
            svc, queries[:RERANK_QUERIES], ds.qrels, DSTC_ROOT,
            with_session(mode="thinking", rerank=True, limit=RERANK_LIMIT, context_type="resource", score_threshold=-1.0),
        )
        out["thinking_rerank"]["queries"] = len(queries[:RERANK_QUERIES])
        print(f"  dstc11 thinking_rerank ({best}): {out['thinking_rerank']}", flush=True)
        embedder.save()
    return out


def _config_of(key: str) -> ThinkingConfig:
    """``thinking_<scope>[-ancestors]_alpha_<a>`` -> its configuration."""
    alpha = float(key.rsplit("_", 1)[1])
    scope = "subtree" if "subtree" in key else "children"
    return ThinkingConfig(alpha=alpha, threshold=-1.0, scope=scope, ancestor_scores="ancestors" in key)


def bench_scifact(data: Path, limit_queries: int | None, best: str) -> dict[str, Any]:
    ds = load(data, "scifact")
    queries = list(ds.queries.values())[:limit_queries]
    embedder = CachedEmbedder(LocalEmbedder())
    with tempfile.TemporaryDirectory() as tmp:
        store = _store(scifact_documents(ds), SCIFACT_ROOT, tmp, embedder)
        svc = Cairn(store, embedder, "bench")

        def plain(**opts: Any) -> Ask:
            return lambda svc, q: svc.find(q["text"], include_provenance=True, **opts)

        base = dict(limit=LIMIT, context_type="resource", score_threshold=-1.0)
        modes = {
            "quick": (None, plain(mode="quick", **base)),
            "quick_hybrid": (None, plain(mode="quick", hybrid=True, **base)),
            best: (_config_of(best), plain(mode="thinking", **base)),
        }
        out: dict[str, Any] = {"queries": len(queries), **_sweep("scifact", svc, queries, ds.qrels, SCIFACT_ROOT, modes)}
        svc.reranker = build_reranker("local", embedder=embedder.inner)
        rr = {**base, "limit": RERANK_LIMIT}
        for key, opts in (("quick_hybrid_rerank", {"mode": "quick", "hybrid": True}), ("thinking_rerank", {"mode": "thinking"})):
            out[key] = measure(svc, queries[:RERANK_QUERIES], ds.qrels, SCIFACT_ROOT, plain(rerank=True, **opts, **rr))
            print(f"  scifact {key}: {out[key]}", flush=True)
    return out


def run(data: Path, limit_queries: int | None = None) -> dict[str, Any]:
    dstc = bench_dstc11(data, limit_queries)
    return {"suite": SUITE, "dstc11": dstc, "scifact": bench_scifact(data, limit_queries, dstc["best_thinking"])}
