"""Per-tenant rate limits and quotas, counted where every process that serves a tenant sees them.

A limit is ``N/period`` — at most N requests of one tenant in each window of the period
(``second``, ``minute``, ``hour``, ``day``). A tenant has a list of them: a rate
(``20/second``) and a quota (``100000/day``) together are ``"20/second, 100000/day"``. Every
tenant has the settings' default (``rate_limits``, ``CAIRN_RATE_LIMITS``) unless it has its own
(``tenant_rate_limits``, ``CAIRN_TENANT_RATE_LIMITS={"acme": "5/second", "bigco": "none"}``).

Windows are fixed and aligned to UTC (a day is a UTC day): window k of a period P covers epoch
seconds [k·P, (k+1)·P). So a burst across the edge of two windows may pass N, up to 2·N in the
two halves around it — the price of one atomic increment per limit and request, with no read
first. Limits are checked shortest first; a request refused by one is not counted by the longer
ones (a tenant throttled per second does not burn its daily quota), a request admitted by all is
counted by all. A refusal is a :class:`~cairn.core.errors.RateLimited` (429, ``Retry-After``: the
seconds until the window that refused it ends).

The counters are shared by every process that serves the tenant:

* **DynamoDB** (the deployed API, ``rate_limit_table``): one item per tenant, limit and window,
  incremented by one conditional ``UpdateItem`` (``n < N``), expired by the table's TTL. Every
  Lambda instance counts into the same items.
* **SQLite** (``cairn serve``, ``cairn mcp``): one row per tenant, limit and window in
  ``<home>/ratelimits.db``, incremented by one upsert; every worker of ``cairn serve --workers N``
  opens the same file.

A counter that cannot be reached admits the request (the limiter never takes the API down with
it) and says so in a warning log line with the error.
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from cairn.core.errors import RateLimited
from cairn.core.limits import PERIODS, Limit, parse_limits
from cairn.core.logging import get_logger

log = get_logger(__name__)
EXPIRY_GRACE_S = 60  # a window's counter outlives its window by this much (clock skew between instances)


@dataclass(frozen=True)
class LimitPolicy:
    """Each tenant's limits: its own, else the default."""

    default: tuple[Limit, ...] = ()
    tenants: Mapping[str, tuple[Limit, ...]] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, default: str, tenants: Mapping[str, str]) -> LimitPolicy:
        return cls(parse_limits(default, setting="rate_limits (CAIRN_RATE_LIMITS)"),
                   {t: parse_limits(v, setting=f"the limits of tenant {t!r} (CAIRN_TENANT_RATE_LIMITS)")
                    for t, v in tenants.items()})

    def for_tenant(self, tenant: str) -> tuple[Limit, ...]:
        return self.tenants.get(tenant, self.default)

    @property
    def limits_anyone(self) -> bool:
        return bool(self.default) or any(self.tenants.values())


class Counter(Protocol):
    """Counts one window's requests: ``take`` adds one unless ``limit`` are counted already."""

    def take(self, key: str, limit: int, expires_at: int) -> bool: ...


