"""LoCoMo evidence recall through cairn's memories (issue 12).

Each conversation is one user. Its sessions are appended through cairn's sessions API in order
(both speakers as ``user`` turns, since both are people whose words are remembered — cairn keeps
what users say as memories and an assistant's replies only as their context — each turn with its
speaker's name and the session's date) and each session is committed, which archives its turns as episodic memories
(the embedded default: no LLM). Then every question of categories 1-4 is asked through
``Cairn.search`` in a fresh session of that user (``user=`` passed explicitly, context type
memory). A memory cites the turns it came from; recall@k is the share of a question's evidence
turns cited by the first k memories returned (folder summaries cite nothing and are skipped).

Reported per configuration: recall@5/10/20 overall and per category, the average number of turns
a memory cites (a memory citing many turns makes recall@k easier: compare at equal citations),
latency per question (p50/p95) and per commit. Anchor (evidence_recall_baseline.md): BM25 over
single turns 0.501 / 0.577 / 0.648; RRF(BM25, dense) 0.518 / 0.607 / 0.703.

    python -m benchmarks.run locomo --data ../shared/data [--queries N]
"""

from __future__ import annotations

import json
import os
import re
import statistics
import tempfile
import time
from calendar import timegm
from collections import defaultdict
from pathlib import Path
from typing import Any

from cairn import Cairn
from cairn.core.models import Level, record_id
from cairn.engine.memory import MemoryService, UseRecorder
from cairn.engine.memory.hotness import record_id_of_match
from cairn.engine.memory.search import search_memories
from cairn.engine.planning.scope import FolderResolver
from cairn.engine.planning.session_planner import SessionRewritePlanner
from cairn.engine.retrieval.scope import roots_for
from cairn.ports.embeddings.local import LocalEmbedder
from cairn.ports.rerank import build_reranker
from cairn.ports.sessions import open_session_store
from cairn.ports.vectorstores.local import LocalVectorStore

from .cache import CachedEmbedder
from .metrics import percentiles

SUITE = "locomo"
TENANT = "bench"
KS = (5, 10, 20)
ASK_LIMIT = 30  # results asked per question; judged on the first k memory leaves
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
WINDOWS = (1, 2, 3)
# a partial run: CAIRN_LOCOMO_WINDOWS=2,3 CAIRN_LOCOMO_MODES=quick_hybrid,search_default
_ENV_WINDOWS = os.environ.get("CAIRN_LOCOMO_WINDOWS")
_ENV_MODES = os.environ.get("CAIRN_LOCOMO_MODES")
_SPLIT = re.compile(r"[;,\s]+")
_ID = re.compile(r"D:?(\d+):0*(\d+)")
_DATE = "%I:%M %p on %d %B, %Y"


# ---------------------------------------------------------------- the data


def load(data: Path) -> list[dict]:
    path = data / "locomo" / "locomo10.json"
    if not path.exists():
        raise SystemExit(f"{path} not found; pass --data pointing at the folder that holds locomo/")
    return json.loads(path.read_text())


def sessions_of(conv: dict) -> list[tuple[int, float, list[dict]]]:
    """(number, start epoch seconds, turns) of every session that has turns, in order."""
    c = conv["conversation"]
    nums = sorted(int(m.group(1)) for k in c if (m := re.fullmatch(r"session_(\d+)", k)))
    out = []
    for n in nums:
        start = timegm(time.strptime(c[f"session_{n}_date_time"], _DATE))
        out.append((n, float(start), c[f"session_{n}"]))
    return out


def evidence(qa: dict, known: set[str]) -> list[str]:
    """The question's evidence turn ids, repaired as in evidence_recall_baseline.md."""
    out: list[str] = []
    for raw in qa.get("evidence") or []:
        for part in _SPLIT.split(str(raw).strip()):
            m = _ID.fullmatch(part)
            if m:
                dia = f"D{int(m.group(1))}:{int(m.group(2))}"
                if dia in known and dia not in out:
                    out.append(dia)
    return out


# ---------------------------------------------------------------- one configuration


