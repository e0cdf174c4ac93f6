"""integrations: what the LangChain and LlamaIndex adapters add to a bare cairn call (issue 41).

The sample handbook (examples/handbook, in the repository: no --data needed) is ingested by the
`cairn` command into a fresh home, then served by `cairn serve` in its own process. One client in
this process asks the handbook's questions, each round calling every variant once in a shuffled
order (so drift on a shared machine falls on all of them alike):

- bare: ``CairnClient.find(q, limit=5, include_provenance=True)`` (what the adapters send by default);
- langchain: ``CairnRetriever(cairn=client, limit=5).invoke(q)``, Documents with metadata and explanation;
- llamaindex: ``CairnRetriever(client, limit=5).retrieve(q)``, NodeWithScores likewise;
- the same three without provenance (``explain=False``), against ``find`` without it;
- in process: ``Cairn.find`` against the LangChain retriever over that ``Cairn``.

Overhead is (p50 of the adapter - p50 of its bare call) / p50 of the bare call. The adapters' own
work (checking the options, turning an answer into documents) is also timed alone on one answer.

    python -m benchmarks.run integrations            # 300 rounds; --queries N for N rounds
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from cairn import Cairn
from cairn.app.services import Services
from cairn.client import CairnClient
from cairn.core.config import load_settings
from cairn.core.models import FindResult
from cairn.integrations import langchain, llamaindex
from cairn.integrations.retrieval import passages

from .metrics import percentiles

SUITE = "integrations"
REPO = Path(__file__).resolve().parents[1]
ROOT = "cairn://resources/handbook"
LIMIT = 5
ROUNDS = 300
QUESTIONS = [
    "how long until the money for a returned item is back on my card?",
    "who approves a refund of a Stripe payment?",
    "how many days a year may I work from another country?",
    "what do I do when I lose my laptop?",
    "can unused holiday days be carried over into the next year?",
    "when should a ticket go to a support lead?",
    "how do I get a corrected invoice with another VAT number?",
    "how much parental leave do parents get?",
]


def run(data: Path, limit_queries: int | None = None) -> dict:
    rounds = limit_queries or ROUNDS
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        cairn = [sys.executable, "-m", "cairn.cli.main", "--home", str(home)]
        subprocess.run([*cairn, "ingest", str(REPO / "examples" / "handbook"), "--uri", ROOT], check=True,
                       capture_output=True)
        with _served(cairn) as url, CairnClient(url, retries=0) as client:
            over_http = _variants(client, rounds)
        in_process = Cairn(Services(load_settings(env={"CAIRN_HOME": str(home), "CAIRN_RECORD_USE": "false"})), "default")
        local = _measure({"bare": lambda q: in_process.find(q, limit=LIMIT, include_provenance=True),
                          "langchain": langchain.CairnRetriever(cairn=in_process, limit=LIMIT).invoke}, rounds)
        answer = in_process.find(QUESTIONS[0], limit=LIMIT, include_provenance=True)
    return {
        "rounds": rounds, "limit": LIMIT, "questions": len(QUESTIONS),
        "http": over_http,
        "in_process": {**local, "langchain_overhead": _overhead(local, "langchain", "bare")},
        "adapter_work_ms": _adapter_work(answer),
    }


def _variants(client: CairnClient, rounds: int) -> dict:
    calls: dict[str, Callable[[str], object]] = {
        "bare": lambda q: client.find(q, limit=LIMIT, include_provenance=True),
        "langchain": langchain.CairnRetriever(cairn=client, limit=LIMIT).invoke,
        "llamaindex": llamaindex.CairnRetriever(client, limit=LIMIT).retrieve,
        "bare_no_provenance": lambda q: client.find(q, limit=LIMIT),
        "langchain_no_explain": langchain.CairnRetriever(cairn=client, limit=LIMIT, explain=False).invoke,
        "llamaindex_no_explain": llamaindex.CairnRetriever(client, limit=LIMIT, explain=False).retrieve,
    }
    found = _measure(calls, rounds)
    found["overhead"] = {name: _overhead(found, name, "bare") for name in ("langchain", "llamaindex")}
    found["overhead"].update({name: _overhead(found, name, "bare_no_provenance")
                              for name in ("langchain_no_explain", "llamaindex_no_explain")})
    return found


def _measure(calls: dict[str, Callable[[str], object]], rounds: int) -> dict:
    """Each call's latency percentiles over ``rounds`` rounds (one warm-up round not counted)."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    order = list(calls)
    shuffle = random.Random(41)
    for n in range(rounds + 1):
        question = QUESTIONS[n % len(QUESTIONS)]
        shuffle.shuffle(order)
        for name in order:
            started = time.perf_counter()
            calls[name](question)
            if n:
                samples[name].append((time.perf_counter() - started) * 1000)
    return {name: percentiles(ms) for name, ms in samples.items()}


def _overhead(found: dict, adapter: str, bare: str) -> str:
    ratio = found[adapter]["p50_ms"] / found[bare]["p50_ms"] - 1
    return f"{ratio:+.1%}"


class _Answered:
    """A cairn that answers every call with one fixed answer at once, so that what is timed through it
    is the adapters' and their frameworks' own work (no server, no retrieval)."""

    def __init__(self, answer: FindResult) -> None:
        self.answer = answer

    def find(self, query: str, **options: object) -> FindResult:
        return self.answer

    def search(self, query: str, session_id: str | None = None, **options: object) -> FindResult:
        return self.answer


def _adapter_work(answer: FindResult) -> dict:
    """Milliseconds (median) each layer adds to one answer of LIMIT matches, without any call to cairn:
    the shared retrieval (options checked, answer turned into passages), then each framework's call."""
    from cairn.integrations.retrieval import RetrievalOptions, retrieve

    def median_ms(work: Callable[[], object], repeat: int = 2000) -> float:
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            work()
            times.append((time.perf_counter() - started) * 1000)
        return round(sorted(times)[len(times) // 2], 4)

    answered = _Answered(answer)
    question = QUESTIONS[0]
    lc, li = langchain.CairnRetriever(cairn=answered, limit=LIMIT), llamaindex.CairnRetriever(answered, limit=LIMIT)
    return {
        "options": median_ms(lambda: RetrievalOptions.of(limit=LIMIT)),
        "retrieve_to_passages": median_ms(lambda: retrieve(answered, question, RetrievalOptions.of(limit=LIMIT))),
        "langchain_documents": median_ms(lambda: [langchain.document(p) for p in passages(answer)]),
        "llamaindex_nodes": median_ms(lambda: [llamaindex.node(p) for p in passages(answer)]),
        "langchain_invoke": median_ms(lambda: lc.invoke(question)),
        "llamaindex_retrieve": median_ms(lambda: li.retrieve(question)),
    }


class _served:
    """`cairn serve` on a free port in its own process, over the benchmark's home."""

    def __init__(self, cairn: list[str]) -> None:
        from tests.ports import free_port

        self.port = free_port()
        self.server = subprocess.Popen([*cairn, "serve", "--port", str(self.port), "--workers", "1"], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)

    def __enter__(self) -> str:
        url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                httpx.get(url + "/v1/health", timeout=2)
                return url
            except httpx.HTTPError:
                time.sleep(0.3)
        raise RuntimeError(f"cairn serve did not answer on {url} within 300 s")

    def __exit__(self, *exc: object) -> None:
        self.server.terminate()
        self.server.wait(timeout=30)