class RateLimiter:
    """Admits a tenant's request or refuses it with :class:`~cairn.core.errors.RateLimited`."""

    def __init__(self, policy: LimitPolicy, counter: Counter | None, *, clock: Callable[[], float] = time.time) -> None:
        self.policy, self.counter, self.clock = policy, counter, clock

    def admit(self, tenant: str) -> None:
        limits = self.policy.for_tenant(tenant)
        if not limits or self.counter is None:
            return
        now = self.clock()
        for limit in limits:
            window = int(now // limit.seconds)
            ends = (window + 1) * limit.seconds
            key = f"{tenant}/{limit.period}/{window}"
            try:
                admitted = self.counter.take(key, limit.count, ends + EXPIRY_GRACE_S)
            except Exception as exc:  # noqa: BLE001 - an unreachable counter admits; it is logged
                log.warning("rate limit not checked: the counter failed; the request is admitted", tenant=tenant,
                            limit=str(limit), error=type(exc).__name__, message=str(exc)[:300])
                return
            if not admitted:
                raise _refusal(tenant, limit, ends, now)


def _refusal(tenant: str, limit: Limit, ends: int, now: float) -> RateLimited:
    retry_after = max(1, math.ceil(ends - now))
    kind = "rate limit" if limit.seconds < PERIODS["day"] else "quota"
    resets = datetime.fromtimestamp(ends, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    log.info("rate limited", tenant=tenant, limit=str(limit), retry_after_s=retry_after)
    return RateLimited(
        f"tenant {tenant!r} is over its {kind} of {limit.count:,} requests per {limit.period}; "
        f"retry in {retry_after} s (at {resets})",
        retry_after_s=retry_after,
        details={"limit": str(limit), "count": limit.count, "period": limit.period, "kind": kind,
                 "retry_after_s": retry_after, "resets_at": resets})


class MemoryCounter:
    """This process's counts (one process only: a test, a library user)."""

    def __init__(self) -> None:
        self._counts: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def take(self, key: str, limit: int, expires_at: int) -> bool:
        with self._lock:
            if len(self._counts) > 10_000:
                now = time.time()
                self._counts = {k: v for k, v in self._counts.items() if v[1] > now}
            count, _ = self._counts.get(key, (0, expires_at))
            if count >= limit:
                return False
            self._counts[key] = (count + 1, expires_at)
            return True


class SQLiteCounter:
    """Counts in one SQLite file, shared by every process that opens it (``cairn serve --workers``)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._taken = 0

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=5.0, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # counts, not records: no fsync per request
            db.execute("CREATE TABLE IF NOT EXISTS windows (key TEXT PRIMARY KEY, n INTEGER NOT NULL, "
                       "expires_at INTEGER NOT NULL)")
            self._local.db = db
        return db

    def take(self, key: str, limit: int, expires_at: int) -> bool:
        db = self._db()
        taken = db.execute(
            "INSERT INTO windows (key, n, expires_at) VALUES (?, 1, ?) "
            "ON CONFLICT(key) DO UPDATE SET n = n + 1 WHERE n < ?", (key, expires_at, limit)).rowcount
        self._taken += 1
        if self._taken % 1000 == 0:  # windows that ended: forget them now and then
            db.execute("DELETE FROM windows WHERE expires_at < ?", (int(time.time()),))
        return taken == 1


class DynamoDBCounter:
    """Counts in a DynamoDB table (partition key ``pk``; TTL attribute ``expires_at``), shared by
    every Lambda instance: one conditional ``UpdateItem`` per limit and request."""

    def __init__(self, table: str, client: Any = None) -> None:
        self.table, self._client = table, client

    @property
    def client(self) -> Any:
        if self._client is None:  # built on the first count: a stack without limits never pays for it
            self._client = dynamodb_client()
        return self._client

    def take(self, key: str, limit: int, expires_at: int) -> bool:
        try:
            self.client.update_item(
                TableName=self.table, Key={"pk": {"S": key}},
                UpdateExpression="ADD n :one SET expires_at = if_not_exists(expires_at, :exp)",
                ConditionExpression="attribute_not_exists(n) OR n < :limit",
                ExpressionAttributeValues={":one": {"N": "1"}, ":exp": {"N": str(expires_at)}, ":limit": {"N": str(limit)}})
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True


def dynamodb_client() -> Any:
    """A DynamoDB client for the counters: short timeouts, a few retries (the request waits on it)."""
    import boto3
    from botocore.config import Config

    return boto3.client("dynamodb", config=Config(connect_timeout=1, read_timeout=1,
                                                  retries={"max_attempts": 2, "mode": "standard"}))


def create_table(client: Any, table: str) -> None:
    """Create the counters' table as template.yaml does (partition key ``pk``, on demand, TTL on
    ``expires_at``) where no stack creates it (DynamoDB Local, a test); an existing one is kept."""
    try:
        client.create_table(TableName=table, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                            BillingMode="PAY_PER_REQUEST")
    except client.exceptions.ResourceInUseException:
        return
    client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    client.update_time_to_live(TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"})
