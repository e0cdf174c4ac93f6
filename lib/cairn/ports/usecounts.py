"""Use counts (hotness) kept beside the vectors, not in them.

Counting that a record was returned or read must cost the size of a count, not of the record: a
vector store that has no partial update (Pinecone bills an upsert by the record's whole size, its
vector included) would otherwise rewrite every returned record after every find. So the counts
live in a small table of their own, keyed by tenant and record id, and are read back only where
hotness needs them (a ``hotness_weight`` above 0):

* :class:`DynamoDBUseCounts`: the deployed stack's table (partition key ``pk`` = tenant, sort key
  ``sk`` = record id; ``n`` uses, ``last_used``, the record's ``uri`` so a user's counts can be
  erased with the user, and a TTL ``expires_at`` that drops a count unused for
  :data:`FORGET_AFTER_S`, by when its recency has decayed to nothing). One ``UpdateItem ADD`` per
  record used (1 write unit), one ``BatchGetItem`` per 100 ids read back.
* :class:`SQLiteUseCounts`: one SQLite file, ``<home>/uses.sqlite``, for a cloud store run
  without a table (``cairn serve`` on Pinecone, say).
* :class:`StoreSideCounts`: the embedded store's side table (``LocalVectorStore.record_uses``),
  which that store merges into the records it returns itself (:attr:`merged_into_records`).

Every implementation answers :meth:`UseCounts.uses` with ``id -> (total, last used)`` and
:func:`overlay` merges that into a record: the larger count and the later use win, so a record
carrying a count of its own (written before counts moved out of the index) keeps it.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from cairn.core.errors import VectorStoreError
from cairn.core.models import Candidate, ContextRecord
from cairn.core.uri import is_under

LAST_USED = "last_used_at"  # the metadata key a record's last use is shown under
FORGET_AFTER_S = 180 * 86400  # a count unused this long is dropped (TTL); hotness halves every 7 days
BATCH_GET = 100  # DynamoDB's BatchGetItem limit
BATCH_WRITE = 25  # DynamoDB's BatchWriteItem limit
WRITERS = 8  # UpdateItem calls in flight per flush


class UseCounts(Protocol):
    """Where use counts are kept. ``merged_into_records``: the store already returns records with
    their counts (nothing to read back)."""

    merged_into_records: bool

    def add_uses(self, tenant: str, uses: Mapping[str, int], now: float, uris: Mapping[str, str]) -> int:
        """Add ``uses[id]`` uses to each record (``uris[id]``: its URI), last used at ``now``;
        the records counted."""
        ...

    def uses(self, tenant: str, ids: Iterable[str]) -> dict[str, tuple[int, float]]:
        """``id -> (total, last used)`` for the ids ever counted."""
        ...

    def forget_under(self, tenant: str, root: str) -> int:
        """Drop the counts of ``root`` and every record under it (a user's data, erased); how many."""
        ...


def overlay(record: ContextRecord, used: tuple[int, float] | None) -> ContextRecord:
    """``record`` with its recorded uses merged in (the larger count, the later use)."""
    if used is None:
        return record
    total, last = used
    prior = record.metadata.get(LAST_USED)
    newest = max(last, float(prior)) if isinstance(prior, int | float) else last
    if total <= record.active_count and newest == prior:
        return record
    return record.model_copy(update={"active_count": max(record.active_count, total),
                                     "metadata": {**record.metadata, LAST_USED: newest}})


def with_uses(candidates: list[Candidate], counts: UseCounts | None) -> list[Candidate]:
    """``candidates`` with their records' use counts read back from
    ``counts`` (one read per tenant); unchanged when the store already merged them in."""
    if counts is None or counts.merged_into_records or not candidates:
        return candidates
    by_tenant: dict[str, list[str]] = defaultdict(list)
    for c in candidates:
        by_tenant[c.record.tenant].append(c.record.id)
    used = {t: counts.uses(t, ids) for t, ids in by_tenant.items()}
    out = []
    for c in candidates:
        rec = overlay(c.record, used[c.record.tenant].get(c.record.id))
        out.append(c if rec is c.record else c.model_copy(update={"record": rec}))
    return out


class StoreSideCounts:
    """The embedded store's side table (no segment written, no index touched; the store merges the
    counts into what it returns)."""

    merged_into_records = True

    def __init__(self, store: Any) -> None:
        self.store = store

    def add_uses(self, tenant: str, uses: Mapping[str, int], now: float, uris: Mapping[str, str]) -> int:
        return int(self.store.record_uses(tenant, uses, now))

    def uses(self, tenant: str, ids: Iterable[str]) -> dict[str, tuple[int, float]]:
        return {}  # already in the records the store returns

    def forget_under(self, tenant: str, root: str) -> int:
        return 0  # the store drops a record's uses when it deletes the record


class SQLiteUseCounts:
    """Counts in one SQLite file (``<home>/uses.sqlite``, WAL: the processes sharing a home share
    them), for a cloud store run without a counts table."""

    merged_into_records = False
    _SCHEMA = ("CREATE TABLE IF NOT EXISTS uses (tenant TEXT NOT NULL, id TEXT NOT NULL, total INTEGER NOT NULL, "
               "last_used REAL NOT NULL, uri TEXT, PRIMARY KEY (tenant, id))")

    def __init__(self, path: Path | None) -> None:
        import sqlite3

        self.path = path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path) if path is not None else ":memory:", timeout=30, check_same_thread=False,
                                   isolation_level=None)
        if path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(self._SCHEMA)
        self._lock = threading.Lock()

    def _run(self, what: str, tenant: str, work: Any) -> Any:
        import sqlite3

        try:
            with self._lock, self._db:
                return work(self._db)
        except sqlite3.Error as exc:
            raise VectorStoreError(f"could not {what} the use counts of tenant {tenant!r} in {self.path}: {exc}",
                                   retryable=True) from exc

    def add_uses(self, tenant: str, uses: Mapping[str, int], now: float, uris: Mapping[str, str]) -> int:
        rows = [(tenant, i, int(n), now, uris.get(i), int(n)) for i, n in uses.items() if n > 0]
        self._run("add to", tenant, lambda db: db.executemany(
            "INSERT INTO uses (tenant, id, total, last_used, uri) VALUES (?, ?, ?, ?, ?) ON CONFLICT(tenant, id) DO UPDATE "
            "SET total = total + ?, last_used = max(last_used, excluded.last_used), uri = coalesce(excluded.uri, uri)", rows))
        return len(rows)

    def uses(self, tenant: str, ids: Iterable[str]) -> dict[str, tuple[int, float]]:
        ids = list(dict.fromkeys(ids))

        def read(db: Any) -> dict[str, tuple[int, float]]:
            out: dict[str, tuple[int, float]] = {}
            for start in range(0, len(ids), BATCH_GET):
                part = ids[start : start + BATCH_GET]
                marks = ",".join("?" * len(part))
                for i, total, last in db.execute(
                        f"SELECT id, total, last_used FROM uses WHERE tenant = ? AND id IN ({marks})", [tenant, *part]):
                    out[i] = (int(total), float(last))
            return out

        return dict(self._run("read", tenant, read))

    def forget_under(self, tenant: str, root: str) -> int:
        def forget(db: Any) -> int:
            doomed = [(tenant, i) for i, uri in db.execute("SELECT id, uri FROM uses WHERE tenant = ?", (tenant,))
                      if uri is not None and is_under(uri, root)]
            db.executemany("DELETE FROM uses WHERE tenant = ? AND id = ?", doomed)
            return len(doomed)

        return int(self._run("erase", tenant, forget))


