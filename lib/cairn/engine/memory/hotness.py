"""Hotness with a real signal: records count as used when they are returned in the top results
or read at L2, and the counts are written off the request path.

:class:`UseRecorder` keeps the uses in memory (``record`` is a dict update under a lock, no I/O)
and a background thread writes them every ``flush_every_s`` seconds, or sooner when more than
``max_pending`` distinct records wait: it reads the records back by id (one fetch per tenant and
batch), adds the uses to ``active_count``, sets ``metadata.last_used_at`` and upserts them.
``close()`` (or ``flush()``) writes what is left. A flush that fails keeps its uses for the next
one (logged); uses of records deleted meanwhile are dropped.

A store that keeps bookkeeping beside its index (the embedded store's ``record_uses``: a side
table merged into the records it returns) gets the counts there: no record is rewritten, no
index changes, and nothing a query needs is invalidated. Elsewhere the write is read-modify-write
through the ordinary upsert: an update of the same record landing between the flush's fetch and
its upsert would be overwritten by the flush's copy. The window is a few milliseconds per batch;
a store that offers partial metadata updates (Pinecone ``update``, OpenSearch ``_update``) can
close it, see the lead's notes in the memory report.

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
from cairn.ports.vectorstores import VectorStore

log = logging.getLogger("cairn.engine.memory")
LAST_USED = "last_used_at"
FETCH_BATCH = 500


def record_id_of_match(tenant: str, display_uri: str, level: int) -> str:
    """The record id behind a match's display URI (``.../.abstract.md`` is the directory's L0)."""
    for suffix in ("/.abstract.md", "/.overview.md"):
        if display_uri.endswith(suffix):
            display_uri = display_uri[: -len(suffix)]
    return record_id(tenant, display_uri, Level(level))


def use_hotness(record: ContextRecord, now: float, half_life_s: float = HOTNESS_HALF_LIFE_S) -> float:
    last = record.metadata.get(LAST_USED)
    since = max(record.updated_at, float(last)) if isinstance(last, int | float) else record.updated_at
    return hotness(record.active_count, since, now, half_life_s)


class UseRecorder:
    def __init__(
        self,
        store: VectorStore,
        *,
        flush_every_s: float = 5.0,
        max_pending: int = 5000,
        top: int = 5,
        clock: Callable[[], float] = time.time,
        background: bool = True,
    ) -> None:
        self.store = store
        self.flush_every_s = flush_every_s
        self.max_pending = max_pending
        self.top = top
        self.clock = clock
        self._pending: dict[str, Counter[str]] = defaultdict(Counter)
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

    def record(self, tenant: str, ids: Iterable[str]) -> None:
        """Count one use of each record id (cheap: no I/O)."""
        with self._lock:
            self._pending[tenant].update(ids)
            size = sum(len(c) for c in self._pending.values())
        if size >= self.max_pending:
            self._wake.set()

    def record_result(self, tenant: str, result: Any, top: int | None = None) -> None:
        """Count the first ``top`` matches of each bucket of a ``FindResult`` as used."""
        k = self.top if top is None else top
        ids = [
            record_id_of_match(tenant, m.uri, int(m.level))
            for bucket in (result.memories, result.resources, result.skills)
            for m in bucket[:k]
        ]
        self.record(tenant, ids)

    def record_read(self, tenant: str, uri: str, level: int) -> None:
        """Count a read (the agent opened it); call for L2 reads."""
        if int(level) == int(Level.DETAIL):
            self.record(tenant, [record_id(tenant, uris.validate(uri), Level.DETAIL)])

    # ----------------------------------------------------------------- off the request path

    def pending(self) -> int:
        with self._lock:
            return sum(len(c) for c in self._pending.values())

    def flush(self) -> int:
        """Write every pending use now; returns the records written."""
        with self._flush_lock:
            with self._lock:
                batch, self._pending = self._pending, defaultdict(Counter)
            written = 0
            for tenant, uses in batch.items():
                ids = list(uses)
                for start in range(0, len(ids), FETCH_BATCH):
                    part = ids[start : start + FETCH_BATCH]
                    try:
                        written += self._write(tenant, {i: uses[i] for i in part})
                    except CairnError as exc:
                        self.failures += 1
                        log.warning("use counts kept for the next flush", extra={"error": exc.message, "records": len(part)})
                        with self._lock:
                            self._pending[tenant].update({i: uses[i] for i in part})
            self.flushed += written
            return written

    def _write(self, tenant: str, uses: dict[str, int]) -> int:
        now = self.clock()
        side = getattr(self.store, "record_uses", None)
        if callable(side):
            return int(side(tenant, uses, now))
        updated = []
        for rec in self.store.fetch(tenant, list(uses)):
            if rec.vector is None:
                continue
            meta = {**rec.metadata, LAST_USED: now}
            updated.append(rec.model_copy(update={"active_count": rec.active_count + uses[rec.id], "metadata": meta}))
        return self.store.upsert(updated) if updated else 0

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
