"""agent_day: an agent's day of support chats through `cairn serve`, five ways to use a conversation.

The knowledge base (``benchmarks/agent_day/kb/``: 32 help-centre pages in topic folders whose names
are ordinary words too: billing, support, data, engineering, faq, account) is uploaded with
``PUT /v1/documents``; five users' facts are remembered with ``POST /v1/memories``; then ten
scripted chats (``benchmarks/agent_day/conversations.json``, written for this benchmark: 154 judged
turns with paraphrases, topic changes, short follow-ups, references back and questions about
remembered facts) are played turn by turn. Before a user turn is appended to its session, each arm
answers it over HTTP:

* ``find(turn)``; ``search(turn)`` without a session; ``search(turn, session)`` (the agent path);
* ``find(previous user turn + turn)``: the naive way to use a conversation;
* ``bm25(last two user turns)``: bm25s over the raw pages (stemmed, English stop words).

and ``POST /v1/context`` with the session and a 300-token budget (blocks over budget; its latency
next to the session search's).

Judged on the kb pages (chunks count as their page): recall@3, recall@5 and nDCG@10 per arm, over
every turn with ``docs``; memory recall = share of the ``mem`` turns whose remembered fact is in the
first 3 results of the answer (memories and resources ranked together) for the session arm, and
how many of the other turns (none asks about a memory) have a memory in those 3 anyway; the
share of empty answers on judged turns; p50 / p95 per call. The chats of one user follow each
other, and each chat is committed at its end (``POST /v1/sessions/{id}/commit``): what a user said
in an earlier chat ("we're a registered charity") is a memory in the next.

Also: 1,000 random strings (``cairn.engine.retrieval.evidence.random_strings``, a seed of its own) asked
with ``find`` and ``search``: how many get any result (the target is none).

A second set, ``staff`` (``benchmarks/agent_day/staff/`` and ``staff_conversations.json``: a staff
handbook of 18 pages in topic folders named by words only their own pages use, three employees'
chats, 37 judged turns and 5 memory turns), is played the same way on a server of its own and
reported under ``staff``; the top-level figures are the help centre's. A third, ``product``
(``benchmarks/agent_day/product/`` and ``product_conversations.json``: a product's help centre of
18 pages where ``integrations/`` holds one folder per integration, each with the same two pages,
beside topic folders; two customers' chats, 24 judged turns and 2 memory turns), is reported under
``product``. With a multilingual embedder (``CAIRN_EMBEDDING_MODEL=multilingual-e5-small``), a fourth,
``languages``: the staff handbook asked in Chinese and German (``languages_conversations.json``, 12
judged turns; BM25 on English pages finds nothing there).

    python -m benchmarks.run agent_day
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from cairn.client import CairnClient

from .metrics import evaluate, percentiles

SUITE = "agent_day"
HERE = Path(__file__).parent / "agent_day"
ROOT = "cairn://resources/kb"
LIMIT = 10
ARMS = ("find", "search", "search_session", "find_prev_turn", "bm25_two_turns")
NOISE = 1000
CONTEXT_BUDGET = 300


# each set: (its pages' folder, its chats) under benchmarks/agent_day/; every set is played on a fresh home
SETS = {"helpdesk": ("kb", "conversations.json"), "staff": ("staff", "staff_conversations.json"),
        "product": ("product", "product_conversations.json"), "languages": ("staff", "languages_conversations.json"),
        "indirect": ("staff", "indirect_conversations.json"), "indirect_kb": ("kb", "indirect_kb_conversations.json")}


def load(name: str = "helpdesk") -> tuple[list[dict], dict]:
    pages, chats = SETS[name]
    docs = [{"path": str(p.relative_to(HERE / pages)), "text": p.read_text()} for p in sorted((HERE / pages).rglob("*.md"))]
    return docs, json.loads((HERE / chats).read_text())


def page_of(uri: str) -> str | None:
    """``cairn://resources/kb/billing/refunds.md#2`` -> ``billing/refunds.md`` (folders: None)."""
    if not uri.startswith(ROOT + "/") or uri.endswith((".abstract.md", ".overview.md")):
        return None
    return uri[len(ROOT) + 1 :].split("#", 1)[0]


def ranked_pages(matches: list[Any]) -> dict[str, float]:
    """The kb pages of a result, best first, each once, scored by rank (for ir-measures)."""
    out: dict[str, float] = {}
    for m in matches:
        page = page_of(m.uri)
        if page and page not in out:
            out[page] = float(1000 - len(out))
    return out


