"""Hotness with a real signal: records count as used when they are returned in the top results
or read at L2, and the counts are written off the request path, beside the vectors.

:class:`UseRecorder` keeps the uses in memory (``record`` is a dict update under a lock, no I/O)
and a background thread writes them every ``flush_every_s`` seconds, or sooner when more than
``max_pending`` distinct records wait. ``close()`` (or ``flush()``) writes what is left. A flush
that fails keeps its uses for the next one (logged).

Where the counts go is a :class:`~cairn.ports.usecounts.UseCounts`: a DynamoDB table in the
deployed stack, the embedded store's side table by default, a SQLite file beside a cloud store
run without a table. No record is rewritten and no index changes: a use costs the size of a
count (on Pinecone, rewriting each returned record whole cost ~70 % of a find). Where hotness
is blended in, the counts are read back for the candidates
(:func:`cairn.ports.usecounts.with_uses`).

:func:`use_hotness` is the score the blend reads: use (saturating in ``active_count``) times
recency, halving every ``half_life_s`` since the last use (or the last update, when later).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from cairn.core import uri as uris
from cairn.core.errors import CairnError
from cairn.core.models import ContextRecord, Level, record_id
from cairn.engine.assemble import HOTNESS_HALF_LIFE_S, hotness
from cairn.ports.usecounts import LAST_USED, StoreSideCounts, UseCounts
from cairn.ports.vectorstores import VectorStore

log = logging.getLogger("cairn.engine.memory")
WRITE_BATCH = 500  # ids per write


def record_uri_of_match(display_uri: str) -> str:
    """The record URI behind a match's display URI (``.../.abstract.md`` is the directory's L0)."""
    for suffix in ("/.abstract.md", "/.overview.md"):
        if display_uri.endswith(suffix):
            return display_uri[: -len(suffix)]
    return display_uri


def record_id_of_match(tenant: str, display_uri: str, level: int) -> str:
    """The record id behind a match's display URI."""
    return record_id(tenant, record_uri_of_match(display_uri), Level(level))


def as_counts(where: UseCounts | VectorStore) -> UseCounts:
    """``where`` if it keeps counts, else the side table of a store that has one."""
    if callable(getattr(where, "add_uses", None)):
        return where  # type: ignore[return-value]
    if callable(getattr(where, "record_uses", None)):
        return StoreSideCounts(where)
    raise TypeError(f"{type(where).__name__} keeps no use counts beside its records: give the use recorder a "
                    "cairn.ports.usecounts.UseCounts (DynamoDBUseCounts, SQLiteUseCounts)")


def use_hotness(record: ContextRecord, now: float, half_life_s: float = HOTNESS_HALF_LIFE_S) -> float:
    last = record.metadata.get(LAST_USED)
    since = max(record.updated_at, float(last)) if isinstance(last, int | float) else record.updated_at
    return hotness(record.active_count, since, now, half_life_s)


class UseRecorder:
    def __init__(
        self,
        counts: UseCounts | VectorStore,
        *,
        flush_every_s: float = 5.0,
        max_pending: int = 5000,
        top: int = 5,
        clock: Callable[[], float] = time.time,
        background: bool = True,
    ) -> None:
        self.counts = as_counts(counts)
        self.flush_every_s = flush_every_s
        self.max_pending = max_pending
        self.top = top
        self.clock = clock
        self._pending: dict[str, Counter[str]] = defaultdict(Counter)
        self._uris: dict[str, dict[str, str]] = defaultdict(dict)  # tenant -> id -> URI (erasable by user)
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.flushed = 0  # records written over the recorder's life
        self.failures = 0
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._loop, name="cairn-use-recorder", daemon=True)
            self._thread.start()

    # ----------------------------------------------------------------- on the request path

    def record(self, tenant: str, ids: Iterable[str], uris: dict[str, str] | None = None) -> None:
        """Count one use of each record id (cheap: no I/O); ``uris``: their URIs, where known."""
        with self._lock:
            self._pending[tenant].update(ids)
            if uris:
                self._uris[tenant].update(uris)
            size = sum(len(c) for c in self._pending.values())
        if size >= self.max_pending:
            self._wake.set()

    def record_result(self, tenant: str, result: Any, top: int | None = None) -> None:
        """Count the first ``top`` matches of each bucket of a ``FindResult`` as used."""
        k = self.top if top is None else top
        uris = {}
        for bucket in (result.memories, result.resources, result.skills):
            for m in bucket[:k]:
                uri = record_uri_of_match(m.uri)
                uris[record_id(tenant, uri, Level(int(m.level)))] = uri
        self.record(tenant, list(uris), uris)

    def record_read(self, tenant: str, uri: str, level: int) -> None:
        """Count a read (the agent opened it); call for L2 reads."""
        if int(level) == int(Level.DETAIL):
            uri = uris.validate(uri)
            rid = record_id(tenant, uri, Level.DETAIL)
            self.record(tenant, [rid], {rid: uri})

    # ----------------------------------------------------------------- off the request path

    def pending(self) -> int:
        with self._lock:
            return sum(len(c) for c in self._pending.values())

    def flush(self) -> int:
        """Write every pending use now; returns the records written."""
        with self._flush_lock:
            with self._lock:
                batch, self._pending = self._pending, defaultdict(Counter)
                known, self._uris = self._uris, defaultdict(dict)
            written = 0
            for tenant, uses in batch.items():
                ids = list(uses)
                for start in range(0, len(ids), WRITE_BATCH):
                    part = ids[start : start + WRITE_BATCH]
                    where = {i: known[tenant][i] for i in part if i in known[tenant]}
                    try:
                        written += self.counts.add_uses(tenant, {i: uses[i] for i in part}, self.clock(), where)
                    except CairnError as exc:
                        self.failures += 1
                        log.warning("use counts kept for the next flush", extra={"error": exc.message, "records": len(part)})
                        with self._lock:
                            self._pending[tenant].update({i: uses[i] for i in part})
                            self._uris[tenant].update(where)
            self.flushed += written
            return written

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.flush_every_s)
            self._wake.clear()
            if self.pending():
                try:
                    self.flush()
                except Exception as exc:  # the thread must survive anything; logged, never silent
                    self.failures += 1
                    log.warning("use recorder flush failed", extra={"error": str(exc)})

    def close(self) -> None:
        """Stop the thread and write what is left."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.flush()
