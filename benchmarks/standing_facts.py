"""standing_facts: the profile arm's keep rule swept over its margins, on every agent_day set.

For each turn of the five agent_day sets in this repository (each on a fresh in-process home with the
embedded default), the evidence the profile arm reads (:mod:`cairn.engine.retrieval.profile`): the
user's profile and preference facts with their vectors, and the question's first pages with theirs.
Then the keep rule is applied offline for several first/next margins: the share of the indirect
sets' asked facts it keeps (recall), and of the turns that ask about no memory, the share where it
keeps one fact or more, and more than one. The row of the shipped margins is marked.

    python -m benchmarks.run standing_facts        # about 2 minutes
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

SUITE = "standing_facts"
SETS = ("helpdesk", "staff", "product", "indirect", "indirect_kb")
INDIRECT = ("indirect", "indirect_kb")
MARGINS = ((0.1, 0.3), (0.2, 0.3), (0.3, 0.3), (0.5, 0.3), (0.2, 0.5))


def evidence(name: str) -> list[dict[str, Any]]:
    """Per turn of one set: the asked phrase (or None), the facts' texts and their scores."""
    from cairn import Cairn
    from cairn.engine.retrieval import profile
    from cairn.core.models import ThinkingTrace
    from cairn.engine.retrieval.memories import memory_roots
    from cairn.engine.retrieval.scope import roots_for

    from . import agent_day

    os.environ["CAIRN_HOME"] = tempfile.mkdtemp(prefix=f"cairn-standing-{name}-")
    c = Cairn.from_settings()
    docs, script = agent_day.load(name)
    c.put_documents(agent_day.ROOT, docs, sync=True)
    for user, facts in script["memories"].items():
        for key, category, text in facts:
            c.remember(text, category, user=user, key=key)
    services, tenant = c.services, c.tenant
    rows = []
    for conv in script["conversations"]:
        user = conv["user"]
        page_roots = [r for r in roots_for(None, (), user) if r not in memory_roots(user)]
        for turn in conv["turns"]:
            vector = services.embedder.embed_one(turn["u"]).tolist()
            facts, scores, _ = profile.scored_facts(services.store, tenant, vector, user, page_roots, None, ThinkingTrace())
            rows.append({"set": name, "mem": turn.get("mem"), "facts": [f.record.text for f in facts], "scores": scores})
    return rows


def sweep(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from cairn.engine.retrieval import profile

    out = []
    shipped = (profile.FIRST_MARGIN, profile.NEXT_MARGIN)
    for first, nxt in MARGINS:
        profile_first, profile_next = profile.FIRST_MARGIN, profile.NEXT_MARGIN
        profile.FIRST_MARGIN, profile.NEXT_MARGIN = first, nxt
        try:
            asked = {s: [0, 0] for s in INDIRECT}
            unasked = [0, 0, 0]
            for r in rows:
                kept = [r["facts"][i] for i in profile.standing_out(r["scores"])] if r["scores"] else []
                if r["mem"] and r["set"] in asked:
                    asked[r["set"]][1] += 1
                    asked[r["set"]][0] += any(r["mem"].lower() in k.lower() for k in kept)
                elif not r["mem"]:
                    unasked[0] += 1
                    unasked[1] += len(kept) >= 1
                    unasked[2] += len(kept) > 1
        finally:
            profile.FIRST_MARGIN, profile.NEXT_MARGIN = profile_first, profile_next
        out.append({"first": first, "next": nxt, "shipped": (first, nxt) == shipped,
                    **{f"{s}_recall": round(h / max(n, 1), 3) for s, (h, n) in asked.items()},
                    "unasked_turns": unasked[0], "unasked_one_or_more": round(unasked[1] / max(unasked[0], 1), 3),
                    "unasked_more_than_one": round(unasked[2] / max(unasked[0], 1), 3)})
    return out


def run(data: Any = None, limit_queries: int | None = None) -> dict[str, Any]:
    rows = [r for name in SETS for r in evidence(name)]
    table = sweep(rows)
    for line in table:
        print(("* " if line["shipped"] else "  ") + "  ".join(f"{k}={v}" for k, v in line.items() if k != "shipped"))
    return {"margins": table}
