"""The agent path on public conversational sets nobody here wrote, beside the one-line baselines.

    python -m benchmarks.run conversations --data ../shared/data          # every set present (~10 min idle)
    CAIRN_BENCH_CONVERSATIONS=mtrag python -m benchmarks.run conversations  # one set

Sets (BEIR layout with each judged turn's dialogue in ``metadata.context``; each folder's SOURCE.md
says where it comes from and how it was converted, ``benchmarks/sources/`` keeps a copy):

- ``dstc11``: DSTC11 track 5, hotel and restaurant FAQs and reviews, one folder per entity;
- ``mtrag``: IBM's MTRAG (and MTRAG-UN) human-written multi-turn RAG conversations over Wikipedia,
  IBM Cloud docs, FiQA and US government pages, one folder per source document
  (``benchmarks/convert_mtrag.py``);
- ``trec_cast``: TREC CAsT 2020 and 2022, raw (not rewritten) utterances
  (``benchmarks/convert_trec_cast.py``).

Each set is ingested once through the public ``Ingestor`` (cached: :mod:`.collections`). Every judged
turn is asked as an agent asks it: the dialogue before it is a session (user and assistant turns),
and ``search(turn, session)`` runs with the defaults a ``cairn serve`` tenant gets (the no-LLM session
planner with the folder resolver, default threshold, ``limit`` 10). Beside it, the baselines the
session must beat: ``find(turn)``, ``find(previous user turn + turn)`` and BM25 (bm25s, stemmed) on
the previous user turn + the turn. Judged on the first 10 documents (chunks of a document count once):
nDCG@10 and R@10 (ir-measures); ``below_find`` is the share of judged turns whose session nDCG@10 is
under ``find(turn)``'s; ``vector_calls`` the mean per turn; latency is the whole call with the query
embedding cached.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import ir_measures
from ir_measures import nDCG

from cairn import Cairn
from cairn.app.services import Services
from cairn.core.config import Settings
from cairn.ports.sessions import open_session_store

from .collections import COLLECTIONS, TENANT, Collection, cached_store
from .metrics import evaluate, percentiles
from .quality import MemoEmbedder, bm25_run, judged, previous_user_turn

os.environ.setdefault("CAIRN_LOG_LEVEL", "WARNING")  # a usage line per call would bury the figures
SUITE = "conversations"
SETS = ("dstc11", "mtrag", "trec_cast")
LIMIT = 10
COLD_TURNS = 300  # turns timed with their embedding (new_turn_latency)


def per_query_ndcg(qrels: dict, run: dict) -> dict[str, float]:
    full = {q: run.get(q) or {"__none__": 0.0} for q in qrels}
    return {m.query_id: m.value for m in ir_measures.iter_calc([nDCG @ 10], qrels, full)}


def play(col: Collection, svc: Cairn, queries: list[dict], ask: Any,
         shapes: dict[str, tuple[str, frozenset[str]]] | None = None) -> tuple[dict, list[float], list[int]]:
    """Each query asked once: its judged run, latency and vector calls (and, into ``shapes``, the
    shape of the plan that answered it and the folders it boosted)."""
    run, lat, calls = {}, [], []
    for q in queries:
        t = time.perf_counter()
        res = ask(q)
        lat.append((time.perf_counter() - t) * 1000)
        calls.append(sum(qr.trace.stats.vector_calls for qr in res.query_results))
        run[q["_id"]] = judged(col, res)
        if shapes is not None:
            folders = {col.corpus_id(u) for tq in res.query_plan.queries for u in tq.boost_uris} if res.query_plan else set()
            shapes[q["_id"]] = (plan_shape(res.query_plan, bool(previous_user_turn(q))), frozenset(folders))
    return run, lat, calls


def boost_kind(shape: tuple[str, frozenset[str]], relevant: dict[str, int]) -> str:
    """A boosted turn told apart by whether a folder it boosted holds a document judged relevant
    (``boosted, right folder``) or not (``boosted, other folder``); other shapes as they are."""
    kind, folders = shape
    if not folders:
        return kind
    right = any(not folder or doc.startswith(f"{folder}/")  # "": the collection's root
                for folder in folders for doc, grade in relevant.items() if grade > 0)
    return f"{kind}, {'right' if right else 'other'} folder"


def plan_shape(plan: Any, follows: bool) -> str:
    """What the session planner did with a turn: ``first`` (no earlier user turn), ``boosted`` (a
    folder the conversation names), ``carried`` (also searched with the previous user turn), else ``turn``."""
    if not follows:
        return "first"
    queries = plan.queries if plan is not None else ()
    if any(q.boost_uris for q in queries):
        return "boosted"
    return "carried" if any(q.weight < 1.0 for q in queries) else "turn"


def arm_figures(qrels: dict, run: dict, lat: list[float] | None = None, calls: list[int] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {k: round(v, 4) for k, v in evaluate(qrels, run).items()}
    if lat:
        out.update(percentiles(lat))
    if calls:
        out["vector_calls"] = round(statistics.mean(calls), 2)
    return out


def new_turn_latency(memo: MemoEmbedder, turns: list[dict], arms: tuple) -> dict[str, float]:
    """p50 (ms) of ``find(turn)`` and ``search(turn, session)`` for turns nobody embedded before:
    what an agent's new turn costs, the model's work included (each call starts with no query
    vector kept; the two arms take turns)."""
    lat: dict[str, list[float]] = {"find_turn": [], "search_session": []}
    asks = {name: ask for name, _, ask in arms if name in lat}
    for q in turns:
        for name, ask in asks.items():
            memo.forget()
            t = time.perf_counter()
            ask(q)
            lat[name].append((time.perf_counter() - t) * 1000)
    out = {name: round(statistics.median(v), 2) for name, v in lat.items() if v}
    if len(out) == 2 and out["find_turn"] > 0:
        out["ratio"] = round(out["search_session"] / out["find_turn"], 2)
    return out


def planner_for(store: Any, embedder: Any) -> Any:
    """The planner a ``cairn serve`` tenant gets by default (the composition root builds it)."""
    services = Services(Settings(), store=store, embedder=embedder)
    return services.planner(TENANT)


def bench(key: str, data: Path, limit_queries: int | None) -> dict[str, Any]:
    col = COLLECTIONS[key]
    store, embedder, ds = cached_store(key, data)
    memo = MemoEmbedder(embedder)
    queries = list(ds.queries.values())[:limit_queries]
    qrels = {q["_id"]: ds.qrels[q["_id"]] for q in queries if ds.qrels.get(q["_id"])}
    queries = [q for q in queries if q["_id"] in qrels]
    two = [{**q, "text": f"{previous_user_turn(q)} {q['text']}".strip()} for q in queries]
    out: dict[str, Any] = {"judged_turns": len(queries), "dialogues": len({q["metadata"].get("dialogue_id", q["_id"]) for q in queries})}
    with tempfile.TemporaryDirectory() as tmp:
        sessions = open_session_store("sqlite", path=Path(tmp) / "sessions.db")
        session_of: dict[str, str] = {}
        for q in queries:  # the dialogue before the judged turn is the session
            s = sessions.create(TENANT)
            for turn in (q["metadata"].get("context") or [])[:-1]:
                sessions.append(TENANT, s.id, "user" if turn["speaker"] == "U" else "assistant", turn["text"])
            session_of[q["_id"]] = s.id
        svc = Cairn(store, memo, TENANT, planner=planner_for(store, memo), sessions=sessions)
        opts = dict(limit=LIMIT, context_type="resource")
        arms = (
            ("find_turn", queries, lambda q: svc.find(q["text"], **opts)),
            ("find_previous_user_turn_and_turn", two, lambda q: svc.find(q["text"], **opts)),
            ("search_session", queries, lambda q: svc.search(q["text"], session_id=session_of[q["_id"]], **opts)),
        )
        for _, batch, ask in arms:  # untimed: every text each arm embeds is embedded once (the p50s are the searches')
            for q in batch:
                ask(q)
        runs: dict[str, dict] = {}
        shapes: dict[str, tuple[str, frozenset[str]]] = {}
        for name, batch, ask in arms:
            run, lat, calls = play(col, svc, batch, ask, shapes if name == "search_session" else None)
            runs[name] = run
            out[name] = arm_figures(qrels, run, lat, calls)
            print(f"  {key} {name}: {out[name]}", flush=True)
        out["new_turn_p50_ms"] = new_turn_latency(memo, queries[:COLD_TURNS], arms)
        print(f"  {key} p50 with the turn's embedding: {out['new_turn_p50_ms']}", flush=True)
    out["bm25_previous_user_turn_and_turn"] = arm_figures(qrels, bm25_run(ds, two, stemmed=True))
    session, find = per_query_ndcg(qrels, runs["search_session"]), per_query_ndcg(qrels, runs["find_turn"])
    below = sorted(q for q in qrels if session.get(q, 0.0) < find.get(q, 0.0) - 1e-9)
    out["below_find"] = round(len(below) / max(len(qrels), 1), 4)
    out["below_find_examples"] = below[:10]
    kinds = {q: boost_kind(shape, qrels.get(q, {})) for q, shape in shapes.items()}
    out["by_plan_shape"] = {
        shape: {"turns": len(qids), "search_session": round(statistics.mean(session.get(q, 0.0) for q in qids), 4),
                "find_turn": round(statistics.mean(find.get(q, 0.0) for q in qids), 4),
                "below_find": sum(1 for q in qids if q in set(below))}
        for shape in sorted(set(kinds.values()))
        if (qids := [q for q in qrels if kinds.get(q) == shape])
    }
    print(f"  {key} by plan shape: {out['by_plan_shape']}", flush=True)
    best_baseline = max(out[a]["nDCG@10"] for a in ("find_turn", "find_previous_user_turn_and_turn", "bm25_previous_user_turn_and_turn"))
    out["margin_over_best_baseline"] = round(out["search_session"]["nDCG@10"] - best_baseline, 4)
    print(f"  {key}: session {out['search_session']['nDCG@10']} vs best baseline {best_baseline} "
          f"(margin {out['margin_over_best_baseline']:+.4f}); below find on {out['below_find']:.1%}", flush=True)
    return out


def run(data: Path, limit_queries: int | None = None) -> dict[str, Any]:
    wanted = [s for s in os.environ.get("CAIRN_BENCH_CONVERSATIONS", ",".join(SETS)).split(",") if s]
    out: dict[str, Any] = {}
    for key in wanted:
        if not (data / COLLECTIONS[key].name / "queries.jsonl").exists():
            print(f"  {key}: not under {data} (see benchmarks/sources/): skipped", flush=True)
            continue
        out[key] = bench(key, data, limit_queries)
    return out
