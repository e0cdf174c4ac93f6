"""tool_calls: what the function-tool dispatcher (cairn.integrations.tools) adds to a bare call.

The handbook (examples/handbook) is ingested once and served by `cairn serve` (in a thread, loopback);
then each of a few handbook questions is asked, round after round, as a bare ``CairnClient.find`` /
``.context`` and as the tool call a model would make (``CairnTools.run`` with the JSON arguments),
the two alternating which goes first. Every question is asked once before the clock starts, so
both sides answer from warm caches: the overhead is measured against the fastest bare call, where
it weighs most. The same again in process (``Cairn``). Target (issue 41): overhead <= 5 % of p50.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cairn import Cairn
from cairn.api import ApiKeys
from cairn.api.server import running
from cairn.app.services import Services
from cairn.client import CairnClient
from cairn.core.config import Settings
from cairn.integrations.tools import CairnTools

from .metrics import percentiles

SUITE = "tool_calls"
ROOT = "cairn://resources/handbook"
HANDBOOK = Path(__file__).resolve().parents[1] / "examples" / "handbook"
KEY = "bench-tools-0123456789abcdef"
ROUNDS = 60
QUESTIONS = (
    "How many days of paid annual leave do employees get?",
    "When must a support agent escalate a ticket to a lead?",
    "Who approves the refund of a payment made through Stripe?",
    "A business customer needs another VAT number on an invoice: what happens?",
    "How many days a week may office staff work from home?",
)


def run(data: Path, limit_queries: int | None = None) -> dict:
    rounds = limit_queries or ROUNDS
    with tempfile.TemporaryDirectory() as tmp:
        services = Services(Settings(home=Path(tmp)), reranker=None)
        cairn = Cairn(services, "acme")
        cairn.ingest(HANDBOOK, ROOT)
        out: dict[str, Any] = {"rounds": rounds, "questions": len(QUESTIONS),
                               "in_process": _compare(cairn, rounds)}
        with running(services, ApiKeys({KEY: "acme"})) as url, CairnClient(url, KEY) as client:
            out["over_http"] = _compare(client, rounds)
    return out


def _compare(door: Any, rounds: int) -> dict[str, Any]:
    """p50/p95 of each operation, bare and as a tool call, and the tool's overhead at p50."""
    tools = CairnTools(door)
    pairs: dict[str, tuple[Callable[[str], Any], Callable[[str], Any]]] = {
        "find": (lambda q: door.find(q, limit=5),
                 lambda q: tools.run("find", json.dumps({"query": q, "limit": 5}))),
        "context": (lambda q: door.context(q, budget_tokens=600),
                    lambda q: tools.run("context", json.dumps({"query": q, "budget_tokens": 600}))),
    }
    figures: dict[str, Any] = {}
    for name, (bare, tool) in pairs.items():
        for question in QUESTIONS:  # warm: the query vectors, the store's pages, the connection
            bare(question), tool(question)
        times: dict[str, list[float]] = {"bare": [], "tool": []}
        for r in range(rounds):
            for question in QUESTIONS:
                order = (("bare", bare), ("tool", tool)) if r % 2 == 0 else (("tool", tool), ("bare", bare))
                for side, call in order:
                    started = time.perf_counter()
                    call(question)
                    times[side].append((time.perf_counter() - started) * 1000)
        bare_p, tool_p = percentiles(times["bare"]), percentiles(times["tool"])
        figures[name] = {"bare_ms": bare_p, "tool_ms": tool_p,
                         "overhead_p50_pct": round(100 * (tool_p["p50_ms"] - bare_p["p50_ms"]) / bare_p["p50_ms"], 1)}
    return figures
