"""Retrieval statistics: a thread-safe collector, its snapshot, and EMF output.

Every retrieval (one typed query) is recorded under its context type: the scores it
returned, its latency, how many vector calls and rounds it took, and whether a reranker
scored it or fell back to vector scores.

* Embedded (CLI, local API): the collector keeps running totals in the process;
  :meth:`RetrievalStats.snapshot` returns them as a pydantic model.
* Lambda: :meth:`RetrievalStats.emit_emf` writes what was recorded since the previous
  emit as CloudWatch Embedded Metric Format, one JSON line per context type, through
  Powertools Metrics (imported only then, so importing this module stays cheap).

Scores that are not finite are counted as results but left out of min/mean/max.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from cairn.ports.observability import metrics as m

if TYPE_CHECKING:
    from cairn.core.models import QueryResult

ALL_TYPES = "all"  # the context type of a typed query that spans every type
LATENCY_WINDOW = 1024  # latencies kept per type for the snapshot's percentiles
MAX_PENDING_LATENCIES = 1000  # latencies kept per type between two EMF emits
HISTORY_BUCKET_S = 60  # queries over time: counted per minute
HISTORY_BUCKETS = 24 * 60  # the last day of minutes is kept


class TypeStats(BaseModel):
    """Totals for one context type (or for all of them, in ``StatsSnapshot.total``)."""

    context_type: str
    queries: int = 0
    results: int = 0
    zero_result_queries: int = 0
    score_min: float | None = None
    score_mean: float | None = None
    score_max: float | None = None
    latency_ms_mean: float | None = None
    latency_ms_max: float | None = None
    latency_ms_p50: float | None = None  # over the last LATENCY_WINDOW queries
    latency_ms_p95: float | None = None
    rerank_used: int = 0
    rerank_fallbacks: int = 0
    rerank_fallback_reasons: dict[str, int] = Field(default_factory=dict)
    vector_calls: int = 0
    rounds: int = 0

    @property
    def vector_calls_per_query(self) -> float:
        return self.vector_calls / self.queries if self.queries else 0.0


class QueryBucket(BaseModel):
    """The typed queries answered in one minute (since ``start``, epoch seconds), and how many found nothing."""

    start: float
    queries: int
    zero_result_queries: int


class StatsSnapshot(BaseModel):
    since: float  # epoch seconds of the collector's start or last reset
    by_type: dict[str, TypeStats] = Field(default_factory=dict)
    total: TypeStats = Field(default_factory=lambda: TypeStats(context_type=ALL_TYPES))


def _percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


class _Totals:
    """Mutable running totals; only touched under the collector's lock."""

    def __init__(self, latency_window: int | None) -> None:
        self.queries = self.results = self.zero = 0
        self.score_n = 0
        self.score_sum = 0.0
        self.score_min = math.inf
        self.score_max = -math.inf
        self.latency_n = 0
        self.latency_sum = 0.0
        self.latency_max = 0.0
        self.latencies: deque[float] = deque(maxlen=latency_window)
        self.rerank_used = self.fallbacks = 0
        self.reasons: dict[str, int] = {}
        self.vector_calls = self.rounds = 0

    def add(
        self,
        scores: Sequence[float],
        latency_ms: float,
        vector_calls: int,
        rounds: int,
        rerank_used: bool,
        rerank_fallback: str | None,
    ) -> None:
        self.queries += 1
        self.results += len(scores)
        self.zero += not scores
        for s in scores:
            if math.isfinite(s):
                self.score_n += 1
                self.score_sum += s
                self.score_min = min(self.score_min, s)
                self.score_max = max(self.score_max, s)
        self.latency_n += 1
        self.latency_sum += latency_ms
        self.latency_max = max(self.latency_max, latency_ms)
        if self.latencies.maxlen is None or self.latencies.maxlen > 0:
            self.latencies.append(latency_ms)
        self.rerank_used += bool(rerank_used)
        if rerank_fallback:
            self.fallbacks += 1
            self.reasons[rerank_fallback] = self.reasons.get(rerank_fallback, 0) + 1
        self.vector_calls += vector_calls
        self.rounds += rounds

    def to_model(self, context_type: str) -> TypeStats:
        scored = self.score_n > 0
        timed = self.latency_n > 0
        return TypeStats(
            context_type=context_type,
            queries=self.queries,
            results=self.results,
            zero_result_queries=self.zero,
            score_min=self.score_min if scored else None,
            score_mean=self.score_sum / self.score_n if scored else None,
            score_max=self.score_max if scored else None,
            latency_ms_mean=self.latency_sum / self.latency_n if timed else None,
            latency_ms_max=self.latency_max if timed else None,
            latency_ms_p50=_percentile(self.latencies, 0.50),
            latency_ms_p95=_percentile(self.latencies, 0.95),
            rerank_used=self.rerank_used,
            rerank_fallbacks=self.fallbacks,
            rerank_fallback_reasons=dict(self.reasons),
            vector_calls=self.vector_calls,
            rounds=self.rounds,
        )


