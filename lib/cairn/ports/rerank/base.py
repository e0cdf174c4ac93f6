"""The ``Reranker`` base class: the fallback rules (docs/rerank.md) live here, once.

:meth:`Reranker.rerank` is a template method. It picks each candidate's text, fits it to
the optional token budget, sends the non-blank ones to the backend's :meth:`_score` hook,
checks the answer, applies the scores and sorts. A backend only turns
``(query, documents)`` into one score per document.

Fallback rules (each one counted in the :class:`RerankOutcome` and logged as a field):

* a candidate whose text is blank keeps its vector score and is not sent;
* an exception, an empty answer or an answer of the wrong length (or, for index/score
  answers, an index out of range or repeated) keeps **all** vector scores;
* a score that is not finite (NaN, ±inf, or not a number at all) keeps that one
  candidate's vector score (when every score is, the outcome's fallback is ``non_finite``);
* a blank query, or candidates that are all blank, send nothing (fallback ``blank_query``
  or ``blank``).

Reranked candidates get ``reason="rerank"``; candidates that kept their vector score keep
their reason. The output is sorted by score, best first (stable: ties keep their input
order; a non-finite vector score sorts last and is left for the threshold step to zero).

Token budget (``max_tokens``, per query-document pair, off by default): the query may
use up to 3/4 of it; each document gets what the query leaves. A text over its share is
cut to its first 75 % and last 25 % (the opening usually states the topic, the end often
holds the conclusion). Tokens are *estimated* as ``ceil(characters / 4)``, the usual rule
of thumb for English with BPE/WordPiece tokenizers: it needs no tokenizer and errs a little
on the long side for plain prose, which is the safe side for a budget.
"""

from __future__ import annotations

import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict

from cairn.core.errors import CairnError, RerankError, RerankResponseError
from cairn.core.logging import get_logger
from cairn.core.models import Candidate
from cairn.core.retry import RetryPolicy, is_retryable_cairn_error

T = TypeVar("T")
log = get_logger(__name__)

CHARS_PER_TOKEN = 4
QUERY_SHARE = 0.75  # of the token budget, at most, for the query
HEAD_SHARE = 0.75  # of a cut text's allowance, kept from its start; the rest from its end
CUT_MARK = " … "
RERANK_REASON = "rerank"

# Why a rerank call kept every vector score (RerankOutcome.fallback).
FALLBACK_ERROR = "error"  # the backend raised (after its retries)
FALLBACK_EMPTY = "empty"  # the backend answered with no scores
FALLBACK_LENGTH = "length_mismatch"  # not one score per document sent
FALLBACK_BAD_INDEX = "bad_index"  # an index/score answer named a document out of range, or twice
FALLBACK_NON_FINITE = "non_finite"  # every score was NaN/inf: each candidate kept its vector score
FALLBACK_BLANK = "blank"  # every candidate's text was blank: nothing to send
FALLBACK_BLANK_QUERY = "blank_query"  # the query was blank: nothing to rank against


class RerankOutcome(BaseModel):
    """What one rerank call did: the candidates, best first, and every fallback it took."""

    model_config = ConfigDict(frozen=True)

    candidates: list[Candidate]
    reranker: str
    used: bool = False  # at least one candidate carries a reranker score
    sent: int = 0  # documents sent to the backend
    blank: int = 0  # candidates with blank text: kept their vector score, not sent
    non_finite: int = 0  # backend scores that were not finite numbers: those kept their vector score
    truncated: int = 0  # texts (query included) cut to fit the token budget
    fallback: str | None = None  # why every vector score was kept (FALLBACK_*), else None
    error: str | None = None  # the message behind fallback="error" (or a bad answer)
    retryable: bool = False  # whether that error was transient
    latency_ms: float = 0.0

    @property
    def scores(self) -> list[float]:
        return [c.score for c in self.candidates]


# --- token budget ---------------------------------------------------------------------