class DynamoDBUseCounts:
    """Counts in a DynamoDB table: partition key ``pk`` (tenant), sort key ``sk`` (record id),
    TTL ``expires_at`` (template.yaml's ``UseCountsTable``; :func:`create_table` elsewhere)."""

    merged_into_records = False

    def __init__(self, table: str, client: Any = None) -> None:
        self.table, self._client = table, client
        self._pool: ThreadPoolExecutor | None = None

    @property
    def client(self) -> Any:
        if self._client is None:  # built on the first use: a process that never counts never pays for it
            from cairn.ports.ratelimit import dynamodb_client

            self._client = dynamodb_client()
        return self._client

    def _failed(self, what: str, tenant: str, exc: Exception) -> VectorStoreError:
        return VectorStoreError(f"could not {what} the use counts of tenant {tenant!r} in DynamoDB table "
                                f"{self.table!r}: {exc}", retryable=True)

    def add_uses(self, tenant: str, uses: Mapping[str, int], now: float, uris: Mapping[str, str]) -> int:
        items = [(i, int(n)) for i, n in uses.items() if n > 0]
        client = self.client

        def add(item: tuple[str, int]) -> None:
            rid, n = item
            values = {":n": {"N": str(n)}, ":now": {"N": repr(float(now))}, ":exp": {"N": str(int(now + FORGET_AFTER_S))}}
            update = "ADD n :n SET last_used = :now, expires_at = :exp"
            if rid in uris:
                update += ", uri = :uri"
                values[":uri"] = {"S": uris[rid]}
            client.update_item(TableName=self.table, Key={"pk": {"S": tenant}, "sk": {"S": rid}},
                               UpdateExpression=update, ExpressionAttributeValues=values)

        try:
            list(self._side_by_side(add, items))
        except Exception as exc:  # botocore's errors: mapped once, here
            raise self._failed("add to", tenant, exc) from exc
        return len(items)

    def _side_by_side(self, work: Any, items: list[Any]) -> Iterable[Any]:
        """``work`` over ``items``, several at a time (the api function waits for this flush
        before it returns); one at a time for one item, or once the interpreter shuts down (the
        last flush, at exit, may no longer start threads)."""
        if len(items) > 1:
            try:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="cairn-use-counts")
                return list(self._pool.map(work, items))
            except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
                pass
        return [work(item) for item in items]

    def uses(self, tenant: str, ids: Iterable[str]) -> dict[str, tuple[int, float]]:
        ids = list(dict.fromkeys(ids))
        out: dict[str, tuple[int, float]] = {}
        try:
            for start in range(0, len(ids), BATCH_GET):
                keys = [{"pk": {"S": tenant}, "sk": {"S": i}} for i in ids[start : start + BATCH_GET]]
                request = {self.table: {"Keys": keys, "ProjectionExpression": "sk, n, last_used"}}
                while request:
                    answer = self.client.batch_get_item(RequestItems=request)
                    for item in answer.get("Responses", {}).get(self.table, []):
                        out[item["sk"]["S"]] = (int(item["n"]["N"]), float(item["last_used"]["N"]))
                    request = answer.get("UnprocessedKeys") or {}
        except Exception as exc:
            raise self._failed("read", tenant, exc) from exc
        return out

    def forget_under(self, tenant: str, root: str) -> int:
        doomed: list[str] = []
        try:
            pages = self.client.get_paginator("query").paginate(
                TableName=self.table, KeyConditionExpression="pk = :t", ExpressionAttributeValues={":t": {"S": tenant}},
                ProjectionExpression="sk, uri")
            for page in pages:
                doomed += [item["sk"]["S"] for item in page.get("Items", [])
                           if "uri" in item and is_under(item["uri"]["S"], root)]
            for start in range(0, len(doomed), BATCH_WRITE):
                request = {self.table: [{"DeleteRequest": {"Key": {"pk": {"S": tenant}, "sk": {"S": i}}}}
                                        for i in doomed[start : start + BATCH_WRITE]]}
                while request:
                    request = self.client.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
        except Exception as exc:
            raise self._failed("erase", tenant, exc) from exc
        return len(doomed)


def create_table(client: Any, table: str) -> None:
    """Create the use counts' table as template.yaml does (``pk`` + ``sk``, on demand, TTL on
    ``expires_at``) where no stack creates it (DynamoDB Local, a test); an existing one is kept."""
    try:
        client.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                  {"AttributeName": "sk", "AttributeType": "S"}])
    except client.exceptions.ResourceInUseException:
        return
    client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    client.update_time_to_live(TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"})
