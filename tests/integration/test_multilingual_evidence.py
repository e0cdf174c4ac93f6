"""The evidence gate on the embedded multilingual model: a real question that shares no word with a
small tenant keeps its best matches; random letters still get nothing."""

import pytest

from cairn import Cairn
from cairn.core.config import load_settings

pytestmark = pytest.mark.integration
KB = "cairn://resources/kb"
PAGES = {
    "billing/plans.md": "Free covers 3 boards and 10 members. Team costs $8 per member a month with unlimited boards.",
    "billing/invoices.md": "Invoices are emailed to the billing contact on the first day of each month.",
    "admin/audit-log.md": "The audit log records who changed workspace settings, with the time and IP address.",
    "admin/roles.md": "Owners manage billing and can delete the workspace. Admins manage members.",
}


@pytest.fixture
def svc(tmp_path):
    """What `cairn serve` builds from CAIRN_EMBEDDING_MODEL=multilingual-e5-small, on a fresh home."""
    settings = load_settings({"CAIRN_HOME": str(tmp_path), "CAIRN_EMBEDDING_MODEL": "multilingual-e5-small"})
    svc = Cairn.from_settings(settings)
    svc.put_documents(KB, [{"path": path, "text": text} for path, text in PAGES.items()], sync=True)
    return svc


@pytest.fixture
def e5(svc):
    return svc.embedder


def test_a_question_with_no_word_of_the_tenant_keeps_its_best_matches(svc):
    # no word of "is that included in what we pay now?" occurs in the pages; its words are words of a
    # language to e5's own vocabulary, so the gate keeps the answer (it used to return nothing:
    # on four pages, e5's noise floor sits above every match of a real question)
    for res in (svc.find("is that included in what we pay now?", limit=5), svc.search("is that included in what we pay now?", limit=5)):
        events = [e.detail for qr in res.query_results for e in qr.trace.events]
        assert any("reads as language" in d for d in events)
        assert f"{KB}/billing/plans.md" in [m.uri for m in res.resources]


def test_random_letters_still_get_nothing(svc):
    for q in ("qzxkvb abqeiwz", "xvbtrl glorbnak wzq"):
        assert svc.find(q, limit=5).total == 0 and svc.search(q, limit=5).total == 0


def test_a_context_block_is_counted_in_the_models_own_tokens(svc, e5):
    # the budget holds in e5's own SentencePiece tokens, not in an estimate
    block = svc.context("who changed the workspace settings?", budget_tokens=60)
    assert block.counter == "tokenizer of local-multilingual-e5-small"
    assert block.passages and 0 < block.tokens <= 60 and block.tokens == e5.count_tokens(block.text)
