"""The rerank base class: the fallback rules of docs/rerank.md, NaN handling, blank documents,
token-budget truncation and ordering, through a small recording reranker."""

from __future__ import annotations

import io
import json
import math

import pytest

from cairn.core.errors import ConfigError, RerankError
from cairn.core.logging import configure_logging
from cairn.core.models import Candidate, ContextRecord
from cairn.ports.rerank import build_reranker
from cairn.ports.rerank.base import (
    CUT_MARK,
    Reranker,
    RerankResponseError,
    cut_head_tail,
    estimate_tokens,
    fit_budget,
    scores_from_indexed,
    with_retries,
)

pytestmark = pytest.mark.unit


class RecordingReranker(Reranker):
    """Remembers what it was sent; answers with ``answer`` (a list, or an exception to raise)."""

    name = "recording"

    def __init__(self, answer=None, **kw):
        super().__init__(**kw)
        self.answer = answer
        self.calls: list[tuple[str, list[str]]] = []

    def _score(self, query, documents):
        self.calls.append((query, list(documents)))
        if isinstance(self.answer, BaseException):
            raise self.answer
        if callable(self.answer):
            return self.answer(documents)
        return self.answer


def cand(name: str, score: float, text: str | None = None, reason: str = "vector") -> Candidate:
    rec = ContextRecord.build(
        tenant="acme", uri=f"cairn://resources/docs/{name}", level=2, title="", text=name if text is None else text
    )
    return Candidate(record=rec, score=score, reason=reason)


CANDS = [cand("alpha", 0.9), cand("beta", 0.5), cand("gamma", 0.3)]


def uris(outcome):
    return [c.uri.rsplit("/", 1)[1] for c in outcome.candidates]


def test_scores_replace_vector_scores_and_sort_best_first():
    r = RecordingReranker([0.1, 0.8, 0.5])
    out = r.rerank("q", CANDS)
    assert uris(out) == ["beta", "gamma", "alpha"]
    assert out.scores == [0.8, 0.5, 0.1]
    assert all(c.reason == "rerank" for c in out.candidates)
    assert out.used and out.fallback is None and out.sent == 3
    assert r.calls == [("q", ["alpha", "beta", "gamma"])]


def test_ties_keep_input_order():
    out = RecordingReranker([0.5, 0.5, 0.5]).rerank("q", CANDS)
    assert uris(out) == ["alpha", "beta", "gamma"]


def test_blank_documents_keep_their_vector_score_and_are_not_sent():
    cands = [cand("alpha", 0.9), cand("blank", 0.6, text="   \n"), cand("gamma", 0.3)]
    r = RecordingReranker([0.1, 0.95])
    out = r.rerank("q", cands)
    assert r.calls == [("q", ["alpha", "gamma"])]
    by = {c.uri.rsplit("/", 1)[1]: c for c in out.candidates}
    assert by["blank"].score == 0.6 and by["blank"].reason == "vector"
    assert by["alpha"].score == 0.1 and by["gamma"].score == 0.95
    assert uris(out) == ["gamma", "blank", "alpha"]
    assert out.blank == 1 and out.sent == 2 and out.fallback is None and out.used


def test_all_blank_sends_nothing_and_says_so():
    r = RecordingReranker([1.0])
    out = r.rerank("q", [cand("a", 0.2, text=""), cand("b", 0.4, text=" ")])
    assert r.calls == []
    assert out.fallback == "blank" and out.blank == 2 and not out.used
    assert out.scores == [0.4, 0.2]


def test_blank_query_sends_nothing():
    r = RecordingReranker([1.0, 1.0, 1.0])
    out = r.rerank("  ", CANDS)
    assert r.calls == [] and out.fallback == "blank_query"
    assert out.scores == [0.9, 0.5, 0.3]


def test_no_candidates_is_not_a_fallback():
    r = RecordingReranker([1.0])
    out = r.rerank("q", [])
    assert out.candidates == [] and out.fallback is None and r.calls == []


