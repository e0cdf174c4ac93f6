"""planning: the raw last turn vs the no-LLM session-aware planner on dstc11_track5.

Each query's dialogue (``metadata.context`` minus its last user turn) is loaded into a SQLite
session; the last user turn is the query. Both arms use quick ``find``-style retrieval over the
same index; the session-aware arm searches the planner's rewritten query. recall@5 and nDCG@5.

    python -m benchmarks.run planning --data ../shared/data [--queries N]

The ingested store is cached under ``benchmarks/results/cache/`` keyed by the corpus hash, so
only the first run pays for embedding ~13k records.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from pathlib import Path

from cairn import Cairn
from cairn.core.models import ContextType, QueryPlan, TypedQuery
from cairn.engine.ingest import Document, Ingestor
from cairn.engine.planning.session_planner import SessionRewritePlanner
from cairn.ports.embeddings.local import LocalEmbedder
from cairn.ports.sessions.sqlite import SQLiteSessionStore
from cairn.ports.vectorstores.local import LocalVectorStore

from .beir import BeirSet, load
from .metrics import evaluate, percentiles

SUITE = "planning"
ROOT = "cairn://resources/dstc11"
TENANT = "bench"
K = 5
LAYOUT_VERSION = "1"  # bump when the way documents are built below changes
CACHE = Path(__file__).parent / "results" / "cache"


def to_document(d: dict) -> Document:
    """hotel/17/review/3/2 -> path (hotel, 17, review, 3, 2.md).

    A leaf's title names its entity, as a real document about a hotel would ("A and B Guest
    House — Can I bring my pet?"); review sentences have no title of their own.
    """
    meta = d["metadata"]
    path = [str(p) for p in meta["path"]]
    entity = str(meta.get("entity_name", "")).title()
    title = f"{entity} — {d['title']}" if d.get("title") else f"{entity} — {meta.get('doc_type', 'review')}"
    return Document(path=tuple(path[:-1]) + (path[-1] + ".md",), text=d["text"] or d["title"], title=title)


def corpus_id_of(uri: str) -> str:
    """cairn://resources/dstc11/hotel/17/review/3/2.md -> hotel/17/review/3/2"""
    rel = uri.split("#", 1)[0].removeprefix(ROOT + "/")
    return rel.removesuffix(".md")


def cached_store(data: Path, ds: BeirSet | None = None, embedder: LocalEmbedder | None = None) -> LocalVectorStore:
    """The dstc11 corpus ingested into a LocalVectorStore, built once per corpus hash."""
    corpus_file = data / "dstc11_track5" / "corpus.jsonl"
    digest = hashlib.sha256(corpus_file.read_bytes() + LAYOUT_VERSION.encode()).hexdigest()[:16]
    folder = CACHE / f"dstc11-{digest}"
    embedder = embedder or LocalEmbedder()
    if not (folder / "READY").exists():
        ds = ds or load(data, "dstc11_track5")
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="dstc11-", dir=CACHE))
        store = LocalVectorStore(tmp, dimension=embedder.dimension)
        t0 = time.perf_counter()
        report = Ingestor(store, embedder, TENANT, batch_size=1024).ingest(
            [to_document(d) for d in ds.corpus],
            ROOT,
            progress=lambda s, d, t: print(f"\r  ingest: {d}/{t} records", end="", flush=True),
        )
        print(f"\n  ingested {report.documents} documents, {report.records} records in {time.perf_counter() - t0:.0f} s")
        (tmp / "READY").write_text(str(report.records))
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
    return LocalVectorStore(folder, dimension=embedder.dimension)


def load_sessions(sessions: SQLiteSessionStore, queries: list[dict]) -> dict[str, str]:
    """Each query's dialogue before its last user turn, as a session; query id -> session id."""
    out = {}
    for q in queries:
        turns = q["metadata"]["context"]
        if turns and turns[-1]["speaker"] == "U" and turns[-1]["text"].strip() == q["text"].strip():
            turns = turns[:-1]
        s = sessions.create(TENANT)
        for t in turns:
            if t["text"].strip():
                sessions.append(TENANT, s.id, "user" if t["speaker"] == "U" else "assistant", t["text"])
        out[q["_id"]] = s.id
    return out


def _ranked(svc: Cairn, plan: QueryPlan) -> dict[str, float]:
    """Leaves found by each typed query, merged by best score, cut to K corpus ids."""
    best: dict[str, float] = {}
    for tq in plan.queries:
        res = svc.find(tq.query, limit=K, context_type=(tq.context_type or ContextType.RESOURCE).value, score_threshold=-1.0)
        for m in res.resources:
            if m.level == 2:
                cid = corpus_id_of(m.uri)
                best[cid] = max(best.get(cid, -1.0), m.score)
    return dict(sorted(best.items(), key=lambda kv: -kv[1])[:K])


def run(data: Path, queries: int | None = None) -> dict:
    ds = load(data, "dstc11_track5")
    embedder = LocalEmbedder()
    store = cached_store(data, ds, embedder)
    svc = Cairn(store, embedder, TENANT)
    qs = list(ds.queries.values())[:queries]
    qrels = {q["_id"]: ds.qrels[q["_id"]] for q in qs}
    vocabulary = sorted({str(d["metadata"]["entity_name"]).title() for d in ds.corpus})
    planners = {
        "session_rewrite": SessionRewritePlanner(),
        "session_rewrite_vocabulary": SessionRewritePlanner(vocabulary),
    }
    out: dict = {"suite": SUITE, "queries": len(qs), "k": K, "retrieval": "quick find(), resources, leaves only"}
    with tempfile.TemporaryDirectory() as tmp:
        sessions = SQLiteSessionStore(Path(tmp) / "sessions.db")
        t0 = time.perf_counter()
        session_of = load_sessions(sessions, qs)
        out["session_load_seconds"] = round(time.perf_counter() - t0, 1)
        runs: dict[str, dict[str, dict[str, float]]] = {"raw_last_turn": {}, **{name: {} for name in planners}}
        latency: dict[str, list[float]] = {name: [] for name in planners}
        rewritten: dict[str, int] = {name: 0 for name in planners}
        for q in qs:
            raw = QueryPlan(queries=(TypedQuery(query=q["text"]),))
            runs["raw_last_turn"][q["_id"]] = _ranked(svc, raw)
            view = sessions.get(TENANT, session_of[q["_id"]], recent=5)
            for name, planner in planners.items():
                t = time.perf_counter()
                plan = planner.plan(q["text"], view)
                latency[name].append((time.perf_counter() - t) * 1000)
                rewritten[name] += plan.queries[0].query != q["text"]
                runs[name][q["_id"]] = _ranked(svc, plan)
        sessions.close()
    for name, run_ in runs.items():
        out[name] = {k: round(v, 4) for k, v in evaluate(qrels, run_, k=K).items()}
        if name in planners:
            out[name]["rewritten_queries"] = rewritten[name]
            out[name]["plan_latency"] = percentiles(latency[name])
    out["vocabulary"] = f"{len(vocabulary)} entity names (the corpus's entity titles), used only by session_rewrite_vocabulary"
    return out
