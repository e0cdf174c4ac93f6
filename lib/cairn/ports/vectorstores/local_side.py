"""Per-tenant bookkeeping beside the embedded store's segments: use counts and learned facts.

One SQLite database per tenant folder (``side.sqlite``, WAL mode, so processes sharing a home
read and write it concurrently), apart from the segment log: recording that a record was used
never writes a segment, never touches the keyword or vector index, and never makes a reader
reload anything.

* **uses** ``(id, total, last_used)``: a record's use count and last use. The store merges it
  into the records it returns (``active_count`` is the larger of the record's and the table's,
  ``metadata.last_used_at`` the later), so a record upserted back with the count it was read
  with is not counted twice, and an edit of the record keeps its uses.
* **facts** ``(key, value)``: what the library learned about the tenant and wants to keep
  across processes (JSON values), e.g. the evidence gate's noise floor.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

FILE = "side.sqlite"
LAST_USED = "last_used_at"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS uses (id TEXT PRIMARY KEY, total INTEGER NOT NULL, last_used REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS facts (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
_CHUNK = 500  # ids per IN (...) clause


class SideTable:
    """One tenant's side database, opened on first use (a read of a tenant never used creates nothing)."""

    def __init__(self, folder: Path | None) -> None:
        self.path = folder / FILE if folder is not None else None
        self._db: sqlite3.Connection | None = None
        self._memory: dict[str, dict[str, Any]] = {"uses": {}, "facts": {}}  # without a home
        self._lock = threading.Lock()

    def _conn(self, create: bool) -> sqlite3.Connection | None:
        if self._db is None and self.path is not None and (create or self.path.exists()):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            for stmt in _SCHEMA:
                db.execute(stmt)
            self._db = db
        return self._db

    # ------------------------------------------------------------ uses

    def add_uses(self, uses: Mapping[str, tuple[int, int]], now: float) -> None:
        """Add ``uses[id] = (count, base)`` to each id's total (``base``: the record's own count,
        where the total starts)."""
        with self._lock:
            if self.path is None:
                table = self._memory["uses"]
                for i, (n, base) in uses.items():
                    total, last = table.get(i, (base, now))
                    table[i] = (total + n, max(last, now))
                return
            db = self._conn(create=True)
            assert db is not None
            with db:
                db.executemany(
                    "INSERT INTO uses (id, total, last_used) VALUES (?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                    "total = total + ?, last_used = max(last_used, excluded.last_used)",
                    [(i, base + n, now, n) for i, (n, base) in uses.items()],
                )

    def uses(self, ids: Iterable[str]) -> dict[str, tuple[int, float]]:
        """id -> (total, last used) for the ids that were ever used."""
        ids = list(dict.fromkeys(ids))
        with self._lock:
            if self.path is None:
                table = self._memory["uses"]
                return {i: table[i] for i in ids if i in table}
            db = self._conn(create=False)
            if db is None or not ids:
                return {}
            out: dict[str, tuple[int, float]] = {}
            for start in range(0, len(ids), _CHUNK):
                part = ids[start : start + _CHUNK]
                marks = ",".join("?" * len(part))
                for i, total, last in db.execute(f"SELECT id, total, last_used FROM uses WHERE id IN ({marks})", part):
                    out[i] = (int(total), float(last))
            return out

    def forget_uses(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        with self._lock:
            if self.path is None:
                for i in ids:
                    self._memory["uses"].pop(i, None)
                return
            db = self._conn(create=False)
            if db is not None and ids:
                with db:
                    db.executemany("DELETE FROM uses WHERE id = ?", [(i,) for i in ids])

    # ------------------------------------------------------------ facts

    def fact(self, key: str) -> Any:
        with self._lock:
            if self.path is None:
                return self._memory["facts"].get(key)
            db = self._conn(create=False)
            row = db.execute("SELECT value FROM facts WHERE key = ?", (key,)).fetchone() if db is not None else None
        return json.loads(row[0]) if row else None

    def learn(self, key: str, value: Any) -> None:
        raw = json.dumps(value)
        with self._lock:
            if self.path is None:
                self._memory["facts"][key] = json.loads(raw)
                return
            db = self._conn(create=True)
            assert db is not None
            with db:
                db.execute("INSERT INTO facts (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, raw))

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def overlay(doc: dict[str, Any], used: tuple[int, float] | None) -> dict[str, Any]:
    """The record dump with its recorded uses merged in (a new dict when anything changes)."""
    if used is None:
        return doc
    total, last = used
    meta = doc.get("metadata") or {}
    prior = meta.get(LAST_USED)
    newest = max(last, float(prior)) if isinstance(prior, int | float) else last
    return {**doc, "active_count": max(int(doc.get("active_count") or 0), total), "metadata": {**meta, LAST_USED: newest}}
