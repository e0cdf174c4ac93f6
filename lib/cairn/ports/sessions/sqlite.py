"""SQLite sessions: the embedded default. One file, WAL, safe across threads and processes.

Every connection belongs to one thread; writes run in ``BEGIN IMMEDIATE`` transactions, so
the seq counter increment and the message insert are one atomic step, also between processes:
the stored messages are always the gap-free run ``summarized_through + 1 .. last_seq``. Reads
that must agree with each other (the session row and its messages) share one snapshot (a
deferred read transaction; WAL lets it run beside a writer). A compression commit checks, in its
own write transaction, that the folded range holds exactly the folded messages.
The tenant is part of every primary key.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from cairn.core.errors import CairnError, SessionConflict, SessionError
from cairn.ports.sessions.base import Message, Role, Session, SessionStore

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    user TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    summary TEXT NOT NULL DEFAULT '',
    summarized_through INTEGER NOT NULL DEFAULT 0,
    last_seq INTEGER NOT NULL DEFAULT 0,
    committed_through INTEGER NOT NULL DEFAULT 0,
    prefetched TEXT,
    prefetched_seq INTEGER,
    PRIMARY KEY (tenant, id)
);
CREATE TABLE IF NOT EXISTS messages (
    tenant TEXT NOT NULL,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at REAL NOT NULL,
    name TEXT,
    PRIMARY KEY (tenant, session_id, seq)
);
CREATE INDEX IF NOT EXISTS sessions_expiry ON sessions (expires_at);
CREATE INDEX IF NOT EXISTS sessions_user ON sessions (tenant, user);
CREATE TABLE IF NOT EXISTS idempotency (
    tenant TEXT NOT NULL,
    session_id TEXT NOT NULL,
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (tenant, session_id, key)
);
"""
_COLUMNS = "id, tenant, user, created_at, updated_at, expires_at, summary, summarized_through, last_seq, committed_through"
# columns added after the first release: a file written by an older cairn gets them on open
_MIGRATIONS = (
    ("sessions", "committed_through", "ALTER TABLE sessions ADD COLUMN committed_through INTEGER NOT NULL DEFAULT 0"),
    ("messages", "name", "ALTER TABLE messages ADD COLUMN name TEXT"),
    ("sessions", "prefetched_seq", "ALTER TABLE sessions ADD COLUMN prefetched_seq INTEGER"),
)