def _cairn(store: LocalVectorStore, embedder: CachedEmbedder, sessions: Any, rerank: bool) -> Cairn:
    """The embedded default's search: the session-rewrite planner over the store, local rerank."""
    planner = SessionRewritePlanner(
        resolver=FolderResolver(store, TENANT, embedder), roots=lambda ct: roots_for(ct, (), None)
    )
    reranker = build_reranker("local", embedder=embedder) if rerank else None
    return Cairn(store, embedder, TENANT, planner=planner, sessions=sessions, reranker=reranker)


def ingest(convs: list[dict], svc: MemoryService, sessions: Any) -> tuple[dict[str, str], list[float], int]:
    """Append and commit every session; returns (citation -> dia_id, commit seconds, turns)."""
    dia_of: dict[str, str] = {}
    commit_s: list[float] = []
    turns = 0
    for conv in convs:
        user = conv["sample_id"]
        for _, start, session_turns in sessions_of(conv):
            s = sessions.create(TENANT, user=user)
            for i, turn in enumerate(session_turns):
                m = sessions.append(TENANT, s.id, "user", turn["text"], name=turn["speaker"], created_at=start + i)
                dia_of[f"{s.id}#{m.seq}"] = turn["dia_id"]
                turns += 1
            t0 = time.perf_counter()
            svc.commit(s.id)
            commit_s.append(time.perf_counter() - t0)
    return dia_of, commit_s, turns


