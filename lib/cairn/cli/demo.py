"""``cairn demo``: ingest cairn's own documentation, ask it a few questions (one in a session), then ask
the same service through ``cairn serve`` with the Python client, as an agent would."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cairn.cli.common import _progress, _service
from cairn.cli.output import _where, print_table
from cairn.core.errors import RequestError

DEMO_DIALOGUE = (
    ("user", "I am reading the concepts pages of the docs."),
    ("assistant", "Good: they explain URIs and how retrieval works."),
)


DEMO_FOLLOW_UP = "What are the three levels?"  # "concepts" names a folder: the search is scoped to it


DEMO_QUESTIONS = (
    "How do I install cairn and try it?",
    "Which filter operators can I use?",
    "What is the difference between L0, L1 and L2?",
)


def _default_docs() -> Path:
    """cairn's documentation: docs/ of a checkout, else the copy the wheel ships (``cairn/_docs/``)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "docs" / "getting-started.md").exists():
            return parent / "docs"
    shipped = here.parents[1] / "_docs"  # cairn/_docs beside cairn/cli/
    if (shipped / "getting-started.md").exists():
        return shipped
    raise RequestError("cannot find cairn's docs/ folder; pass it with --docs PATH")


def cmd_demo(args: argparse.Namespace) -> int:
    docs = Path(args.docs) if args.docs else _default_docs()
    svc = _service(args)
    print(f"== Ingesting cairn's documentation ({docs}) into cairn://resources/cairn-docs")
    report = svc.ingest(docs, "cairn://resources/cairn-docs", _progress)
    print(
        f"   {report.documents} documents -> {report.records} records "
        f"({report.embedded} embedded, {report.unchanged} unchanged) in {report.seconds:.1f}s\n"
    )
    for q in args.question or DEMO_QUESTIONS:
        print(f"== find: {q}")
        print_table(svc.find(q, limit=args.limit, include_provenance=True), show_provenance=True)
        print()
    if not args.question:  # search(): the session says what "it" is
        session = svc.sessions.create(svc.tenant)
        for role, text in DEMO_DIALOGUE:
            svc.sessions.append(svc.tenant, session.id, role, text)
            print(f"   {role}: {text}")
        print(f"== search (session {session.id[:8]}): {DEMO_FOLLOW_UP}")
        result = svc.search(DEMO_FOLLOW_UP, session_id=session.id, limit=args.limit, include_provenance=True)
        print_table(result, show_provenance=True)
        print()
        _demo_through_server(svc, DEMO_QUESTIONS[0], args.limit)
    return 0


def _demo_through_server(svc: Any, question: str, limit: int) -> None:
    """The same service behind `cairn serve`, called with the Python client as an agent would."""
    from cairn.api.server import running
    from cairn.client import CairnClient

    with running(svc.services) as url, CairnClient(url) as client:
        print(f"== through the HTTP API (cairn serve on {url}): POST /v1/find {question!r}")
        answer = client.find(question, limit=limit)
        for n, m in enumerate(answer.all(), 1):
            print(f"{n:>3}. {m.score:.3f}  L{int(m.level)}  {m.uri}{_where(m.citation)}")