class SQLiteSessionStore(SessionStore):
    backend = "sqlite"

    def __init__(self, path: str | Path, **options: Any) -> None:
        super().__init__(**options)
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._conn().executescript(_SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        with self._tx() as db:
            for table, column, ddl in _MIGRATIONS:
                if column not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
                    db.execute(ddl)

    # connections ------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=True)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA busy_timeout=30000")
            self._local.db = db
        return db

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        db = self._conn()
        if db.in_transaction:  # nested (a read inside a snapshot): join the open transaction
            yield db
            return
        db.execute(begin)
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:  # also when COMMIT itself failed: never leave it open
                db.execute("ROLLBACK")
            raise

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """A write transaction: takes the write lock up front (no upgrade deadlock)."""
        if self._conn().in_transaction:
            raise RuntimeError("SQLite session store: a write inside an open transaction")
        return self._transaction("BEGIN IMMEDIATE")

    def _snapshot(self) -> AbstractContextManager[sqlite3.Connection]:
        """A read transaction: every read inside sees the same committed state."""
        return self._transaction("BEGIN DEFERRED")

    def _map_error(self, exc: Exception, op: str, session_id: str) -> CairnError:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            return SessionError(f"session {session_id!r}: {op}: the SQLite file {str(self.path)!r} is busy; retry", retryable=True)
        return SessionError(f"session {session_id!r}: {op} failed on SQLite file {str(self.path)!r}: {exc}")

    # backend methods ------------------------------------------------------------------

    def _create(self, session: Session) -> None:
        with self._tx() as db:
            db.execute(
                f"INSERT INTO sessions ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (session.id, session.tenant, session.user, session.created_at, session.updated_at,
                 session.expires_at, session.summary, session.summarized_through, session.last_seq,
                 session.committed_through),
            )

    def _append(
        self, tenant: str, session_id: str, role: Role, content: str, now: float,
        name: str | None = None, created_at: float | None = None,
    ) -> Message:
        with self._tx() as db:
            return self._insert(db, tenant, session_id, role, content, now, name, created_at)

    def _append_once(
        self, tenant: str, session_id: str, role: Role, content: str, now: float,
        name: str | None, created_at: float | None, key: str,
    ) -> Message:
        with self._tx() as db:  # one write transaction: the key and the message land together or not at all
            used = db.execute(
                "SELECT m.seq, m.role, m.content, m.created_at, m.name FROM idempotency i JOIN messages m "
                "ON m.tenant = i.tenant AND m.session_id = i.session_id AND m.seq = i.seq "
                "WHERE i.tenant = ? AND i.session_id = ? AND i.key = ?",
                (tenant, session_id, key),
            ).fetchone()
            if used is not None:
                s_, r, c, t, n = used
                return Message(seq=s_, role=r, content=c, created_at=t, name=n)
            msg = self._insert(db, tenant, session_id, role, content, now, name, created_at)
            db.execute("INSERT INTO idempotency (tenant, session_id, key, seq) VALUES (?,?,?,?)", (tenant, session_id, key, msg.seq))
        return msg

    def _insert(
        self, db: sqlite3.Connection, tenant: str, session_id: str, role: Role, content: str, now: float,
        name: str | None, created_at: float | None,
    ) -> Message:
        """Take the next seq of a live session and store the message at it (inside a write transaction)."""
        row = db.execute(
            "UPDATE sessions SET last_seq = last_seq + 1, updated_at = ? "
            "WHERE tenant = ? AND id = ? AND expires_at > ? RETURNING last_seq",
            (now, tenant, session_id, now),
        ).fetchone()
        if row is None:
            raise self.not_found(session_id)
        said = now if created_at is None else created_at
        db.execute(
            "INSERT INTO messages (tenant, session_id, seq, role, content, created_at, name) VALUES (?,?,?,?,?,?,?)",
            (tenant, session_id, row[0], role, content, said, name),
        )
        return Message(seq=row[0], role=role, content=content, created_at=said, name=name)

    def _mark_committed(self, session: Session, through: int, now: float) -> int:
        with self._tx() as db:
            db.execute(
                "UPDATE sessions SET committed_through = ? WHERE tenant = ? AND id = ? AND committed_through < ?",
                (through, session.tenant, session.id, through),
            )
            row = db.execute(
                "SELECT committed_through FROM sessions WHERE tenant = ? AND id = ?", (session.tenant, session.id)
            ).fetchone()
        if row is None:
            raise self.not_found(session.id)
        return int(row[0])

    def _load(self, tenant: str, session_id: str) -> Session:
        row = self._conn().execute(
            f"SELECT {_COLUMNS} FROM sessions WHERE tenant = ? AND id = ? AND expires_at > ?",
            (tenant, session_id, time.time()),
        ).fetchone()
        if row is None:
            raise self.not_found(session_id)
        return Session(**dict(zip([c.strip() for c in _COLUMNS.split(",")], row)))

    def _messages(self, tenant: str, session_id: str, after_seq: int, newest: int | None = None) -> list[Message]:
        sql = "SELECT seq, role, content, created_at, name FROM messages WHERE tenant = ? AND session_id = ? AND seq > ?"
        if newest is not None:
            rows = self._conn().execute(sql + " ORDER BY seq DESC LIMIT ?", (tenant, session_id, after_seq, newest)).fetchall()
            rows.reverse()
        else:
            rows = self._conn().execute(sql + " ORDER BY seq", (tenant, session_id, after_seq)).fetchall()
        return [Message(seq=s, role=r, content=c, created_at=t, name=n) for s, r, c, t, n in rows]

    def _get_prefetched(self, tenant: str, session_id: str) -> dict[str, Any] | None:
        row = self._conn().execute(
            "SELECT prefetched FROM sessions WHERE tenant = ? AND id = ?", (tenant, session_id)
        ).fetchone()
        return json.loads(row[0]) if row and row[0] else None

    def _set_prefetched(self, session: Session, context: dict[str, Any], now: float, seq: int | None) -> bool:
        with self._tx() as db:
            cur = db.execute(  # with a seq, only over the context of an earlier message (or none)
                "UPDATE sessions SET prefetched = ?, prefetched_seq = ?, updated_at = ? WHERE tenant = ? AND id = ? "
                "AND (? IS NULL OR prefetched_seq IS NULL OR prefetched_seq < ?)",
                (json.dumps(context, ensure_ascii=False), seq, now, session.tenant, session.id, seq, seq),
            )
            if cur.rowcount == 0:
                if db.execute("SELECT 1 FROM sessions WHERE tenant = ? AND id = ?", (session.tenant, session.id)).fetchone():
                    return False
                raise self.not_found(session.id)
        return True

    def _prefetched_seq(self, tenant: str, session_id: str) -> int:
        row = self._conn().execute(
            "SELECT prefetched_seq FROM sessions WHERE tenant = ? AND id = ?", (tenant, session_id)).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def _commit_summary(self, session: Session, summary: str, folded: Sequence[Message], now: float) -> None:
        through = folded[-1].seq
        with self._tx() as db:
            cur = db.execute(
                "UPDATE sessions SET summary = ?, summarized_through = ?, updated_at = ? "
                "WHERE tenant = ? AND id = ? AND summarized_through = ?",
                (summary, through, now, session.tenant, session.id, session.summarized_through),
            )
            if cur.rowcount == 0:
                raise SessionConflict(f"session {session.id!r}: another compression committed first; retry")
            # appends are atomic, so the range holds exactly the folded messages; checked, never assumed
            held = db.execute(
                "DELETE FROM messages WHERE tenant = ? AND session_id = ? AND seq <= ?",
                (session.tenant, session.id, through),
            ).rowcount
            if held != len(folded):  # raising rolls the whole commit back
                raise SessionConflict(
                    f"session {session.id!r}: seqs {session.summarized_through + 1}..{through} hold {held} "
                    f"messages, the summary folds {len(folded)}; retry"
                )

    def _delete(self, tenant: str, session_id: str) -> bool:
        with self._tx() as db:
            db.execute("DELETE FROM messages WHERE tenant = ? AND session_id = ?", (tenant, session_id))
            db.execute("DELETE FROM idempotency WHERE tenant = ? AND session_id = ?", (tenant, session_id))
            return db.execute("DELETE FROM sessions WHERE tenant = ? AND id = ?", (tenant, session_id)).rowcount > 0

    def _list(self, tenant: str, user: str, limit: int) -> list[Session]:
        rows = self._conn().execute(
            f"SELECT {_COLUMNS} FROM sessions WHERE tenant = ? AND user = ? AND expires_at > ? "
            "ORDER BY created_at DESC LIMIT ?",
            (tenant, user, time.time(), limit),
        ).fetchall()
        names = [c.strip() for c in _COLUMNS.split(",")]
        return [Session(**dict(zip(names, row))) for row in rows]

    def purge_expired(self, now: float | None = None) -> int:
        """Delete expired sessions and their messages; returns how many sessions went."""
        now = time.time() if now is None else now
        with self._tx() as db:
            db.execute(
                "DELETE FROM messages WHERE EXISTS (SELECT 1 FROM sessions s WHERE s.tenant = messages.tenant "
                "AND s.id = messages.session_id AND s.expires_at <= ?)",
                (now,),
            )
            db.execute(
                "DELETE FROM idempotency WHERE EXISTS (SELECT 1 FROM sessions s WHERE s.tenant = idempotency.tenant "
                "AND s.id = idempotency.session_id AND s.expires_at <= ?)",
                (now,),
            )
            return db.execute("DELETE FROM sessions WHERE expires_at <= ?", (now,)).rowcount

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None