@pytest.mark.parametrize(
    "answer, fallback",
    [
        (RerankError("boom", retryable=True), "error"),
        (RuntimeError("unexpected"), "error"),
        ([], "empty"),
        (None, "error"),
        ([0.5, 0.4], "length_mismatch"),
        ([0.5, 0.4, 0.3, 0.2], "length_mismatch"),
        (RerankResponseError("index 7 out of range", fallback="bad_index"), "bad_index"),
    ],
)
def test_any_bad_answer_keeps_all_vector_scores(answer, fallback):
    out = RecordingReranker(answer).rerank("q", CANDS)
    assert out.fallback == fallback
    assert not out.used
    assert out.scores == [0.9, 0.5, 0.3]
    assert [c.reason for c in out.candidates] == ["vector"] * 3
    assert out.error


def test_error_keeps_retryable_flag():
    out = RecordingReranker(RerankError("throttled", retryable=True)).rerank("q", CANDS)
    assert out.retryable and out.error == "throttled"


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, None, "high"])
def test_a_non_finite_score_keeps_that_items_vector_score(bad):
    out = RecordingReranker([0.2, bad, 0.7]).rerank("q", CANDS)
    by = {c.uri.rsplit("/", 1)[1]: c for c in out.candidates}
    assert by["beta"].score == 0.5 and by["beta"].reason == "vector"
    assert by["alpha"].score == 0.2 and by["gamma"].score == 0.7
    assert out.non_finite == 1 and out.used and out.fallback is None
    assert uris(out) == ["gamma", "beta", "alpha"]


def test_all_non_finite_scores_is_a_fallback():
    out = RecordingReranker([math.nan] * 3).rerank("q", CANDS)
    assert out.non_finite == 3 and not out.used and out.fallback == "non_finite"
    assert out.scores == [0.9, 0.5, 0.3]


def test_non_finite_vector_scores_sort_last():
    cands = [cand("a", math.nan), cand("b", 0.1)]
    out = RecordingReranker(RuntimeError("x")).rerank("q", cands)
    assert uris(out) == ["b", "a"]


def test_fallbacks_are_counted_on_the_reranker():
    r = RecordingReranker(RuntimeError("x"))
    r.rerank("q", CANDS)
    r.rerank("q", CANDS)
    r.answer = [0.1, math.nan, 0.2]
    r.rerank("q", CANDS)
    counts = r.counts()
    assert counts["calls"] == 3 and counts["fallback.error"] == 2 and counts["non_finite"] == 1
    assert counts["sent"] == 9


def test_a_fallback_is_logged_with_fields():
    buf = io.StringIO()
    configure_logging(stream=buf, force=True, level="INFO")
    try:
        RecordingReranker([0.5]).rerank("q", CANDS)
    finally:
        configure_logging(force=True)
    lines = [json.loads(line) for line in buf.getvalue().splitlines()]
    (line,) = [x for x in lines if x.get("message") == "rerank kept vector scores"]
    assert line["level"] == "WARNING"
    assert line["fallback"] == "length_mismatch" and line["sent"] == 3 and line["reranker"] == "recording"
    assert "1 scores for 3 documents" in line["error"]


# --- token budget ------------------------------------------------------------------------


def test_cut_keeps_head_and_tail():
    text = "HEAD-" + "x" * 1000 + "-TAIL"
    cut = cut_head_tail(text, 50)  # 200 characters
    assert len(cut) <= 200
    assert cut.startswith("HEAD-") and cut.endswith("-TAIL") and CUT_MARK in cut
    head, tail = cut.split(CUT_MARK)
    assert len(head) == pytest.approx(3 * len(tail), abs=4)


def test_short_text_is_not_cut():
    assert cut_head_tail("short", 10) == "short"
    assert estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2


def test_budget_gives_the_query_at_most_three_quarters():
    query = "q" * 4000
    q, docs, cut = fit_budget(query, ["d" * 4000], 100)
    assert estimate_tokens(q) <= 75
    assert estimate_tokens(q) + estimate_tokens(docs[0]) <= 100
    assert cut == 2