def _type_key(context_type: Any) -> str:
    if context_type is None:
        return ALL_TYPES
    return str(getattr(context_type, "value", context_type))


class RetrievalStats:
    """Collects retrieval statistics per context type. Safe to share between threads."""

    def __init__(self, *, latency_window: int = LATENCY_WINDOW) -> None:
        self._lock = threading.Lock()
        self._latency_window = latency_window
        self._reset_locked()

    def _reset_locked(self) -> None:
        self._since = time.time()
        self._by_type: dict[str, _Totals] = {}
        self._total = _Totals(self._latency_window)
        self._pending: dict[str, _Totals] = {}
        self._pending_total = _Totals(0)  # what the next emit writes by service alone (no latencies kept)
        self._minutes: deque[list[int]] = deque(maxlen=HISTORY_BUCKETS)  # [minute start, queries, zero-result]

    def reset(self) -> None:
        """Forget everything recorded, including what was not yet emitted."""
        with self._lock:
            self._reset_locked()

    def record(
        self,
        context_type: Any,
        *,
        scores: Sequence[float],
        latency_ms: float,
        vector_calls: int = 0,
        rounds: int = 0,
        rerank_used: bool = False,
        rerank_fallback: str | None = None,
    ) -> None:
        """Record one retrieval.

        ``context_type`` is a ``ContextType``, its value, or ``None`` for a query across all
        types (recorded as ``"all"``). ``scores`` are the scores of the results returned (so
        ``len(scores)`` is the result count). ``rerank_fallback`` names why the reranker's
        scores were not used (``"error"``, ``"empty"``, ...), or is ``None``.
        """
        key = _type_key(context_type)
        scores = [float(s) for s in scores]
        args = (scores, float(latency_ms), int(vector_calls), int(rounds), rerank_used, rerank_fallback)
        with self._lock:
            if key not in self._by_type:
                self._by_type[key] = _Totals(self._latency_window)
            self._by_type[key].add(*args)
            self._total.add(*args)
            if key not in self._pending:
                self._pending[key] = _Totals(MAX_PENDING_LATENCIES)
            self._pending[key].add(*args)
            self._pending_total.add(*args)
            minute = int(time.time()) // HISTORY_BUCKET_S * HISTORY_BUCKET_S
            if not self._minutes or self._minutes[-1][0] != minute:
                self._minutes.append([minute, 0, 0])
            self._minutes[-1][1] += 1
            self._minutes[-1][2] += 0 if scores else 1

    def history(self) -> list[QueryBucket]:
        """Queries over time: one bucket per minute in which any was answered, oldest first (the last day)."""
        with self._lock:
            return [QueryBucket(start=float(b[0]), queries=b[1], zero_result_queries=b[2]) for b in self._minutes]

    def record_result(self, result: QueryResult) -> None:
        """Record one typed query's :class:`~cairn.core.models.QueryResult` from its matches and trace."""
        st = result.trace.stats
        self.record(
            result.query.context_type,
            scores=[mc.score for mc in result.matches],
            latency_ms=st.latency_ms,
            vector_calls=st.vector_calls,
            rounds=st.rounds,
            rerank_used=st.rerank_used,
            rerank_fallback=st.rerank_fallback,
        )

    def record_many(self, results: Iterable[QueryResult]) -> None:
        for r in results:
            self.record_result(r)

    def snapshot(self) -> StatsSnapshot:
        """Everything recorded since start (or :meth:`reset`), per type and in total."""
        with self._lock:
            return StatsSnapshot(
                since=self._since,
                by_type={k: t.to_model(k) for k, t in sorted(self._by_type.items())},
                total=self._total.to_model(ALL_TYPES),
            )

    def emit_emf(self, metrics: Any | None = None, *, namespace: str = m.NAMESPACE, service: str | None = None) -> int:
        """Write what was recorded since the last emit as CloudWatch EMF; return the blobs written.

        One flush per context type with dimensions ``service`` and ``context_type`` (queries,
        zero-result queries, latency), then one with ``service`` alone (results, scores, vector
        calls, rounds, rerank use and fallbacks, summed over the types: :mod:`.metrics` says why),
        printed to stdout by Powertools (Lambda ships stdout to CloudWatch Logs, which turns
        EMF lines into metrics). By default a Powertools ``EphemeralMetrics`` is used, so
        nothing leaks into (or is flushed out of) a handler's own ``Metrics`` instance; pass
        ``metrics`` to use another provider with the same ``add_dimension``/``add_metric``/
        ``add_metadata``/``flush_metrics`` methods. Returns the context types written.
        """
        with self._lock:
            pending, self._pending = self._pending, {}
            total, self._pending_total = self._pending_total, _Totals(0)
        if not pending:
            return 0
        if metrics is None:
            from aws_lambda_powertools.metrics import EphemeralMetrics

            metrics = EphemeralMetrics(
                namespace=namespace,
                service=service or os.environ.get("POWERTOOLS_SERVICE_NAME") or m.DEFAULT_SERVICE,
            )
        for key, totals in sorted(pending.items()):
            _add_type_metrics(metrics, key, totals)
            metrics.flush_metrics()
        _add_service_metrics(metrics, total)
        metrics.flush_metrics()
        return len(pending)


