"""cairn.context: prompt-ready blocks within a budget, with numbered citations; the compact text form."""

from __future__ import annotations

import pytest

from cairn.context import build_context, estimate_tokens, render_text, token_counter
from cairn.models import ContextType, FindResult, Level, MatchedContext


def _m(uri: str, score: float, text: str, ctype: ContextType = ContextType.RESOURCE, level: Level = Level.DETAIL, **kw) -> MatchedContext:
    return MatchedContext(context_type=ctype, uri=uri, level=level, score=score, abstract=text[:80], text=text, **kw)


REFUNDS = "Approved refunds reach the original card in 5 to 10 business days. " * 3
RESULT = FindResult(
    resources=[
        _m("cairn://resources/kb/billing/refunds.md#2", 0.9, REFUNDS, title="Refunds",
           citation={"heading_path": ["Refunds", "Timing"], "page": 3}),
        _m("cairn://resources/kb/billing/refunds.md#1", 0.8, "You can ask for a refund within 30 days.", title="Refunds"),
        _m("cairn://resources/kb/billing", 0.7, "billing: 2 documents", level=Level.ABSTRACT, title="billing"),
        _m("cairn://resources/kb/faq/refunds.md", 0.6, REFUNDS, title="Refunds FAQ"),  # the same text again
    ],
    memories=[_m("cairn://user/ann/memories/profile/plan", 0.5, "Ann's workspace is on the Growth plan.", ContextType.MEMORY)],
)


def test_memories_come_first_then_resources_one_per_document_and_no_text_twice():
    block = build_context(RESULT, 1000, estimate_tokens, counted_with="estimate")
    assert [p.uri for p in block.passages] == [
        "cairn://user/ann/memories/profile/plan", "cairn://resources/kb/billing/refunds.md#2", "cairn://resources/kb/billing",
    ]
    assert [p.n for p in block.passages] == [1, 2, 3]
    assert block.text.startswith("Memories of the user:\n[1] ")
    assert "Resources:\n[2] Refunds (cairn://resources/kb/billing/refunds.md#2 — Refunds > Timing, page 3)" in block.text
    assert block.passages[1].heading == "Refunds > Timing" and block.passages[1].page == 3
    assert block.left_out == 0 and block.counted_with == "estimate"


@pytest.mark.parametrize("budget", [10, 40, 60, 120, 400])
def test_a_block_never_exceeds_its_budget(budget):
    block = build_context(RESULT, budget, estimate_tokens)
    assert block.tokens == estimate_tokens(block.text) <= budget
    assert all(f"[{p.n}]" in block.text for p in block.passages)


def test_the_passage_that_does_not_fit_is_cut_at_a_word_and_the_rest_left_out():
    whole = build_context(RESULT, 10_000, estimate_tokens)
    budget = estimate_tokens(whole.text) - 60  # the last passage cannot fit whole
    block = build_context(RESULT, budget, estimate_tokens)
    assert block.passages[-1].cut and block.passages[-1].text.endswith("…")
    assert block.left_out == 3 - len(block.passages) and block.tokens <= budget


def test_a_budget_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        build_context(RESULT, 0, estimate_tokens)


def test_the_estimate_over_counts_a_real_tokenizer_and_the_embedders_tokenizer_is_used(embedder):
    count, how = token_counter(embedder)
    assert how == "tokenizer"
    for text in (REFUNDS, "Können wir mit PayPal bezahlen?", "我可以带狗吗", "x" * 50):
        assert estimate_tokens(text) >= count(text)
    assert token_counter(object())[1] == "estimate"


def test_render_text_is_compact_and_numbered():
    text = render_text(RESULT)
    assert text.splitlines()[0] == "5 matches, best first:"
    assert "[1] resource 0.90 Refunds — cairn://resources/kb/billing/refunds.md#2 — Refunds > Timing, page 3" in text
    assert "5 to 10 business days" in text
    assert render_text(FindResult()) == "No matches."
    assert len(text) < 2 * sum(len(m.text) for m in RESULT.all())