def test_short_query_leaves_the_rest_to_documents():
    q, docs, cut = fit_budget("short query", ["START " + "d" * 4000 + " END"], 100)
    assert q == "short query" and cut == 1
    assert estimate_tokens(docs[0]) <= 100 - estimate_tokens(q)
    assert docs[0].startswith("START") and docs[0].endswith("END")


def test_reranker_sends_truncated_texts_and_counts_them():
    long = cand("long", 0.4, text="BEGIN " + "word " * 500 + "FINISH")
    r = RecordingReranker([0.3, 0.6], max_tokens=64)
    out = r.rerank("what is it", [cand("short", 0.5), long])
    sent = r.calls[0][1]
    assert sent[0] == "short"
    assert sent[1].startswith("BEGIN") and sent[1].endswith("FINISH") and len(sent[1]) <= 64 * 4
    assert out.truncated == 1
    # the candidate itself still carries its full text
    assert out.candidates[0].record.text.count("word") == 500


def test_no_budget_means_no_cut():
    r = RecordingReranker([0.1])
    r.rerank("q", [cand("long", 0.4, text="w " * 3000)])
    assert len(r.calls[0][1][0]) == len("w " * 3000)


def test_invalid_budget_is_rejected():
    with pytest.raises(RerankError, match="max_tokens"):
        RecordingReranker([], max_tokens=0)


# --- helpers for backends ------------------------------------------------------------------


def test_indexed_results_are_put_back_in_document_order():
    assert scores_from_indexed([(2, 0.1), (0, 0.9), (1, 0.5)], 3, who="t") == [0.9, 0.5, 0.1]
    assert scores_from_indexed([], 3, who="t") == []


@pytest.mark.parametrize(
    "pairs, fallback",
    [
        ([(0, 0.1), (3, 0.2), (1, 0.3)], "bad_index"),
        ([(0, 0.1), (-1, 0.2), (1, 0.3)], "bad_index"),
        ([(0, 0.1), (0, 0.2), (1, 0.3)], "bad_index"),
        ([(0, 0.1), ("1", 0.2), (2, 0.3)], "bad_index"),
        ([(0, 0.1), (1, 0.2)], "length_mismatch"),
    ],
)
def test_bad_indexed_results_raise_with_their_fallback(pairs, fallback):
    with pytest.raises(RerankResponseError) as info:
        scores_from_indexed(pairs, 3, who="t")
    assert info.value.fallback == fallback


def test_retries_only_retryable_errors_and_honours_retry_after():
    calls, sleeps = [], []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise RerankError("429", retryable=True, details={"retry_after": 0.5})
        return "ok"

    assert with_retries(flaky, max_retries=2, backoff_s=0.0, sleep=sleeps.append) == "ok"
    assert len(calls) == 3 and sleeps == [0.5, 0.5]

    calls.clear()

    def fatal():
        calls.append(1)
        raise RerankError("400")

    with pytest.raises(RerankError):
        with_retries(fatal, max_retries=5, backoff_s=0.0, sleep=sleeps.append)
    assert len(calls) == 1


def test_retries_give_up_after_max_retries():
    calls = []

    def always():
        calls.append(1)
        raise RerankError("503", retryable=True)

    with pytest.raises(RerankError):
        with_retries(always, max_retries=2, backoff_s=0.0, sleep=lambda s: None)
    assert len(calls) == 3


# --- factory -----------------------------------------------------------------------------------


def test_factory_rejects_unknown_kinds_and_options():
    with pytest.raises(ConfigError, match="choose one of: local, cohere, bedrock, litellm"):
        build_reranker("crossencoder")
    with pytest.raises(ConfigError, match=r"unknown option\(s\) colour.*missing option\(s\) base_url"):
        build_reranker("cohere", model="m", colour="red")


def test_factory_builds_a_cohere_compatible_reranker_by_alias():
    r = build_reranker("jina", base_url="http://127.0.0.1:9", model="jina-reranker-v2", path="/v1/rerank")
    try:
        assert r.url == "http://127.0.0.1:9/v1/rerank" and r.name == "cohere:jina-reranker-v2"
    finally:
        r.close()