def estimate_tokens(text: str) -> int:
    """A cheap token estimate: ``ceil(len(text) / 4)`` (see the module docstring)."""
    return -(-len(text) // CHARS_PER_TOKEN)


def cut_head_tail(text: str, max_tokens: int, head_share: float = HEAD_SHARE) -> str:
    """``text`` if it fits ``max_tokens``; else its head (75 %) and tail (25 %) joined by `` … ``."""
    max_chars = max(0, max_tokens) * CHARS_PER_TOKEN
    if len(text) <= max_chars:
        return text
    room = max_chars - len(CUT_MARK)
    if room < 2:
        return text[:max_chars]
    head = int(room * head_share)
    tail = room - head
    return text[:head] + CUT_MARK + text[len(text) - tail :]


def fit_budget(query: str, documents: Sequence[str], max_tokens: int | None) -> tuple[str, list[str], int]:
    """Fit each (query, document) pair into ``max_tokens``; return query, documents, texts cut."""
    if not max_tokens or max_tokens <= 0:
        return query, list(documents), 0
    cut = 0
    q = cut_head_tail(query, int(max_tokens * QUERY_SHARE))
    cut += q != query
    doc_budget = max(1, max_tokens - estimate_tokens(q))
    docs = []
    for d in documents:
        short = cut_head_tail(d, doc_budget)
        cut += short != d
        docs.append(short)
    return q, docs, cut


# --- helpers for backends ----------------------------------------------------------------


def as_score(value: Any) -> float:
    """A backend's score as a float; NaN when it is not a number (the base then keeps the vector score)."""
    if isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def scores_from_indexed(pairs: Iterable[tuple[Any, Any]], n: int, *, who: str) -> list[float]:
    """Turn ``(index, score)`` results into one score per document, in document order.

    No results gives ``[]`` (the base treats it as an empty answer). An index that is not an
    integer in ``0..n-1``, or that repeats, raises ``RerankResponseError`` (``bad_index``);
    fewer distinct indices than documents raises it with ``length_mismatch``.
    """
    pairs = list(pairs)
    if not pairs:
        return []
    out = [math.nan] * n
    seen: set[int] = set()
    for index, score in pairs:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
            raise RerankResponseError(
                f"{who}: result index {index!r} is out of range; {n} documents were sent (indices 0..{n - 1})",
                fallback=FALLBACK_BAD_INDEX,
            )
        if index in seen:
            raise RerankResponseError(f"{who}: result index {index} appears twice", fallback=FALLBACK_BAD_INDEX)
        seen.add(index)
        out[index] = as_score(score)
    if len(seen) != n:
        raise RerankResponseError(
            f"{who}: {len(seen)} results for {n} documents; every document needs a score",
            fallback=FALLBACK_LENGTH,
        )
    return out


def with_retries(
    call: Callable[[], T],
    *,
    max_retries: int,
    backoff_s: float,
    max_backoff_s: float = 8.0,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``call`` under the one :class:`~cairn.core.retry.RetryPolicy`: a ``CairnError`` whose
    ``retryable`` is set is tried again, up to ``max_retries`` times, after a full-jitter wait or
    the server's ``retry_after`` (from the error's ``details``), capped at ``max_backoff_s``."""
    policy = RetryPolicy.of_retries(max_retries, backoff_s, max_backoff_s)
    return policy.call(call, retryable=is_retryable_cairn_error, sleep=sleep, what="rerank")


# --- the base class ---------------------------------------------------------------------


class Reranker(ABC):
    """Rescores retrieval candidates against a query; never fails the retrieval.

    Subclasses implement :meth:`_score`; callers use :meth:`rerank`.
    """

    name: str = "abstract"

    def __init__(self, *, max_tokens: int | None = None) -> None:
        if max_tokens is not None and max_tokens <= 0:
            raise RerankError(f"{self.name}: max_tokens must be a positive integer or None, got {max_tokens!r}")
        self.max_tokens = max_tokens
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {"calls": 0, "sent": 0, "blank": 0, "non_finite": 0, "truncated": 0}

    @abstractmethod
    def _score(self, query: str, documents: list[str]) -> list[float]:
        """One relevance score per document, in document order (higher is better).

        ``documents`` are non-blank and already fit the token budget. Raise on failure (map
        vendor errors to ``RerankError``); an empty or short list is handled by the base.
        """

    def rerank(self, query: str, candidates: Sequence[Candidate], *, language: str | None = None) -> RerankOutcome:
        """Rescore ``candidates`` for ``query``; return them best first with what happened.
        ``language``: the tenant's fixed language (None: the query's is detected where it matters)."""
        start = time.perf_counter()
        candidates = list(candidates)
        texts = [c.record.rerank_text for c in candidates]
        to_send = [i for i, t in enumerate(texts) if t.strip()]
        stats: dict[str, Any] = {"blank": len(candidates) - len(to_send)}
        scores: list[float] | None = None
        if not candidates:
            pass
        elif not query.strip():
            stats["fallback"] = FALLBACK_BLANK_QUERY
        elif not to_send:
            stats["fallback"] = FALLBACK_BLANK
        else:
            q, docs, stats["truncated"] = fit_budget(query, [texts[i] for i in to_send], self.max_tokens)
            stats["sent"] = len(docs)
            scores = self._checked_scores(q, docs, stats, [candidates[i] for i in to_send], language)
        out = list(candidates)
        if scores is not None:
            non_finite = 0
            for i, s in zip(to_send, scores):
                if math.isfinite(s):
                    out[i] = candidates[i].model_copy(update={"score": s, "reason": RERANK_REASON})
                else:
                    non_finite += 1
            stats["non_finite"] = non_finite
            stats["used"] = non_finite < len(scores)
            if not stats["used"]:
                stats["fallback"] = FALLBACK_NON_FINITE
        out.sort(key=lambda c: -c.score if math.isfinite(c.score) else math.inf)
        outcome = RerankOutcome(
            candidates=out, reranker=self.name, latency_ms=(time.perf_counter() - start) * 1000, **stats
        )
        self._account(outcome)
        return outcome

    def _score_candidates(self, query: str, documents: list[str], candidates: list[Candidate],
                          language: str | None = None) -> list[float]:
        """The hook a backend that reads more than the texts overrides (the candidates' stored
        vectors, the query's language, say); by default :meth:`_score` of the texts."""
        return self._score(query, documents)

    def _checked_scores(self, query: str, docs: list[str], stats: dict[str, Any],
                        sent: list[Candidate] | None = None, language: str | None = None) -> list[float] | None:
        """Call the backend; on any bad answer fill ``stats`` with the fallback and return None."""
        try:
            raw = self._score_candidates(query, docs, sent, language) if sent is not None else self._score(query, docs)
        except RerankResponseError as exc:
            stats.update(fallback=exc.fallback, error=exc.message)
            return None
        except CairnError as exc:
            stats.update(fallback=FALLBACK_ERROR, error=exc.message, retryable=exc.retryable)
            return None
        except Exception as exc:  # noqa: BLE001 - a reranker must never fail the retrieval
            stats.update(fallback=FALLBACK_ERROR, error=f"{type(exc).__name__}: {exc}")
            return None
        try:
            scores = [as_score(s) for s in raw]
        except TypeError:
            stats.update(fallback=FALLBACK_ERROR, error=f"{self.name}: answer is not a list of scores: {raw!r:.200}")
            return None
        if not scores:
            stats.update(fallback=FALLBACK_EMPTY, error=f"{self.name}: no scores for {len(docs)} documents")
            return None
        if len(scores) != len(docs):
            stats.update(
                fallback=FALLBACK_LENGTH, error=f"{self.name}: {len(scores)} scores for {len(docs)} documents"
            )
            return None
        return scores

    def _account(self, o: RerankOutcome) -> None:
        with self._lock:
            c = self._counts
            c["calls"] += 1
            for key in ("sent", "blank", "non_finite", "truncated"):
                c[key] += getattr(o, key)
            if o.fallback:
                c[f"fallback.{o.fallback}"] = c.get(f"fallback.{o.fallback}", 0) + 1
        fields = {
            "reranker": o.reranker,
            "candidates": len(o.candidates),
            "sent": o.sent,
            "blank": o.blank,
            "non_finite": o.non_finite,
            "truncated": o.truncated,
            "fallback": o.fallback,
            "latency_ms": round(o.latency_ms, 2),
        }
        if o.fallback or o.blank or o.non_finite:
            log.warning("rerank kept vector scores", error=o.error, retryable=o.retryable, **fields)
        else:
            log.debug("rerank", **fields)

    def counts(self) -> dict[str, int]:
        """Running totals for this reranker: calls, documents sent, blanks, non-finite scores, fallbacks."""
        with self._lock:
            return dict(self._counts)

    def close(self) -> None:
        """Release network clients; the default has none."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