def ask_all(
    convs: list[dict], cairn: Cairn, sessions: Any, dia_of: dict[str, str], store: LocalVectorStore,
    limit_queries: int | None, *, mode: str, rerank: bool, hybrid: bool = False, recorder: UseRecorder | None = None,
) -> dict[str, Any]:
    sums: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    counts: dict[str, int] = defaultdict(int)
    latencies: list[float] = []
    cited_in_top: list[int] = []
    budget: dict[int, float] = defaultdict(float)
    asked = 0
    for conv in convs:
        user = conv["sample_id"]
        known = {t["dia_id"] for _, _, ts in sessions_of(conv) for t in ts}
        for qa in conv["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            gold = evidence(qa, known)
            if not gold:
                continue
            if limit_queries is not None and asked >= limit_queries:
                break
            asked += 1
            ranked = _ask(cairn, sessions, store, user, qa["question"], mode, rerank, hybrid, recorder, latencies)
            cited = [[dia_of.get(c, "") for c in (r.metadata.get("cites") or [])] if r else [] for r in ranked]
            cited_in_top += [len(c) for c in cited[:10]]
            turns = list(dict.fromkeys(d for c in cited for d in c))  # cited turns in rank order
            for k in KS:  # at an equal budget of turns, whatever the memories' size
                budget[k] += len(set(turns[:k]) & set(gold)) / len(gold)
            for cat in (CATEGORIES[qa["category"]], "all"):
                counts[cat] += 1
                for k in KS:
                    got = {d for c in cited[:k] for d in c}
                    sums[cat][k] += len(got & set(gold)) / len(gold)
    table = {
        cat: {"n": counts[cat], **{f"R@{k}": round(sums[cat][k] / counts[cat], 4) for k in KS}}
        for cat in ["all", *CATEGORIES.values()] if counts[cat]
    }
    return {
        "questions": asked,
        "recall": table,
        "turns_cited_per_memory_in_top10": round(statistics.mean(cited_in_top), 2) if cited_in_top else 0.0,
        "recall_within_first_n_cited_turns": {f"N={k}": round(budget[k] / asked, 4) for k in KS} if asked else {},
        "latency_ms": percentiles(latencies),
    }


def _ask(cairn: Cairn, sessions: Any, store: LocalVectorStore, user: str, question: str, mode: str, rerank: bool,
         hybrid: bool, recorder: UseRecorder | None, latencies: list[float]) -> list[Any]:
    """One question; returns the memory records in rank order (None for a record not found)."""
    if mode == "memory_search":  # cairn.engine.memory.search_memories: the user's memory leaves, hybrid
        t0 = time.perf_counter()
        hits = search_memories(store, cairn.embedder, TENANT, user, question, limit=max(KS))
        latencies.append((time.perf_counter() - t0) * 1000)
        return [h.record for h in hits]
    s = sessions.create(TENANT, user=user)  # a fresh session of the user, as an agent would open
    t0 = time.perf_counter()
    opts: dict[str, Any] = dict(user=user, context_type="memory", limit=ASK_LIMIT, mode=mode, rerank=rerank,
                                score_threshold=-1.0)
    if hybrid:
        opts["hybrid"] = True
    result = cairn.search(question, session_id=s.id, **opts)
    latencies.append((time.perf_counter() - t0) * 1000)
    if recorder is not None:
        recorder.record_result(TENANT, result)
    leaves = [m for m in result.memories if int(m.level) == int(Level.DETAIL)]
    recs = {r.id: r for r in store.fetch(TENANT, [record_id(TENANT, m.uri, Level.DETAIL) for m in leaves])}
    return [recs.get(record_id_of_match(TENANT, m.uri, int(m.level))) for m in leaves]


def run_window(convs: list[dict], embedder: CachedEmbedder, window: int, limit_queries: int | None,
               modes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalVectorStore(Path(tmp) / "store", dimension=embedder.dimension)
        sessions = open_session_store("sqlite", path=Path(tmp) / "sessions.db")
        svc = MemoryService(store, embedder, TENANT, sessions=sessions, window=window)
        dia_of, commit_s, turns = ingest(convs, svc, sessions)
        embedder.save()
        leaves = store.count(TENANT, {"level": 2})
        out: dict[str, Any] = {
            "window": window,
            "turns": turns,
            "memories": leaves,
            "turns_cited_per_memory": round(turns / leaves, 2) if leaves else 0.0,
            "commits": len(commit_s),
            "commit_ms": percentiles([s * 1000 for s in commit_s]),
            "commit_mean_ms": round(statistics.mean(commit_s) * 1000, 1),
        }
        print(f"  window {window}: {turns} turns -> {leaves} memories; commit {out['commit_ms']}", flush=True)
        for name, opts in modes.items():
            cairn = _cairn(store, embedder, sessions, opts.get("rerank", False))
            recorder = None
            if opts.get("hotness"):
                recorder = UseRecorder(store)  # flushed by its own thread every 5 s, as in a server
                cairn.hotness_weight = opts["hotness"]
            res = ask_all(convs, cairn, sessions, dia_of, store, limit_queries, recorder=recorder,
                          **{k: v for k, v in opts.items() if k != "hotness"})
            if recorder is not None:
                recorder.close()
            out[name] = res
            print(f"  window {window} {name}: {json.dumps(res['recall']['all'])} {res['latency_ms']}", flush=True)
            embedder.save()
    return out


MODES: dict[str, dict[str, Any]] = {
    "quick": {"mode": "quick", "rerank": False},
    "quick_hybrid": {"mode": "quick", "rerank": False, "hybrid": True},
    "search_default": {"mode": "thinking", "rerank": True},
    "search_hybrid": {"mode": "thinking", "rerank": True, "hybrid": True},
    # what search(context_type="memory") does with the shipped settings: thinking, hybrid (memory_hybrid), no reranker
    "search_defaults": {"mode": "thinking", "rerank": False, "hybrid": True},
    "memory_search": {"mode": "memory_search", "rerank": False},
    # hotness: every question's top results count as used (written by the recorder's thread) and
    # later questions blend (1-w)·score + w·hotness; measured against quick_hybrid
    "quick_hybrid_hotness_0.1": {"mode": "quick", "rerank": False, "hybrid": True, "hotness": 0.1},
}


def run(data: Path, limit_queries: int | None = None) -> dict[str, Any]:
    convs = load(data)
    embedder = CachedEmbedder(LocalEmbedder(), name="locomo")
    out: dict[str, Any] = {"anchor_bm25_single_turns": {"R@5": 0.501, "R@10": 0.577, "R@20": 0.648}}
    windows = [int(w) for w in _ENV_WINDOWS.split(",")] if _ENV_WINDOWS else WINDOWS
    for window in windows:
        names = _ENV_MODES.split(",") if _ENV_MODES else (
            list(MODES) if window == 1 else ["quick_hybrid", "search_default", "search_hybrid"])
        modes = {k: MODES[k] for k in names}
        out[f"window_{window}"] = run_window(convs, embedder, window, limit_queries, modes)
    return out
