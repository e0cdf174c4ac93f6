"""memory_bar: how the user's memories are kept, replayed on the agent_day turns with two embedders.

For every turn of ``benchmarks/agent_day`` (played in process on a fresh home, chats committed, so
earlier chats' episodes are memories), the raw scores of one quick hybrid search of the turn over
the resources (10 results) and over the user's memories; then each keep rule is applied to them
offline: how many memory turns keep the remembered fact they ask about, and how many of the other
turns keep any memory at all. The rules: ``RELATIVE`` x best alone (the bar before session 8), and
``max(RELATIVE x best, background + R x (best - background))`` for several R, the background being
the 10th resource score (``cairn.engine.retrieval.memories``). Each embedder runs in a process of its own.

    python -m benchmarks.run memory_bar        # about 70 s
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SUITE = "memory_bar"
EMBEDDERS = ("all-MiniLM-L6-v2", "multilingual-e5-small")
RS = (0.0, 0.1, 0.15, 0.2, 0.3)


def scores() -> list[dict[str, Any]]:
    """The raw scores of every turn, in this process (its embedder: the settings')."""
    from cairn import Cairn
    from cairn.engine.retrieval.memories import memory_roots
    from cairn.engine.retrieval.quick import quick_search
    from cairn.engine.retrieval.scope import roots_for

    from . import agent_day

    c = Cairn.from_settings()
    docs, script = agent_day.load()
    c.put_documents(agent_day.ROOT, docs)
    for user, facts in script["memories"].items():
        for key, category, text in facts:
            c.remember(text, category, user=user, key=key)
    rows = []
    for conv in script["conversations"]:
        session = c.create_session(user=conv["user"])
        mem_roots = memory_roots(conv["user"])
        roots = [r for r in roots_for(None, (), conv["user"]) if r not in mem_roots]
        for turn in conv["turns"]:
            u = turn["u"]
            vector = c.embedder.embed_one(u).tolist()
            res, _ = quick_search(c.store, c.tenant, vector, roots, 10, None, u, True)
            mems, _ = quick_search(c.store, c.tenant, vector, mem_roots, 10, None, u, True)
            rows.append({"mem": turn.get("mem"), "res": [r.score for r in res],
                         "mems": [(m.score, m.record.text) for m in mems if int(m.record.level) == 2]})
            c.search(u, session.id, limit=10)  # the session's prefetch, as a chat does
            c.append_message(session.id, "user", u)
            c.append_message(session.id, "assistant", turn["a"])
        c.commit(session.id)
    return rows


def evaluate(rows: list[dict[str, Any]], above: float, relative: float, threshold: float = 0.1) -> dict[str, str]:
    """The keep rule of ``cairn.engine.retrieval.memories`` (``relevant``, ``background_of``) with the given
    ``above`` and ``relative``, applied to every turn's raw scores (``above`` 0: no background bar,
    the rule before session 8)."""
    from cairn.core.models import Candidate, ContextRecord
    from cairn.engine.retrieval.memories import background_of, relevant

    facts = asked = unasked = others = 0
    for row in rows:
        mems = [Candidate(record=ContextRecord.build(tenant="t", uri=f"cairn://user/u/memories/m{n}", level=2, text=text),
                          score=score) for n, (score, text) in enumerate(row["mems"])]
        kept = relevant(mems, max(row["res"], default=0.0), threshold, relative,
                        background=background_of(row["res"]) if above else None, above=above)
        texts = [m.record.text for m in kept]
        if row["mem"]:
            asked += 1
            facts += any(row["mem"].lower() in t.lower() for t in texts)
        else:
            others += 1
            unasked += bool(texts)
    return {"facts_kept": f"{facts}/{asked}", "other_turns_keeping_a_memory": f"{unasked}/{others}"}


def run(data: Path, limit_queries: int | None = None) -> dict[str, Any]:
    from cairn.engine.retrieval.memories import RELATIVE

    out: dict[str, Any] = {}
    for model in EMBEDDERS:
        with tempfile.TemporaryDirectory() as home:
            env = {**os.environ, "CAIRN_HOME": home, "CAIRN_EMBEDDING_MODEL": model, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
            for name in ("CAIRN_PLANNER", "CAIRN_LLM_PROVIDER", "CAIRN_RERANKER", "CAIRN_EMBEDDER"):
                env.pop(name, None)
            done = subprocess.run([sys.executable, "-m", "benchmarks.memory_bar", str(Path(home) / "rows.json")],
                                  env=env, capture_output=True, text=True, cwd=Path(__file__).parent.parent)
            if done.returncode:
                raise RuntimeError(f"memory_bar ({model}) failed: {done.stderr[-2000:]}")
            rows = json.loads((Path(home) / "rows.json").read_text())
        out[model] = {"turns": len(rows)} | {f"R={r:g}": evaluate(rows, r, RELATIVE) for r in RS} | {
            "background alone, R=0.15": evaluate(rows, 0.15, 0.0)}
    return out


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(scores()))