class Bm25:
    """Plain BM25 over the kb pages (bm25s, English stop words, Snowball stemmer)."""

    def __init__(self, docs: list[dict]) -> None:
        import bm25s
        import Stemmer

        self.bm25s, self.stem = bm25s, Stemmer.Stemmer("english").stemWords
        self.paths = [d["path"] for d in docs]
        self.index = bm25s.BM25()
        self.index.index(bm25s.tokenize([d["text"] for d in docs], stopwords="en", stemmer=self.stem, show_progress=False), show_progress=False)

    def __call__(self, text: str) -> dict[str, float]:
        tokens = self.bm25s.tokenize([text], stopwords="en", stemmer=self.stem, return_ids=False, show_progress=False)
        if not tokens[0]:
            return {}
        ids, scores = self.index.retrieve(tokens, k=LIMIT, show_progress=False)
        return {self.paths[i]: float(s) for i, s in zip(ids[0], scores[0]) if s > 0}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(home: Path, workers: int | None = None) -> tuple[subprocess.Popen, str]:
    """`cairn serve` in a process of its own, on a fresh home (the embedded default); ``workers``:
    its ``--workers`` (None: the default, one process per core)."""
    port = _free_port()
    env = {**os.environ, "CAIRN_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    for name in ("CAIRN_PLANNER", "CAIRN_LLM_PROVIDER", "CAIRN_RERANKER"):
        env.pop(name, None)
    cli = Path(sys.executable).with_name("cairn")
    log = (home / "serve.log").open("wb")  # a pipe nobody reads would fill and stall the server
    extra = ["--workers", str(workers)] if workers else []
    proc = subprocess.Popen([str(cli), "serve", "--port", str(port), *extra], env=env, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"cairn serve exited: {(home / 'serve.log').read_text()[-2000:]}")
        try:
            with CairnClient(url, timeout_s=2, retries=0) as c:
                c.health()
            return proc, url
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("cairn serve did not answer within 120 s")


def _timed(latencies: list[float], call: Any) -> Any:
    t0 = time.perf_counter()
    out = call()
    latencies.append((time.perf_counter() - t0) * 1000)
    return out


def play(client: CairnClient, data: dict, bm25: Bm25, with_context: bool = True) -> dict[str, Any]:
    """Every chat turn by turn (module doc); ``with_context``: also ``POST /v1/context`` each turn
    (its latency and budget; the quality gate reads neither)."""
    runs: dict[str, dict[str, dict[str, float]]] = {a: {} for a in ARMS}
    latency: dict[str, list[float]] = defaultdict(list)
    qrels: dict[str, dict[str, int]] = {}
    empty: dict[str, int] = defaultdict(int)
    memory_hits, memory_turns, misses, over_budget = 0, 0, [], 0
    unasked, other_turns = 0, 0  # turns that ask about no memory, and those with a memory in the top 3 anyway
    crowded = 0  # turns that ask about no memory but get more than one
    per_kind: dict[str, list[str]] = defaultdict(list)
    for conv in data["conversations"]:
        session = client.create_session(user=conv["user"])
        user_turns: list[str] = []
        for n, turn in enumerate(conv["turns"]):
            qid = f"{conv['id']}#{n}"
            u = turn["u"]
            prev = user_turns[-1] if user_turns else ""
            answers = {
                "find": _timed(latency["find"], lambda: client.find(u, limit=LIMIT)),
                "search": _timed(latency["search"], lambda: client.search(u, limit=LIMIT)),
                "search_session": _timed(latency["search_session"], lambda: client.search(u, session.id, limit=LIMIT)),
                "find_prev_turn": _timed(latency["find_prev_turn"], lambda: client.find(f"{prev} {u}".strip(), limit=LIMIT)),
            }
            for arm, res in answers.items():
                runs[arm][qid] = ranked_pages(res.all())
                if (turn.get("docs") or turn.get("mem")) and res.total == 0:
                    empty[arm] += 1
            runs["bm25_two_turns"][qid] = _timed(latency["bm25_two_turns"], lambda: bm25(f"{prev} {u}"))
            if with_context:
                block = _timed(latency["context_session"], lambda: client.context(u, session.id, budget_tokens=CONTEXT_BUDGET, limit=LIMIT))
                over_budget += block.tokens > CONTEXT_BUDGET
            if turn.get("docs"):
                qrels[qid] = {d: 1 for d in turn["docs"]}
                per_kind[turn.get("kind", "")].append(qid)
            if turn.get("mem"):
                memory_turns += 1
                top3 = answers["search_session"].all()[:3]
                if any(m.context_type.value == "memory" and turn["mem"].lower() in _text(m).lower() for m in top3):
                    memory_hits += 1
                else:
                    misses.append({"turn": qid, "query": u, "top3": [m.uri for m in top3]})
            else:
                other_turns += 1
                unasked += any(m.context_type.value == "memory" for m in answers["search_session"].all()[:3])
                crowded += len(answers["search_session"].memories) > 1
            client.append_message(session.id, "user", u)
            client.append_message(session.id, "assistant", turn["a"])
            user_turns.append(u)
        client.commit(session.id)
    judged = len(qrels)
    judged_all = judged + sum(1 for c in data["conversations"] for t in c["turns"] if t.get("mem") and not t.get("docs"))
    arms = {}
    for arm in ARMS:
        scores = {**evaluate(qrels, runs[arm], 10), **{k: v for k, v in evaluate(qrels, runs[arm], 3).items() if "recall" in k},
                  **{k: v for k, v in evaluate(qrels, runs[arm], 5).items() if "recall" in k}}
        arms[arm] = {k: round(v, 3) for k, v in scores.items()} | percentiles(latency[arm]) | {
            "empty_answers": f"{empty[arm]}/{judged_all}" if arm != "bm25_two_turns" else "-",
        }
    by_kind = {
        kind: {arm: round(evaluate({q: qrels[q] for q in qids}, runs[arm], 10)["nDCG@10"], 3) for arm in ARMS} | {"turns": len(qids)}
        for kind, qids in sorted(per_kind.items())
    }
    worse = [q for q in qrels if _turn_ndcg(qrels, runs["search_session"], q) < _turn_ndcg(qrels, runs["find"], q)]
    extra = [c - s_ for c, s_ in zip(latency["context_session"], latency["search_session"])]
    context = percentiles(latency["context_session"]) | {
        "over_budget": over_budget, "p50_ms_over_search": round(sorted(extra)[len(extra) // 2], 2)} if extra else None
    return {
        "context_300_tokens": context,
        "judged_turns": judged, "memory_turns": memory_turns, "arms": arms, "by_kind_nDCG@10": by_kind,
        "memory_recall@3": round(memory_hits / max(memory_turns, 1), 3), "memory_misses": misses,
        "unasked_memory_in_top3": f"{unasked}/{other_turns}",
        "unasked_more_than_one_memory": f"{crowded}/{other_turns}",
        "session_worse_than_find": worse,
    }


def _turn_ndcg(qrels: dict, run: dict, qid: str) -> float:
    return evaluate({qid: qrels[qid]}, {qid: run.get(qid, {})}, 10)["nDCG@10"]


def _text(m: Any) -> str:
    return " ".join(filter(None, (m.title, m.abstract, getattr(m, "text", "") or "")))


def noise(client: CairnClient, n: int = NOISE) -> dict[str, int]:
    from cairn.engine.retrieval.evidence import random_strings

    texts = random_strings(n, seed=424242)
    return {
        "strings": n,
        "find_with_results": sum(1 for t in texts if client.find(t, limit=LIMIT).total),
        "search_with_results": sum(1 for t in texts if client.search(t, limit=LIMIT).total),
    }


def run(data: Path, limit_queries: int | None = None) -> dict:
    """The help centre's chats (the top-level figures, and the random strings), the staff
    handbook's (``staff``: topic folders whose names only their own pages use) and a product help
    centre's (``product``: folders of a kind nested in a topic folder), each through a `cairn serve`
    of its own on a fresh home."""
    out = run_set("helpdesk", limit_queries, with_noise=True)
    out["staff"] = run_set("staff", limit_queries)
    out["product"] = run_set("product", limit_queries)
    out["indirect"] = run_set("indirect", limit_queries)
    out["indirect_kb"] = run_set("indirect_kb", limit_queries)
    if os.environ.get("CAIRN_EMBEDDING_MODEL", "").startswith("multilingual"):  # an English-only model cannot
        out["languages"] = run_set("languages", limit_queries)
    out["machine"] = f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    return out


def run_set(name: str, limit_queries: int | None, with_noise: bool = False, with_context: bool = True,
            workers: int | None = None) -> dict:
    """One set of :data:`SETS` played through a `cairn serve` of its own on a fresh home (the quality
    gate plays them too, without the context calls and on one serving process: benchmarks/quality_gate.py)."""
    docs, script = load(name)
    if limit_queries:
        script = {**script, "conversations": script["conversations"][: max(1, limit_queries // 15)]}
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(Path(tmp), workers)
        try:
            with CairnClient(url, timeout_s=60) as client:
                client.put_documents(ROOT, docs)
                for user, facts in script["memories"].items():
                    for key, category, text in facts:
                        client.remember(text, category, user=user, key=key)
                client.find("warm up")
                out = play(client, script, Bm25(docs), with_context)
                if with_noise:
                    out["noise"] = noise(client)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    out["pages"] = len(docs)
    return out