def _add_type_metrics(metrics: Any, context_type: str, t: _Totals) -> None:
    """The metrics split by context type (:data:`.metrics.BY_CONTEXT_TYPE`)."""
    metrics.add_dimension(name=m.DIM_CONTEXT_TYPE, value=context_type)
    metrics.add_metric(name=m.QUERIES, unit=m.UNITS[m.QUERIES], value=t.queries)
    metrics.add_metric(name=m.ZERO_RESULT_QUERIES, unit=m.UNITS[m.ZERO_RESULT_QUERIES], value=t.zero)
    for latency in t.latencies:
        metrics.add_metric(name=m.LATENCY, unit=m.UNITS[m.LATENCY], value=latency)


def _add_service_metrics(metrics: Any, t: _Totals) -> None:
    """The other retrieval metrics, summed over the context types (dimension ``service`` only)."""
    def add(name: str, value: float) -> None:
        metrics.add_metric(name=name, unit=m.UNITS[name], value=value)

    add(m.RESULTS, t.results)
    add(m.VECTOR_CALLS, t.vector_calls)
    add(m.ROUNDS, t.rounds)
    add(m.RERANK_USED, t.rerank_used)
    add(m.RERANK_FALLBACKS, t.fallbacks)
    if t.score_n:
        add(m.SCORE_MIN, t.score_min)
        add(m.SCORE_MEAN, t.score_sum / t.score_n)
        add(m.SCORE_MAX, t.score_max)
    if t.reasons:
        metrics.add_metadata(key="rerank_fallback_reasons", value=dict(t.reasons))
