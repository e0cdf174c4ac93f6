"""The memories' background is the query's 10th raw resource match whatever limit the caller asks for."""

import re

import pytest

from cairn.core.models import ContextRecord, Level
from cairn.core.requests import FindRequest
from cairn.engine.ingest import Document, Ingestor
from cairn.engine.retrieval.quick import quick_search
from cairn.engine.stages import retrieve
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.integration
TOPICS = ("refunds take five to ten business days", "invoices are sent on the first of the month",
          "you can pay by card or bank transfer", "two-factor login protects your account",
          "backups are kept for thirty days", "the status page shows outages", "seats are billed monthly",
          "exports are CSV files", "support answers within a day", "webhooks retry three times",
          "SSO works with SAML", "the mobile app is free")


@pytest.mark.parametrize("mode,limit", [("quick", 3), ("quick", 10), ("thinking", 3)])
def test_a_small_limit_does_not_raise_the_memories_bar(tmp_path, embedder, mode, limit):
    store = LocalVectorStore(tmp_path / "s", dimension=embedder.dimension)
    docs = [Document((f"p{i}.md",), text, title=text.split()[0]) for i, text in enumerate(TOPICS)]
    Ingestor(store, embedder, "t").ingest(docs, "cairn://resources/kb")
    text = "Ann gets her refunds paid back to her card"
    memory = ContextRecord.build(tenant="t", uri="cairn://user/ann/memories/profile/card", level=Level.DETAIL, text=text,
                                 vector=embedder.embed_one(text).tolist())
    store.upsert([memory])
    query = "how long do refunds take?"
    request = FindRequest(query=query, limit=limit, mode=mode, user="ann", hybrid=True)
    out = retrieve(_typed(request), request, tenant="t", store=store, embedder=embedder)
    keep = next(e.detail for e in out.trace.events if e.kind == "keep" and "memories of ann" in e.detail)
    ref, _ = quick_search(store, "t", embedder.embed_one(query).tolist(), ["cairn://resources", "cairn://agent/skills"], 10,
                          None, query)
    tenth = sorted((c.score for c in ref), reverse=True)[9]
    assert float(re.search(r"background (\d\.\d+)", keep).group(1)) == pytest.approx(tenth, abs=1e-3)


def _typed(request):
    from cairn.engine.planning.base import raw_query

    return raw_query(request.query, request.context_type, request.target_uris)
