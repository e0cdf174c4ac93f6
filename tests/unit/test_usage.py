"""Usage lines carry the billable work of the operation they close: embedding requests and tokens,
LLM calls and tokens, as the providers counted them."""

from __future__ import annotations

import pytest

from cairn.ports.llm.base import LLMClient
from cairn.ports.observability import usage

pytestmark = pytest.mark.unit


class Metered:
    def __init__(self) -> None:
        self.requests = 0
        self.tokens = 0


class CountingLLM(LLMClient):
    provider = "counting"

    def _complete(self, messages, system, timeout_s, json):
        self.count_usage(input_tokens=120, output_tokens=30)
        return '{"ok": true}'


def test_a_usage_line_holds_the_tokens_spent_since_the_previous_line(caplog) -> None:
    embedder, llm = usage.watch(Metered()), usage.watch(CountingLLM("m"))
    usage.record_usage("acme", "warm-up")  # whatever came before
    embedder.requests += 3
    embedder.tokens += 57
    llm.complete("plan this")
    line = usage.record_usage("acme", "search", searches=2)
    assert line == {"tenant": "acme", "operation": "search", "searches": 2, "embedding_requests": 3, "embedding_tokens": 57,
                    "llm_calls": 1, "llm_input_tokens": 120, "llm_output_tokens": 30}
    assert usage.record_usage("acme", "find") == {"tenant": "acme", "operation": "find"}  # counted once


def test_explicit_counts_win_over_metered_ones() -> None:
    embedder = usage.watch(Metered())
    embedder.tokens += 5
    assert usage.record_usage("acme", "ingest", embedding_tokens=9)["embedding_tokens"] == 9

