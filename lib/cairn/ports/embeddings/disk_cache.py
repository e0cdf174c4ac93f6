"""The local models' vectors kept on disk, so a text is embedded once per machine.

A local model spends most of an ingest on the model (the demo's ~500 records: ~38 s of both cores). The
same texts come back often: the demo run again, the sample handbook ingested into a second home or
tenant, a folder re-ingested after ``rm``, a reindex back to a model used before. Each process then
paid the model again. :class:`DiskCachedEmbedder` puts one SQLite file per model in front of the
model, shared by every process of the machine (WAL: readers never wait for a writer):

- it serves the calls of an ingest (more than ``QUERY_CALL_TEXTS`` texts); a query's few texts stay
  with the model's own in-memory LRU, so a search never waits on the file;
- a text's key is the SHA-256 of the text (and of the input type, for a model that embeds queries and
  documents differently); its value the float32 vector the model gave it. A hit returns that vector,
  so the demo answers byte for byte the same with the cache on, off, cold or warm;
- the file's name carries the model's identity (provider, model, dimension, languages) and its
  package versions: another model, or an upgraded one, starts a file of its own;
- it is bounded (``CAIRN_EMBEDDING_CACHE_MB``, 512 by default): past it, the oldest vectors go; a
  folder it creates is readable by its user alone;
- it can never fail an embedding: a cache that cannot be opened, read or written (a read-only home, a
  full disk, a damaged file) is left alone for the rest of the process, with one warning, and the
  model answers.

Where: ``CAIRN_EMBEDDING_CACHE`` — ``auto`` (the default: ``$XDG_CACHE_HOME/cairn/embeddings``, else
``~/.cache/cairn/embeddings``; off inside AWS Lambda, whose disk does not outlive its container),
``off``, or a folder. Only the local models are cached; a remote provider's vectors are not kept.
The file holds vectors of every text embedded on the machine, whichever home or tenant it came from:
``off`` keeps none (docs/configuration.md).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cairn.core.logging import get_logger
from cairn.ports.embeddings.base import QUERY_CALL_TEXTS, Embedder, InputType
from cairn.ports.embeddings.identity import EmbedderIdentity

log = get_logger("cairn.ports.embeddings")

DEFAULT_MB = 512
_ROW_BYTES = 2_100  # a 384-d float32 vector (1,536 bytes), its key and SQLite's pages: 2,097 bytes measured
_LOOKUP_CHUNK = 500  # keys per SELECT (SQLite's bound on a statement's variables is 32,766 since 3.32)


def cache_folder(setting: str, env: dict[str, str] | None = None) -> Path | None:
    """The folder ``CAIRN_EMBEDDING_CACHE`` names (None: no cache)."""
    env = dict(os.environ if env is None else env)
    value = setting.strip()
    if value.lower() == "off":
        return None
    if value.lower() != "auto":
        return Path(value).expanduser()
    if env.get("AWS_LAMBDA_FUNCTION_NAME"):
        return None  # a container's /tmp is gone with it: nothing to share
    root = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "cairn" / "embeddings"


class VectorFile:
    """One model's vectors in one SQLite file: ``get`` what is there, ``put`` what was embedded."""

    def __init__(self, path: Path, dimension: int, max_rows: int) -> None:
        self.path = path
        self.dimension = dimension
        self.max_rows = max(max_rows, 1)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._broken = False

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            if not self.path.parent.is_dir():  # the texts' vectors: for this user's eyes only
                self.path.parent.mkdir(parents=True, mode=0o700)
            db = sqlite3.connect(self.path, timeout=10, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB NOT NULL UNIQUE, vector BLOB NOT NULL)")
            self._db = db
        return self._db

    def _give_up(self, action: str, exc: BaseException) -> None:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            log.debug("embedding_cache_busy", path=str(self.path), action=action)  # another writer, for 10 s: next time
            return
        self._broken = True
        log.warning("embedding_cache_unusable", path=str(self.path), action=action,
                    error=f"{type(exc).__name__}: {exc}", effect="texts are embedded by the model; nothing is kept",
                    fix="set CAIRN_EMBEDDING_CACHE to a writable folder, or to off")

    def get(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        if self._broken or not keys:
            return {}
        found: dict[bytes, np.ndarray] = {}
        width = self.dimension * 4
        try:
            with self._lock:
                db = self._connect()
                for start in range(0, len(keys), _LOOKUP_CHUNK):
                    part = list(keys[start : start + _LOOKUP_CHUNK])
                    marks = ",".join("?" * len(part))
                    for key, blob in db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", part):
                        if len(blob) == width:  # anything else was not written by this model's cache
                            found[bytes(key)] = np.frombuffer(blob, dtype=np.float32)
        except (sqlite3.Error, OSError) as exc:
            self._give_up("read", exc)
            return {}
        return found

    def put(self, rows: dict[bytes, np.ndarray]) -> None:
        if self._broken or not rows:
            return
        try:
            with self._lock:
                db = self._connect()
                db.execute("BEGIN IMMEDIATE")
                try:
                    db.executemany("INSERT OR IGNORE INTO vectors (key, vector) VALUES (?, ?)",
                                   [(k, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for k, v in rows.items()])
                    (newest,) = db.execute("SELECT coalesce(max(rowid), 0) FROM vectors").fetchone()
                    if newest > self.max_rows:  # rowids grow with each insert: the lowest are the oldest
                        db.execute("DELETE FROM vectors WHERE rowid <= ?", (newest - self.max_rows,))
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
        except (sqlite3.Error, OSError) as exc:
            self._give_up("write", exc)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


class DiskCachedEmbedder(Embedder):
    """``inner`` with :class:`VectorFile` in front: only the texts the file lacks reach the model.

    Everything else (its tokenizer, token counts, ``warm``, its counters) is the inner embedder's, so
    the pair is used wherever the model alone was."""

    def __init__(self, inner: Embedder, folder: Path, max_mb: int = DEFAULT_MB) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.batch_size = inner.batch_size
        self.distinguishes_input_type = inner.distinguishes_input_type
        self.languages = inner.languages
        self.max_tokens = inner.max_tokens
        identity = EmbedderIdentity.of(inner)
        tag = hashlib.sha256(f"{identity.tag}:{_versions(inner)}".encode()).hexdigest()[:12]
        safe = "".join(c if c.isalnum() or c in "-." else "-" for c in identity.model)
        self.file = VectorFile(folder / f"{identity.provider}-{safe}-{tag}.sqlite3", inner.dimension,
                               max_mb * 1_000_000 // _ROW_BYTES)
        self.hits = 0

    def __getattr__(self, name: str) -> Any:  # what the wrapper does not define is the model's
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _key(self, text: str, input_type: InputType) -> bytes:
        typed = f"{input_type}\0{text}" if self.distinguishes_input_type else text
        return hashlib.sha256(typed.encode("utf-8", "surrogatepass")).digest()[:16]

    def embed(self, texts: Sequence[str], input_type: InputType = "document") -> np.ndarray:
        if isinstance(texts, str) or len(texts) <= QUERY_CALL_TEXTS or not all(isinstance(t, str) for t in texts):
            return self.inner.embed(texts, input_type)  # a query (the model's LRU keeps it), or the model's own errors
        keys = [self._key(t, input_type) for t in texts]
        vectors = self.file.get(list(dict.fromkeys(keys)))
        hits = sum(k in vectors for k in keys)
        new = {k: t for k, t in zip(keys, texts, strict=True) if k not in vectors}  # a repeated text once
        if new:
            made = dict(zip(new, self.inner.embed(list(new.values()), input_type), strict=True))
            self.file.put(made)
            vectors |= made
        self.hits += hits
        return np.stack([vectors[k] for k in keys]).astype(np.float32, copy=False)

    def tokenizer(self) -> Any | None:
        return self.inner.tokenizer()

    def _embed(self, texts: list[str]) -> np.ndarray:  # never called: embed() goes to the inner model
        return self.inner.embed(texts)


def _versions(inner: Embedder) -> str:
    """The versions of the packages that make ``inner``'s vectors (its ``packages``): an upgrade of
    the model or of its runtime starts a new file."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for package in getattr(inner, "packages", ()):
        try:
            out.append(f"{package}=={version(package)}")
        except PackageNotFoundError:
            out.append(f"{package}==?")
    return ",".join(out)


def cached(inner: Embedder, setting: str, max_mb: int = DEFAULT_MB) -> Embedder:
    """``inner`` behind the machine's vector file where ``setting`` (``CAIRN_EMBEDDING_CACHE``) names
    one, else ``inner`` itself."""
    folder = cache_folder(setting)
    return inner if folder is None else DiskCachedEmbedder(inner, folder, max_mb)
