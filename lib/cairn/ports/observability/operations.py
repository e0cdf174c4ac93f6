"""Per-operation request metrics: how many requests each API operation answered, how many failed
(4xx, 5xx, refused by a rate limit) and how long each took.

The route table records every request it answers (:meth:`OperationStats.record`); the api
function writes what was recorded as CloudWatch EMF before it returns (:meth:`emit_emf`): one
document per ``operation`` dimension value (``find``, ``search``, ``context``, or ``other`` for
every other route, see :mod:`.metrics`) with the operations it counted in its ``operations``
field, and one with ``RateLimited`` by ``service`` alone. The alarms and the dashboard of
template.yaml read these names (a test checks them against what this module prints).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

from cairn.core.logging import correlation_id
from cairn.ports.observability import metrics as m

MAX_PENDING_LATENCIES = 100  # CloudWatch takes at most 100 values of one metric per EMF document


@dataclass
class _Pending:
    requests: int = 0
    client_errors: int = 0
    server_errors: int = 0
    rate_limited: int = 0
    latencies: list[float] = field(default_factory=list)


class OperationStats:
    """Thread-safe counts per operation since the last emit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}

    def record(self, operation: str, status: int, latency_ms: float | None) -> None:
        """One answered request (``latency_ms`` None: refused by validation before it was timed)."""
        with self._lock:
            p = self._pending.setdefault(operation, _Pending())
            p.requests += 1
            p.client_errors += 400 <= status < 500
            p.server_errors += status >= 500
            p.rate_limited += status == 429
            if latency_ms is not None and len(p.latencies) < MAX_PENDING_LATENCIES:
                p.latencies.append(round(latency_ms, 3))

    def emit_emf(self, metrics: Any | None = None, *, namespace: str = m.NAMESPACE, service: str | None = None) -> int:
        """Print what was recorded since the last emit as EMF (one document per ``operation``
        dimension value, one for ``RateLimited``); the operations counted."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return 0
        if metrics is None:
            from aws_lambda_powertools.metrics import EphemeralMetrics

            metrics = EphemeralMetrics(namespace=namespace,
                                       service=service or os.environ.get("POWERTOOLS_SERVICE_NAME") or m.DEFAULT_SERVICE)
        grouped: dict[str, list[tuple[str, _Pending]]] = {}
        for operation, p in sorted(pending.items()):
            grouped.setdefault(m.operation_dimension(operation), []).append((operation, p))
        for value, members in sorted(grouped.items()):
            metrics.add_dimension(name=m.DIM_OPERATION, value=value)
            for name, count in ((m.REQUESTS, sum(p.requests for _, p in members)),
                                (m.CLIENT_ERRORS, sum(p.client_errors for _, p in members)),
                                (m.SERVER_ERRORS, sum(p.server_errors for _, p in members))):
                metrics.add_metric(name=name, unit=m.UNITS[name], value=count)
            for latency in [x for _, p in members for x in p.latencies][:MAX_PENDING_LATENCIES]:
                metrics.add_metric(name=m.REQUEST_LATENCY, unit=m.UNITS[m.REQUEST_LATENCY], value=latency)
            metrics.add_metadata(key="operations", value={op: p.requests for op, p in members})
            if correlation_id() is not None and sum(p.requests for _, p in members) == 1:  # one request's metrics
                metrics.add_metadata(key="correlation_id", value=correlation_id())
            metrics.flush_metrics()
        metrics.add_metric(name=m.RATE_LIMITED, unit=m.UNITS[m.RATE_LIMITED], value=sum(p.rate_limited for p in pending.values()))
        metrics.flush_metrics()  # by service alone
        return len(pending)
