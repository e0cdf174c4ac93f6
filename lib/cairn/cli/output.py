"""How the ``cairn`` command prints an answer: one line per match, and with ``--explain`` where each
score came from."""

from __future__ import annotations

import textwrap
from typing import Any


def print_table(result: Any, show_provenance: bool = False) -> None:
    matches = result.all()
    plan = result.query_plan
    if plan is not None and plan.planner != "raw":
        queries = "; ".join(
            f"{q.query!r} ({q.context_type.value if q.context_type else 'all'})"
            + (f" in {', '.join(q.target_uris)}" if q.target_uris else "")
            + (f" boosting {', '.join(q.boost_uris)}" if q.boost_uris else "")
            for q in plan.queries
        )
        print(f"  plan [{plan.planner}{', fallback' if plan.fallback else ''}]: {queries or 'no retrieval needed'}")
    if not matches:
        print("  (no results above the score threshold)")
    for n, m in enumerate(matches, 1):
        print(f"{n:>3}. {m.score:.3f}  L{int(m.level)}  {m.uri}{_where(m.citation)}")
        abstract = textwrap.shorten(m.abstract or m.title, width=150, placeholder=" ...")
        print(textwrap.indent(textwrap.fill(abstract, width=100), " " * 17))
        if show_provenance and getattr(m, "explanation", None) is not None:
            print_arithmetic(m.explanation)
    if show_provenance:
        for qr in result.query_results:
            print_provenance(qr.provenance())


def _where(citation: dict[str, Any] | None) -> str:
    """`` (p. 3, Billing > Refunds)``: where in its document a match is, when ingestion knows."""
    if not citation:
        return ""
    parts = []
    if citation.get("page"):
        end = citation.get("page_end")
        parts.append(f"p. {citation['page']}" + (f"-{end}" if end and end != citation["page"] else ""))
    if citation.get("heading_path"):
        path = citation["heading_path"]
        parts.append(" > ".join(path) if isinstance(path, list) else str(path))
    return f"  ({', '.join(parts)})" if parts else ""


def print_provenance(p: dict[str, Any]) -> None:
    stats = p["trace"]["stats"]
    rerank = f" rerank={'used' if stats['rerank_used'] else 'off'}" + (
        f" (fallback: {stats['rerank_fallback']})" if stats["rerank_fallback"] else ""
    )
    print(
        f"  provenance: mode={stats['mode']} vector_calls={stats['vector_calls']} rounds={stats['rounds']} "
        f"stop={stats['stop_reason']}{rerank} latency={stats['latency_ms']:.1f}ms"
    )
    for d in p["searched_directories"]:
        print(f"    searched {d}")
    for m in p["matches"]:
        print(f"    {m['tier']} {m['reason']:<8} {m['score']:.3f} {m['uri']}")


def print_arithmetic(explanation: Any, indent: int = 17) -> None:
    """How a score was combined: the rule's line (``score = ...``), then each arm with its weight,
    and under an arm the arithmetic of its own score."""
    pad = " " * indent
    print(f"{pad}score = {explanation.formula()}  [{explanation.rule}: {explanation.note}]")
    for term in explanation.terms:
        print(f"{pad}  {term.score:.6f} × {term.weight:.6g}  {term.label}")
        if term.explanation is not None:
            print_arithmetic(term.explanation, indent + 4)
